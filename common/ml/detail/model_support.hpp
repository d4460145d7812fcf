#pragma once
// Pieces shared by the models in model.hpp: row selection without copying the full data set,
// dispatch on dense/sparse features (so each model is written once, as a template over the
// feature matrix), argument checks, and the softmax cross-entropy head.
#include <memory>
#include <span>
#include <string>

#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"

namespace tern::ml::detail {

// The rows a model works on: the data set itself when rows is empty, otherwise a gathered copy
// as floats (contiguous rows make the matrix products run at full speed).
class RowSelection {
 public:
  RowSelection(const Dataset& data, std::span<const size_t> rows);
  const Dataset& get() const { return *selected_; }

 private:
  Dataset gathered_;
  const Dataset* selected_;
};

// Calls f(features) with the sparse or the dense matrix; f must return the same type for both.
// Byte features are passed as a float copy of them all: callers that care gather chunks first.
template <class F>
decltype(auto) visitFeatures(const Dataset& data, F&& f) {
  if (data.is_sparse) return f(data.sparse);
  if (data.is_bytes) {
    const DenseMatrix floats = withFloatFeatures(data).dense;
    return f(floats);
  }
  return f(data.dense);
}

// Throws std::invalid_argument unless params (and grad, when given) have num_params entries and
// the data has the model's feature count and at least one row.
void checkArguments(const char* model, const ModelSpec& spec, size_t num_params,
                    std::span<const float> params, const Dataset& data,
                    const std::span<float>* grad);

// Mean softmax cross-entropy of logits (rows x classes) against labels. When want_grad, the
// logits are overwritten with d(mean loss)/d(logits) = (softmax - onehot) / rows.
double softmaxCrossEntropy(DenseMatrix& logits, std::span<const int32_t> labels, bool want_grad);

// Number of rows whose largest logit is at the label (ties go to the lower class).
size_t countArgmaxHits(const DenseMatrix& logits, std::span<const int32_t> labels);

// max_i ||[x_i, 1]||^2 over the rows of data: the feature-side factor of the smoothness bounds.
double maxAugmentedRowNorm2(const Dataset& data);

std::unique_ptr<Model> makeSoftmaxModel(const ModelSpec& spec);
std::unique_ptr<Model> makeLogisticModel(const ModelSpec& spec);
std::unique_ptr<Model> makeMlpModel(const ModelSpec& spec);
std::unique_ptr<Model> makeExternalModel(const ModelSpec& spec);

}  // namespace tern::ml::detail
