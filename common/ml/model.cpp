#include "common/ml/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/ml/detail/model_support.hpp"

namespace tern::ml {
namespace detail {

RowSelection::RowSelection(const Dataset& data, std::span<const size_t> rows) : selected_(&data) {
  if (!rows.empty()) {
    data.gatherInto(rows, gathered_);
    selected_ = &gathered_;
  }
}

void checkArguments(const char* model, const ModelSpec& spec, size_t num_params,
                    std::span<const float> params, const Dataset& data,
                    const std::span<float>* grad) {
  const auto fail = [&](const std::string& what) {
    throw std::invalid_argument(std::string(model) + " model: " + what);
  };
  if (params.size() != num_params) {
    fail("expected " + std::to_string(num_params) + " parameters, got " +
         std::to_string(params.size()));
  }
  if (grad && grad->size() != num_params) {
    fail("gradient buffer has " + std::to_string(grad->size()) + " entries, expected " +
         std::to_string(num_params));
  }
  if (data.features() != spec.features) {
    fail("data has " + std::to_string(data.features()) + " features, model expects " +
         std::to_string(spec.features));
  }
  if (data.rows() == 0) fail("no rows to evaluate");
}

double softmaxCrossEntropy(DenseMatrix& logits, std::span<const int32_t> labels, bool want_grad) {
  const Eigen::Index n = logits.rows();
  const Eigen::Index classes = logits.cols();
  const float inv_n = 1.0f / static_cast<float>(n);
  double total = 0;
  for (Eigen::Index i = 0; i < n; ++i) {
    const int32_t y = labels[size_t(i)];
    if (y < 0 || y >= classes) {
      throw std::invalid_argument("softmax: label " + std::to_string(y) + " outside [0, " +
                                  std::to_string(classes) + ")");
    }
    auto z = logits.row(i);
    // Shift by the max so exp never overflows; the loss is log-sum-exp minus the true logit.
    const float shift = z.maxCoeff();
    const float true_logit = z[y] - shift;
    z.array() = (z.array() - shift).exp();
    const float sum = z.sum();
    total += std::log(double(sum)) - double(true_logit);
    if (want_grad) {
      z *= inv_n / sum;
      z[y] -= inv_n;
    }
  }
  return total / double(n);
}

size_t countArgmaxHits(const DenseMatrix& logits, std::span<const int32_t> labels) {
  size_t hits = 0;
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    Eigen::Index best = 0;
    logits.row(i).maxCoeff(&best);
    hits += best == labels[size_t(i)];
  }
  return hits;
}

namespace {

double maxRowNorm2(const DenseMatrix& x) {
  double best = 0;
  for (Eigen::Index i = 0; i < x.rows(); ++i) {
    best = std::max(best, x.row(i).cast<double>().squaredNorm());
  }
  return best;
}

// maxRowNorm2 of byte features, as floats a few rows at a time (a small device never holds them
// all as floats). Chunks start at multiples of 16 rows, so every row sits at the alignment it
// would in a float copy of the whole: the same sum.
double maxByteRowNorm2(const Dataset& data) {
  constexpr size_t kChunk = 16;
  Dataset chunk;
  std::vector<size_t> rows;
  double best = 0;
  for (size_t begin = 0; begin < data.rows(); begin += kChunk) {
    rows.resize(std::min(kChunk, data.rows() - begin));
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = begin + i;
    data.gatherInto(rows, chunk);
    best = std::max(best, maxRowNorm2(chunk.dense));
  }
  return best;
}

}  // namespace

double maxAugmentedRowNorm2(const Dataset& data) {
  double best = 0;
  if (data.is_bytes) {
    best = maxByteRowNorm2(data);
  } else if (data.is_sparse) {
    for (Eigen::Index i = 0; i < data.sparse.outerSize(); ++i) {
      double s = 0;
      for (SparseMatrix::InnerIterator it(data.sparse, i); it; ++it) {
        s += double(it.value()) * it.value();
      }
      best = std::max(best, s);
    }
  } else {
    best = maxRowNorm2(data.dense);
  }
  return best + 1.0;  // the constant input that multiplies the bias
}

}  // namespace detail

std::string labelsUnfit(const ModelSpec& spec, const Dataset& data) {
  const int64_t outputs = spec.kind == "logistic" ? 2 : int64_t(spec.classes);
  for (int32_t y : data.labels) {
    if (y < 0 || y >= outputs) {
      return "label " + std::to_string(y) + " has no output in a " + spec.kind + " model of " +
             std::to_string(outputs) + " classes" +
             (spec.kind == "logistic" ? " (labels must be 0 or 1)" : "");
    }
  }
  return "";
}

uint64_t paramsOf(std::span<const TensorShape> tensors) {
  uint64_t total = 0;
  for (const auto& t : tensors) {
    uint64_t n = 1;
    for (uint64_t dim : t.shape) {
      if (dim != 0 && n > UINT64_MAX / dim) return UINT64_MAX;
      n *= dim;
    }
    if (total > UINT64_MAX - n) return UINT64_MAX;
    total += n;
  }
  return total;
}

