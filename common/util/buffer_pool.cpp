#include "common/util/buffer_pool.hpp"

namespace tern {

std::shared_ptr<BufferPool> BufferPool::make(size_t keep) {
  return std::shared_ptr<BufferPool>(new BufferPool(keep));
}

std::vector<uint8_t> BufferPool::take() {
  std::lock_guard lock(mu_);
  if (free_.empty()) return {};
  std::vector<uint8_t> bytes = std::move(free_.back());
  free_.pop_back();
  bytes.clear();
  return bytes;
}

std::shared_ptr<const std::vector<uint8_t>> BufferPool::share(std::vector<uint8_t> bytes) {
  // The deleter holds the pool, so a buffer still in flight keeps it alive.
  auto self = shared_from_this();
  return std::shared_ptr<const std::vector<uint8_t>>(
      new std::vector<uint8_t>(std::move(bytes)), [self](const std::vector<uint8_t>* p) {
        self->giveBack(const_cast<std::vector<uint8_t>*>(p));
      });
}

void BufferPool::giveBack(std::vector<uint8_t>* bytes) {
  {
    std::lock_guard lock(mu_);
    if (free_.size() < keep_) {
      free_.push_back(std::move(*bytes));
    }
  }
  delete bytes;
}

size_t BufferPool::held() const {
  std::lock_guard lock(mu_);
  return free_.size();
}

}  // namespace tern
