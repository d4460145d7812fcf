#pragma once
// The messages the coordinator sends: one builder and one parser per envelope type (the heartbeat,
// sent both ways, is in worker_messages.hpp), so that the coordinator, the worker and the tests
// spell each message once. Parsers return nothing when the envelope holds another type.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "message.hpp"
#include "worker_messages.hpp"  // the heartbeat, which goes both ways

namespace tern::proto {

struct AckBody {
  uint64_t round = 0;
  uint64_t bytes_received = 0;
  double hold_seconds = 0.0;
  bool probe = false;
  uint64_t probe_id = 0;
  bool leave = false;  // answers a Leave
};

// What a refusal is about: a push of `round` (the worker takes back what it carried).
struct ErrorAbout {
  uint64_t round = 0;
  bool push = false;
  std::optional<uint64_t> session;  // the coordinator's session, for a push of another session
};

struct ErrorBody {
  wire::Error::Code code = wire::Error::CODE_UNSPECIFIED;
  std::string text;
  std::optional<ErrorAbout> about;
};

struct FinishBody {
  uint64_t round = 0;
  std::optional<double> test_accuracy;
  bool full_model = false;  // the payload is the whole model, not the last step
};

Message welcome(wire::Welcome body, Payload payload);
Message roundStart(wire::RoundStart body, Payload payload);
Message ack(const AckBody& body);
Message error(const ErrorBody& body);
Message finish(const FinishBody& body, Payload payload);

const wire::Welcome* parseWelcome(const Message& m);
const wire::RoundStart* parseRoundStart(const Message& m);
std::optional<AckBody> parseAck(const Message& m);
std::optional<ErrorBody> parseError(const Message& m);
std::optional<FinishBody> parseFinish(const Message& m);

}  // namespace tern::proto
