#include "worker/external_trainer.hpp"

#include <spdlog/spdlog.h>

#include <bit>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "common/util/rng.hpp"
#include "trainer.pb.h"

namespace tern::worker {

static_assert(std::endian::native == std::endian::little, "the payload is little-endian fp32");

namespace {

constexpr uint32_t kVersion = trainer::TRAINER_PROTOCOL_VERSION;
constexpr int kSliceMs = 50;  // a wait's slice: a stop is noticed within it
// How long a request with no trainer to go to waits for one (restarting) to say Hello.
constexpr double kReconnectSeconds = 1.0;
constexpr size_t kMaxDimensions = 8;  // a tensor of more is no model's
// The most rows the coordinator takes from one worker's join (Membership::kMaxSamplesPerWorker).
constexpr uint64_t kMaxTrainRows = uint64_t{1} << 40;
constexpr std::string_view kIpc = "ipc://";
// Without a timeout of its own, a request times out at this share of the round deadline.
constexpr double kDeadlineShareOfTimeout = 0.8;

using Clock = std::chrono::steady_clock;

transport::ChannelOptions channelOptions(int64_t max_message_bytes) {
  transport::ChannelOptions o;
  o.max_message_bytes = max_message_bytes;
  o.linger_ms = 0;  // nothing queued for a trainer matters once the worker is gone
  return o;
}

std::vector<ml::TensorShape> layoutOf(const trainer::Hello& h) {
  std::vector<ml::TensorShape> out;
  for (const auto& t : h.tensors()) {
    out.push_back({t.name(), std::vector<uint64_t>(t.shape().begin(), t.shape().end())});
  }
  return out;
}

}  // namespace

struct ExternalTrainer::Incoming {
  std::string peer;
  trainer::Envelope env;
  std::optional<zmq::message_t> payload;
};

ExternalTrainer::ExternalTrainer(const config::TrainerSettings& settings, int64_t max_message_bytes)
    : timeout_seconds_(settings.timeout_seconds),
      channel_(ctx_, zmq::socket_type::router, channelOptions(max_message_bytes)) {
  if (settings.endpoint.starts_with(kIpc)) {
    socket_file_ = settings.endpoint.substr(kIpc.size());
    std::error_code ec;
    std::filesystem::remove(socket_file_, ec);  // a stale one from a worker that died
  }
  // Before the bind: every connection the socket accepts is seen.
  const std::string monitor_at = "inproc://trainer-connections";
  if (zmq_socket_monitor(channel_.socket().handle(), monitor_at.c_str(),
                         ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED) != 0)
    throw std::runtime_error("cannot watch the trainer socket's connections");
  monitor_.set(zmq::sockopt::linger, 0);
  monitor_.connect(monitor_at);
  try {
    endpoint_ = channel_.bind(settings.endpoint);
  } catch (const zmq::error_t& e) {
    throw std::runtime_error("cannot bind the trainer endpoint " + settings.endpoint + ": " +
                             e.what());
  }
  if (!socket_file_.empty()) {
    namespace fs = std::filesystem;
    std::error_code ec;  // best effort: the directory's permissions are what protects it
    fs::permissions(socket_file_, fs::perms::owner_read | fs::perms::owner_write, ec);
  }
}

ExternalTrainer::~ExternalTrainer() {
  // Whoever computed with it has stopped by now (the daemon's job thread goes first).
  std::optional<std::string> done;
  {
    std::lock_guard lock(mutex_);
    done = done_reason_;
  }
  if (done && !peer_.empty()) {
    trainer::Envelope env;
    env.set_version(kVersion);
    env.mutable_done()->set_reason(*done);
    channel_.socket().set(zmq::sockopt::linger, 1000);  // the context's end waits for it
    sendEnvelope(peer_, env);
  }
  // No events after this, and none left in the monitor's pipe when its sockets close (libzmq
  // leaks an event still in flight then).
  zmq_socket_monitor(channel_.socket().handle(), nullptr, 0);
  takeConnectionEvents();
  if (socket_file_.empty()) return;
  std::error_code ec;
  std::filesystem::remove(socket_file_, ec);
}

void ExternalTrainer::sayDoneAtExit(const std::string& reason) {
  std::lock_guard lock(mutex_);
  done_reason_ = reason;
}

ExternalTrainerCounters ExternalTrainer::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void ExternalTrainer::count(uint64_t ExternalTrainerCounters::*counter) {
  std::lock_guard lock(mutex_);
  ++(counters_.*counter);
}

void ExternalTrainer::sendEnvelope(const std::string& peer, const trainer::Envelope& env) {
  if (!channel_.send(peer, env.SerializeAsString(), {})) {
    spdlog::debug("the trainer {} is gone: a message to it was dropped", peer);
  }
}

void ExternalTrainer::sendError(const std::string& peer, const std::string& text) {
  trainer::Envelope err;
  err.set_version(kVersion);
  err.mutable_error()->set_text(text);
  sendEnvelope(peer, err);
}

void ExternalTrainer::takeConnectionEvents() {
  zmq::message_t event, address;
  while (transport::receiveFrame(monitor_, event, zmq::recv_flags::dontwait)) {
    if (event.more()) {
      (void)transport::receiveFrame(monitor_, address, zmq::recv_flags::none);  // the endpoint
    }
    if (event.size() < sizeof(uint16_t)) continue;
    uint16_t id = 0;
    std::memcpy(&id, event.data(), sizeof id);
    if (id == ZMQ_EVENT_ACCEPTED) ++connections_;
    if (id == ZMQ_EVENT_DISCONNECTED) ++disconnects_;
    if (id == ZMQ_EVENT_DISCONNECTED && connections_ > 0) --connections_;
  }
  if (connections_ > 0) return;
  // Every connection closed: no trainer is there (a restarted one's Hello says so again).
  std::lock_guard lock(mutex_);
  if (!counters_.connected) return;
  counters_.connected = false;
  spdlog::warn("the trainer at {} disconnected; requests wait for one to say Hello", endpoint_);
}

std::optional<ExternalTrainer::Incoming> ExternalTrainer::receive(int timeout_ms) {
  zmq::socket_t* const also[] = {&monitor_};
  const bool readable = channel_.waitReadable(std::chrono::milliseconds(timeout_ms), also);
  takeConnectionEvents();
  if (!readable) return std::nullopt;
  auto frames = channel_.receive();
  if (!frames) return std::nullopt;
  Incoming in;
  in.peer = frames->peer;
  if (frames->parts.empty() || frames->frame_count > transport::kMaxKeptFrames ||
      !in.env.ParseFromArray(frames->parts[0].data(), int(frames->parts[0].size()))) {
    count(&ExternalTrainerCounters::malformed);
    spdlog::warn("a malformed message from the trainer ({} frames, {} bytes): dropped",
                 frames->frame_count, frames->bytes);
    sendError(in.peer, "the message is not a trainer Envelope frame (and at most a payload frame)");
    return std::nullopt;
  }
  if (in.env.version() != kVersion) {
    count(&ExternalTrainerCounters::malformed);
    spdlog::warn("the trainer speaks protocol version {}, this worker {}", in.env.version(),
                 kVersion);
    if (!in.env.has_error()) {  // an Error is not answered: another version's Error neither
      sendError(in.peer, "this worker speaks trainer protocol version " + std::to_string(kVersion));
    }
    return std::nullopt;
  }
  if (frames->parts.size() > 1) in.payload = std::move(frames->parts[1]);
  return in;
}

std::string ExternalTrainer::helloProblem(const trainer::Envelope& env) const {
  const auto& h = env.hello();
  if (h.tensors().empty()) return "the Hello describes no tensors";
  if (h.train_rows() == 0) {
    return "train_rows is 0: the coordinator weighs a worker by its rows and takes none without";
  }
  if (h.train_rows() > kMaxTrainRows) {
    return "train_rows " + std::to_string(h.train_rows()) +
           " is more than the coordinator takes (" + std::to_string(kMaxTrainRows) + ")";
  }
  for (const auto& t : h.tensors()) {
    if (size_t(t.shape().size()) > kMaxDimensions) {
      return "tensor '" + t.name() + "' has more than " + std::to_string(kMaxDimensions) +
             " dimensions";
    }
    for (uint64_t d : t.shape()) {
      if (d == 0) return "tensor '" + t.name() + "' has a dimension of 0";
    }
  }
  const auto layout = layoutOf(h);
  if (const uint64_t n = ml::paramsOf(layout); n > ml::kMaxParams) {
    return "the layout holds " + std::to_string(n) + " values, more than " +
           std::to_string(ml::kMaxParams);
  }
  for (const auto& c : h.label_histogram()) {
    if (c.label() < 0 || uint32_t(c.label()) >= ml::kMaxClasses) {
      return "label " + std::to_string(c.label()) + " is outside [0, " +
             std::to_string(ml::kMaxClasses) + ")";
    }
  }
  if (!layout_.empty() && layout != layout_) {
    return "its layout " + ml::describeLayout(layout) + " is not the one this worker trains (" +
           ml::describeLayout(layout_) + ")";
  }
  return "";
}

bool ExternalTrainer::isRefresh(const std::string& peer) const {
  // An identity a trainer chose itself may come back on a new connection: after any connection
  // closed, a Hello is taken as a new trainer's.
  return !peer_.empty() && peer == peer_ && disconnects_ == peer_disconnects_;
}

bool ExternalTrainer::onHello(const std::string& peer, const trainer::Envelope& env) {
  const std::string why = helloProblem(env);
  trainer::Envelope reply;
  reply.set_version(kVersion);
  reply.mutable_hello_reply()->set_accepted(why.empty());
  reply.mutable_hello_reply()->set_reason(why);
  sendEnvelope(peer, reply);
  if (!why.empty()) {
    count(&ExternalTrainerCounters::hellos_refused);
    spdlog::warn("refused a trainer's Hello at {}: {}", endpoint_, why);
    return false;
  }
  const auto& h = env.hello();
  if (!described_) {
    layout_ = layoutOf(h);
    LocalData d;
    d.rows = h.train_rows();
    for (const auto& c : h.label_histogram()) {
      if (d.label_histogram.size() <= size_t(c.label())) d.label_histogram.resize(c.label() + 1);
      d.label_histogram[c.label()] += c.count();
    }
    d.tensors = layout_;
    d.eval_rows = h.eval_rows();
    described_ = std::move(d);
  }
  // The same connection's trainer saying Hello again (asked to, or on a request before its
  // reply) is a refresh, not another trainer.
  const bool refresh = isRefresh(peer);
  peer_ = peer;
  peer_disconnects_ = disconnects_;
  if (!refresh) busy_since_.reset();  // a new trainer owes nothing yet
  {
    std::lock_guard lock(mutex_);
    counters_.connected = true;
    if (!refresh || !h.framework().empty()) counters_.framework = h.framework();
    if (!refresh) ++counters_.connections;
  }
  spdlog::log(refresh ? spdlog::level::debug : spdlog::level::info,
              "trainer {} at {} ({}): {}, {} rows", refresh ? "said Hello again" : "connected",
              endpoint_, h.framework().empty() ? "framework not given" : h.framework(),
              ml::describeLayout(layout_), h.train_rows());
  return true;
}

std::optional<LocalData> ExternalTrainer::waitForHello(const std::function<bool()>& stop) {
  while (!(stop && stop())) {
    auto in = receive(kSliceMs);
    if (!in) continue;
    if (in->env.has_hello()) {
      if (onHello(in->peer, in->env)) return described_;
    } else {
      spdlog::debug("a message from the trainer before its Hello: ignored");
      // Never an Error for an Error: two peers doing so would answer each other for good.
      if (!in->env.has_error()) {
        sendError(in->peer, "say Hello first: this worker has no accepted Hello from its trainer");
      }
    }
  }
  return std::nullopt;
}

bool ExternalTrainer::sendFit(const GradientRequest& request) {
  trainer::Envelope env;
  env.set_version(kVersion);
  auto* fit = env.mutable_fit();
  fit->set_id(request.id);
  fit->set_round(request.round);
  fit->set_batch_size(request.plan.batch_size);
  fit->set_local_steps(request.plan.local_steps);
  fit->set_local_lr(request.plan.local_lr);
  // This worker's and this round's own seed, as the built-in trainer draws its minibatches.
  fit->set_seed(minibatchSeed(request));
  fit->set_evaluate(request.evaluate);
  const auto& p = *request.params;
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(p.data()),
                                       p.size() * sizeof(float));
  if (!channel_.send(peer_, env.SerializeAsString(), bytes)) return false;
  if (!busy_since_) busy_since_ = Clock::now();
  return true;
}

