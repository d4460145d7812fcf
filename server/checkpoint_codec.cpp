#include "server/checkpoint_codec.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <span>
#include <stdexcept>
#include <string_view>

#include "common/util/checksum.hpp"
#include "common/util/printable.hpp"
#include "model_spec.hpp"
#include "server/link_checks.hpp"

namespace tern::server {
namespace {

// The protobuf message's own layout number (wire::Checkpoint.format).
constexpr uint32_t kCheckpointFormat = 1;

// The file around it (docs/reliability.md): magic, file format, body length, body, and an FNV-1a
// checksum of every byte before it. Any one changed byte, and any cut, is refused.
constexpr char kMagic[8] = {'T', 'E', 'R', 'N', 'C', 'K', 'P', 'T'};
constexpr size_t kHeaderBytes = sizeof kMagic + 4 + 8;
constexpr size_t kTrailerBytes = 8;

void putLittleEndian(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char((v >> (8 * i)) & 0xFFu));
}

uint64_t getLittleEndian(std::string_view in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(in[at + size_t(i)])) << (8 * i);
  return v;
}

uint64_t fileChecksum(std::string_view bytes) {
  uint64_t h = kFnvOffset;
  for (char c : bytes) h = fnv1a(h, uint8_t(c), 1);
  return h;
}

// Bytes without the header: a format 1 checkpoint (a bare message) is named as such.
[[noreturn]] void refuseHeaderless(std::string_view bytes) {
  wire::Checkpoint old;
  if (old.ParseFromArray(bytes.data(), int(std::min<size_t>(bytes.size(), INT32_MAX))) &&
      old.format() == 1 && old.has_model()) {
    throw std::runtime_error(
        "checkpoint is of file format 1 (written by an earlier release, without a whole-file "
        "checksum); this release reads format " +
        std::to_string(kCheckpointFileFormat) +
        " only: resume it with the earlier release, or "
        "remove it to start again");
  }
  throw std::runtime_error(
      "checkpoint does not start with the tern checkpoint header (damaged, "
      "or not a checkpoint)");
}

std::string floatBytes(const std::vector<float>& v) {
  auto b = floatsToBytes(v);
  return std::string(b.begin(), b.end());
}

