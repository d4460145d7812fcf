#include "common/transport/frame_guard.hpp"

#include "common/transport/splice_pipe.hpp"

// clang-format off
// Boost 1.74's asio uses std::exchange without including <utility> (fixed in later releases).
#include <utility>
#include <boost/asio.hpp>
// clang-format on

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

namespace tern::transport {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using unix_stream = asio::local::stream_protocol;
using boost::system::error_code;

struct FrameGuard::State {
  explicit State(const FrameGuardOptions& o) : opts(o) {}
  // Relay buffers' bytes above their first size (the guard's thread only); before io, so that
  // links destroyed with io's handlers still find it.
  size_t grown = 0;
  std::atomic<uint64_t> pipes{0};  // held by links now; before io, like grown
  size_t links = 0;                // relayed now (the guard's thread only); before io, like grown
  asio::io_context io;             // destroyed after everything that runs on it
  tcp::acceptor acceptor{io};
  asio::steady_timer retry{io};
  unix_stream::endpoint inside;
  FrameGuardOptions opts;
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> refused{0};
  std::atomic<uint64_t> over_limit{0};
  mutable std::mutex mu;
  std::string last_refusal;
  std::thread thread;
};

namespace {

// Counts a connection closed by the guard and keeps `reason` with the peer's address as the
// latest refusal.
void noteRefusal(FrameGuard::State& st, const tcp::socket& s, const std::string& reason) {
  error_code ec;
  const auto peer = s.remote_endpoint(ec);
  const std::string who =
      ec ? std::string("a peer") : peer.address().to_string() + ":" + std::to_string(peer.port());
  ++st.refused;
  std::lock_guard lock(st.mu);
  st.last_refusal = reason + " (from " + who + ")";
}

// One direction's buffer: starts small, doubles while reads keep filling it (a large message)
// as long as the guard's growth budget allows; it keeps its size (no churn of large blocks).
class RelayBuffer {
 public:
  RelayBuffer(size_t size, size_t max, size_t& grown, size_t budget)
      : first_(size),
        size_(size),
        max_(std::max(size, max)),
        grown_(grown),
        budget_(budget),
        bytes_(new uint8_t[size]) {}
  ~RelayBuffer() { grown_ -= size_ - first_; }
  RelayBuffer(const RelayBuffer&) = delete;
  RelayBuffer& operator=(const RelayBuffer&) = delete;
  uint8_t* data() { return bytes_.get(); }
  size_t size() const { return size_; }
  // Back to its first size, its growth returned to the budget (a pipe carries the direction now).
  void shrink() {
    if (size_ != first_) resize(first_);
    full_reads_ = 0;
  }
  // After a read of n bytes (before the next read).
  void noteRead(size_t n) {
    full_reads_ = n == size_ ? full_reads_ + 1 : 0;
    if (full_reads_ < kFullReads || size_ >= max_) return;
    full_reads_ = 0;
    const size_t next = std::min(max_, size_ * 2);
    if (grown_ + (next - size_) <= budget_) resize(next);
  }

 private:
  static constexpr int kFullReads = 4;
  void resize(size_t size) {
    grown_ = grown_ + size - size_;
    size_ = size;
    bytes_.reset(new uint8_t[size_]);  // left uninitialized, like the first
  }
  size_t first_, size_, max_;
  size_t& grown_;  // the guard's bytes above its buffers' first sizes
  size_t budget_;
  int full_reads_ = 0;
  std::unique_ptr<uint8_t[]> bytes_;
};

// One relayed connection: outside (the peer, scanned) <-> inside (the ROUTER's private socket).
// Large frames' bodies, and a down direction that streams, move through a kernel pipe with
// splice(2) (no copy through the guard) once the growth budget gives the link one.
class Link : public std::enable_shared_from_this<Link> {
 public:
  Link(FrameGuard::State& st, tcp::socket outside)
      : st_(st),
        outside_(std::move(outside)),
        inside_(st.io),
        scanner_(st.opts.limits),
        up_(st.opts.buffer_bytes, st.opts.max_buffer_bytes, st.grown, st.opts.growth_budget_bytes),
        down_(st.opts.buffer_bytes, st.opts.max_buffer_bytes, st.grown,
              st.opts.growth_budget_bytes),
        pipe_size_(st.opts.max_buffer_bytes),
        budget_(st.opts.growth_budget_bytes) {
    ++st_.links;
  }
  ~Link() {
    releasePipe(up_pipe_);
    releasePipe(down_pipe_);
    --st_.links;
  }