GradientResult ExternalTrainer::failed(const GradientRequest& request, const std::string& why,
                                       uint64_t ExternalTrainerCounters::*counter) {
  {
    std::lock_guard lock(mutex_);
    ++(counters_.*counter);
    counters_.last_error = why;
  }
  spdlog::warn("round {}: {}", request.round, why);
  GradientResult out;
  out.request_id = request.id;
  out.failure = why;
  return out;
}

GradientResult ExternalTrainer::takeResult(const GradientRequest& request, const Incoming& in) {
  const auto& r = in.env.result();
  if (!r.error().empty()) {
    return failed(request, "the trainer could not fit: " + r.error(),
                  &ExternalTrainerCounters::trainer_errors);
  }
  const size_t n = request.params->size();
  const size_t got = in.payload ? in.payload->size() : 0;
  if (got != n * sizeof(float)) {
    return failed(request,
                  "the trainer's answer has " + std::to_string(got) + " bytes, the model " +
                      std::to_string(n) + " values (" + std::to_string(n * sizeof(float)) +
                      " bytes)",
                  &ExternalTrainerCounters::bad_answers);
  }
  if (r.kind() != trainer::FitResult::GRADIENT && r.kind() != trainer::FitResult::DELTA) {
    return failed(request, "the trainer's answer is of unknown kind " + std::to_string(r.kind()),
                  &ExternalTrainerCounters::bad_answers);
  }
  GradientResult out;
  out.request_id = request.id;
  out.gradient.resize(n);
  std::memcpy(out.gradient.data(), in.payload->data(), got);
  // A delta over local steps is pushed divided by the local step, as the built-in trainer does.
  if (r.kind() == trainer::FitResult::DELTA && request.plan.local_lr > 0) {
    for (auto& v : out.gradient) v = float(v / request.plan.local_lr);
  }
  out.loss = r.loss();
  out.rows_used = r.rows();
  // An evaluation the request did not ask for is not passed on.
  if (request.evaluate && r.has_evaluation() && r.evaluation().rows() > 0) {
    out.evaluation =
        Evaluation{r.evaluation().loss(), r.evaluation().accuracy(), r.evaluation().rows()};
  }
  return out;
}

