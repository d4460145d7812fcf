#include "server/inline_evaluation.hpp"

#include <stdexcept>

namespace tern::server {

double evaluate(const ml::Model& model, const EvaluationRequest& request, const ml::Dataset& test,
                const std::function<void()>& between, size_t chunk_rows) {
  const auto& params = *request.parameters;
  const size_t rows = chunk_rows > 0 ? chunk_rows : ml::chunkRows(params.size());
  ml::Dataset scratch;
  return ml::chunkedAccuracy(model, params, test, rows, scratch, between);
}

Effects evaluateInline(CoordinatorCore& core, Effects effects, const ml::Dataset* test,
                       const std::function<double()>& clock, const std::function<void()>& between,
                       size_t chunk_rows) {
  while (effects.evaluate) {
    if (!test) throw std::logic_error("an evaluation was asked for without a test set");
    const EvaluationRequest request = std::move(*effects.evaluate);
    effects.evaluate.reset();
    const double accuracy = evaluate(core.model(), request, *test, between, chunk_rows);
    effects.append(core.handleEvaluated(accuracy, clock()));
  }
  return effects;
}

}  // namespace tern::server
