// ExternalTrainer against a fake trainer's DEALER over ipc://: the Hello, fit round trips, and
// each way a trainer fails a request (wrong size, silence, none connected, another layout), a
// restarted trainer taking over and a late answer ignored.
#include "worker/external_trainer.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <thread>

#include "common/util/rng.hpp"
#include "trainer.pb.h"

using namespace tern;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/tern-ext-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

config::TrainerSettings settingsIn(const TempDir& dir, double timeout = 5.0) {
  config::TrainerSettings t;
  t.kind = "external";
  t.endpoint = "ipc://" + dir.path + "/trainer.sock";
  t.timeout_seconds = timeout;
  return t;
}

// A trainer's DEALER, driven step by step from the test.
struct FakeTrainer {
  zmq::context_t ctx{1};
  zmq::socket_t sock{ctx, zmq::socket_type::dealer};
  // Connects to `endpoint` at once; "" leaves the connect to the test (after its options).
  explicit FakeTrainer(const std::string& endpoint) {
    sock.set(zmq::sockopt::linger, 0);
    sock.set(zmq::sockopt::rcvtimeo, 5000);
    if (!endpoint.empty()) sock.connect(endpoint);
  }
  void hello(std::vector<uint64_t> weight_shape = {2, 3}) {
    trainer::Envelope e;
    e.set_version(trainer::TRAINER_PROTOCOL_VERSION);
    auto* h = e.mutable_hello();
    auto* w = h->add_tensors();
    w->set_name("w");
    for (auto d : weight_shape) w->add_shape(d);
    auto* b = h->add_tensors();
    b->set_name("b");
    b->add_shape(3);
    h->set_train_rows(10);
    auto* c0 = h->add_label_histogram();
    c0->set_label(0);
    c0->set_count(4);
    auto* c2 = h->add_label_histogram();
    c2->set_label(2);
    c2->set_count(6);
    h->set_framework("fake");
    send(e, nullptr);
  }
  void send(const trainer::Envelope& e, const std::vector<float>* payload) {
    const std::string header = e.SerializeAsString();
    sock.send(zmq::buffer(header), payload ? zmq::send_flags::sndmore : zmq::send_flags::none);
    if (payload) sock.send(zmq::buffer(*payload), zmq::send_flags::none);
  }
  // The next message (the test fails if none comes within 5 s); its payload in `payload`.
  trainer::Envelope receive(std::vector<float>* payload = nullptr) {
    zmq::message_t m;
    REQUIRE(sock.recv(m).has_value());
    trainer::Envelope e;
    REQUIRE(e.ParseFromArray(m.data(), int(m.size())));
    if (m.more()) {
      zmq::message_t p;
      REQUIRE(sock.recv(p).has_value());
      if (payload) {
        payload->resize(p.size() / sizeof(float));
        std::memcpy(payload->data(), p.data(), p.size());
      }
    }
    return e;
  }
  void answer(uint64_t id, std::vector<float> values, bool delta = false,
              const trainer::Evaluation* eval = nullptr) {
    trainer::Envelope e;
    e.set_version(trainer::TRAINER_PROTOCOL_VERSION);
    auto* r = e.mutable_result();
    r->set_id(id);
    r->set_kind(delta ? trainer::FitResult::DELTA : trainer::FitResult::GRADIENT);
    r->set_loss(0.25);
    r->set_rows(8);
    if (eval) *r->mutable_evaluation() = *eval;
    send(e, &values);
  }
};

worker::GradientRequest request(uint64_t id, bool evaluate = false, double local_lr = 0.0) {
  worker::GradientRequest r;
  r.id = id;
  r.round = id + 100;
  r.params = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8, 9});
  r.plan = {16, local_lr > 0 ? 3u : 1u, local_lr, 42};
  r.evaluate = evaluate;
  return r;
}

std::future<std::optional<worker::GradientResult>> ask(worker::ExternalTrainer& t,
                                                       worker::GradientRequest r) {
  return std::async(std::launch::async, [&t, r] { return t.gradient(r); });
}

const std::vector<float> kGrad{9, 8, 7, 6, 5, 4, 3, 2, 1};

// A trainer connected and accepted.
struct Rig {
  TempDir dir;
  worker::ExternalTrainer trainer;
  FakeTrainer fake;
  explicit Rig(double timeout = 5.0)
      : trainer(settingsIn(dir, timeout), 1 << 20), fake(trainer.endpoint()) {
    fake.hello();
    REQUIRE(trainer.waitForHello({}).has_value());
    REQUIRE(fake.receive().hello_reply().accepted());
  }
};