GradientResult ExternalTrainer::noTrainer(const GradientRequest& request) {
  {
    std::lock_guard lock(mutex_);
    counters_.connected = false;
  }
  peer_.clear();
  busy_since_.reset();
  return failed(request, "no trainer connected to " + endpoint_,
                &ExternalTrainerCounters::no_trainer);
}

void ExternalTrainer::takeStray(const Incoming& in) {
  if (in.env.has_hello()) {
    onHello(in.peer, in.env);
    return;
  }
  if (!in.env.has_result() && !in.env.has_error()) {
    // A worker's message (HelloReply, FitRequest, Done) or no body: what a trainer never sends.
    count(&ExternalTrainerCounters::malformed);
    sendError(in.peer, "a trainer sends Hello, FitResult or Error, not this message");
    return;
  }
  // The trainer answered a request given up: it is working again, and owes nothing now.
  if (in.peer == peer_) busy_since_.reset();
  count(&ExternalTrainerCounters::late_answers);
  const uint64_t late = counters().late_answers;
  const auto level = std::has_single_bit(late) ? spdlog::level::warn : spdlog::level::debug;
  spdlog::log(level,
              "a trainer answer to no waiting request (id {}: given up, or never asked) ignored "
              "({} so far)",
              in.env.has_result() ? std::to_string(in.env.result().id()) : "none", late);
}

