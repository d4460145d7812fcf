// The calibration train's extrapolation, against the line through two points worked by hand.
#include "common/costmodel/calibration_times.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using tern::costmodel::CalibrationTimes;

TEST_CASE("a probe's time is extrapolated from the two largest sizes timed below it") {
  CalibrationTimes t;
  CHECK_FALSE(t.extrapolate(92672).has_value());  // nothing timed
  t.record(1448, 0.012);
  CHECK_FALSE(t.extrapolate(92672).has_value());  // one size: no line
  t.record(5792, 0.05);
  t.record(23168, 0.19);
  t.record(23168, 0.25);  // slower repeat: the fastest time of a size counts
  // Through (5792, 0.05) and (23168, 0.19): slope 0.14 / 17376 s a byte.
  const double want = 0.19 + 0.14 / 17376.0 * (92672.0 - 23168.0);
  REQUIRE(t.extrapolate(92672).has_value());
  CHECK(*t.extrapolate(92672) == doctest::Approx(want));
  // A size between: the line through the two timed below it, (1448, 0.012) and (5792, 0.05).
  CHECK(*t.extrapolate(10000) == doctest::Approx(0.05 + 0.038 / 4344.0 * (10000.0 - 5792.0)));
  CHECK(t.tooLong(92672, 0.25));
  CHECK_FALSE(t.tooLong(92672, 0.0));  // 0: never skip
  CHECK_FALSE(t.tooLong(92672, 1.0));
}

TEST_CASE(
    "a larger probe that came back faster gives no negative slope, and bad times are ignored") {
  CalibrationTimes t;
  t.record(1448, 0.02);
  t.record(5792, 0.01);  // a token bucket's burst, or jitter
  CHECK(*t.extrapolate(92672) == doctest::Approx(0.01));
  t.record(23168, std::numeric_limits<double>::quiet_NaN());
  t.record(23168, -1.0);
  CHECK(*t.extrapolate(92672) == doctest::Approx(0.01));  // still the line through 1 and 4 packets
  t.clear();
  CHECK_FALSE(t.extrapolate(92672).has_value());
}
