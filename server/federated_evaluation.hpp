#pragma once
// Federated evaluation (docs/python.md): every eval_every rounds the round start asks each worker
// to evaluate the model that round starts from on its own held-out rows; the reports ride on the
// pushes, and the round's accuracy is their row-weighted mean. Also the join's layout check of an
// external model.
#include <cstdint>
#include <optional>

#include "common/ml/model.hpp"
#include "server/membership.hpp"

namespace tern::server {

// Whether round `round`'s round start asks for evaluations: every eval_every-th round after the
// first, and the last round (eval_every 0: never).
bool federatedEvaluationDue(uint64_t round, uint64_t eval_every, uint64_t max_rounds);

// Takes the push's evaluation into rec.evaluation when it evaluates model `round` and is usable
// (a loss, an accuracy in [0, 1], 1..max_rows rows). False when one is there but unusable.
bool takeEvaluation(WorkerRecord& rec, const wire::Push& push, uint64_t round, uint64_t max_rows);

struct FederatedEvaluation {
  uint64_t round = 0;  // the model evaluated: the one this round started from
  double accuracy = 0.0;
  double loss = 0.0;
  uint64_t rows = 0;
  uint32_t workers = 0;
};

// The row-weighted mean of the members' evaluations of model `round`; none without one.
std::optional<FederatedEvaluation> federatedEvaluation(const Membership& members, uint64_t round);

// Why a join cannot train `model` (its trainer's layout differs; an external trainer for a
// built-in model or the other way round), or none.
std::optional<JoinRefusal> layoutRefusal(const wire::Join& join, const ml::ModelSpec& model);

}  // namespace tern::server
