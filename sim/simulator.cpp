#include "sim/simulator.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <queue>

#include "common/compression/codec.hpp"
#include "common/ml/data_source.hpp"
#include "common/util/checksum.hpp"
#include "proto/worker_messages.hpp"
#include "server/inline_evaluation.hpp"
#include "sim/link_transmitter.hpp"
#include "worker/worker_core.hpp"

namespace tern::sim {
namespace {

enum class EventKind { kToCoordinator, kToWorker, kWorkerSend, kWorkerTick, kCoordinatorTick };

struct Event {
  double time;
  uint64_t seq;
  EventKind kind;
  size_t worker;
  uint64_t generation;
  std::shared_ptr<Message> message;
  size_t bytes;
};

struct Later {
  bool operator()(const Event& a, const Event& b) const {
    if (a.time != b.time) return a.time > b.time;
    return a.seq > b.seq;
  }
};

size_t wireBytes(const Message& m) { return m.envelope.ByteSizeLong() + m.payload.size(); }

// A Byzantine member's message as it leaves: a push's values times `scale`, a join's claimed
// samples replaced (when given). Other messages pass unchanged.
std::shared_ptr<Message> poisoned(const std::shared_ptr<Message>& m, const config::SimByzantine& b,
                                  size_t dim) {
  auto out = std::make_shared<Message>(*m);
  if (m->envelope.has_join() && b.samples > 0)
    out->envelope.mutable_join()->set_sample_count(b.samples);
  if (!m->envelope.has_push() || m->envelope.push().probe()) return out;
  compression::DecodeLimits limits;
  limits.expected_dim = limits.max_dim = uint32_t(dim);
  limits.max_bytes = m->payload.size() + 64;
  auto decoded = compression::decode(m->payload, limits);
  if (!decoded.value) return out;
  for (float& v : decoded.value->values) v = float(double(v) * b.scale);
  out->payload = compression::encodeUpdate(*decoded.value);
  return out;
}

}  // namespace

struct Simulator::Impl {
  config::SimSettings settings;
  double now = 0.0;
  uint64_t seq = 0;
  std::priority_queue<Event, std::vector<Event>, Later> queue;
  std::unique_ptr<server::CoordinatorCore> coordinator;
  std::shared_ptr<const ml::Dataset> test;
  std::function<void(const server::RoundRecord&)> on_round;
  std::vector<std::unique_ptr<worker::WorkerCore>> workers;
  std::vector<std::unique_ptr<worker::ShardTrainer>> trainers;
  std::vector<config::SimLink> links;
  std::vector<LinkTransmitter> up, down;  // each worker's uplink and downlink
  // The coordinator's thread is busy (an evaluation) until then: what reaches it waits.
  double coordinator_busy_until = 0.0;
  std::vector<uint64_t> sent_to_worker;
  std::vector<uint64_t> worker_tick_gen;
  uint64_t coord_tick_gen = 0;

