#pragma once
// Cap planning: the allocator's inputs (shares, links, measured push prices), the plan of every
// live worker's cap, admission into an open round within what its budget leaves, and when a
// moved input calls for a new plan. The allocation method is parsed once, at construction.
#include <cstdint>
#include <memory>
#include <optional>

#include "common/allocation/allocator.hpp"
#include "common/allocation/budget.hpp"
#include "common/config/settings.hpp"
#include "server/membership.hpp"

namespace tern::server {

// A measured price folded with the next round's (a running mean over rounds).
allocation::PushPrice foldPrice(const std::optional<allocation::PushPrice>& was,
                                const allocation::PushPrice& round);

class CapPlanner {
 public:
  // A plan input that moved by more than this fraction since the last plan re-plans.
  static constexpr double kReplanPushBytesChange = 0.1;
  static constexpr double kReplanLinkChange = 0.25;

  CapPlanner(const config::AllocationSettings& settings, uint32_t dim);

  // Plans every live worker's cap, threshold and share (a benched straggler gets none).
  void plan(Membership& members);
  // Gives `joiner` a cap within what the open round's budget leaves; false when none fits.
  bool admit(Membership& members, Worker& joiner, uint64_t round);
  // A push's valid link model for `w`: under cost-aware, a first fit or b moved re-plans.
  void noteLink(const Worker& w, const wire::LinkModel& link);
  // At a round's close: folds its pushes into the prices; true when the plan should be redone.
  bool closeRound(Membership& members);

  const std::optional<allocation::PushPrice>& meanPrice() const { return mean_price_; }
  uint64_t roundsSincePlan() const { return rounds_since_plan_; }
  void restore(std::optional<allocation::PushPrice> mean_price, uint64_t rounds_since_plan);

 private:
  enum class Method { kVolume, kCostAware };
  bool plansSeconds() const;
  bool pricedInBytes() const;
  bool pricesMoved(Membership& members) const;
  allocation::Budget pricedBudget() const;
  allocation::WorkerLoad loadOf(const Worker& w) const;

  config::AllocationSettings settings_;
  uint32_t dim_;
  Method method_;
  std::unique_ptr<allocation::Allocator> allocator_;
  allocation::Budget planned_budget_;
  bool link_moved_ = false;
  std::optional<allocation::PushPrice> mean_price_;  // all pushes': a worker not yet measured
  uint64_t rounds_since_plan_ = 0;
};

}  // namespace tern::server