bool ExternalTrainer::awaitTrainer(const GradientRequest& request) {
  peer_.clear();
  const auto deadline = Clock::now() + std::chrono::duration<double>(
                                           std::min(timeoutFor(request), kReconnectSeconds));
  while (Clock::now() < deadline && !cancelled()) {
    auto in = receive(kSliceMs);
    if (!in) continue;
    if (!in->env.has_hello()) {
      takeStray(*in);
    } else if (onHello(in->peer, in->env)) {
      return sendFit(request);
    }
  }
  return false;
}

double ExternalTrainer::timeoutFor(const GradientRequest& request) const {
  if (timeout_seconds_) return *timeout_seconds_;
  // Below the deadline: the request is sent after the round's clock started, and a failure said
  // before the round closes reaches the coordinator as this round's.
  return request.deadline_seconds > 0 ? kDeadlineShareOfTimeout * request.deadline_seconds
                                      : config::kDefaultTrainerTimeoutSeconds;
}

void ExternalTrainer::takeWaiting() {
  for (size_t taken = 0; taken < transport::kMaxMessagesPerTurn; ++taken) {
    if (!channel_.waitReadable(std::chrono::milliseconds(0))) return;
    if (auto in = receive(0)) takeStray(*in);
  }
}

void ExternalTrainer::serveIdle() {
  takeWaiting();
  takeConnectionEvents();
  if (connections_ > 0) return;
  // The trainer is gone and owes nothing: the next request waits for a new one's Hello.
  peer_.clear();
  busy_since_.reset();
}

