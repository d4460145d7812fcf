#pragma once
// The calibration train's fastest time per probe size, and the time a larger probe would take by
// the line through the two largest sizes timed below it: the worker skips a calibration probe
// that would hold a slow link longer than link.calibration_max_seconds (docs/link-model.md,
// "Calibration on slow links"). Sans-I/O: times are passed in.
#include <cstddef>
#include <map>
#include <optional>

namespace tern::costmodel {

class CalibrationTimes {
 public:
  // A probe of `bytes` on the wire took `seconds`; non-finite or negative times are ignored.
  void record(size_t bytes, double seconds);
  // The time `bytes` would take on the line through the two largest sizes timed below it (its
  // slope never negative); none while fewer than two such sizes are timed.
  std::optional<double> extrapolate(size_t bytes) const;
  // Whether a calibration probe of `bytes` would take longer than `max_seconds` (> 0; 0 = never).
  bool tooLong(size_t bytes, double max_seconds) const;
  void clear() { fastest_.clear(); }

 private:
  std::map<size_t, double> fastest_;  // probe bytes -> fastest time seen
};

}  // namespace tern::costmodel
