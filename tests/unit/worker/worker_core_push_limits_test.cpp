// The worker core's push held to what the round allows: to what the fitted link carries within
// the round's deadline, and to the coordinator's largest message (probes too); a gradient that
// overflows is sent as a push that says so, leaving the residual as it was.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/compression/codec.hpp"
#include "common/compression/compressor.hpp"
#include "tests/unit/worker/worker_rig.hpp"

using namespace tern;
using namespace tern::testing;

TEST_CASE("a push is held to what the fitted link carries within the round's deadline") {
  // d = 6002, top-k at the cap: a whole push is 17 packets, 0.07 s on a link of 2 ms + 4 ms a
  // packet, against a round deadline of 0.05 s; the gradient takes 4 ms at each of the core's
  // stop checks. Pushed at the cap it missed its round every round.
  auto rig = [](const std::string& compressor, double deadline) {
    auto r = std::make_unique<Rig>(
        0, 2, 3000, [&](config::WorkerSettings& s) { s.compressor.name = compressor; });
    r->round_deadline = deadline;
    r->welcome();
    REQUIRE(r->core->joined());
    Rig* raw = r.get();
    r->core->setStopCheck([raw] {
      raw->now += 0.004;
      return false;
    });
    return r;
  };
  // One round started on an idle link: the level pushed, and when the push (behind the probe
  // ahead of it, if any) arrived, on the link the test models, after the round start.
  auto round = [](Rig& r, uint64_t n) {
    r.now = std::max(r.now, r.link_free) + 0.01;
    const double started = r.now;
    const auto out = r.roundStart(n);
    r.send(out);
    r.deliverAcks();
    const auto push = std::find_if(out.begin(), out.end(), isPush);
    REQUIRE(push != out.end());
    return std::pair{push->envelope.push().level(), r.link_free - started};
  };
  const uint32_t d = 6002;
  const double deadline = 0.05;
  auto slow = rig("topk", deadline);
  // Until the fit is made nothing is known of the link: pushes go at the cap.
  for (uint64_t n = 0; n < 12; ++n) {
    const bool fitted = slow->core->link().fit().valid;
    const auto [level, arrived] = round(*slow, n);
    if (!fitted) CHECK(level == d);
  }
  REQUIRE(slow->core->link().fit().valid);
  const uint64_t trimmed_before = slow->core->stats().deadline_trimmed;
  for (uint64_t n = 12; n < 20; ++n) {
    CAPTURE(n);
    const auto [level, arrived] = round(*slow, n);
    CHECK(level < d);
    // It arrives within the deadline, and not far within it: the level is the most that arrives
    // in time, not a guess.
    CHECK(arrived <= deadline);
    CHECK(arrived >= deadline / 2);
  }
  CHECK(slow->core->stats().deadline_trimmed - trimmed_before == 8);
  CHECK(slow->core->stats().trimmed == 0);
  // A round start that says less is left (a worker admitted into a running round): the push is
  // held to that.
  slow->deadline_left = deadline / 2;
  for (uint64_t n = 20; n < 24; ++n) CHECK(round(*slow, n).second <= deadline / 2);
  // Where nothing was cut, nothing is counted: a deadline that a push at the cap meets.
  slow->deadline_left = 1.0;
  const uint64_t cut = slow->core->stats().deadline_trimmed;
  for (uint64_t n = 24; n < 28; ++n) CHECK(round(*slow, n).first == d);
  CHECK(slow->core->stats().deadline_trimmed == cut);
  // The hard threshold (here 0: every coordinate passes) keeps its largest coordinates that
  // arrive in time; the cut is the deadline's, not the coordinator's message limit's.
  auto threshold = rig("threshold", deadline);
  for (uint64_t n = 0; n < 20; ++n) {
    const auto [level, arrived] = round(*threshold, n);
    if (n >= 12) CHECK(arrived <= deadline);
  }
  REQUIRE(threshold->core->link().fit().valid);
  CHECK(threshold->core->stats().deadline_trimmed > 0);
  CHECK(threshold->core->stats().trimmed == 0);
  // No deadline said (an older coordinator): the push goes at the cap, as before.
  auto unsaid = rig("topk", 0.0);
  for (uint64_t n = 0; n < 16; ++n) CHECK(round(*unsaid, n).first == d);
  CHECK(unsaid->core->stats().deadline_trimmed == 0);
  CHECK(unsaid->core->stats().deadline_late == 0);
  // A compressor without a level cannot send less: it goes whole, and late, counted (and said).
  auto dense = rig("identity", deadline);
  for (uint64_t n = 0; n < 16; ++n) CHECK(round(*dense, n).second > deadline);
  REQUIRE(dense->core->link().fit().valid);
  CHECK(dense->core->stats().deadline_late > 0);
  CHECK(dense->core->stats().deadline_trimmed == 0);
}

