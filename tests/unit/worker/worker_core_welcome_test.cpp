// The worker core refusing what it cannot train on: a welcome with a batch size of 0, a label
// the model has no output for, an unusable threshold or local step, a model beyond the limits
// or a payload of the wrong size is refused, counted and answered with a Leave, the worker up
// and asking again later; it stops, saying why, only where no re-join can help.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/worker/worker_rig.hpp"

using namespace tern;
using namespace tern::testing;

namespace {

// A welcome of a softmax model on the rig's 3 features (4 parameters per class) with the given
// classes, payload size (in floats) and local steps.
Message softmaxWelcome(uint64_t session, uint32_t classes, size_t payload_floats,
                       uint32_t local_steps, double local_lr) {
  Message m;
  m.envelope = makeEnvelope();
  auto* w = m.envelope.mutable_welcome();
  w->set_worker_id(1);
  w->set_session(session);
  w->mutable_model()->set_kind("softmax");
  w->mutable_model()->set_features(3);
  w->mutable_model()->set_classes(classes);
  w->mutable_training()->set_batch_size(8);
  w->mutable_training()->set_local_steps(local_steps);
  w->mutable_training()->set_local_lr(local_lr);
  w->set_cap(8);
  m.payload = floatsToBytes(std::vector<float>(payload_floats, 0.0f));
  return m;
}

}  // namespace

TEST_CASE("a welcome with batch size 0 is refused and counted, and the worker stays unjoined") {
  Rig rig;
  rig.welcome(0);
  CHECK_FALSE(rig.core->joined());
  CHECK(rig.core->stats().rejected == 1);
  rig.welcome(8);
  CHECK(rig.core->joined());
}

TEST_CASE("a worker whose shard has a label the model has no output for asks again later") {
  // The coordinator's configuration (classes) or this worker's data is wrong; either may be
  // mended, and a fleet must not stay down for a typo at the coordinator. Every ask costs a
  // welcome of the whole model: after 30 s, then 60, 120, ... up to 600 s.
  for (const auto& [kind, classes] : {std::pair<std::string, uint32_t>{"logistic", 2},
                                      std::pair<std::string, uint32_t>{"softmax", 2}}) {
    CAPTURE(kind);
    Rig rig(0, 3);  // labels 0, 1, 2
    double t = 0.0;
    for (const double wait : {30.0, 60.0, 120.0, 240.0, 480.0, 600.0, 600.0}) {
      CAPTURE(wait);
      rig.now = t;
      rig.welcome(8, kind, classes);
      CHECK_FALSE(rig.core->joined());
      CHECK_FALSE(rig.core->finished());
      CHECK(rig.core->fatalError().empty());
      CHECK(rig.refused_because.find("label 2 has no output") != std::string::npos);
      CHECK(rig.core->nextWakeup() == doctest::Approx(t + wait));
      rig.now = t + wait - 0.01;  // past its 30 s patience, but a refused join waits its turn
      CHECK(rig.core->onTick().empty());
      rig.now = t + wait;
      const auto ask = rig.core->onTick();
      REQUIRE(ask.size() == 1);
      CHECK(ask[0].envelope.has_join());
      t += wait;
    }
    CHECK(rig.core->stats().rejected == 7);
    // A new connection (a restarted coordinator, perhaps mended) is asked at once, not in 600 s.
    rig.welcome(8, kind, classes);
    CHECK(rig.core->nextWakeup() == doctest::Approx(t + 600.0));
    rig.core->connectionUp();
    CHECK(rig.core->nextWakeup() ==
          doctest::Approx(t));  // within a second: this one's instance is 0
    const auto asked = rig.core->onTick();
    REQUIRE(asked.size() == 1);
    CHECK(asked[0].envelope.has_join());
    // The coordinator's model mended: the next welcome fits and the worker trains.
    rig.welcome(8, "softmax", 3);
    CHECK(rig.core->joined());
    CHECK(rig.core->fatalError().empty());
  }
}

