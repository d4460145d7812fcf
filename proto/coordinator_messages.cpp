#include "coordinator_messages.hpp"

namespace tern::proto {

Message welcome(wire::Welcome body, Payload payload) {
  Message m{makeEnvelope(), std::move(payload)};
  *m.envelope.mutable_welcome() = std::move(body);
  return m;
}

Message roundStart(wire::RoundStart body, Payload payload) {
  Message m{makeEnvelope(), std::move(payload)};
  *m.envelope.mutable_round_start() = std::move(body);
  return m;
}

Message ack(const AckBody& body) {
  Message m{makeEnvelope(), {}};
  auto* a = m.envelope.mutable_ack();
  if (body.round != 0) a->set_round(body.round);
  if (body.bytes_received != 0) a->set_bytes_received(body.bytes_received);
  if (body.hold_seconds != 0.0) a->set_hold_seconds(body.hold_seconds);
  if (body.probe) a->set_probe(true);
  if (body.probe_id != 0) a->set_probe_id(body.probe_id);
  if (body.leave) a->set_leave(true);
  return m;
}

Message error(const ErrorBody& body) {
  Message m{makeEnvelope(), {}};
  auto* e = m.envelope.mutable_error();
  e->set_code(body.code);
  e->set_text(body.text);
  if (body.about) {
    e->set_round(body.about->round);
    e->set_about_push(body.about->push);
    if (body.about->session) e->set_session(*body.about->session);
  }
  return m;
}

Message finish(const FinishBody& body, Payload payload) {
  Message m{makeEnvelope(), std::move(payload)};
  auto* f = m.envelope.mutable_finish();
  f->set_round(body.round);
  if (body.test_accuracy) f->set_test_accuracy(*body.test_accuracy);
  f->set_full_model(body.full_model);
  return m;
}

const wire::Welcome* parseWelcome(const Message& m) {
  return m.envelope.has_welcome() ? &m.envelope.welcome() : nullptr;
}

const wire::RoundStart* parseRoundStart(const Message& m) {
  return m.envelope.has_round_start() ? &m.envelope.round_start() : nullptr;
}

std::optional<AckBody> parseAck(const Message& m) {
  if (!m.envelope.has_ack()) return std::nullopt;
  const auto& a = m.envelope.ack();
  return AckBody{a.round(), a.bytes_received(), a.hold_seconds(),
                 a.probe(), a.probe_id(),       a.leave()};
}

std::optional<ErrorBody> parseError(const Message& m) {
  if (!m.envelope.has_error()) return std::nullopt;
  const auto& e = m.envelope.error();
  ErrorBody body{e.code(), e.text(), std::nullopt};
  if (e.round() != 0 || e.about_push() || e.session() != 0) {
    body.about = ErrorAbout{e.round(), e.about_push(),
                            e.session() != 0 ? std::optional<uint64_t>(e.session()) : std::nullopt};
  }
  return body;
}

std::optional<FinishBody> parseFinish(const Message& m) {
  if (!m.envelope.has_finish()) return std::nullopt;
  const auto& f = m.envelope.finish();
  return FinishBody{
      f.round(), f.has_test_accuracy() ? std::optional<double>(f.test_accuracy()) : std::nullopt};
}

}  // namespace tern::proto
