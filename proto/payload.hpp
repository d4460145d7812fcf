#pragma once
// A message's raw payload frame: immutable bytes behind a shared owner, so that one encoded
// update goes to every worker without a copy per worker (the transport hands the same bytes to
// each send, zero-copy), and a received frame is read where it arrived (the owner is the frame).
// Copies share the bytes; mutableData() copies them first when they are shared.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace tern {

class Payload {
 public:
  Payload() = default;
  Payload(std::vector<uint8_t> bytes) { own(std::move(bytes)); }  // NOLINT: implicit by design
  // Bytes kept alive by `owner` (a received frame, a shared vector): no copy.
  Payload(std::shared_ptr<const void> owner, std::span<const uint8_t> bytes)
      : owner_(std::move(owner)), bytes_(bytes) {}
  static Payload shared(std::shared_ptr<const std::vector<uint8_t>> bytes) {
    if (!bytes) return {};
    const std::span<const uint8_t> view(*bytes);
    return Payload(std::move(bytes), view);
  }

  const uint8_t* data() const { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }
  bool empty() const { return bytes_.empty(); }
  const uint8_t* begin() const { return bytes_.data(); }
  const uint8_t* end() const { return bytes_.data() + bytes_.size(); }
  uint8_t operator[](size_t i) const { return bytes_[i]; }
  operator std::span<const uint8_t>() const { return bytes_; }  // NOLINT: implicit by design
  std::vector<uint8_t> toVector() const { return {begin(), end()}; }
  template <class It>
  void assign(It first, It last) {
    own(std::vector<uint8_t>(first, last));
  }
  void assign(size_t n, uint8_t value) { own(std::vector<uint8_t>(n, value)); }
  // Writable bytes of this payload alone (copied first when another payload shares them).
  uint8_t* mutableData() {
    if (owner_.use_count() != 1 || !unique_vector_) own(toVector());
    return const_cast<uint8_t*>(bytes_.data());
  }
  // What keeps the bytes alive, for a send that must hold them past this payload's life.
  const std::shared_ptr<const void>& owner() const { return owner_; }

 private:
  void own(std::vector<uint8_t> bytes) {
    auto v = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
    bytes_ = std::span<const uint8_t>(*v);
    owner_ = std::move(v);
    unique_vector_ = true;
  }

  std::shared_ptr<const void> owner_;
  std::span<const uint8_t> bytes_;
  bool unique_vector_ = false;  // owner_ is a vector this payload made (safe to write when alone)
};

}  // namespace tern
