// The simulator's link: rate alone, and a token bucket's burst, against times worked by hand.
#include "sim/link_transmitter.hpp"

#include <doctest/doctest.h>

using tern::sim::LinkTransmitter;

TEST_CASE("without a burst a message takes its bytes at the rate, queued behind the one before") {
  LinkTransmitter link(1.0, 0.0);  // 1 Mbit/s: 125,000 bytes a second
  CHECK(link.send(0.0, 1250) == doctest::Approx(0.01));
  CHECK(link.send(0.005, 1250) == doctest::Approx(0.02));  // waits for the first to leave
  CHECK(link.send(1.0, 125) == doctest::Approx(1.001));    // an idle link starts at once
}

TEST_CASE("a burst lets a message through at once after an idle spell, then the rate holds") {
  LinkTransmitter link(1.0, 3000.0);                    // the bucket starts full: 3,000 bytes
  CHECK(link.send(0.0, 2000) == doctest::Approx(0.0));  // paid from the bucket
  // 1,000 bytes left in the bucket; 5,000 more bytes owe 4,000 at the rate: 32 ms.
  CHECK(link.send(0.0, 5000) == doctest::Approx(0.032));
  // Idle from 0.032 to 0.040: 8 ms refill 1,000 bytes; 1,500 bytes owe 500: 4 ms.
  CHECK(link.send(0.040, 1500) == doctest::Approx(0.044));
  // A long idle spell refills no more than the burst: 10,000 bytes owe 7,000: 56 ms.
  CHECK(link.send(10.0, 10000) == doctest::Approx(10.056));
}