// A worker's trainer socket waiting for a Hello in the background, until `stop` (or a Hello).
struct Waiting {
  TempDir dir;
  worker::ExternalTrainer trainer;
  FakeTrainer fake;
  std::atomic<bool> stop{false};
  std::future<std::optional<worker::LocalData>> waited;
  Waiting() : trainer(settingsIn(dir), 1 << 20), fake(trainer.endpoint()) {
    waited = std::async(std::launch::async,
                        [this] { return trainer.waitForHello([this] { return stop.load(); }); });
  }
  // Stops the wait; true when it ended without an accepted Hello.
  bool stopWithoutHello() {
    stop = true;
    return !waited.get().has_value();
  }
};

// A Hello of one 4-value tensor claiming `train_rows` rows.
trainer::Envelope oneTensorHello(uint64_t train_rows) {
  trainer::Envelope e;
  e.set_version(trainer::TRAINER_PROTOCOL_VERSION);
  auto* t = e.mutable_hello()->add_tensors();
  t->set_name("w");
  t->add_shape(4);
  e.mutable_hello()->set_train_rows(train_rows);
  return e;
}

}  // namespace

TEST_CASE("a trainer's Hello is accepted and describes the worker's data") {
  TempDir dir;
  worker::ExternalTrainer trainer(settingsIn(dir), 1 << 20);
  FakeTrainer fake(trainer.endpoint());
  fake.hello();
  const auto data = trainer.waitForHello({});
  REQUIRE(data.has_value());
  CHECK(data->external());
  CHECK(data->rows == 10);
  CHECK(data->label_histogram == std::vector<uint64_t>{4, 0, 6});
  REQUIRE(data->tensors.size() == 2);
  CHECK(data->tensors[0] == ml::TensorShape{"w", {2, 3}});
  CHECK(data->tensors[1] == ml::TensorShape{"b", {3}});
  const auto reply = fake.receive();
  CHECK(reply.hello_reply().accepted());
  const auto c = trainer.counters();
  CHECK(c.connected);
  CHECK(c.framework == "fake");
  CHECK(c.connections == 1);
}

TEST_CASE("waiting for the Hello ends on a stop") {
  TempDir dir;
  worker::ExternalTrainer trainer(settingsIn(dir), 1 << 20);
  CHECK_FALSE(trainer.waitForHello([] { return true; }).has_value());
}

TEST_CASE("a fit round trip carries the request and returns the trainer's gradient") {
  Rig rig;
  auto got = ask(rig.trainer, request(1));
  std::vector<float> params;
  const auto fit = rig.fake.receive(&params).fit();
  CHECK(fit.id() == 1);
  CHECK(fit.round() == 101);
  CHECK(fit.batch_size() == 16);
  // The worker's and the round's own seed (worker 0, round 101), as the built-in trainer draws.
  CHECK(fit.seed() != 42);
  CHECK(fit.seed() == deriveSeed(42, 101));
  CHECK_FALSE(fit.evaluate());
  CHECK(params == *request(1).params);
  rig.fake.answer(1, kGrad);
  const auto result = got.get();
  REQUIRE(result.has_value());
  CHECK(result->failure.empty());
  CHECK(result->request_id == 1);
  CHECK(result->gradient == kGrad);
  CHECK(result->loss == 0.25);
  CHECK(result->rows_used == 8);
  CHECK_FALSE(result->evaluation.has_value());
}

TEST_CASE("a delta over local steps is pushed divided by the local step") {
  Rig rig;
  auto got = ask(rig.trainer, request(2, false, 0.5));
  const auto fit = rig.fake.receive().fit();
  CHECK(fit.local_steps() == 3);
  CHECK(fit.local_lr() == 0.5);
  rig.fake.answer(2, kGrad, true);
  const auto result = got.get();
  REQUIRE(result.has_value());
  REQUIRE(result->gradient.size() == kGrad.size());
  for (size_t i = 0; i < kGrad.size(); ++i) CHECK(result->gradient[i] == kGrad[i] * 2.0f);
}

