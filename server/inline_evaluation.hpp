#pragma once
// The driver's side of an evaluation request, answered at once on the calling thread: the
// simulator (at the same virtual time), the tests, and the daemon (pinging its watchdog between
// chunks of rows) use it.
#include <functional>

#include "common/ml/dataset.hpp"
#include "server/coordinator_core.hpp"

namespace tern::server {

// Test-set accuracy of the request's parameters, over chunks of chunk_rows rows (0 =
// ml::chunkRows of the model); `between` runs between two chunks.
double evaluate(const ml::Model& model, const EvaluationRequest& request, const ml::Dataset& test,
                const std::function<void()>& between = {}, size_t chunk_rows = 0);

// Answers every evaluation `effects` asks for (and any its answer asks for), each answer at
// clock()'s time after it was computed; returns `effects` with the answers' effects appended.
Effects evaluateInline(CoordinatorCore& core, Effects effects, const ml::Dataset* test,
                       const std::function<double()>& clock,
                       const std::function<void()>& between = {}, size_t chunk_rows = 0);

}  // namespace tern::server
