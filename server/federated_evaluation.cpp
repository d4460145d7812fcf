#include "server/federated_evaluation.hpp"

#include "model_spec.hpp"

namespace tern::server {

bool federatedEvaluationDue(uint64_t round, uint64_t eval_every, uint64_t max_rounds) {
  if (eval_every == 0) return false;
  return (round > 0 && round % eval_every == 0) || round + 1 == max_rounds;
}

bool takeEvaluation(WorkerRecord& rec, const wire::Push& push, uint64_t round, uint64_t max_rows) {
  if (!push.has_evaluation()) return true;
  const auto& e = push.evaluation();
  const bool usable = e.round() == round && e.rows() > 0 && e.rows() <= max_rows &&
                      ml::usableScores(e.loss(), e.accuracy());
  if (!usable) return false;
  rec.evaluation = {e.round(), e.loss(), e.accuracy(), e.rows(), true};
  return true;
}

std::optional<FederatedEvaluation> federatedEvaluation(const Membership& members, uint64_t round) {
  FederatedEvaluation f;
  f.round = round;
  double correct = 0.0, loss = 0.0;
  for (const auto& [id, w] : members.all()) {
    const auto& e = w.rec.evaluation;
    if (!e.known || e.round != round) continue;
    correct += e.accuracy * double(e.rows);
    loss += e.loss * double(e.rows);
    f.rows += e.rows;
    ++f.workers;
  }
  if (f.rows == 0) return std::nullopt;
  f.accuracy = correct / double(f.rows);
  f.loss = loss / double(f.rows);
  return f;
}

std::optional<JoinRefusal> layoutRefusal(const wire::Join& join, const ml::ModelSpec& model) {
  const bool external = model.kind == "external";
  if (join.tensors_size() == 0 && !external) return std::nullopt;
  const auto theirs = fromWire(join.tensors());
  if (external && theirs == model.tensors) return std::nullopt;
  std::string text =
      external ? (theirs.empty() ? "this coordinator trains an external model of layout " +
                                       ml::describeLayout(model.tensors) +
                                       ": the worker needs an external trainer (trainer.kind "
                                       "external) of that layout"
                                 : "the trainer's layout " + ml::describeLayout(theirs) +
                                       " differs from the coordinator's model " +
                                       ml::describeLayout(model.tensors))
               : "this coordinator trains a built-in " + model.kind +
                     " model: an external trainer's layout cannot join it";
  return JoinRefusal{wire::Error::LAYOUT_MISMATCH, "layout_mismatch", std::move(text)};
}

}  // namespace tern::server
