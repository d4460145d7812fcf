#include "common/compression/error_feedback.hpp"

#include <stdexcept>

#include "common/compression/compressor_support.hpp"
#include "common/util/float_passes.hpp"

namespace tern::compression {

ErrorFeedback::ErrorFeedback(std::unique_ptr<Compressor> inner, bool enabled,
                             std::shared_ptr<std::vector<float>> shared_corrected)
    : inner_(std::move(inner)),
      enabled_(enabled),
      shared_(shared_corrected != nullptr),
      corrected_(shared_ ? std::move(shared_corrected) : std::make_shared<std::vector<float>>()) {
  if (!inner_) throw std::invalid_argument("ErrorFeedback: no compressor");
}

std::span<const float> ErrorFeedback::corrected(std::span<const float> g) {
  have_corrected_ = true;
  if (!enabled_) return view_ = g;  // nothing to add: the caller's gradient itself, no copy
  // A different dimension means a different model (a re-join): the old residual is void.
  if (residual_.size() != g.size()) residual_.assign(g.size(), 0.0f);
  std::vector<float>& v = *corrected_;
  v.resize(g.size());
  for (size_t j = 0; j < g.size(); ++j) v[j] = residual_[j] + g[j];
  return view_ = v;
}

std::optional<std::span<const float>> ErrorFeedback::correctedIfFinite(std::span<const float> g) {
  if (!enabled_) {
    if (!detail::allFinite(g)) return std::nullopt;
    return corrected(g);
  }
  if (residual_.size() != g.size()) residual_.assign(g.size(), 0.0f);
  std::vector<float>& v = *corrected_;
  v.resize(g.size());
  // The pass is memory-bound: the check rides on the sum (no early exit, so it vectorizes).
  uint32_t bad = 0;
  for (size_t j = 0; j < g.size(); ++j) {
    v[j] = residual_[j] + g[j];
    bad |= nonFiniteBit(g[j]);
  }
  if (bad != 0) {
    have_corrected_ = false;
    view_ = {};
    return std::nullopt;
  }
  have_corrected_ = true;
  return view_ = v;
}

Compressed ErrorFeedback::compressCorrected(uint32_t level, Rng& rng) {
  if (!have_corrected_) throw std::logic_error("ErrorFeedback: compressCorrected before corrected");
  Compressed c = inner_->compress(view_, level, rng);
  if (enabled_) {
    // e <- v - C(v), coordinate by coordinate in float, exactly as a receiver would subtract:
    // v becomes the residual (its own buffer, no copy; a shared one is copied), then the sent
    // coordinates lose what was sent.
    if (shared_) {
      residual_.assign(view_.begin(), view_.end());
    } else {
      residual_.swap(*corrected_);
    }
    const SparseGradient& dec = c.decoded;
    if (dec.isDense()) {
      for (size_t j = 0; j < residual_.size(); ++j) residual_[j] = residual_[j] - dec.values[j];
    } else {
      for (size_t i = 0; i < dec.indices.size(); ++i) {
        const uint32_t j = dec.indices[i];
        residual_[j] = residual_[j] - dec.values[i];
      }
    }
  }
  have_corrected_ = false;
  view_ = {};
  return c;
}

bool ErrorFeedback::takeBack(const SparseGradient& unsent) {
  if (!enabled_ || residual_.size() != unsent.dim) return false;
  if (unsent.isDense()) {
    if (unsent.values.size() != residual_.size()) return false;
    for (size_t j = 0; j < residual_.size(); ++j) residual_[j] += unsent.values[j];
  } else {
    for (size_t i = 0; i < unsent.indices.size(); ++i) {
      residual_[unsent.indices[i]] += unsent.values[i];
    }
  }
  return true;
}

std::span<const float> ErrorFeedback::resendResidual(size_t d) {
  if (!enabled_ || residual_.size() != d) return {};
  *corrected_ = residual_;
  have_corrected_ = true;
  return view_ = *corrected_;
}

Compressed ErrorFeedback::compress(std::span<const float> g, uint32_t level, Rng& rng) {
  corrected(g);
  return compressCorrected(level, rng);
}

void ErrorFeedback::reset() {
  residual_.clear();
  if (!shared_) corrected_->clear();
  view_ = {};
  have_corrected_ = false;
}

}  // namespace tern::compression
