#pragma once
// The tuners by kind (tuner.hpp): what tuning.method names, parsed once.
#include <optional>
#include <string_view>

namespace tern::tuning {

// kCat prices levels on the fresh gradient (tern's, with a residual); kCatPaper on what is sent
// from, gradient plus residual (the paper's criterion). docs/cat.md, "The tuner in the daemons".
enum class TunerKind { kCat, kCatPaper, kFixed, kDynamic, kFull };

// The kind named `name` (cat | cat-paper | fixed | dynamic | full), or nullopt.
inline std::optional<TunerKind> tunerKindNamed(std::string_view name) {
  if (name == "cat") return TunerKind::kCat;
  if (name == "cat-paper") return TunerKind::kCatPaper;
  if (name == "fixed") return TunerKind::kFixed;
  if (name == "dynamic") return TunerKind::kDynamic;
  if (name == "full") return TunerKind::kFull;
  return std::nullopt;
}

// The configuration's word for `kind`.
inline const char* tunerKindName(TunerKind kind) {
  switch (kind) {
    case TunerKind::kCat:
      return "cat";
    case TunerKind::kCatPaper:
      return "cat-paper";
    case TunerKind::kDynamic:
      return "dynamic";
    case TunerKind::kFull:
      return "full";
    case TunerKind::kFixed:
      break;
  }
  return "fixed";
}

}  // namespace tern::tuning
