#include "server/wake_queue.hpp"

#include <algorithm>

namespace tern::server {

namespace {
// std::*_heap keep the largest first: the latest wake-up compares smallest.
constexpr auto kLater = [](const auto& a, const auto& b) { return a.at > b.at; };
}  // namespace

bool WakeQueue::current(const Entry& e) const {
  const auto it = live_.find(e.id);
  return it != live_.end() && it->second == e.stamp;
}

void WakeQueue::set(uint32_t id, double at) {
  const uint64_t stamp = ++next_stamp_;
  live_[id] = stamp;
  heap_.push_back({at, id, stamp});
  std::push_heap(heap_.begin(), heap_.end(), kLater);
  if (heap_.size() > 2 * live_.size() + 64) compact();
}

void WakeQueue::compact() {
  std::erase_if(heap_, [this](const Entry& e) { return !current(e); });
  std::make_heap(heap_.begin(), heap_.end(), kLater);
}

void WakeQueue::assign(const std::vector<std::pair<uint32_t, double>>& all) {
  heap_.clear();
  live_.clear();
  heap_.reserve(all.size());
  for (const auto& [id, at] : all) {
    const uint64_t stamp = ++next_stamp_;
    live_[id] = stamp;
    heap_.push_back({at, id, stamp});
  }
  compact();  // drops the earlier entries of an id given twice
}

std::optional<std::pair<uint32_t, double>> WakeQueue::earliest() {
  while (!heap_.empty() && !current(heap_.front())) {
    std::pop_heap(heap_.begin(), heap_.end(), kLater);
    heap_.pop_back();
  }
  if (heap_.empty()) return std::nullopt;
  return std::make_pair(heap_.front().id, heap_.front().at);
}

}  // namespace tern::server