TEST_CASE("a threshold no compressor can use is refused and counted, at the welcome and later") {
  Rig rig(0, 2, 3, [](config::WorkerSettings& s) { s.compressor.name = "threshold"; });
  rig.welcome(8, "softmax", 2, std::numeric_limits<double>::infinity());
  CHECK_FALSE(rig.core->joined());
  CHECK_FALSE(rig.core->finished());  // a coordinator may send a usable one next time
  CHECK(rig.core->stats().rejected == 1);
  rig.welcome(8, "softmax", 2, 0.01);
  REQUIRE(rig.core->joined());
  // A round start with an infinite threshold: refused, and the push goes out under the old one.
  const auto out = rig.roundStart(0, std::numeric_limits<double>::infinity());
  CHECK(rig.core->stats().rejected == 2);
  CHECK(std::count_if(out.begin(), out.end(), isPush) == 1);
}

TEST_CASE("a shard whose smoothness bound is not finite is refused at the welcome, saying why") {
  Rig rig;
  rig.shard->dense(0, 0) = std::numeric_limits<float>::infinity();
  rig.welcome();
  CHECK_FALSE(rig.core->joined());
  CHECK(rig.core->stats().rejected == 1);
  CHECK(rig.core->finished());
  CHECK(rig.core->fatalError().find("smoothness") != std::string::npos);
}

TEST_CASE("a welcome with local steps and no usable local_lr is refused and counted") {
  for (double lr : {0.0, -0.1, std::numeric_limits<double>::quiet_NaN()}) {
    CAPTURE(lr);
    Rig rig;
    rig.core->onMessage(softmaxWelcome(rig.session, 2, 8, 4, lr), 0);
    CHECK_FALSE(rig.core->joined());
    CHECK(rig.core->stats().rejected == 1);
  }
}

TEST_CASE(
    "a welcome with a model beyond the limits, a payload of the wrong size or too many "
    "local steps is refused and counted, and the worker stays up") {
  struct Case {
    std::string name;
    uint32_t classes;
    size_t payload_floats;
    uint32_t local_steps;
  };
  for (const Case& c : {Case{"classes beyond the limit", 4000000000u, 8, 1},
                        Case{"classes within it, payload of another model", 60000, 8, 1},
                        Case{"payload one float short", 2, 7, 1},
                        Case{"too many local steps", 2, 8, config::kMaxLocalSteps + 1}}) {
    CAPTURE(c.name);
    Rig rig;
    std::vector<Message> out;
    CHECK_NOTHROW(
        out = rig.core->onMessage(
            softmaxWelcome(rig.session, c.classes, c.payload_floats, c.local_steps, 0.1), 0));
    CHECK_FALSE(rig.core->joined());
    CHECK(rig.core->stats().rejected == 1);
    REQUIRE(out.size() == 1);
    CHECK(out[0].envelope.has_leave());
  }
  // The same welcome with a usable model, payload and local steps is taken.
  Rig rig;
  rig.core->onMessage(softmaxWelcome(rig.session, 2, 8, 4, 0.1), 0);
  CHECK(rig.core->joined());
}

TEST_CASE("a worker stops, saying why, when no re-join can help") {
  auto errorIn = [](uint32_t version, wire::Error::Code code) {
    Message m;
    m.envelope = makeEnvelope();
    m.envelope.set_version(version);
    m.envelope.mutable_error()->set_code(code);
    m.envelope.mutable_error()->set_text("refused");
    return m;
  };
  SUBCASE("the coordinator speaks another protocol version") {
    Rig rig;
    CHECK(rig.core->onMessage(errorIn(wire::PROTOCOL_VERSION + 1, wire::Error::BAD_VERSION), 0)
              .empty());
    CHECK(rig.core->finished());
    CHECK(rig.core->fatalError().find("protocol version " +
                                      std::to_string(wire::PROTOCOL_VERSION + 1)) !=
          std::string::npos);
  }
  SUBCASE("another version's other messages are refused, not obeyed") {
    Rig rig;
    rig.core->onMessage(errorIn(wire::PROTOCOL_VERSION + 1, wire::Error::SHUTTING_DOWN), 0);
    CHECK_FALSE(rig.core->finished());
    CHECK(rig.core->stats().rejected == 1);
  }
  SUBCASE("the model does not fit the worker's max_message_bytes") {
    Rig rig;
    rig.core->onMessage(errorIn(wire::PROTOCOL_VERSION, wire::Error::MESSAGE_LIMIT), 0);
    CHECK(rig.core->finished());
    CHECK(rig.core->fatalError() == "the coordinator refused this worker: refused");
  }
}
