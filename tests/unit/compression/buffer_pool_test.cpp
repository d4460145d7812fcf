// The buffer pool behind the coordinator's encoded updates: a shared buffer comes back when its
// last holder lets go (from any thread), the next take() gets its capacity, and at most `keep`
// buffers are held.
#include "common/util/buffer_pool.hpp"

#include <doctest/doctest.h>

#include <thread>

using tern::BufferPool;

TEST_CASE("a shared buffer returns to its pool when the last holder lets go, and is reused") {
  auto pool = BufferPool::make(2);
  std::vector<uint8_t> bytes = pool->take();
  CHECK(bytes.capacity() == 0);
  bytes.assign(100000, 7);
  const uint8_t* storage = bytes.data();
  auto shared = pool->share(std::move(bytes));
  auto copy = shared;
  shared.reset();
  CHECK(pool->held() == 0);  // a copy still holds it
  copy.reset();
  CHECK(pool->held() == 1);
  std::vector<uint8_t> again = pool->take();
  CHECK(again.empty());
  CHECK(again.capacity() >= 100000);
  CHECK(again.data() == storage);  // the very buffer, no new allocation
  CHECK(pool->held() == 0);
}

TEST_CASE("a pool keeps at most `keep` buffers and outlives its buffers in flight") {
  auto pool = BufferPool::make(1);
  auto a = pool->share(std::vector<uint8_t>(10));
  auto b = pool->share(std::vector<uint8_t>(20));
  std::weak_ptr<BufferPool> alive = pool;
  pool.reset();
  CHECK_FALSE(alive.expired());  // the buffers in flight hold it
  a.reset();
  CHECK(alive.lock()->held() == 1);
  b.reset();  // over `keep`: freed, and the pool with it
  CHECK(alive.expired());
}

// Not under qemu-user (deploy/cross/build-arm64.sh): it cannot start a thread.
TEST_CASE("a buffer let go on another thread returns to its pool") {
  auto pool = BufferPool::make(2);
  auto shared = pool->share(std::vector<uint8_t>(1000, 1));
  std::thread([s = std::move(shared)]() mutable { s.reset(); }).join();
  CHECK(pool->held() == 1);
  CHECK(pool->take().capacity() >= 1000);
}
