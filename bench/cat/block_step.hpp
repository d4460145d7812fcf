#pragma once
// The block step (docs/cat.md, "The block step"): a level's improvement and step from the
// curvature bound of the block it sends, M = 0.25 X~^T X~ / n + lambda I (the bias unpenalised),
// which bounds the logistic loss's Hessian everywhere, in place of the paper's 1/L.
#include <Eigen/Sparse>
#include <cstdint>
#include <span>

#include "common/compression/compressor.hpp"
#include "common/costmodel/cost_model.hpp"
#include "common/ml/dataset.hpp"
#include "common/tuning/tuner.hpp"

namespace tern::bench::cat {

// The rows with a 1 appended (the bias), column-major: a coordinate's column is a contiguous run.
using Columns = Eigen::SparseMatrix<double, Eigen::ColMajor, int64_t>;
Columns augmentedColumns(const ml::Dataset& data);

// The level's decrease <g, q>^2 / (2 q^T M q) at the step <g, q> / q^T M q, q the direction the
// compressor decodes v to (top-T: v on the kept set; S+Q: the signs there scaled by S1 / T).
// `fixed_level` > 0 evaluates that level only; 0 picks the best ratio to C(T) over every level.
tuning::TuningDecision chooseBlock(std::span<const float> v, std::span<const float> grad,
                                   const Columns& X, double l2, bool sign_scale,
                                   uint32_t fixed_level, const compression::Compressor& comp,
                                   const costmodel::CostModel& cost);

// EF21's state h with the block step: the level that maximises w D(h + Q_T(v)) - lambda C(T),
// D(u) = <g, u>^2 / (2 u^T M u) the decrease along the new state at its best step (0 where u is
// no descent direction), v = g - h the difference the worker compresses.
tuning::TuningDecision chooseBlockState(std::span<const float> v, std::span<const float> grad,
                                        std::span<const float> state, const Columns& X, double l2,
                                        bool sign_scale, double w, double lambda,
                                        const compression::Compressor& comp,
                                        const costmodel::CostModel& cost);

}  // namespace tern::bench::cat