TEST_CASE("the trainer's evaluation is passed on when the request asked for it") {
  Rig rig;
  trainer::Evaluation eval;
  eval.set_loss(0.7);
  eval.set_accuracy(0.8);
  eval.set_rows(50);
  auto got = ask(rig.trainer, request(3, true));
  CHECK(rig.fake.receive().fit().evaluate());
  rig.fake.answer(3, kGrad, false, &eval);
  const auto result = got.get();
  REQUIRE(result.has_value());
  REQUIRE(result->evaluation.has_value());
  CHECK(result->evaluation->loss == 0.7);
  CHECK(result->evaluation->accuracy == 0.8);
  CHECK(result->evaluation->rows == 50);
  // Not asked: not passed on.
  auto unasked = ask(rig.trainer, request(4));
  rig.fake.receive();
  rig.fake.answer(4, kGrad, false, &eval);
  CHECK_FALSE(unasked.get()->evaluation.has_value());
}

TEST_CASE("an answer of the wrong size fails the request") {
  Rig rig;
  auto got = ask(rig.trainer, request(5));
  rig.fake.receive();
  rig.fake.answer(5, {1, 2, 3});
  const auto result = got.get();
  REQUIRE(result.has_value());
  CHECK(result->failure.find("12 bytes") != std::string::npos);
  CHECK(rig.trainer.counters().bad_answers == 1);
  CHECK(rig.trainer.counters().last_error == result->failure);
}

TEST_CASE("the trainer's own error fails the request") {
  Rig rig;
  auto got = ask(rig.trainer, request(6));
  rig.fake.receive();
  trainer::Envelope e;
  e.set_version(trainer::TRAINER_PROTOCOL_VERSION);
  e.mutable_result()->set_id(6);
  e.mutable_result()->set_error("out of memory");
  rig.fake.send(e, nullptr);
  const auto result = got.get();
  REQUIRE(result.has_value());
  CHECK(result->failure.find("out of memory") != std::string::npos);
  CHECK(rig.trainer.counters().trainer_errors == 1);
}

TEST_CASE("a trainer that never answers fails the request after the timeout") {
  Rig rig(0.3);
  auto got = ask(rig.trainer, request(7));
  rig.fake.receive();
  const auto result = got.get();
  REQUIRE(result.has_value());
  CHECK(result->failure == "the trainer did not answer within 0.3 s");
  CHECK(rig.trainer.counters().timeouts == 1);
}

TEST_CASE("a request with no trainer connected fails") {
  TempDir dir;
  worker::ExternalTrainer trainer(settingsIn(dir), 1 << 20);
  const auto result = trainer.gradient(request(8));
  REQUIRE(result.has_value());
  CHECK(result->failure == "no trainer connected to " + trainer.endpoint());
  CHECK(trainer.counters().no_trainer == 1);
}

TEST_CASE("a request waiting for its answer is abandoned on a stop") {
  Rig rig;
  std::atomic<bool> stop{false};
  rig.trainer.setCancelled([&] { return stop.load(); });
  auto got = ask(rig.trainer, request(9));
  rig.fake.receive();
  stop = true;
  CHECK_FALSE(got.get().has_value());
}

TEST_CASE("a second trainer with another layout is refused and the first keeps training") {
  Rig rig;
  FakeTrainer other(rig.trainer.endpoint());
  other.hello({4, 3});
  auto got = ask(rig.trainer, request(10));
  const auto reply = other.receive();
  CHECK_FALSE(reply.hello_reply().accepted());
  CHECK(reply.hello_reply().reason().find("layout") != std::string::npos);
  CHECK(rig.fake.receive().fit().id() == 10);
  rig.fake.answer(10, kGrad);
  const auto result = got.get();
  REQUIRE(result.has_value());
  CHECK(result->failure.empty());
  CHECK(rig.trainer.counters().hellos_refused == 1);
}

TEST_CASE("a restarted trainer with the same layout serves the next request") {
  Rig rig;
  rig.fake.sock.close();
  FakeTrainer restarted(rig.trainer.endpoint());
  restarted.hello();
  auto got = ask(rig.trainer, request(11));
  CHECK(restarted.receive().hello_reply().accepted());
  CHECK(restarted.receive().fit().id() == 11);
  restarted.answer(11, kGrad);
  const auto result = got.get();
  REQUIRE(result.has_value());
  CHECK(result->failure.empty());
  CHECK(result->gradient == kGrad);
  CHECK(rig.trainer.counters().connections == 2);
}

