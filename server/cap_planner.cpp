#include "server/cap_planner.hpp"

#include <spdlog/spdlog.h>

#include <cmath>

#include "common/allocation/link_costs.hpp"
#include "server/link_checks.hpp"

namespace tern::server {

allocation::PushPrice foldPrice(const std::optional<allocation::PushPrice>& was,
                                const allocation::PushPrice& round) {
  constexpr double kWeight = 0.25;
  if (!was) return round;
  return {(1 - kWeight) * was->per_push + kWeight * round.per_push,
          (1 - kWeight) * was->per_coordinate + kWeight * round.per_coordinate};
}

CapPlanner::CapPlanner(const config::AllocationSettings& settings, uint32_t dim)
    : settings_(settings),
      dim_(dim),
      method_(settings.method == allocation::Method::kCostAware ? Method::kCostAware
                                                                : Method::kVolume),
      allocator_(allocation::makeAllocator(settings.method)) {}

void CapPlanner::restore(std::optional<allocation::PushPrice> mean_price,
                         uint64_t rounds_since_plan) {
  mean_price_ = mean_price;
  rounds_since_plan_ = rounds_since_plan;
}

bool CapPlanner::plansSeconds() const {
  return method_ == Method::kCostAware && settings_.budget.seconds_per_round > 0.0;
}

allocation::Budget CapPlanner::pricedBudget() const {
  allocation::Budget budget = settings_.budget;
  if (settings_.measure_push_bytes && mean_price_) {
    budget.bytes_per_coordinate = mean_price_->per_coordinate;
    budget.bytes_per_push = mean_price_->per_push;
  }
  return budget;
}

allocation::WorkerLoad CapPlanner::loadOf(const Worker& w) const {
  allocation::WorkerLoad l;
  // A configured bytes_per_coordinate is the price of everyone's coordinates.
  if (settings_.measure_push_bytes && w.push_price) {
    l.price = *w.push_price;
  }
  // The allocator prices packets of the budget's size: b is rescaled from the worker's packet.
  const auto& link = w.rec.link;
  const double own_packet = link.packet_bytes() > 0 ? double(link.packet_bytes()) : 0.0;
  l.seconds_per_packet = own_packet > 0.0 ? link.b_seconds_per_packet() *
                                                double(settings_.budget.packet_bytes) / own_packet
                                          : link.b_seconds_per_packet();
  l.seconds_fixed = link.a_seconds();
  return l;
}

void CapPlanner::plan(Membership& members) {
  std::vector<Worker*> alive;
  double total = 0.0;  // sums of up to 2^40 samples a worker: no overflow, shares in [0, 1]
  for (auto& [id, w] : members.all()) {
    if (!w.rec.alive || w.rec.benched) continue;  // a benched straggler holds no cap
    alive.push_back(&w);
    total += double(w.samples);
  }
  if (alive.empty() || !(total > 0.0)) return;
  std::vector<allocation::WorkerLoad> loads;
  for (Worker* w : alive) {
    allocation::WorkerLoad l = loadOf(*w);
    l.share = double(w->samples) / total;
    loads.push_back(l);
  }
  const allocation::Budget budget = pricedBudget();
  auto plan = allocator_->allocate(loads, dim_, budget);
  planned_budget_ = budget;
  allocation::LinkCosts links;  // what the plan charges each worker of a link-seconds budget
  if (plansSeconds()) links = allocation::linkCosts(loads, budget);
  for (size_t i = 0; i < alive.size(); ++i) {
    PlannedCap& p = alive[i]->plan;
    p.seconds_per_packet = fittedSecondsPerPacket(alive[i]->rec.link);
    p.unit_seconds = links.known ? links.per_unit[i] : 0.0;
    p.packing = links.known ? links.packing[i] : allocation::Packing{};
    p.price = allocation::pushPrice(loads[i], budget);
    alive[i]->rec.share = loads[i].share;
    alive[i]->rec.cap = i < plan.caps.size() ? plan.caps[i] : dim_;
    alive[i]->rec.threshold = i < plan.thresholds.size() ? plan.thresholds[i] : 0.0;
  }
  rounds_since_plan_ = 0;
}

bool CapPlanner::admit(Membership& members, Worker& joiner, uint64_t round) {
  // The others keep the caps they were handed for this round; the new plan applies from the next.
  joiner.plan.in_round = true;
  joiner.plan.round_cap = joiner.rec.cap;
  std::vector<const Worker*> others;
  for (const auto& [id, w] : members.all()) {
    if (&w != &joiner && w.plan.in_round && (w.rec.alive || w.pending)) others.push_back(&w);
  }
  // Nobody else holds a cap in the round: it is the joiner's, under the plan just made.
  if (others.empty()) return true;
  const char* budget_name = "budget";
  if (plansSeconds() && joiner.plan.unit_seconds > 0.0) {
    const double seconds = planned_budget_.seconds_per_round;
    double spent = 0.0;
    for (const Worker* w : others) {
      spent += allocation::chargedSeconds(w->plan.unit_seconds, w->plan.packing, w->plan.round_cap,
                                          seconds);
    }
    joiner.plan.round_cap = allocation::capWithin(joiner.plan.unit_seconds, joiner.plan.packing,
                                                  joiner.rec.cap, seconds - spent, seconds);
    budget_name = "link seconds";
  } else {
    double spent = 0.0;
    for (const Worker* w : others) {
      spent += allocation::roundPushCost(w->plan.price, planned_budget_, w->plan.round_cap);
    }
    const double limit = allocation::roundLimit(others.size() + 1, dim_, planned_budget_);
    joiner.plan.round_cap = allocation::capWithinRound(joiner.plan.price, planned_budget_,
                                                       joiner.rec.cap, spent, limit);
  }
  if (joiner.plan.round_cap > 0) return true;
  joiner.plan.in_round = false;
  spdlog::info("worker {} ({}) sits out round {}, its {} spent: it starts with the next",
               joiner.rec.id, joiner.rec.name, round, budget_name);
  return false;
}

void CapPlanner::noteLink(const Worker& w, const wire::LinkModel& link) {
  if (method_ != Method::kCostAware) return;  // only cost-aware plans with the links
  const double was = w.plan.seconds_per_packet;
  const double b = fittedSecondsPerPacket(link);
  if ((was > 0.0) != (b > 0.0) || (was > 0.0 && std::abs(b / was - 1.0) > kReplanLinkChange))
    link_moved_ = true;
}

bool CapPlanner::pricedInBytes() const {
  const auto& budget = settings_.budget;
  return budget.bytes_per_round > 0.0 ||
         (method_ == Method::kCostAware &&
          (budget.seconds_per_round > 0.0 || budget.deadline_seconds > 0.0 ||
           budget.round_overhead_seconds > 0.0));
}

bool CapPlanner::pricesMoved(Membership& members) const {
  if (!settings_.measure_push_bytes || !mean_price_ || !pricedInBytes()) return false;
  const allocation::Budget priced = pricedBudget();
  double planned = 0.0, now = 0.0;
  for (const auto& [id, w] : members.all()) {
    if (!w.rec.alive) continue;
    const allocation::PushPrice price = allocation::pushPrice(loadOf(w), priced);
    planned += w.plan.price.per_push + w.plan.price.per_coordinate * w.rec.cap;
    now += price.per_push + price.per_coordinate * w.rec.cap;
  }
  return planned > 0.0 && std::abs(now / planned - 1.0) > kReplanPushBytesChange;
}

bool CapPlanner::closeRound(Membership& members) {
  ++rounds_since_plan_;
  bool moved = link_moved_;
  link_moved_ = false;
  PushSample round;  // the sums over the round's pushes
  uint64_t pushes = 0;
  for (auto& [id, w] : members.all()) {
    if (!w.round_push) continue;
    const PushSample sample = *w.round_push;
    w.round_push.reset();
    round.fixed += sample.fixed;
    round.coordinate_bytes += sample.coordinate_bytes;
    round.coordinates += sample.coordinates;
    ++pushes;
    if (sample.coordinates > 0.0) {
      w.push_price =
          foldPrice(w.push_price, {sample.fixed, sample.coordinate_bytes / sample.coordinates});
    }
  }
  if (pushes > 0 && round.coordinates > 0.0) {
    mean_price_ = foldPrice(
        mean_price_, {round.fixed / double(pushes), round.coordinate_bytes / round.coordinates});
  }
  if (moved || pricesMoved(members)) return true;
  return settings_.reallocate_every > 0 && rounds_since_plan_ >= settings_.reallocate_every;
}

}  // namespace tern::server
