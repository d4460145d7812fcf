#pragma once
// Models trained by tern, over a flat fp32 parameter vector (that is what is compressed and sent):
//  - softmax: multinomial logistic regression, params = W (classes x features, row-major) then b.
//  - logistic: binary logistic regression with L2 (labels 0/1), params = w (features) then b;
//    smoothness L = 0.25 * max_i ||[x_i,1]||^2 + l2 (an upper bound on the Hessian norm), which is
//    what CAT (docs/cat.md, method) needs for its step 1/L.
//  - mlp: one hidden layer (ReLU) then softmax; params = W1, b1, W2, b2.
// The L2 term l2/2 * ||w||^2 covers the weight matrices/vectors only, never the biases (a bias
// penalty would pull class priors towards uniform). smoothness(): logistic as above; softmax
// 0.5 * max_i ||[x_i,1]||^2 + l2 (its Hessian in the logits is at most 1/2); mlp: none.
// Dense and sparse datasets both work for every model; sparse features are never densified.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/ml/dataset.hpp"
#include "common/util/rng.hpp"

namespace tern::ml {

// One named tensor of an external model (row-major; an empty shape is a scalar).
struct TensorShape {
  std::string name;
  std::vector<uint64_t> shape;
  bool operator==(const TensorShape&) const = default;
};

struct ModelSpec {
  std::string kind = "softmax";  // softmax | logistic | mlp | external
  uint32_t features = 0;
  uint32_t classes = 10;
  uint32_t hidden = 64;
  double l2 = 0.0;
  // external: the layout its trainers train (a model tern does not know: docs/python.md), and
  // the initial parameters (the coordinator's, from model.file; null on a worker).
  std::vector<TensorShape> tensors;
  std::shared_ptr<const std::vector<float>> initial;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelSpec& spec() const = 0;
  virtual size_t numParams() const = 0;
  // Deterministic initialisation (zeros for the linear models, scaled Gaussian for the MLP).
  virtual void init(std::span<float> params, Rng& rng) const = 0;
  // Mean loss over `rows` (all rows when empty), plus l2/2 * ||w||^2; writes its gradient to grad.
  virtual double lossAndGradient(std::span<const float> params, const Dataset& data,
                                 std::span<const size_t> rows, std::span<float> grad) const = 0;
  virtual double loss(std::span<const float> params, const Dataset& data,
                      std::span<const size_t> rows = {}) const = 0;
  // Fraction of rows whose predicted class equals the label.
  virtual double accuracy(std::span<const float> params, const Dataset& data) const = 0;
  // Smoothness constant of the loss on this data, where known in closed form.
  virtual std::optional<double> smoothness(const Dataset& data) const = 0;
};

// The largest models makeModel builds: the configuration's limits, and at most kMaxParams
// parameters (4 GiB of fp32; the wire's dimensions are 32-bit).
inline constexpr uint32_t kMaxFeatures = 1u << 26;
inline constexpr uint32_t kMaxClasses = 1u << 16;
inline constexpr uint32_t kMaxHidden = 1u << 16;
inline constexpr uint64_t kMaxParams = uint64_t{1} << 30;
// The values a layout holds (saturating at UINT64_MAX).
uint64_t paramsOf(std::span<const TensorShape> tensors);
// "name[2,3], bias[3]": a layout for messages.
std::string describeLayout(std::span<const TensorShape> tensors);
// The number of parameters a model of `spec` has, computed without overflow (kind as makeModel
// reads it); 0 for an unknown kind.
uint64_t paramsOf(const ModelSpec& spec);
// An external model's spec is checked for a layout of 1..kMaxParams values (and initial values
// of that size, when given); its Model knows only its size and initial values: it is trained and
// evaluated by its trainers, never by tern (loss, gradient and accuracy throw std::logic_error).
// Throws std::invalid_argument on an unknown kind, zero features/classes, or a spec beyond the
// limits above (a model description from the wire must not make the caller allocate gigabytes).
std::unique_ptr<Model> makeModel(const ModelSpec& spec);
// Why `data` cannot train or test a model of `spec` (a label the model has no output for; a
// logistic model takes labels 0 and 1 only), or "" when it can.
std::string labelsUnfit(const ModelSpec& spec, const Dataset& data);

// How many rows one model evaluation over a large batch takes at a time: about kChunkWork rows x
// parameters (a few GFLOP for the dense models: about a second on a small board), 256 to 4,096.
inline constexpr size_t kChunkWork = size_t{1} << 28;
// A held-out evaluation a coordinator takes: a finite loss and an accuracy in [0, 1].
bool usableScores(double loss, double accuracy);

inline constexpr size_t kChunkMinRows = 256;
inline constexpr size_t kChunkMaxRows = 4096;
size_t chunkRows(size_t params);

// Model::accuracy over every row of `data`, in chunks of at most chunk_rows rows gathered into
// `scratch`: the same fraction, holding one chunk's rows and activations at a time; `between`
// (if given) runs between two chunks (a daemon pings its watchdog there).
double chunkedAccuracy(const Model& model, std::span<const float> params, const Dataset& data,
                       size_t chunk_rows, Dataset& scratch,
                       const std::function<void()>& between = {});

// Model::lossAndGradient over `rows` of `data` (not empty), in chunks of at most chunk_rows rows
// gathered into `scratch` (chunk_grad holds one chunk's gradient): the mean of the chunks' means
// weighted by their rows, so that only one chunk's rows and activations are held at a time. A
// batch of one chunk is one call, exactly. Before each chunk after the first, `stop` (if given)
// is asked; nullopt when it said stop (grad is then partial).
std::optional<double> chunkedLossAndGradient(const Model& model, std::span<const float> params,
                                             const Dataset& data, std::span<const size_t> rows,
                                             size_t chunk_rows, Dataset& scratch,
                                             std::vector<float>& chunk_grad, std::span<float> grad,
                                             const std::function<bool()>& stop = {});

}  // namespace tern::ml