TEST_CASE("a late answer to a request that timed out is ignored") {
  Rig rig(0.3);
  auto first = ask(rig.trainer, request(12));
  rig.fake.receive();
  REQUIRE(first.get()->failure.find("did not answer") != std::string::npos);
  auto second = ask(rig.trainer, request(13));
  CHECK(rig.fake.receive().fit().id() == 13);
  rig.fake.answer(12, {0, 0, 0, 0, 0, 0, 0, 0, 0});
  rig.fake.answer(13, kGrad);
  const auto result = second.get();
  REQUIRE(result.has_value());
  CHECK(result->request_id == 13);
  CHECK(result->gradient == kGrad);
  CHECK(rig.trainer.counters().late_answers == 1);
}

TEST_CASE("a Hello describing no model is refused and the worker keeps waiting") {
  TempDir dir;
  worker::ExternalTrainer trainer(settingsIn(dir), 1 << 20);
  FakeTrainer fake(trainer.endpoint());
  std::atomic<bool> stop{false};
  auto waited = std::async(std::launch::async,
                           [&] { return trainer.waitForHello([&] { return stop.load(); }); });
  fake.hello({0, 3});
  const auto reply = fake.receive();
  CHECK_FALSE(reply.hello_reply().accepted());
  CHECK(reply.hello_reply().reason() == "tensor 'w' has a dimension of 0");
  stop = true;
  CHECK_FALSE(waited.get().has_value());
  CHECK(trainer.counters().hellos_refused == 1);
  CHECK_FALSE(trainer.counters().connected);
}

TEST_CASE("a message that does not parse, or comes before a Hello, is answered with an Error") {
  Waiting w;
  const std::string junk = "\xff\xfe not an envelope";
  w.fake.sock.send(zmq::buffer(junk), zmq::send_flags::none);
  CHECK(w.fake.receive().error().text().find("not a trainer Envelope") != std::string::npos);
  trainer::Envelope early;
  early.set_version(trainer::TRAINER_PROTOCOL_VERSION);
  early.mutable_result()->set_id(1);
  w.fake.send(early, nullptr);
  const std::string text = w.fake.receive().error().text();
  CHECK(text.find("Hello") != std::string::npos);  // the Python trainer says Hello again on it
  // An Error is never answered with one, or two such peers would talk for good.
  trainer::Envelope error;
  error.set_version(trainer::TRAINER_PROTOCOL_VERSION);
  error.mutable_error()->set_text("a message I cannot take");
  w.fake.send(error, nullptr);
  error.set_version(trainer::TRAINER_PROTOCOL_VERSION + 1);
  w.fake.send(error, nullptr);
  w.fake.sock.set(zmq::sockopt::rcvtimeo, 300);
  zmq::message_t none;
  CHECK_FALSE(w.fake.sock.recv(none).has_value());
  CHECK(w.stopWithoutHello());
  CHECK(w.trainer.counters().malformed == 2);  // the junk and the other version's Error
}

TEST_CASE("a Hello with no training rows is refused: the coordinator takes no worker without") {
  Waiting w;
  w.fake.send(oneTensorHello(0), nullptr);
  const auto reply = w.fake.receive();
  CHECK_FALSE(reply.hello_reply().accepted());
  CHECK(reply.hello_reply().reason().find("train_rows is 0") != std::string::npos);
  CHECK(w.stopWithoutHello());
}

TEST_CASE("a hang is a timeout even when every request is given up before the timeout") {
  // Rounds that move on (a new round start gives the request up) must not restart the clock: a
  // trainer that answers nothing is reported once trainer.timeout_seconds passed since the
  // oldest request it owes.
  Rig rig(1.0);
  std::atomic<bool> stop{false};
  rig.trainer.setCancelled([&] { return stop.load(); });
  const auto started = std::chrono::steady_clock::now();
  auto first = ask(rig.trainer, request(20));
  CHECK(rig.fake.receive().fit().id() == 20);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  stop = true;
  CHECK_FALSE(first.get().has_value());  // given up: its round moved on
  stop = false;
  auto second = ask(rig.trainer, request(21));
  CHECK(rig.fake.receive().fit().id() == 21);
  const auto result = second.get();
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  REQUIRE(result.has_value());
  CHECK(result->failure == "the trainer did not answer within 1 s");
  CHECK(rig.trainer.counters().timeouts == 1);
  CHECK(waited < 1.5);  // 1 s from the first request (not 1.7 s: 1 s from the second)
  // Once it answers again (late, then the current request), the clock starts afresh.
  auto third = ask(rig.trainer, request(22));
  CHECK(rig.fake.receive().fit().id() == 22);
  rig.fake.answer(20, kGrad);
  rig.fake.answer(22, kGrad);
  const auto answered = third.get();
  REQUIRE(answered.has_value());
  CHECK(answered->failure.empty());
  CHECK(answered->gradient == kGrad);
}