  explicit Impl(const config::SimSettings& s) : settings(s) {
    auto full = ml::loadDataset(s.train_data);
    if (!s.coordinator.test_data.format.empty()) {
      test = std::make_shared<ml::Dataset>(ml::loadDataset(s.coordinator.test_data));
    }
    auto cset = s.coordinator;
    cset.min_workers = s.workers;
    if (cset.model.features == 0) cset.model.features = uint32_t(full.features());
    // Said before any round, as the daemons do (the coordinator for its test set, a worker at
    // the welcome for its shard).
    ml::requireFitsModel("train_data", s.train_data, full, cset.model);
    if (test) ml::requireFitsModel("test_data", s.coordinator.test_data, *test, cset.model);
    coordinator = std::make_unique<server::CoordinatorCore>(
        server::coordinatorOptions(cset), ml::makeModel(cset.model), test != nullptr,
        deriveSeed(cset.training.seed, 0x73657373ULL), now);
    auto parts = ml::partitionOf(s.train_data, full, s.workers, s.worker.partition);
    // One event at a time: the workers' trainers never compute together and share their storage.
    // Nor do they build pushes together: one buffer for error feedback's corrected gradient.
    auto scratch = std::make_shared<worker::TrainerScratch>();
    auto corrected = std::make_shared<std::vector<float>>();
    auto filler = std::make_shared<proto::ProbeFiller>();  // and one probe filler
    for (size_t i = 0; i < s.workers; ++i) {
      auto wset = s.worker;
      wset.name = "sim-worker-" + std::to_string(i);
      wset.shard_index = i;
      wset.shard_total = s.workers;
      auto shard = std::make_shared<ml::Dataset>(full.subset(parts[i]));
      auto options = worker::workerOptions(wset);
      options.push.corrected_scratch = corrected;
      options.probe_filler = filler;
      workers.push_back(std::make_unique<worker::WorkerCore>(options, shard, i + 1));
      trainers.push_back(std::make_unique<worker::ShardTrainer>(shard, nullptr, nullptr, scratch));
      links.push_back(s.links[std::min(i, s.links.size() - 1)]);
      const auto& l = links.back();
      up.emplace_back(l.rate_mbps, l.burst_bytes);
      down.emplace_back(l.download_rate_mbps.value_or(s.download_rate_mbps), l.burst_bytes);
    }
    sent_to_worker.assign(s.workers, 0);
    worker_tick_gen.assign(s.workers, 0);
  }

  void push(double t, EventKind kind, size_t w, std::shared_ptr<Message> m, size_t bytes,
            uint64_t gen = 0) {
    queue.push(Event{t, seq++, kind, w, gen, std::move(m), bytes});
  }

  // What a worker's event asks for: a gradient is computed at once, at the same virtual time.
  std::vector<Message> fulfil(size_t i, worker::Effects e) {
    if (!e.compute) return std::move(e.send);
    auto result = trainers[i]->gradient(*e.compute);
    auto pushed = workers[i]->onGradient(*result, now);
    for (auto& m : pushed.send) e.send.push_back(std::move(m));
    return std::move(e.send);
  }

  // A worker hands messages to its uplink; a push departs after its compute time.
  void workerOut(size_t i, worker::Effects e) {
    auto out = fulfil(i, std::move(e));
    double depart = now;
    for (auto& m : out) {
      if (m.envelope.has_push() && !m.envelope.push().probe())
        depart = now + links[i].compute_seconds;
      auto msg = std::make_shared<Message>(std::move(m));
      push(depart, EventKind::kWorkerSend, i, msg, wireBytes(*msg));
    }
    scheduleWorkerTick(i);
  }

  // The core's effects at `now`: an evaluation is answered after evaluation_seconds, the
  // coordinator busy meanwhile; closed rounds are reported, messages enter the downlinks.
  void coordinatorOut(server::Effects effects) {
    double t = now;
    effects = server::evaluateInline(*coordinator, std::move(effects), test.get(), [this, &t] {
      t += settings.evaluation_seconds;
      return t;
    });
    coordinator_busy_until = std::max(coordinator_busy_until, t);
    if (on_round) {
      for (const auto& r : effects.closed_rounds) on_round(r);
    }
    for (auto& o : effects.messages) {
      size_t i = std::stoul(o.peer);
      auto msg = std::make_shared<Message>(std::move(o.message));
      size_t bytes = wireBytes(*msg);
      sent_to_worker[i] += bytes;
      const double done = down[i].send(t, bytes);
      push(done + links[i].latency_ms / 1000.0, EventKind::kToWorker, i, msg, bytes);
    }
    scheduleCoordinatorTick();
  }

  void scheduleWorkerTick(size_t i) {
    if (workers[i]->finished()) return;
    push(std::max(now, workers[i]->nextWakeup()), EventKind::kWorkerTick, i, nullptr, 0,
         ++worker_tick_gen[i]);
  }
  void scheduleCoordinatorTick() {
    if (coordinator->finished()) return;
    push(std::max({now, coordinator_busy_until, coordinator->nextTimeout(now)}),
         EventKind::kCoordinatorTick, 0, nullptr, 0, ++coord_tick_gen);
  }

