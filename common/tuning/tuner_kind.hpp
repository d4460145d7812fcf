#pragma once
// The tuners by kind (tuner.hpp): what tuning.method names, parsed once.
#include <optional>
#include <string_view>

namespace tern::tuning {

enum class TunerKind { kCat, kFixed, kDynamic, kFull };

// The kind named `name` (cat | fixed | dynamic | full), or nullopt.
inline std::optional<TunerKind> tunerKindNamed(std::string_view name) {
  if (name == "cat") return TunerKind::kCat;
  if (name == "fixed") return TunerKind::kFixed;
  if (name == "dynamic") return TunerKind::kDynamic;
  if (name == "full") return TunerKind::kFull;
  return std::nullopt;
}

}  // namespace tern::tuning