TEST_CASE("pushes and probes fit in the coordinator's largest message, said in its welcome") {
  // d = 6002 and a coordinator taking parts of at most 4096 bytes; probes sized for 512-byte
  // packets (the largest calibration probe 32 kB; every push spans two packets or more, so the
  // worker probes). Before, the welcome did not say, and a push or probe over the coordinator's
  // limit cost the worker its connection, again every round.
  auto rig = [](const std::string& compressor, uint64_t peer_max) {
    auto r = std::make_unique<Rig>(0, 2, 3000, [&](config::WorkerSettings& s) {
      s.compressor.name = compressor;
      s.link.packet_bytes = 512;
    });
    r->peer_max_bytes = peer_max;
    r->welcome();
    return r;
  };
  for (const std::string name : {"topk", "stochastic", "sq"}) {
    CAPTURE(name);
    auto r = rig(name, 4096);
    REQUIRE(r->core->joined());
    for (uint64_t round = 0; round < 6; ++round) {
      const auto out = r->roundStart(round);
      for (const auto& m : out) {
        CHECK(m.payload.size() <= 4096);
        // S+Q's signs of all 6002 coordinates fit (about 750 bytes); the others' values do not.
        if (isPush(m) && name != "sq") CHECK(m.envelope.push().level() < 6002);
      }
      r->send(out);
      r->deliverAcks();
    }
    CHECK(r->probes_sent.size() >= 4);
  }
  // Without the limit said, the push is the whole model at top-k's cap, and probes are as sized.
  auto unlimited = rig("topk", 0);
  const auto out = unlimited->roundStart(0);
  bool big = false;
  for (const auto& m : out) big = big || m.payload.size() > 4096;
  CHECK(big);
  // A compressor that sends every coordinate whatever the level cannot fit: the worker says why
  // and asks again later (the coordinator's limit may be raised).
  auto dense = rig("identity", 4096);
  CHECK_FALSE(dense->core->joined());
  CHECK_FALSE(dense->core->finished());
  CHECK(dense->refused_because.find("max_message_bytes of 4096") != std::string::npos);
  CHECK(dense->core->nextWakeup() == doctest::Approx(dense->now + 30.0));
  // A threshold push's size follows the data: at threshold 0 every coordinate passes, and the
  // push keeps its largest that fit, counted, the rest staying in the residual. Before, the
  // worker sent the whole model and lost its connection every round.
  auto threshold = rig("threshold", 4096);
  REQUIRE(threshold->core->joined());
  for (uint64_t round = 0; round < 3; ++round) {
    const auto pushed_now = threshold->roundStart(round);
    bool pushed = false;
    for (const auto& m : pushed_now) {
      CHECK(m.payload.size() <= 4096);
      if (!isPush(m)) continue;
      pushed = true;
      const auto decoded = compression::decode(m.payload, compression::DecodeLimits{});
      REQUIRE(decoded.value.has_value());
      const size_t sent = decoded.value->nonZeros();
      CHECK(sent > 500);  // about 4096 / 8 bytes a coordinate: the limit is used, not wasted
      // The rest is kept, and what went is the largest: nothing kept outweighs anything sent
      // (each round's vector is the gradient plus the residual, which the push splits).
      float smallest_sent = INFINITY, largest_kept = 0.0f;
      for (float x : decoded.value->values) smallest_sent = std::min(smallest_sent, std::fabs(x));
      size_t kept = 0;
      for (float x : threshold->core->residual()) {
        kept += x != 0.0f ? 1 : 0;
        largest_kept = std::max(largest_kept, std::fabs(x));
      }
      CHECK(kept > 0);
      CHECK(largest_kept <= smallest_sent);
    }
    CHECK(pushed);
    threshold->send(out);
    threshold->deliverAcks();
  }
  CHECK(threshold->core->stats().trimmed == 3);
  // Without a limit said, the same worker sends every coordinate that passes, and trims nothing.
  auto unlimited_threshold = rig("threshold", 0);
  REQUIRE(unlimited_threshold->core->joined());
  bool unlimited_pushed = false;
  for (const auto& m : unlimited_threshold->roundStart(0)) {
    if (!isPush(m)) continue;
    unlimited_pushed = true;
    const auto decoded = compression::decode(m.payload, compression::DecodeLimits{});
    REQUIRE(decoded.value.has_value());
    CHECK(decoded.value->nonZeros() > 4096 / 8);
    CHECK(m.payload.size() > 4096);
  }
  CHECK(unlimited_pushed);
  CHECK(unlimited_threshold->core->stats().trimmed == 0);
}