  void start() {
    auto self = shared_from_this();
    inside_.async_connect(st_.inside, [self](error_code ec) {
      if (ec) return self->close();
      error_code ignored;  // splice needs both sockets non-blocking; asio's own calls expect it
      self->outside_.native_non_blocking(true, ignored);
      self->inside_.native_non_blocking(true, ignored);
      self->pumpUp();
      self->pumpDown();
    });
  }

 private:
  // A frame body at least this long goes through the pipe, when the link has one.
  static constexpr uint64_t kSpliceBodyBytes = 64 << 10;
  // Pipe fills in a row before a spliced direction lets the other links have the thread.
  static constexpr int kTurns = 16;

  // Peer -> ROUTER: each chunk is scanned before it is passed on; a refusal closes both sides.
  void pumpUp() {
    if (up_pipe_ && scanner_.bodyLeft() >= kSpliceBodyBytes) return spliceUp();
    auto self = shared_from_this();
    outside_.async_read_some(asio::buffer(up_.data(), up_.size()), [self](error_code ec, size_t n) {
      if (ec) return self->close();
      if (!self->scanner_.feed(std::span<const uint8_t>(self->up_.data(), n))) {
        return self->refuse();
      }
      asio::async_write(self->inside_, asio::buffer(self->up_.data(), n),
                        [self, n](error_code wec, size_t) {
                          if (wec) return self->close();
                          self->noteUpRead(n);
                          self->pumpUp();
                        });
    });
  }

  // A read that filled the buffer inside a body of kSpliceBodyBytes or more still to come: the
  // peer is streaming a large frame, whose rest goes through a pipe when the link can have one
  // (a header alone, claiming a large body, gets none).
  void noteUpRead(size_t n) {
    const bool streams = n == up_.size() && scanner_.bodyLeft() >= kSpliceBodyBytes;
    up_.noteRead(n);
    if (streams) havePipe(up_pipe_);
  }

  // The rest of a large frame's body (never past it: the next header is scanned) via the pipe,
  // tried at once and waited for only when the peer has sent nothing more yet.
  void spliceUp() {
    auto self = shared_from_this();
    for (int turn = 0; turn < kTurns; ++turn) {
      if (scanner_.bodyLeft() < kSpliceBodyBytes) {
        releasePipe(up_pipe_);  // the frame's end: the next large one must stream again
        return pumpUp();
      }
      const auto m = up_pipe_->fill(outside_.native_handle(), scanner_.bodyLeft());
      if (m.status == SplicePipe::Status::kAgain) {
        return waitFor(outside_, tcp::socket::wait_read, [self] { self->spliceUp(); });
      }
      if (m.status != SplicePipe::Status::kMoved) return close();
      scanner_.passBody(m.bytes);
      if (!drained(up_pipe_, inside_, [self] { self->spliceUp(); })) return;
    }
    asio::post(st_.io, [self] { self->spliceUp(); });  // the other links' turn
  }

  // ROUTER -> peer, as it comes.
  void pumpDown() {
    if (down_pipe_) return spliceDown();
    auto self = shared_from_this();
    inside_.async_read_some(asio::buffer(down_.data(), down_.size()),
                            [self](error_code ec, size_t n) {
                              if (ec) return self->close();
                              asio::async_write(self->outside_, asio::buffer(self->down_.data(), n),
                                                [self, n](error_code wec, size_t) {
                                                  if (wec) return self->close();
                                                  self->noteDownRead(n);
                                                  self->pumpDown();
                                                });
                            });
  }

  // A read of kSpliceBodyBytes or more that filled the buffer: large messages stream down; they
  // go through the pipe from now on when the link can have one.
  void noteDownRead(size_t n) {
    const bool streams = n >= kSpliceBodyBytes && n == down_.size();
    down_.noteRead(n);
    if (streams && havePipe(down_pipe_)) down_.shrink();
  }

  void spliceDown() {
    auto self = shared_from_this();
    for (int turn = 0; turn < kTurns; ++turn) {
      const auto m = down_pipe_->fill(inside_.native_handle(), SIZE_MAX);
      if (m.status == SplicePipe::Status::kAgain) {
        return waitFor(inside_, unix_stream::socket::wait_read, [self] { self->spliceDown(); });
      }
      if (m.status != SplicePipe::Status::kMoved) return close();
      if (!drained(down_pipe_, outside_, [self] { self->spliceDown(); })) return;
    }
    asio::post(st_.io, [self] { self->spliceDown(); });
  }

