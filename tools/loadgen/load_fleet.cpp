#include "tools/loadgen/load_fleet.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/daemon/heap_policy.hpp"
#include "common/daemon/signals.hpp"
#include "common/transport/framing.hpp"
#include "common/util/steady_clock.hpp"
#include "worker/dealer_security.hpp"
#include "worker/worker_options.hpp"

namespace tern::loadgen {

namespace {

// The most messages taken from one worker's socket per turn, so one busy worker never starves
// the others' timers.
constexpr size_t kMessagesPerWorkerTurn = 16;

// Read once for the fleet: the keys are read (and plaintext warned about) once, not per worker.
transport::ChannelOptions channelOptions(const config::WorkerSettings& s) {
  transport::ChannelOptions opts;
  opts.max_message_bytes = int64_t(s.max_message_bytes);
  opts.curve = worker::curveClient(s.security);
  return opts;
}

worker::WorkerOptions memberOptions(const config::WorkerSettings& s, const FleetOptions& f,
                                    size_t i) {
  worker::WorkerOptions o = worker::workerOptions(s);
  o.name = f.prefix + "-" + std::to_string(i);
  o.shard_index = i;
  o.shard_total = f.workers;
  return o;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

struct LoadFleet::Member {
  Member(zmq::context_t& ctx, const transport::ChannelOptions& c, const config::WorkerSettings& s,
         const FleetOptions& f, size_t i, std::shared_ptr<const ml::Dataset> shard)
      : channel(ctx, zmq::socket_type::dealer, c),
        // Instances are per process in the daemon; here one per member, never 0.
        core(memberOptions(s, f, i), std::move(shard), deriveSeed(f.seed, 2 * i) | 1),
        trainer(deriveSeed(f.seed, 2 * i + 1), f.scale) {}
  transport::Channel channel;
  worker::WorkerCore core;
  RandomTrainer trainer;
};

LoadFleet::LoadFleet(const config::WorkerSettings& s, std::shared_ptr<const ml::Dataset> shard,
                     uint64_t partition, const FleetOptions& options)
    : options_(options) {
  // One socket per worker (and libzmq's own few): past the default of 1,023 for large fleets.
  ctx_.set(zmq::ctxopt::max_sockets, int(options.workers + 64));
  members_.reserve(options.workers);
  const auto channel_options = channelOptions(s);
  for (size_t i = 0; i < options.workers; ++i) {
    members_.push_back(std::make_unique<Member>(ctx_, channel_options, s, options, i, shard));
    members_.back()->core.setPartition(partition);
    members_.back()->channel.connect(s.coordinator);
  }
}

LoadFleet::~LoadFleet() = default;

void LoadFleet::send(Member& m, std::vector<Message> out) {
  for (auto& msg : out) {
    if (auto sent = transport::sendMessage(m.channel, "", msg))
      m.core.onSent(msg, *sent, steadySeconds());
  }
}

void LoadFleet::dispatch(Member& m, worker::Effects e) {
  send(m, std::move(e.send));
  if (!e.compute) return;
  if (auto result = m.trainer.gradient(*e.compute))
    dispatch(m, m.core.onGradient(*result, steadySeconds()));
}

void LoadFleet::noteRound(uint64_t round) { round_started_.try_emplace(round, steadySeconds()); }

void LoadFleet::takeMessages(Member& m) {
  for (size_t n = 0; n < kMessagesPerWorkerTurn; ++n) {
    auto frames = m.channel.receive();
    if (!frames) return;
    auto parsed = transport::parseFrames(*frames);
    if (!parsed.message) {
      ++malformed_;
      continue;
    }
    dispatch(m, m.core.onMessage(*parsed.message, frames->bytes, steadySeconds()));
    if (m.core.joined()) noteRound(m.core.replicaRound());
    daemon::keepBuffersOf(m.core.parameters().size() * sizeof(float));
  }
}

void LoadFleet::tick() {
  const double now = steadySeconds();
  for (auto& m : members_)
    if (m->core.nextWakeup() <= now) dispatch(*m, m->core.onTick(now));
}

double LoadFleet::nextWakeup() const {
  double at = 1e300;
  for (const auto& m : members_) at = std::min(at, m->core.nextWakeup());
  return at;
}

bool LoadFleet::done() const {
  return std::all_of(members_.begin(), members_.end(), [&](const auto& m) {
    return m->core.finished() || (options_.rounds > 0 && m->core.stats().rounds >= options_.rounds);
  });
}

FleetSummary LoadFleet::run() {
  const double started = steadySeconds();
  for (auto& m : members_) dispatch(*m, m->core.start(started));
  std::vector<zmq::pollitem_t> items;
  for (auto& m : members_) items.push_back({m->channel.socket().handle(), 0, ZMQ_POLLIN, 0});
  while (!done() && !daemon::stopRequested()) {
    const double wait = std::clamp(nextWakeup() - steadySeconds(), 0.0, 0.1);
    zmq::poll(items.data(), items.size(), std::chrono::milliseconds(int(wait * 1000)));
    for (size_t i = 0; i < members_.size(); ++i)
      if (items[i].revents & ZMQ_POLLIN) takeMessages(*members_[i]);
    tick();
  }
  const double seconds = steadySeconds() - started;
  // A finished worker's coordinator is gone or going: only the others say they leave.
  for (auto& m : members_)
    if (!m->core.finished()) send(*m, m->core.stop("load generator done", steadySeconds()));
  if (malformed_) spdlog::warn("{} malformed messages from the coordinator", malformed_);
  return summary(seconds);
}

FleetSummary LoadFleet::summary(double seconds) const {
  FleetSummary s;
  s.workers = members_.size();
  s.seconds = seconds;
  s.min_pushes = members_.empty() ? 0 : UINT64_MAX;
  for (const auto& m : members_) {
    s.joined += m->core.joined() ? 1 : 0;
    s.pushes += m->core.stats().rounds;
    s.min_pushes = std::min(s.min_pushes, m->core.stats().rounds);
  }
  s.rounds_seen = round_started_.size();
  std::vector<double> gaps;
  for (auto it = round_started_.begin(); it != round_started_.end(); ++it) {
    auto next = std::next(it);
    if (next != round_started_.end() && next->first == it->first + 1)
      gaps.push_back(1000.0 * (next->second - it->second));
  }
  s.round_ms_median = median(gaps);
  for (double g : gaps) s.round_ms_mean += g / double(gaps.size());
  return s;
}

}  // namespace tern::loadgen