  // A worker's message onto its uplink, to arrive after its transfer and latency (a Byzantine
  // member's poisoned on the way).
  void uplink(const Event& e) {
    size_t i = e.worker;
    workers[i]->onSent(*e.message, e.bytes, now);
    const double done = up[i].send(now, e.bytes);
    const bool byzantine = i < settings.byzantine.workers;
    push(done + links[i].latency_ms / 1000.0, EventKind::kToCoordinator, i,
         byzantine ? poisoned(e.message, settings.byzantine, coordinator->parameters().size())
                   : e.message,
         e.bytes);
  }

  SimResult run(const std::function<void(const server::RoundRecord&)>& on_round_cb) {
    on_round = on_round_cb;
    for (size_t i = 0; i < workers.size(); ++i) workerOut(i, workers[i]->start(now));
    scheduleCoordinatorTick();
    SimResult result;
    while (!queue.empty() && !coordinator->finished()) {
      Event e = queue.top();
      queue.pop();
      now = e.time;
      ++result.events;
      switch (e.kind) {
        case EventKind::kWorkerSend:
          uplink(e);
          break;
        case EventKind::kToCoordinator:
          if (now < coordinator_busy_until) {  // read once the evaluation is done
            push(coordinator_busy_until, e.kind, e.worker, e.message, e.bytes);
            break;
          }
          coordinatorOut(
              coordinator->handleMessage(std::to_string(e.worker), *e.message, e.bytes, now, now));
          break;
        case EventKind::kToWorker:
          workerOut(e.worker, workers[e.worker]->onMessage(*e.message, e.bytes, now));
          if (!workers[e.worker]->fatalError().empty()) {
            throw std::runtime_error("sim-worker-" + std::to_string(e.worker) +
                                     " gave up: " + workers[e.worker]->fatalError());
          }
          // A daemon would ask again later, for a mended coordinator; the simulated one is
          // configured once, so nothing would change.
          if (!workers[e.worker]->unfitWelcome().empty()) {
            throw std::runtime_error(
                "sim-worker-" + std::to_string(e.worker) +
                " cannot train the coordinator's model: " + workers[e.worker]->unfitWelcome());
          }
          break;
        case EventKind::kWorkerTick:
          if (e.generation == worker_tick_gen[e.worker]) {
            workerOut(e.worker, workers[e.worker]->onTick(now));
          }
          break;
        case EventKind::kCoordinatorTick:
          if (e.generation == coord_tick_gen) coordinatorOut(coordinator->handleTimeout(now));
          break;
      }
    }
    // Deliver what is still in flight to the workers (the final update) so replicas can be checked.
    // Only deliveries move the clock: ticks still queued are not part of the run.
    while (!queue.empty()) {
      Event e = queue.top();
      queue.pop();
      if (e.kind != EventKind::kToWorker) continue;
      now = e.time;
      fulfil(e.worker, workers[e.worker]->onMessage(*e.message, e.bytes, now));
    }
    uint64_t reference = checksum(coordinator->parameters());
    for (const auto& w : workers) {
      if (checksum(w->parameters()) != reference) ++result.replica_mismatches;
    }
    result.last = coordinator->lastRecord();
    result.rounds = coordinator->round();
    result.virtual_seconds = now;
    result.sent_to_worker = sent_to_worker;
    for (const auto& w : workers) result.workers.push_back(w->stats());
    return result;
  }
};

Simulator::Simulator(const config::SimSettings& settings)
    : impl_(std::make_unique<Impl>(settings)) {}
Simulator::~Simulator() = default;

SimResult Simulator::run(const std::function<void(const server::RoundRecord&)>& on_round) {
  return impl_->run(on_round);
}

}  // namespace tern::sim
