// Session: when the worker joins, re-joins and heartbeats, with timers written out by hand.
#include "worker/session.hpp"

#include <doctest/doctest.h>

using namespace tern;
using worker::Session;
using worker::Standing;

TEST_CASE("a session heartbeats once joined and re-joins after a silence of its patience") {
  Session s(5.0, 30.0);
  CHECK(s.joining(0.0) == 1);
  CHECK(s.awaitingWelcome());
  CHECK(s.due(10.0) == Session::Due::nothing);  // no heartbeat before a welcome
  s.welcomed({7, 2}, true, 0.0, 0.0);
  CHECK(s.standing() == Standing::joined);
  CHECK(s.address().session == 7);
  CHECK(s.address().worker_id == 2);
  s.sent(10.0);
  CHECK(s.due(14.9) == Session::Due::nothing);
  CHECK(s.due(15.0) == Session::Due::heartbeat);
  CHECK(s.nextWakeup() == doctest::Approx(15.0));
  s.heard(20.0);
  CHECK(s.due(49.9) != Session::Due::silent_rejoin);
  CHECK(s.due(50.0) == Session::Due::silent_rejoin);
}

TEST_CASE("a session fits its timers to the coordinator's: a third of its patience, three beats") {
  Session s(20.0, 30.0);
  s.joining(0.0);
  s.welcomed({1, 1}, false, 20.0, 10.0);
  CHECK(s.heartbeatInterval() == doctest::Approx(10.0 / 3.0));
  CHECK(s.patience() == doctest::Approx(60.0));
}

TEST_CASE("a refused join is asked again at its time, sooner once a connection comes up") {
  Session s(5.0, 30.0);
  s.joining(0.0);
  s.refusedUntil(12.0, "the coordinator admits no more workers now");
  CHECK(s.refusal() == "the coordinator admits no more workers now");
  CHECK(s.standing() == Standing::refused);
  CHECK_FALSE(s.awaitingWelcome());
  CHECK(s.due(11.9) == Session::Due::nothing);
  CHECK(s.due(12.0) == Session::Due::retry_join);
  s.connectionUp(1.0, 1250);  // within a second, spread by the instance: 250 ms
  CHECK(s.due(1.25) == Session::Due::retry_join);
  CHECK(s.joining(1.25) == 2);
  CHECK(s.standing() == Standing::joining);
  CHECK_FALSE(s.refusal().empty());  // said until a welcome, not only while waiting to ask
  s.welcomed({1, 1}, false, 0.0, 0.0);
  CHECK(s.refusal().empty());
}

TEST_CASE("an unfit welcome waits 30 s, then twice as long each time, up to 10 minutes") {
  Session s(5.0, 30.0);
  double expected = 30.0;
  for (int i = 0; i < 8; ++i) {
    s.joining(0.0);
    CHECK(s.unfit("features", 0.0) == doctest::Approx(std::min(expected, 600.0)));
    // However quiet the coordinator, the retry waits for its time.
    CHECK(s.due(std::min(expected, 600.0) - 0.1) == Session::Due::nothing);
    CHECK(s.nextWakeup() == doctest::Approx(std::min(expected, 600.0)));
    expected *= 2.0;
  }
  CHECK(s.refusal() == "features");
  s.welcomed({1, 1}, false, 0.0, 0.0);
  CHECK(s.unfitWelcome().empty());
  CHECK(s.refusal().empty());
}

TEST_CASE("silences over a live connection are allowed twice as long each time, up to 8 times") {
  Session s(5.0, 30.0);
  s.joining(0.0);
  for (double factor : {2.0, 4.0, 8.0, 8.0}) {
    s.connectionUp(0.0, 0);
    s.silentRejoin();
    CHECK(s.silenceAllowed() == doctest::Approx(30.0 * factor));
  }
  s.silentRejoin();  // no connection since: the patience as it is
  CHECK(s.silenceAllowed() == doctest::Approx(30.0));
}

TEST_CASE("a Leave is answered by its ack, a Finish or a refusal, not by a refused push") {
  Session s(5.0, 30.0);
  s.leaveSent(true);
  wire::Envelope push_refused = makeEnvelope();
  push_refused.mutable_error()->set_code(wire::Error::UNKNOWN_SESSION);
  push_refused.mutable_error()->set_about_push(true);
  s.noteLeaveAnswer(push_refused);
  CHECK(s.leaveUnanswered());
  wire::Envelope ack = makeEnvelope();
  ack.mutable_ack()->set_leave(true);
  s.noteLeaveAnswer(ack);
  CHECK_FALSE(s.leaveUnanswered());
}
