#include "bench/transport/raw_round.hpp"

#include <chrono>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

namespace tern::bench {

namespace {

// A DEALER's routing id: "w" and its number.
std::string idOf(size_t i) {
  std::string id = std::to_string(i);
  id.insert(id.begin(), 'w');
  return id;
}

// The workers' side: N DEALERs on one thread (as tern-loadgen runs its members), each answering
// every message with `up_bytes`, until each has answered `rounds` messages.
void dealers(zmq::context_t& ctx, const std::string& endpoint, const RawPattern& p) {
  std::vector<zmq::socket_t> socks;
  std::vector<zmq::pollitem_t> items;
  for (size_t i = 0; i < p.workers; ++i) {
    socks.emplace_back(ctx, zmq::socket_type::dealer);
    socks.back().set(zmq::sockopt::routing_id, idOf(i));
    // The default linger: the last answers must reach the ROUTER after this thread is done.
    socks.back().connect(endpoint);
    socks.back().send(zmq::str_buffer("hello"), zmq::send_flags::none);
  }
  for (auto& s : socks) items.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
  std::vector<char> up(p.up_bytes, 'u');
  size_t answers = 0, total = p.workers * size_t(p.rounds + p.warmup);
  zmq::message_t in;
  while (answers < total) {
    zmq::poll(items.data(), items.size(), std::chrono::milliseconds(-1));
    for (size_t i = 0; i < socks.size(); ++i) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      while (socks[i].recv(in, zmq::recv_flags::dontwait)) {
        socks[i].send(zmq::buffer(up), zmq::send_flags::none);
        ++answers;
      }
    }
  }
}

// One round: the update to every DEALER, then one answer from each.
void round(zmq::socket_t& router, const std::vector<std::string>& ids,
           const std::vector<char>& down) {
  for (const auto& id : ids) {
    router.send(zmq::buffer(id), zmq::send_flags::sndmore);
    router.send(zmq::buffer(down), zmq::send_flags::none);
  }
  zmq::message_t from, body;
  for (size_t got = 0; got < ids.size(); ++got) {
    (void)router.recv(from);
    (void)router.recv(body);
  }
}

}  // namespace

double rawRoundMs(const RawPattern& p) {
  zmq::context_t ctx;
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.bind("tcp://127.0.0.1:*");
  std::string endpoint = router.get(zmq::sockopt::last_endpoint);
  std::thread workers([&] { dealers(ctx, endpoint, p); });
  std::vector<std::string> ids;
  zmq::message_t from, body;
  for (size_t i = 0; i < p.workers; ++i) {
    (void)router.recv(from);
    (void)router.recv(body);
    ids.push_back(from.to_string());
  }
  std::vector<char> down(p.down_bytes, 'd');
  for (int r = 0; r < p.warmup; ++r) round(router, ids, down);
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < p.rounds; ++r) round(router, ids, down);
  auto t1 = std::chrono::steady_clock::now();
  workers.join();
  return std::chrono::duration<double, std::milli>(t1 - t0).count() / std::max(1, p.rounds);
}

}  // namespace tern::bench