TEST_CASE("a limit just above the whole model's size caps top-k below the index section's cost") {
  // All 6002 values take 9 + 4 * 6002 bytes with no index section; 6001 take about 750 bytes
  // more. With the limit 200 bytes above the whole model, top-k at its cap of d fits, but a level
  // a little below d does not: the cap must fall below every such level. Before, the search took
  // the whole model's size for the levels near d and let pushes over the limit through.
  const uint32_t d = 6002;
  const auto topk = compression::makeCompressor({"topk"});
  const uint64_t limit = topk->encodedBytes(d, d) + 200;
  REQUIRE(topk->encodedBytes(d, d - 1) > limit);
  Rig r(0, 2, 3000, [](config::WorkerSettings& s) { s.compressor.name = "topk"; });
  r.peer_max_bytes = limit;
  r.welcome();
  REQUIRE(r.core->joined());
  for (uint64_t round = 0; round < 4; ++round) {
    const auto out = r.roundStart(round);
    for (const auto& m : out) {
      if (!isPush(m)) continue;
      CHECK(m.payload.size() <= limit);
      CHECK(m.envelope.push().level() < d);
      // The largest level that fits, by brute force over the codec's bound.
      uint32_t best = 0;
      for (uint32_t k = 1; k < d; ++k) {
        if (topk->encodedBytes(d, k) <= limit) best = k;
      }
      CHECK(m.envelope.push().level() == best);
    }
    r.send(out);
    r.deliverAcks();
  }
}

TEST_CASE("a round whose gradient overflows sends a push that says so, and leaves the residual") {
  Rig rig(0, 2, 3, [](config::WorkerSettings& s) {
    s.compressor.name = "topk";
    s.error_feedback = true;
    s.error_feedback_auto = false;
    s.link.measure = false;
  });
  rig.welcome();
  REQUIRE(rig.core->joined());
  const std::vector<float> good = rig.core->parameters();
  auto roundWith = [&](uint64_t round, const std::vector<float>& params) {
    Message m;
    m.envelope = makeEnvelope();
    auto* rs = m.envelope.mutable_round_start();
    rs->set_round(round);
    rs->set_session(rig.session);
    rs->set_full_model(true);
    rs->set_cap(1);  // top-1: the residual keeps the rest
    m.payload = floatsToBytes(params);
    return rig.core->onMessage(m, 0);
  };
  const auto first = roundWith(0, good);
  REQUIRE(std::count_if(first.begin(), first.end(), isPush) == 1);
  const std::vector<float> residual = rig.core->residual();
  REQUIRE(residual.size() == good.size());
  REQUIRE(std::any_of(residual.begin(), residual.end(), [](float e) { return e != 0.0f; }));
  const uint64_t rounds = rig.core->stats().rounds;
  // A model whose logits overflow a float: loss and gradient are not finite.
  const auto out = roundWith(1, std::vector<float>(good.size(), 3e38f));
  REQUIRE(out.size() == 1);  // no probe ahead of it
  REQUIRE(isPush(out[0]));
  CHECK(std::isnan(out[0].envelope.push().local_loss()));
  CHECK(out[0].payload.empty());
  CHECK(rig.core->stats().non_finite_gradients == 1);
  CHECK(rig.core->stats().rounds == rounds);
  CHECK(rig.core->residual() == residual);
  // The next round's model is finite again: an ordinary push.
  const auto next = roundWith(2, good);
  const auto push = std::find_if(next.begin(), next.end(), isPush);
  REQUIRE(push != next.end());
  CHECK(std::isfinite(push->envelope.push().local_loss()));
  CHECK_FALSE(push->payload.empty());
  CHECK(rig.core->stats().rounds == rounds + 1);
}
