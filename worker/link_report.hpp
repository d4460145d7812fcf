#pragma once
// Which pushes carry the worker's link model. The coordinator keeps the last model it took, so a
// push carries it only when the coordinator has none from this session, when a or b moved by
// more than kMove from the copy it took, and every kEvery pushes; on a slow link every byte of
// a push is round time (docs/link-model.md, "The model and its fit").
#include <cstdint>
#include <optional>
#include <utility>

#include "tern.pb.h"

namespace tern::worker {

class LinkReport {
 public:
  static constexpr double kMove = 0.1;
  static constexpr uint32_t kEvery = 16;

  // The model to attach to the push of `round` (the link's model now), or nullopt when the
  // coordinator's copy will do.
  std::optional<wire::LinkModel> forPush(uint64_t round, const wire::LinkModel& now);
  // The push of `round` was acknowledged: the coordinator took the model it carried, if any.
  void taken(uint64_t round);
  // A welcome: the coordinator's copy is unknown until a push carries one.
  void reset();

 private:
  std::optional<wire::LinkModel> taken_;                           // the coordinator's copy
  std::optional<std::pair<uint64_t, wire::LinkModel>> in_flight_;  // the latest one sent
  uint32_t since_ = 0;  // pushes since the last that carried a model
};

// Whether `now` differs from `was` by more than LinkReport::kMove in b (relative) or in a
// (relative to |a| + b of `was`), in packet size, in having samples at all or in twice as many,
// or in whether b's standard error is finite (the fit identified).
bool linkMoved(const wire::LinkModel& was, const wire::LinkModel& now);

}  // namespace tern::worker