// Parses fp32 bytes into exactly n finite values; a checkpoint holding anything else is damaged.
std::vector<float> checkpointFloats(const std::string& bytes, size_t n, const char* what) {
  std::vector<float> out(n);
  std::span<const uint8_t> raw(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  if (!bytesToFloats(raw, out)) {
    throw std::runtime_error(std::string("checkpoint ") + what + " has " +
                             std::to_string(bytes.size()) + " bytes, expected " +
                             std::to_string(n * sizeof(float)));
  }
  for (float x : out) {
    if (!std::isfinite(x)) {
      throw std::runtime_error(std::string("checkpoint ") + what + " holds a non-finite value");
    }
  }
  return out;
}

void putPrice(const allocation::PushPrice& p, wire::PushPrice* out) {
  out->set_fixed_bytes(p.per_push);
  out->set_bytes_per_coordinate(p.per_coordinate);
}

// A measured push price: finite, and some bytes per coordinate (every allocator divides by them).
allocation::PushPrice takePrice(const wire::PushPrice& p, const std::string& whose) {
  if (!std::isfinite(p.fixed_bytes()) || p.fixed_bytes() < 0.0 ||
      !std::isfinite(p.bytes_per_coordinate()) || !(p.bytes_per_coordinate() > 0.0)) {
    throw std::runtime_error("checkpoint holds an invalid push price for " + whose + " (" +
                             std::to_string(p.fixed_bytes()) + " bytes a push, " +
                             std::to_string(p.bytes_per_coordinate()) + " a coordinate)");
  }
  return {p.fixed_bytes(), p.bytes_per_coordinate()};
}

void putWorker(const Worker& w, wire::CheckpointWorker* cw) {
  cw->set_id(w.rec.id);
  cw->set_name(w.rec.name);
  cw->set_samples(w.samples);
  cw->set_cap(w.rec.cap);
  cw->set_threshold(w.rec.threshold);
  cw->set_share(w.rec.share);
  *cw->mutable_link() = w.rec.link;
  cw->set_upload_bytes(w.rec.upload_bytes);
  cw->set_download_bytes(w.rec.download_bytes);
  cw->set_instance(w.instance);
  cw->set_missed_in_row(w.rec.missed_in_row);
  cw->set_benched(w.rec.benched);
  cw->set_probe_round(w.rec.probe_round);
  cw->set_pushes_clipped(w.rec.pushes_clipped);
  if (w.push_price) putPrice(*w.push_price, cw->mutable_push_price());
}

// A checkpoint's worker (not alive: it re-joins by name); its link dropped if no link has it.
Worker takeWorker(const wire::CheckpointWorker& cw, size_t max_message_bytes) {
  Worker w;
  w.rec.id = cw.id();
  w.rec.name = cw.name();
  w.rec.cap = cw.cap();
  w.rec.threshold = cw.threshold();
  w.rec.share = cw.share();
  if (const char* why = invalidLinkModel(cw.link(), max_message_bytes)) {
    spdlog::warn("checkpoint's link model of worker {} dropped: {}", printable(cw.name()), why);
  } else {
    w.rec.link = cw.link();
  }
  w.rec.upload_bytes = cw.upload_bytes();
  w.rec.download_bytes = cw.download_bytes();
  w.samples = cw.samples();
  w.instance = cw.instance();
  w.rec.missed_in_row = cw.missed_in_row();
  w.rec.benched = cw.benched();
  w.rec.probe_round = cw.probe_round();
  w.rec.pushes_clipped = cw.pushes_clipped();
  if (cw.has_push_price()) w.push_price = takePrice(cw.push_price(), "worker " + cw.name());
  return w;
}

void putCounters(const Counters& n, wire::Checkpoint& c) {
  c.set_upload_bytes(n.upload_bytes);
  c.set_download_bytes(n.download_bytes);
  c.set_full_bytes(n.full_bytes);
  c.set_late_pushes(n.late_pushes);
  c.set_pushes_asked_again(n.pushes_asked_again);
  c.set_push_reports_unusable(n.push_reports_unusable);
  c.set_steps_refused(n.steps_refused);
  c.set_pushes_clipped(n.pushes_clipped);
  c.set_workers_benched(n.benched);
  c.set_evaluations_unusable(n.evaluations_unusable);
  for (const auto& [reason, count] : n.rejections) {
    auto* r = c.add_rejections();
    r->set_reason(reason);
    r->set_count(count);
  }
}

Counters takeCounters(const wire::Checkpoint& c) {
  Counters n;
  n.upload_bytes = c.upload_bytes();
  n.download_bytes = c.download_bytes();
  n.full_bytes = c.full_bytes();
  n.late_pushes = c.late_pushes();
  n.pushes_asked_again = c.pushes_asked_again();
  n.push_reports_unusable = c.push_reports_unusable();
  n.steps_refused = c.steps_refused();
  n.pushes_clipped = c.pushes_clipped();
  n.benched = c.workers_benched();
  n.evaluations_unusable = c.evaluations_unusable();
  for (const auto& r : c.rejections()) n.rejections[r.reason()] = r.count();
  return n;
}

wire::Checkpoint parse(const std::string& body) {
  wire::Checkpoint c;
  if (!c.ParseFromString(body)) throw std::runtime_error("checkpoint does not parse");
  if (c.format() != kCheckpointFormat) {
    throw std::runtime_error("checkpoint format " + std::to_string(c.format()) +
                             " is not supported (expected " + std::to_string(kCheckpointFormat) +
                             ")");
  }
  return c;
}

// "mlp, 200 features, 3 classes, 64 hidden units": what shapes a model of the kind.
std::string modelShape(const std::string& kind, uint64_t features, uint64_t classes,
                       uint64_t hidden) {
  std::string out =
      kind + ", " + std::to_string(features) + " features, " + std::to_string(classes) + " classes";
  if (kind == "mlp") out += ", " + std::to_string(hidden) + " hidden units";
  return out;
}

void checkModel(const wire::ModelSpec& got, const ml::ModelSpec& want) {
  // The hidden width only shapes an MLP; the linear models ignore it.
  if (got.kind() != want.kind || got.features() != want.features || got.classes() != want.classes ||
      (want.kind == "mlp" && got.hidden() != want.hidden)) {
    throw std::runtime_error("checkpoint holds a model of " +
                             modelShape(got.kind(), got.features(), got.classes(), got.hidden()) +
                             "; the configuration asks for " +
                             modelShape(want.kind, want.features, want.classes, want.hidden));
  }
  if (want.kind == "external" && fromWire(got.tensors()) != want.tensors) {
    throw std::runtime_error("checkpoint holds an external model of layout " +
                             ml::describeLayout(fromWire(got.tensors())) + "; the model file has " +
                             ml::describeLayout(want.tensors));
  }
}

void takeModel(const wire::Checkpoint& c, CheckpointState& s) {
  const size_t n = ml::makeModel(s.model)->numParams();
  s.parameters = checkpointFloats(c.parameters(), n, "parameters");
  if (tern::checksum(s.parameters) != c.parameters_checksum()) {
    throw std::runtime_error("checkpoint parameters do not match their checksum");
  }
  s.velocity = checkpointFloats(c.velocity(), n, "velocity");
  if (c.has_velocity_checksum() && tern::checksum(s.velocity) != c.velocity_checksum()) {
    throw std::runtime_error("checkpoint velocity does not match its checksum");
  }
  if (c.download_residual().empty()) return;
  s.download_residual = checkpointFloats(c.download_residual(), n, "download residual");
  if (tern::checksum(s.download_residual) != c.download_residual_checksum()) {
    throw std::runtime_error("checkpoint download residual does not match its checksum");
  }
}

void takeWorkers(const wire::Checkpoint& c, size_t max_message_bytes, CheckpointState& s) {
  std::set<std::string> names;
  std::set<uint32_t> ids;
  for (const auto& cw : c.workers()) {
    if (cw.id() >= c.next_worker_id() || !ids.insert(cw.id()).second || cw.name().empty() ||
        cw.samples() == 0) {
      throw std::runtime_error("checkpoint has an invalid or repeated worker entry (id " +
                               std::to_string(cw.id()) + ")");
    }
    // A name a join would refuse is forgotten (it joins afresh), the rest of the run restored.
    if (std::string why = config::workerNameProblem(cw.name()); !why.empty()) {
      spdlog::warn(
          "checkpoint names worker {} {}, which a join would refuse (the name {}): "
          "forgotten",
          cw.id(), printable(cw.name()), why);
      ids.erase(cw.id());
      continue;
    }
    if (!names.insert(cw.name()).second) {
      throw std::runtime_error("checkpoint names worker " + printable(cw.name()) + " twice");
    }
    s.workers[cw.id()] = takeWorker(cw, max_message_bytes);
  }
}

}  // namespace