std::string describeLayout(std::span<const TensorShape> tensors) {
  std::string out;
  for (const auto& t : tensors) {
    if (!out.empty()) out += ", ";
    out += t.name + "[";
    for (size_t i = 0; i < t.shape.size(); ++i) {
      if (i > 0) out += ',';
      out += std::to_string(t.shape[i]);
    }
    out += "]";
  }
  return out.empty() ? "(no tensors)" : out;
}

uint64_t paramsOf(const ModelSpec& spec) {
  if (spec.kind == "external") return paramsOf(spec.tensors);
  // Each factor is below 2^32, so every product of two fits in 64 bits.
  const uint64_t f = spec.features, c = spec.classes, h = spec.hidden;
  if (spec.kind == "softmax") return c * (f + 1);
  if (spec.kind == "logistic") return f + 1;
  if (spec.kind == "mlp") {
    const uint64_t a = h * (f + 1), b = c * (h + 1);
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
  }
  return 0;
}

std::unique_ptr<Model> makeModel(const ModelSpec& spec) {
  if (spec.kind == "external") return detail::makeExternalModel(spec);
  if (spec.features == 0) throw std::invalid_argument("makeModel: features must be >= 1");
  if (spec.classes == 0) throw std::invalid_argument("makeModel: classes must be >= 1");
  if (spec.features > kMaxFeatures || spec.classes > kMaxClasses ||
      (spec.kind == "mlp" && spec.hidden > kMaxHidden)) {
    throw std::invalid_argument("makeModel: features " + std::to_string(spec.features) +
                                ", classes " + std::to_string(spec.classes) + ", hidden " +
                                std::to_string(spec.hidden) + " beyond the limits " +
                                std::to_string(kMaxFeatures) + ", " + std::to_string(kMaxClasses) +
                                ", " + std::to_string(kMaxHidden));
  }
  if (const uint64_t n = paramsOf(spec); n > kMaxParams) {
    throw std::invalid_argument("makeModel: " + std::to_string(n) + " parameters, more than " +
                                std::to_string(kMaxParams));
  }
  if (!std::isfinite(spec.l2) || spec.l2 < 0) {
    throw std::invalid_argument("makeModel: l2 must be finite and >= 0");
  }
  if (spec.kind == "softmax") return detail::makeSoftmaxModel(spec);
  if (spec.kind == "logistic") return detail::makeLogisticModel(spec);
  if (spec.kind == "mlp") {
    if (spec.hidden == 0) throw std::invalid_argument("makeModel: mlp needs hidden >= 1");
    return detail::makeMlpModel(spec);
  }
  throw std::invalid_argument("makeModel: unknown model kind '" + spec.kind +
                              "' (softmax | logistic | mlp | external)");
}

bool usableScores(double loss, double accuracy) {
  return std::isfinite(loss) && std::isfinite(accuracy) && accuracy >= 0.0 && accuracy <= 1.0;
}

size_t chunkRows(size_t params) {
  return std::clamp(kChunkWork / std::max<size_t>(params, 1), kChunkMinRows, kChunkMaxRows);
}

double chunkedAccuracy(const Model& model, std::span<const float> params, const Dataset& data,
                       size_t chunk_rows, Dataset& scratch, const std::function<void()>& between) {
  if (chunk_rows == 0) throw std::invalid_argument("chunkedAccuracy: chunk_rows is 0");
  const size_t n = data.rows();
  if (n <= chunk_rows) return model.accuracy(params, data);
  std::vector<size_t> rows;
  double correct = 0.0;
  for (size_t begin = 0; begin < n; begin += chunk_rows) {
    if (begin > 0 && between) between();
    const size_t count = std::min(chunk_rows, n - begin);
    rows.resize(count);
    for (size_t i = 0; i < count; ++i) rows[i] = begin + i;
    data.gatherInto(rows, scratch);
    // A fraction of `count` rows: a whole number of them.
    correct += std::round(model.accuracy(params, scratch) * double(count));
  }
  return correct / double(n);
}

std::optional<double> chunkedLossAndGradient(const Model& model, std::span<const float> params,
                                             const Dataset& data, std::span<const size_t> rows,
                                             size_t chunk_rows, Dataset& scratch,
                                             std::vector<float>& chunk_grad, std::span<float> grad,
                                             const std::function<bool()>& stop) {
  if (rows.empty()) throw std::invalid_argument("chunkedLossAndGradient: no rows");
  if (chunk_rows == 0) throw std::invalid_argument("chunkedLossAndGradient: chunk_rows is 0");
  if (rows.size() <= chunk_rows) {
    data.gatherInto(rows, scratch);
    return model.lossAndGradient(params, scratch, {}, grad);
  }
  std::fill(grad.begin(), grad.end(), 0.0f);
  chunk_grad.resize(grad.size());
  double loss = 0.0;
  for (size_t begin = 0; begin < rows.size(); begin += chunk_rows) {
    if (begin > 0 && stop && stop()) return std::nullopt;
    const auto chunk = rows.subspan(begin, std::min(chunk_rows, rows.size() - begin));
    data.gatherInto(chunk, scratch);
    // The L2 term's weights sum to 1, as the rows' do.
    const double weight = double(chunk.size()) / double(rows.size());
    loss += weight * model.lossAndGradient(params, scratch, {}, chunk_grad);
    for (size_t j = 0; j < grad.size(); ++j) grad[j] += float(weight) * chunk_grad[j];
  }
  return loss;
}

}  // namespace tern::ml