  // Runs `then` once `s` is ready for `what` (closes the link on an error).
  template <class Socket, class Then>
  void waitFor(Socket& s, typename Socket::wait_type what, Then then) {
    s.async_wait(what, [self = shared_from_this(), then](error_code ec) {
      if (ec) return self->close();
      then();
    });
  }

  // Empties `pipe` into `to`: true when it is empty now; false when the link closed or `to` is
  // full, in which case the rest goes once it has room, and then `next`.
  template <class Socket, class Next>
  bool drained(std::unique_ptr<SplicePipe>& pipe, Socket& to, Next next) {
    const auto m = pipe->drain(to.native_handle());
    if (m.status == SplicePipe::Status::kFailed) {
      close();
      return false;
    }
    if (pipe->held() == 0) return true;
    waitFor(to, Socket::wait_write, [self = shared_from_this(), &pipe, &to, next] {
      if (self->drained(pipe, to, next)) next();
    });
    return false;
  }

  // What a pipe counts in the guard's growth budget: at least the size asked for, whatever the
  // kernel gave (it may round up, or keep its default when the system's limit is reached).
  size_t chargeOf(const SplicePipe& pipe) const { return std::max(pipe_size_, pipe.capacity()); }

  // True when `pipe` exists or could be made within the guard's growth budget.
  bool havePipe(std::unique_ptr<SplicePipe>& pipe) {
    if (pipe) return true;
    if (st_.grown + pipe_size_ > budget_)
      return false;  // no system calls for a pipe it cannot keep
    auto made = std::make_unique<SplicePipe>(pipe_size_);
    if (!made->valid() || st_.grown + chargeOf(*made) > budget_) return false;
    st_.grown += chargeOf(*made);
    ++st_.pipes;
    pipe = std::move(made);
    return true;
  }

  // Closes an empty pipe and gives its share of the budget back.
  void releasePipe(std::unique_ptr<SplicePipe>& pipe) {
    if (!pipe) return;
    st_.grown -= chargeOf(*pipe);
    --st_.pipes;
    pipe.reset();
  }

  void refuse() {
    noteRefusal(st_, outside_, scanner_.reason());
    close();
  }

  // Idempotent; the other side's pending operation then ends with an error and calls it again.
  void close() {
    error_code ignored;
    outside_.close(ignored);
    inside_.close(ignored);
  }

