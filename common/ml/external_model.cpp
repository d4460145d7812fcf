// model.kind external: a model trained by its trainers (docs/python.md). tern keeps its flat
// vector, its layout and its initial values, and never computes with it.
#include <stdexcept>

#include "common/ml/detail/model_support.hpp"

namespace tern::ml {
namespace detail {
namespace {

class ExternalModel final : public Model {
 public:
  explicit ExternalModel(ModelSpec spec) : spec_(std::move(spec)), n_(paramsOf(spec_.tensors)) {}
  const ModelSpec& spec() const override { return spec_; }
  size_t numParams() const override { return n_; }
  // The initial values when known (the coordinator's), else zeros.
  void init(std::span<float> params, Rng&) const override {
    if (params.size() != n_) throw std::invalid_argument("ExternalModel::init: wrong size");
    if (spec_.initial) {
      std::copy(spec_.initial->begin(), spec_.initial->end(), params.begin());
    } else {
      std::fill(params.begin(), params.end(), 0.0f);
    }
  }
  double lossAndGradient(std::span<const float>, const Dataset&, std::span<const size_t>,
                         std::span<float>) const override {
    throw std::logic_error("an external model is trained by its trainer, not by tern");
  }
  double loss(std::span<const float>, const Dataset&, std::span<const size_t>) const override {
    throw std::logic_error("an external model is evaluated by its trainers, not by tern");
  }
  double accuracy(std::span<const float>, const Dataset&) const override {
    throw std::logic_error("an external model is evaluated by its trainers, not by tern");
  }
  std::optional<double> smoothness(const Dataset&) const override { return std::nullopt; }

 private:
  ModelSpec spec_;
  size_t n_;
};

}  // namespace

std::unique_ptr<Model> makeExternalModel(const ModelSpec& spec) {
  const uint64_t n = paramsOf(spec.tensors);
  if (spec.tensors.empty() || n == 0) {
    throw std::invalid_argument(
        "makeModel: an external model needs a layout of at least one value");
  }
  if (n > kMaxParams) {
    throw std::invalid_argument("makeModel: the external layout holds " + std::to_string(n) +
                                " values, more than " + std::to_string(kMaxParams));
  }
  if (spec.initial && spec.initial->size() != n) {
    throw std::invalid_argument("makeModel: " + std::to_string(spec.initial->size()) +
                                " initial values for a layout of " + std::to_string(n));
  }
  return std::make_unique<ExternalModel>(spec);
}

}  // namespace detail
}  // namespace tern::ml
