// A push the coordinator refuses is never resent by the worker on its own. The coordinator closes
// the round as soon as every worker has answered (pushed or been refused), or asks the refused
// worker again at the deadline; the worker then compresses the same corrected vector again, so
// the refused push leaves no trace in its error-feedback residual. The cores are driven directly:
// messages are handed from one to the other by the test, the clock is the test's.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>

#include "common/ml/dataset.hpp"
#include "common/ml/model.hpp"
#include "common/util/checksum.hpp"
#include "server/coordinator_core.hpp"
#include "worker/worker_core.hpp"

using namespace tern;

namespace {

struct Cluster {
  double now = 0.0;
  config::CoordinatorSettings cs;
  std::unique_ptr<server::CoordinatorCore> coordinator;
  std::vector<std::unique_ptr<worker::WorkerCore>> workers;
  std::map<std::string, size_t> by_peer;
  // Called on every gradient push before the coordinator sees it; may spoil it.
  std::function<void(size_t worker, Message&)> tamper;

  explicit Cluster(size_t n) {
    cs.min_workers = uint32_t(n);
    cs.max_rounds = 12;
    cs.round_deadline_seconds = 2.0;
    cs.worker_patience_seconds = 1000.0;
    cs.heartbeat_seconds = 1000.0;
    cs.model.kind = "softmax";
    cs.model.features = 6;
    cs.model.classes = 3;
    cs.optimizer.lr = 0.3;
    cs.training.batch_size = 16;
    cs.training.seed = 7;
    cs.allocation.budget.mean_ratio = 0.25;
    coordinator = std::make_unique<server::CoordinatorCore>(cs, ml::makeModel(cs.model), nullptr,
                                                            77, [this] { return now; });
    config::WorkerSettings ws;
    ws.compressor.name = "topk";
    ws.error_feedback = true;
    ws.error_feedback_auto = false;
    ws.coordinator_patience_seconds = 1000.0;
    ws.heartbeat_seconds = 1000.0;
    ws.link.measure = false;
    for (size_t i = 0; i < n; ++i) {
      ws.name = "w" + std::to_string(i);
      auto shard = std::make_shared<ml::Dataset>(ml::syntheticDense(80, 6, 3, 11 + i));
      workers.push_back(std::make_unique<worker::WorkerCore>(ws, shard, [this] { return now; }));
      by_peer["w" + std::to_string(i)] = i;
    }
  }

  // Delivers everything that follows from `from_worker`'s messages until the cluster is quiet.
  void pump(size_t from, std::vector<Message> msgs) {
    std::vector<std::pair<size_t, Message>> to_coordinator;
    for (auto& m : msgs) to_coordinator.emplace_back(from, std::move(m));
    while (!to_coordinator.empty()) {
      auto [i, m] = std::move(to_coordinator.front());
      to_coordinator.erase(to_coordinator.begin());
      const size_t bytes = m.envelope.ByteSizeLong() + m.payload.size();
      workers[i]->onSent(m, bytes);
      if (tamper && m.envelope.has_push() && !m.envelope.push().probe()) tamper(i, m);
      deliver(coordinator->onMessage("w" + std::to_string(i), m, bytes, now), to_coordinator);
    }
  }

  void deliver(std::vector<Outgoing> out, std::vector<std::pair<size_t, Message>>& back) {
    for (auto& o : out) {
      const size_t i = by_peer.at(o.peer);
      const size_t bytes = o.message.envelope.ByteSizeLong() + o.message.payload.size();
      for (auto& r : workers[i]->onMessage(o.message, bytes)) back.emplace_back(i, std::move(r));
    }
  }

  void start() {
    for (size_t i = 0; i < workers.size(); ++i) pump(i, workers[i]->start());
  }

  void tick() {
    std::vector<std::pair<size_t, Message>> back;
    deliver(coordinator->onTick(), back);
    for (auto& [i, m] : back) pump(i, {std::move(m)});
  }

  // Runs to the end, stepping the clock past each deadline when the cluster is quiet.
  void run() {
    start();
    for (int guard = 0; guard < 1000 && !coordinator->finished(); ++guard) {
      now += cs.round_deadline_seconds + 0.01;
      tick();
    }
  }
};

void spoilLoss(Message& m) { m.envelope.mutable_push()->set_local_loss(std::nan("")); }

}  // namespace

TEST_CASE("one worker whose push is refused is asked again and the run ends as if it never was") {
  Cluster clean(1);
  clean.run();
  REQUIRE(clean.coordinator->finished());
  CHECK(clean.coordinator->reasked() == 0);

  Cluster c(1);
  size_t spoiled = 0;
  c.tamper = [&](size_t, Message& m) {
    // Rounds 3 and 7 are refused once each; round 3's retry is refused too.
    const uint64_t r = m.envelope.push().round();
    if ((r == 3 && spoiled < 2) || (r == 7 && spoiled == 2)) {
      spoilLoss(m);
      ++spoiled;
    }
  };
  c.run();
  REQUIRE(c.coordinator->finished());
  CHECK(spoiled == 3);
  CHECK(c.coordinator->rejections().at("non_finite_loss") == 3);
  CHECK(c.coordinator->reasked() == 3);
  CHECK(c.workers[0]->stats().repushes == 3);
  CHECK(c.coordinator->round() == clean.coordinator->round());
  // Bit for bit the clean run's model: the refused pushes were never applied and the worker's
  // residual did not count them as sent.
  CHECK(c.coordinator->parameters() == clean.coordinator->parameters());
  CHECK(checksum(c.workers[0]->parameters()) == checksum(c.coordinator->parameters()));
}

TEST_CASE("a round closes as soon as every worker has pushed or been refused") {
  Cluster c(2);
  c.tamper = [&](size_t i, Message& m) {
    if (i == 1 && m.envelope.push().round() == 0) spoilLoss(m);
  };
  c.start();
  // No clock step: worker 1's refusal was its answer, worker 0's push closes round 0 alone.
  CHECK(c.coordinator->round() >= 1);
  CHECK(c.coordinator->rejections().at("non_finite_loss") == 1);
  CHECK(c.coordinator->reasked() == 0);
  c.run();
  CHECK(c.coordinator->finished());
  for (const auto& w : c.workers) {
    CHECK(checksum(w->parameters()) == checksum(c.coordinator->parameters()));
  }
}

TEST_CASE("when every push of a round is refused, the workers are asked again at the deadline") {
  Cluster c(2);
  int spoiled = 0;
  c.tamper = [&](size_t, Message& m) {
    if (m.envelope.push().round() == 2 && spoiled < 2) {
      spoilLoss(m);
      ++spoiled;
    }
  };
  c.start();
  // The first rounds close on their own; round 2 waits for its deadline.
  CHECK(c.coordinator->round() == 2);
  c.now += c.cs.round_deadline_seconds / 2;
  c.tick();
  CHECK(c.coordinator->round() == 2);
  CHECK(c.coordinator->reasked() == 0);
  c.now += c.cs.round_deadline_seconds;
  c.tick();
  CHECK(c.coordinator->reasked() == 2);
  CHECK(c.coordinator->round() > 2);
  c.run();
  CHECK(c.coordinator->finished());
  for (const auto& w : c.workers) {
    CHECK(w->stats().repushes == 1);
    CHECK(checksum(w->parameters()) == checksum(c.coordinator->parameters()));
  }
}
