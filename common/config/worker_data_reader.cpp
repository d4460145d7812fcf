#include "common/config/worker_data_reader.hpp"

#include <arpa/inet.h>

#include <string>

#include "common/config/data_source_reader.hpp"

namespace tern::config {

void readPartition(MapReader m, ml::PartitionSpec& p) {
  p.dirichlet_alpha =
      m.inRange("dirichlet_alpha", m.get<double>("dirichlet_alpha", p.dirichlet_alpha), 0.0, 1e6);
  p.volume_ratio =
      m.inRange("volume_ratio", m.get<double>("volume_ratio", p.volume_ratio), 1.0, 1e6);
  p.seed = m.get<uint64_t>("seed", p.seed);
  m.done();
}

namespace {

// data.eval: the held-out rows, read whole (never split or sharded).
void readEvalData(MapReader& d, WorkerSettings& s) {
  if (!d.has("eval")) {
    s.eval_data.format = "";
    return;
  }
  MapReader e = d.child("eval");
  readDataSource(e, s.eval_data, ml::DataSource::Split::kTest);
  e.done();
}

}  // namespace

void readWorkerData(MapReader& m, WorkerSettings& s) {
  if (s.trainer.external()) {
    if (m.has("data")) {
      m.fail("data",
             "'data' is read by the external trainer (trainer.kind external), not by the "
             "worker: leave it out");
    }
    s.data.format = "";
    s.eval_data.format = "";
    s.data_mode = "local";
    return;
  }
  if (!m.has("data")) {
    m.failHere(
        "a worker needs 'data' (the rows it trains on: docs/configuration.md) or "
        "'trainer: {kind: external, endpoint: ...}' (a trainer that holds them: docs/python.md)");
  }
  MapReader d = m.child("data");
  s.data_mode = d.oneOf("mode", d.get<std::string>("mode", s.data_mode), {"shard", "local"});
  readDataSource(d, s.data, ml::DataSource::Split::kTrain);
  readEvalData(d, s);
  const bool local = s.data_mode == "local";
  for (const std::string key : {"shard", "partition"}) {
    if (local && d.has(key)) {
      d.fail(key, "'data." + key +
                      "' cuts a shard from a shared data set; data.mode local trains "
                      "on all of this device's rows");
    }
  }
  MapReader shard = d.child("shard");
  s.shard_total =
      shard.inRange<size_t>("total", shard.get<size_t>("total", s.shard_total), 1, kMaxWorkers);
  s.shard_index = shard.inRange<size_t>("index", shard.get<size_t>("index", s.shard_index), 0,
                                        s.shard_total - 1);
  shard.done();
  readPartition(d.child("partition"), s.partition);
  d.done();
}

namespace {

// Why `endpoint` cannot be where a worker serves its trainer, or "": the socket has no
// authentication, so a tcp:// one must be on the loopback (an address, not a host name).
std::string trainerEndpointProblem(const std::string& endpoint) {
  if (std::string why = endpointProblem(endpoint, true); !why.empty()) return why;
  if (endpoint.rfind("tcp://", 0) != 0) return "";
  const std::string host = endpoint.substr(6, endpoint.rfind(':') - 6);
  in_addr v4{};
  if (host == "[::1]" ||
      (inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127)) {
    return "";
  }
  return "must be ipc://PATH or tcp://127.0.0.1:PORT (the trainer's socket has no "
         "authentication: only the loopback), got '" +
         endpoint + "'";
}

}  // namespace

void readTrainer(MapReader& parent, TrainerSettings& t) {
  if (!parent.has("trainer")) return;
  MapReader m = parent.child("trainer");
  t.kind = m.oneOf("kind", m.get<std::string>("kind", t.kind), {"builtin", "external"});
  t.endpoint = m.get<std::string>("endpoint", t.endpoint);
  if (t.external()) {
    if (t.endpoint.empty()) m.failHere("an external trainer needs 'endpoint' (ipc://PATH)");
    if (std::string why = trainerEndpointProblem(t.endpoint); !why.empty()) {
      m.fail("endpoint", "'trainer.endpoint' " + why);
    }
  } else if (m.has("endpoint")) {
    m.fail("endpoint", "'trainer.endpoint' needs 'kind: external'");
  }
  if (m.has("timeout_seconds")) {
    t.timeout_seconds =
        m.inRange("timeout_seconds", m.get<double>("timeout_seconds", 0.0), 0.01, 86400.0);
  }
  m.done();
}

}  // namespace tern::config