TEST_CASE("the trainer is told Done as the worker exits after training, and not after a stop") {
  for (const bool finished : {true, false}) {
    CAPTURE(finished);
    TempDir dir;
    auto trainer = std::make_unique<worker::ExternalTrainer>(settingsIn(dir), 1 << 20);
    FakeTrainer fake(trainer->endpoint());
    fake.hello();
    REQUIRE(trainer->waitForHello({}).has_value());
    REQUIRE(fake.receive().hello_reply().accepted());
    if (finished) trainer->sayDoneAtExit("the coordinator finished training");
    trainer.reset();
    fake.sock.set(zmq::sockopt::rcvtimeo, 1000);
    zmq::message_t m;
    const bool got = fake.sock.recv(m).has_value();
    CHECK(got == finished);
    if (!got) continue;
    trainer::Envelope e;
    REQUIRE(e.ParseFromArray(m.data(), int(m.size())));
    CHECK(e.has_done());
    CHECK(e.done().reason() == "the coordinator finished training");
  }
}

TEST_CASE("a trainer that goes away mid-request fails it within a second, not at the timeout") {
  Rig rig(30.0);
  const auto started = std::chrono::steady_clock::now();
  auto got = ask(rig.trainer, request(30));
  CHECK(rig.fake.receive().fit().id() == 30);
  rig.fake.sock.close();  // the trainer process ends: its connection closes
  const auto result = got.get();
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  REQUIRE(result.has_value());
  CHECK(result->failure == "no trainer connected to " + rig.trainer.endpoint());
  CHECK(rig.trainer.counters().no_trainer == 1);
  CHECK(waited < 10.0);
}

TEST_CASE("a Hello claiming more rows than the coordinator takes from a worker is refused") {
  Waiting w;
  w.fake.send(oneTensorHello((uint64_t{1} << 40) + 1), nullptr);
  const auto reply = w.fake.receive();
  CHECK_FALSE(reply.hello_reply().accepted());
  CHECK(reply.hello_reply().reason().find("more than the coordinator takes") != std::string::npos);
  CHECK(w.stopWithoutHello());
}

TEST_CASE("a worker's message sent by a trainer is answered with an Error and a request goes on") {
  Rig rig;
  auto pending = ask(rig.trainer, request(21));
  CHECK(rig.fake.receive().fit().id() == 21);
  trainer::Envelope wrong;
  wrong.set_version(trainer::TRAINER_PROTOCOL_VERSION);
  wrong.mutable_done()->set_reason("not a trainer's to say");
  rig.fake.send(wrong, nullptr);
  CHECK(rig.fake.receive().error().text().find("a trainer sends Hello") != std::string::npos);
  rig.fake.answer(99, {0, 0, 0, 0, 0, 0, 0, 0, 0});  // an id never asked: ignored
  rig.fake.answer(21, kGrad);
  const auto result = pending.get();
  REQUIRE(result.has_value());
  CHECK(result->gradient == kGrad);
  CHECK(rig.trainer.counters().malformed == 1);
  CHECK(rig.trainer.counters().late_answers == 1);
}