  FrameGuard::State& st_;
  tcp::socket outside_;
  unix_stream::socket inside_;
  ZmtpScanner scanner_;
  // Left uninitialized: a page costs memory only once a read reaches it (small messages: one).
  RelayBuffer up_;
  RelayBuffer down_;
  std::unique_ptr<SplicePipe> up_pipe_;
  std::unique_ptr<SplicePipe> down_pipe_;
  // Kept here: a link may outlive the options (destroyed with the io_context's handlers).
  const size_t pipe_size_;
  const size_t budget_;
};

// The socket options libzmq gives its own TCP connections (channel.cpp): no Nagle delay, and
// the kernel's keepalive after a minute of quiet.
void tuneSocket(tcp::socket& s) {
  error_code ignored;
  s.set_option(tcp::no_delay(true), ignored);
  s.set_option(asio::socket_base::keep_alive(true), ignored);
  const int idle = 60, interval = 10;
  ::setsockopt(s.native_handle(), IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(s.native_handle(), IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
}

// Closes a connection accepted past max_connections, before it costs libzmq a descriptor.
void refuseOverLimit(FrameGuard::State& st, tcp::socket& s) {
  ++st.over_limit;
  noteRefusal(
      st, s,
      "too_many_connections: " + std::to_string(st.opts.max_connections) + " relayed already");
  error_code ignored;
  s.close(ignored);
}

void acceptNext(FrameGuard::State& st) {
  st.acceptor.async_accept([&st](error_code ec, tcp::socket s) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of descriptors or memory: try again shortly instead of spinning on the error.
      st.retry.expires_after(std::chrono::milliseconds(100));
      st.retry.async_wait([&st](error_code wec) {
        if (!wec) acceptNext(st);
      });
      return;
    }
    if (st.opts.max_connections > 0 && st.links >= st.opts.max_connections) {
      refuseOverLimit(st, s);
    } else {
      tuneSocket(s);
      ++st.accepted;
      std::make_shared<Link>(st, std::move(s))->start();
    }
    acceptNext(st);
  });
}

struct HostPort {
  std::string host;
  std::string port;
};

HostPort splitTcpEndpoint(const std::string& endpoint) {
  const std::string scheme = "tcp://";
  const auto colon = endpoint.rfind(':');
  if (endpoint.rfind(scheme, 0) != 0 || colon == std::string::npos || colon < scheme.size()) {
    throw std::runtime_error("not a tcp://HOST:PORT endpoint: " + endpoint);
  }
  HostPort hp{endpoint.substr(scheme.size(), colon - scheme.size()), endpoint.substr(colon + 1)};
  if (hp.host.size() >= 2 && hp.host.front() == '[' && hp.host.back() == ']') {
    hp.host = hp.host.substr(1, hp.host.size() - 2);
  }
  if (hp.port == "*") hp.port = "0";
  return hp;
}

tcp::endpoint resolveListen(asio::io_context& io, const std::string& endpoint) {
  const HostPort hp = splitTcpEndpoint(endpoint);
  unsigned long port = 0;
  try {
    size_t used = 0;
    port = std::stoul(hp.port, &used);
    if (used != hp.port.size() || port > 65535) throw std::invalid_argument(hp.port);
  } catch (const std::exception&) {
    throw std::runtime_error("not a port number in " + endpoint);
  }
  if (hp.host == "*") return {asio::ip::address_v4::any(), uint16_t(port)};
  error_code ec;
  const auto address = asio::ip::make_address(hp.host, ec);
  if (!ec) return {address, uint16_t(port)};
  tcp::resolver resolver(io);
  auto results = resolver.resolve(hp.host, hp.port, ec);
  if (ec || results.empty()) {
    throw std::runtime_error("cannot resolve " + hp.host + " in " + endpoint + ": " +
                             (ec ? ec.message() : std::string("no address")));
  }
  return results.begin()->endpoint();
}

std::string endpointText(const tcp::endpoint& ep) {
  const auto a = ep.address();
  const std::string host = a.is_v6() ? "[" + a.to_string() + "]" : a.to_string();
  return "tcp://" + host + ":" + std::to_string(ep.port());
}

}  // namespace

FrameGuard::FrameGuard(const FrameGuardOptions& options)
    : state_(std::make_shared<State>(options)) {}

FrameGuard::~FrameGuard() {
  if (!state_->thread.joinable()) return;
  asio::post(state_->io, [st = state_.get()] {
    error_code ignored;
    st->acceptor.close(ignored);
    st->retry.cancel();
    st->io.stop();
  });
  state_->thread.join();
}

std::string FrameGuard::start(const std::string& endpoint, const std::string& inside) {
  const std::string ipc = "ipc://";
  if (inside.rfind(ipc, 0) != 0) throw std::runtime_error("not an ipc:// endpoint: " + inside);
  State& st = *state_;
  const std::string path = inside.substr(ipc.size());
  st.inside = unix_stream::endpoint(path[0] == '@' ? std::string(1, '\0') + path.substr(1) : path);
  const tcp::endpoint listen_at = resolveListen(st.io, endpoint);
  try {
    st.acceptor.open(listen_at.protocol());
    st.acceptor.set_option(tcp::acceptor::reuse_address(true));
    st.acceptor.bind(listen_at);
    st.acceptor.listen(asio::socket_base::max_listen_connections);
  } catch (const boost::system::system_error& e) {
    throw std::runtime_error("cannot listen on " + endpoint + ": " + e.code().message());
  }
  const std::string bound = endpointText(st.acceptor.local_endpoint());
  acceptNext(st);
  st.thread = std::thread([&st] {
    // splice(2) into a connection its peer has reset raises SIGPIPE (it has no MSG_NOSIGNAL),
    // whose default would end the process: this thread never takes it; the call fails instead.
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
    st.io.run();
  });
  return bound;
}

FrameGuard::Counts FrameGuard::counts() const {
  return {state_->accepted.load(), state_->refused.load(), state_->pipes.load(),
          state_->over_limit.load()};
}

size_t mostPipes(const FrameGuardOptions& o) {
  return o.max_buffer_bytes > 0 ? o.growth_budget_bytes / o.max_buffer_bytes : 0;
}

size_t connectionsWithin(uint64_t descriptors, const FrameGuardOptions& o, uint64_t reserve) {
  const uint64_t fixed = reserve + 2 * uint64_t(mostPipes(o));
  return descriptors > fixed + 3 ? size_t((descriptors - fixed) / 3) : 1;
}

std::string FrameGuard::lastRefusal() const {
  std::lock_guard lock(state_->mu);
  return state_->last_refusal;
}

}  // namespace tern::transport