std::optional<GradientResult> ExternalTrainer::gradient(const GradientRequest& request) {
  // What came while no request waited first: a restarted trainer's Hello, late answers.
  takeWaiting();
  if (cancelled()) return std::nullopt;
  if ((peer_.empty() || !sendFit(request)) && !awaitTrainer(request)) {
    if (cancelled()) return std::nullopt;
    return noTrainer(request);
  }
  // The time runs from the oldest request the trainer has not answered: one still busy with a
  // request given up (its round moved on) has had its time since then, so a hang is a timeout
  // however often rounds move on before trainer.timeout_seconds.
  const double timeout_seconds = timeoutFor(request);
  if (timeout_seconds != said_timeout_) {
    said_timeout_ = timeout_seconds;
    spdlog::info("a trainer request times out after {:g} s{}", timeout_seconds,
                 timeout_seconds_ ? "" : " (none set: 0.8 of the round deadline, or 60 s)");
  }
  const auto timeout =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds));
  std::optional<Clock::time_point> none_since;  // no trainer connection open since
  while (busy_since_ && Clock::now() < *busy_since_ + timeout) {
    if (cancelled()) return std::nullopt;
    auto in = receive(kSliceMs);
    // Every connection closed (the trainer crashed or was stopped mid-request): a restarted one
    // gets a second to say Hello (and is sent the request), else the request fails at once.
    if (connections_ > 0) {
      none_since.reset();
    } else if (!none_since) {
      none_since = Clock::now();
    } else if (Clock::now() - *none_since > std::chrono::duration<double>(kReconnectSeconds)) {
      return noTrainer(request);
    }
    if (!in) continue;
    if (in->env.has_hello()) {
      // A restarted trainer (another connection) takes over: the request goes to it again. The
      // same connection's Hello again is a refresh: the request is still its to answer.
      const bool refresh = isRefresh(in->peer);
      if (onHello(in->peer, in->env) && !refresh && !sendFit(request)) return noTrainer(request);
      continue;
    }
    const bool current = in->peer == peer_;
    if (current && in->env.has_error()) {
      busy_since_.reset();
      return failed(request, "the trainer refused the request: " + in->env.error().text(),
                    &ExternalTrainerCounters::trainer_errors);
    }
    if (current && in->env.has_result() && in->env.result().id() == request.id) {
      busy_since_.reset();
      return takeResult(request, *in);
    }
    takeStray(*in);
    // An answer to an earlier request: the trainer is on to this one now.
    if (current && in->env.has_result()) busy_since_ = Clock::now();
  }
  // Said once per timeout: the next request's time runs from now (the trainer may still be busy).
  busy_since_ = Clock::now();
  return failed(request, fmt::format("the trainer did not answer within {:g} s", timeout_seconds),
                &ExternalTrainerCounters::timeouts);
}

}  // namespace tern::worker
