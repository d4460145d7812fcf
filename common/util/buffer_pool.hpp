#pragma once
// Byte buffers recycled between rounds: a buffer shared with sends on other threads returns to
// its pool when its last holder lets go, and the next take() refills it instead of allocating
// (the coordinator's encoded update, docs/performance.md). Thread-safe: a buffer may come back
// from any thread (libzmq's I/O thread, once the frame is on the wire).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace tern {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // keep: how many returned buffers are held for reuse (more are freed).
  static std::shared_ptr<BufferPool> make(size_t keep = 2);
  // An empty buffer, with the capacity of a returned one when there is one.
  std::vector<uint8_t> take();
  // Shares `bytes`: when the last copy of the pointer is gone they come back to this pool.
  std::shared_ptr<const std::vector<uint8_t>> share(std::vector<uint8_t> bytes);
  size_t held() const;  // returned buffers waiting for reuse

 private:
  explicit BufferPool(size_t keep) : keep_(keep) {}
  void giveBack(std::vector<uint8_t>* bytes);

  size_t keep_;
  mutable std::mutex mu_;
  std::vector<std::vector<uint8_t>> free_;
};

}  // namespace tern