TEST_CASE(
    "between requests a trainer gone shows as not connected and a new one's Hello is answered") {
  Rig rig;
  rig.fake.sock.close();  // the trainer process ends between rounds
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (rig.trainer.counters().connected && std::chrono::steady_clock::now() < until) {
    rig.trainer.serveIdle();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK_FALSE(rig.trainer.counters().connected);
  FakeTrainer restarted(rig.trainer.endpoint());
  restarted.hello();
  std::atomic<bool> replied{false};
  auto serving = std::async(std::launch::async, [&] {
    while (!replied) {
      rig.trainer.serveIdle();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  // Answered with no request out: the worker's loop serves the socket between rounds.
  const bool accepted = restarted.receive().hello_reply().accepted();
  replied = true;
  serving.get();
  CHECK(accepted);
  CHECK(rig.trainer.counters().connected);
  CHECK(rig.trainer.counters().connections == 2);
  auto got = ask(rig.trainer, request(40));
  CHECK(restarted.receive().fit().id() == 40);
  restarted.answer(40, kGrad);
  const auto result = got.get();
  REQUIRE(result.has_value());
  CHECK(result->gradient == kGrad);
  CHECK(rig.trainer.counters().no_trainer == 0);
}

TEST_CASE("without a timeout of its own a request times out at 0.8 of the round deadline given") {
  TempDir dir;
  auto settings = settingsIn(dir);
  settings.timeout_seconds.reset();
  worker::ExternalTrainer trainer(settings, 1 << 20);
  FakeTrainer fake(trainer.endpoint());
  fake.hello();
  REQUIRE(trainer.waitForHello({}).has_value());
  REQUIRE(fake.receive().hello_reply().accepted());
  auto r = request(41);
  r.deadline_seconds = 0.5;
  auto got = ask(trainer, r);
  CHECK(fake.receive().fit().id() == 41);
  const auto result = got.get();
  REQUIRE(result.has_value());
  CHECK(result->failure == "the trainer did not answer within 0.4 s");
  CHECK(trainer.counters().timeouts == 1);
}

TEST_CASE("a trainer gone while every request is cancelled early still shows as not connected") {
  Rig rig(30.0);
  std::atomic<bool> stop{false};
  rig.trainer.setCancelled([&] { return stop.load(); });
  auto first = ask(rig.trainer, request(50));
  CHECK(rig.fake.receive().fit().id() == 50);
  rig.fake.sock.close();  // killed mid-request; the rounds move on faster than it is noticed
  for (uint64_t id = 50; id < 54; ++id) {
    auto pending = id == 50 ? std::move(first) : ask(rig.trainer, request(id));
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    stop = true;
    CHECK_FALSE(pending.get().has_value());  // cancelled: no failure said
    stop = false;
  }
  CHECK_FALSE(rig.trainer.counters().connected);
  CHECK(rig.trainer.counters().no_trainer == 0);
}

TEST_CASE("a Hello again on the same connection is a refresh, not another trainer") {
  Rig rig;
  rig.fake.hello();
  std::atomic<bool> replied{false};
  auto serving = std::async(std::launch::async, [&] {
    while (!replied) {
      rig.trainer.serveIdle();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  const bool accepted = rig.fake.receive().hello_reply().accepted();
  replied = true;
  serving.get();
  CHECK(accepted);
  CHECK(rig.trainer.counters().connections == 1);
  CHECK(rig.trainer.counters().connected);
}

TEST_CASE("a Hello again on the connection a request is out on does not send the request twice") {
  Rig rig;
  auto got = ask(rig.trainer, request(60));
  CHECK(rig.fake.receive().fit().id() == 60);
  rig.fake.hello();  // the trainer says Hello again (asked to, say) while it works on 60
  CHECK(rig.fake.receive().hello_reply().accepted());
  rig.fake.answer(60, kGrad);
  const auto result = got.get();
  REQUIRE(result.has_value());
  CHECK(result->gradient == kGrad);
  // Nothing more came: no second FitRequest for 60.
  rig.fake.sock.set(zmq::sockopt::rcvtimeo, 200);
  zmq::message_t extra;
  CHECK_FALSE(rig.fake.sock.recv(extra).has_value());
  CHECK(rig.trainer.counters().connections == 1);
}

TEST_CASE("a trainer back under the identity it chose, on a new connection, is sent the request") {
  TempDir dir;
  worker::ExternalTrainer trainer(settingsIn(dir), 1 << 20);
  auto named = [&] {
    auto f = std::make_unique<FakeTrainer>("");
    f->sock.set(zmq::sockopt::routing_id, "trainer-7");
    f->sock.connect(trainer.endpoint());
    return f;
  };
  auto first = named();
  first->hello();
  REQUIRE(trainer.waitForHello({}).has_value());
  REQUIRE(first->receive().hello_reply().accepted());
  auto got = ask(trainer, request(70));
  CHECK(first->receive().fit().id() == 70);
  first.reset();  // the process dies with the request
  // Its connection's end seen (libzmq would refuse the identity while the old one is open).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (trainer.counters().connected && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE_FALSE(trainer.counters().connected);
  auto second = named();
  second->hello();
  CHECK(second->receive().hello_reply().accepted());
  CHECK(second->receive().fit().id() == 70);  // the same identity, but not the same connection
  second->answer(70, kGrad);
  const auto result = got.get();
  REQUIRE(result.has_value());
  CHECK(result->gradient == kGrad);
  CHECK(trainer.counters().connections == 2);
}
