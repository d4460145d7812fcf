#include "common/allocation/budget_rules.hpp"

#include <utility>
#include <vector>

namespace tern::allocation {

namespace {

// The link-seconds fields given (in the order the configuration lists them).
std::vector<std::string> linkSecondsFields(const Budget& b) {
  std::vector<std::string> out;
  if (b.seconds_per_round > 0.0) out.push_back("seconds_per_round");
  if (b.deadline_seconds > 0.0) out.push_back("deadline_seconds");
  if (b.round_overhead_seconds > 0.0) out.push_back("round_overhead_seconds");
  if (b.whole_packets) out.push_back("whole_packets");
  return out;
}

}  // namespace

std::optional<BudgetFault> budgetFault(Method method, const Budget& b, const FieldName& name) {
  const auto fault = [](std::string field, std::string why) {
    return BudgetFault{std::move(field), std::move(why)};
  };
  if (!(b.mean_ratio > 0.0)) return fault("mean_ratio", name("mean_ratio") + " must be above 0");
  if (method == Method::kDagcA && !(b.mean_threshold > 0.0)) {
    return fault("mean_threshold",
                 "dagc-a sets each worker's threshold from the mean one: it needs " +
                     name("mean_threshold") + " above 0");
  }
  if (b.bytes_per_round > 0.0 && b.seconds_per_round > 0.0) {
    return fault("seconds_per_round", name("bytes_per_round") + " and " +
                                          name("seconds_per_round") +
                                          " are two budgets: give one of them");
  }
  if (const auto given = linkSecondsFields(b); method != Method::kCostAware && !given.empty()) {
    return fault(
        given.front(),
        name(given.front()) + " is read by method cost-aware only, not by " + methodName(method));
  }
  if (b.whole_packets && !(b.seconds_per_round > 0.0)) {
    return fault("whole_packets", name("whole_packets") +
                                      " prices uploads in link seconds: it needs " +
                                      name("seconds_per_round") + " above 0");
  }
  return std::nullopt;
}

}  // namespace tern::allocation