std::string sealCheckpoint(const std::string& body) {
  std::string out(kMagic, sizeof kMagic);
  out.reserve(kHeaderBytes + body.size() + kTrailerBytes);
  putLittleEndian(out, kCheckpointFileFormat, 4);
  putLittleEndian(out, body.size(), 8);
  out += body;
  putLittleEndian(out, fileChecksum(out), 8);
  return out;
}

std::string unsealCheckpoint(const std::string& bytes) {
  // An empty file (a disk filled as it was written) says so.
  if (bytes.empty()) throw std::runtime_error("checkpoint is empty (damaged)");
  const std::string_view all(bytes);
  if (all.size() < sizeof kMagic || all.substr(0, sizeof kMagic) != std::string_view(kMagic, 8))
    refuseHeaderless(all);
  if (all.size() < kHeaderBytes + kTrailerBytes)
    throw std::runtime_error("checkpoint is cut short (" + std::to_string(all.size()) + " bytes)");
  const uint64_t format = getLittleEndian(all, sizeof kMagic, 4);
  const uint64_t length = getLittleEndian(all, sizeof kMagic + 4, 8);
  const size_t covered = all.size() - kTrailerBytes;
  if (fileChecksum(all.substr(0, covered)) != getLittleEndian(all, covered, 8)) {
    // A cut file fails here too; its length field says by how much.
    throw std::runtime_error("checkpoint does not match its whole-file checksum (damaged" +
                             std::string(length != covered - kHeaderBytes ? ", or cut short" : "") +
                             ")");
  }
  if (format != kCheckpointFileFormat) {
    throw std::runtime_error("checkpoint is of file format " + std::to_string(format) +
                             "; this release reads format " +
                             std::to_string(kCheckpointFileFormat) + " only");
  }
  if (length != covered - kHeaderBytes)
    throw std::runtime_error("checkpoint's length field does not match its size");
  return std::string(all.substr(kHeaderBytes, length));
}

