#pragma once
// The rules a budget must meet for its method to plan by it, stated once for the coordinator's
// configuration (YAML keys) and `tern-coordinator allocate` (flags); each names the fields its
// own way (docs/configuration.md, allocation).
#include <functional>
#include <optional>
#include <string>

#include "common/allocation/allocator.hpp"

namespace tern::allocation {

// A rule a budget breaks: the Budget field at fault ("mean_threshold", ...) and why, in the
// caller's names of the fields.
struct BudgetFault {
  std::string field;
  std::string why;
};

// How a caller calls a Budget field ("'allocation.seconds_per_round'", "--seconds-per-round").
using FieldName = std::function<std::string(const std::string& field)>;

// The first rule `budget` breaks under `method`, or nullopt: a mean ratio above 0; dagc-a's mean
// threshold above 0; one volume budget (bytes or link seconds, not both); the link-seconds fields
// (seconds_per_round, deadline_seconds, round_overhead_seconds, whole_packets) under cost-aware
// only; whole packets only with a seconds budget. A field counts as given when above 0 (true).
std::optional<BudgetFault> budgetFault(Method method, const Budget& budget, const FieldName& name);

}  // namespace tern::allocation
