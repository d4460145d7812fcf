#pragma once
// A worker's push as the coordinator core receives it: gradient g, identity-coded.
#include <vector>

#include "common/compression/compressor.hpp"
#include "message.hpp"
#include "proto/worker_messages.hpp"

namespace tern::testing {

inline Message identityPush(uint64_t session, uint32_t id, uint64_t round,
                            const std::vector<float>& g) {
  Message m = proto::pushMessage({session, id}, round);
  m.envelope.mutable_push()->set_local_loss(1.0);
  Rng rng(1);
  m.payload = compression::makeCompressor({"identity"})->compress(g, 0, rng).bytes;
  return m;
}

}  // namespace tern::testing