size_t checkpointSizeLimit(const ml::ModelSpec& model) {
  return 3 * sizeof(float) * ml::makeModel(model)->numParams() + kCheckpointOverheadLimit;
}

std::string encodeCheckpoint(const CheckpointState& s) {
  wire::Checkpoint c;
  c.set_format(kCheckpointFormat);
  c.set_session(s.session);
  c.set_round(s.round);
  *c.mutable_model() = toWire(s.model);
  c.set_training_seed(s.training_seed);
  c.set_parameters(floatBytes(s.parameters));
  c.set_velocity(floatBytes(s.velocity));
  c.set_parameters_checksum(tern::checksum(s.parameters));
  c.set_velocity_checksum(tern::checksum(s.velocity));
  if (!s.download_residual.empty()) {
    c.set_download_residual(floatBytes(s.download_residual));
    c.set_download_residual_checksum(tern::checksum(s.download_residual));
  }
  c.set_next_worker_id(s.next_worker_id);
  for (const auto& [id, w] : s.workers) putWorker(w, c.add_workers());
  if (s.mean_price) putPrice(*s.mean_price, c.mutable_push_price());
  c.set_allocation_method(s.allocation_method);
  c.set_rounds_since_alloc(s.rounds_since_plan);
  putCounters(s.counters, c);
  c.set_last_accuracy(s.last_accuracy);
  c.set_accuracy_known(s.accuracy_known);
  c.set_last_train_loss(s.last_train_loss);
  c.set_elapsed_seconds(s.elapsed_seconds);
  c.set_finished(s.finished);
  return sealCheckpoint(c.SerializeAsString());
}

CheckpointState decodeCheckpoint(const std::string& bytes, const CoordinatorOptions& options) {
  if (const size_t limit = checkpointSizeLimit(options.model); bytes.size() > limit) {
    throw std::runtime_error("checkpoint is " + std::to_string(bytes.size()) +
                             " bytes, more than a checkpoint of this model can be (" +
                             std::to_string(limit) + ")");
  }
  const wire::Checkpoint c = parse(unsealCheckpoint(bytes));
  checkModel(c.model(), options.model);
  CheckpointState s;
  s.session = c.session();
  s.round = c.round();
  s.model = options.model;
  s.training_seed = c.training_seed();
  takeModel(c, s);
  takeWorkers(c, options.max_message_bytes, s);
  if (c.has_push_price()) s.mean_price = takePrice(c.push_price(), "all workers");
  s.next_worker_id = c.next_worker_id();
  s.allocation_method = c.allocation_method();
  s.rounds_since_plan = c.rounds_since_alloc();
  s.counters = takeCounters(c);
  s.last_accuracy = c.last_accuracy();
  // Older checkpoints do not say: an accuracy above 0 after a round was measured.
  s.accuracy_known =
      c.has_accuracy_known() ? c.accuracy_known() : c.round() > 0 && c.last_accuracy() > 0.0;
  s.last_train_loss = c.last_train_loss();
  s.elapsed_seconds = c.elapsed_seconds();
  s.finished = c.finished();
  return s;
}

}  // namespace tern::server
