#pragma once
// Wake-up times by worker id, with the earliest found in O(log N) per change: a binary min-heap
// whose superseded entries are dropped when they reach the top, and compacted when they
// outnumber the live ones (docs/performance.md, "Work per event").
#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tern::server {

class WakeQueue {
 public:
  // `id` wakes at `at` from now on (replacing what it had).
  void set(uint32_t id, double at);
  // `id` has no wake-up.
  void remove(uint32_t id) { live_.erase(id); }
  // Exactly the wake-ups in `all` (id, at), each id once; O(N).
  void assign(const std::vector<std::pair<uint32_t, double>>& all);
  // The earliest wake-up (its id and time), or none.
  std::optional<std::pair<uint32_t, double>> earliest();
  size_t size() const { return live_.size(); }
  // Entries held, superseded ones included (at most twice the live ones, plus 64, after a set).
  size_t heapEntries() const { return heap_.size(); }

 private:
  struct Entry {
    double at = 0.0;
    uint32_t id = 0;
    uint64_t stamp = 0;
  };
  bool current(const Entry& e) const;
  void compact();

  std::vector<Entry> heap_;                      // min-heap by `at`; some superseded
  std::unordered_map<uint32_t, uint64_t> live_;  // id -> stamp of its current entry
  uint64_t next_stamp_ = 0;
};

}  // namespace tern::server
