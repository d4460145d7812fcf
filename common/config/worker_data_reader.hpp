#pragma once
// Reading a worker's data and trainer sections: where its rows come from (a shard of one data
// set, or the device's own files), its held-out rows, and who trains (docs/python.md).
#include "common/config/settings.hpp"
#include "common/config/yaml_reader.hpp"

namespace tern::config {

// `partition: {dirichlet_alpha, volume_ratio, seed}`.
void readPartition(MapReader m, ml::PartitionSpec& p);
// The worker's `data` section (mode, the rows, eval, shard, partition); absent with an external
// trainer, which reads its own data.
void readWorkerData(MapReader& worker, WorkerSettings& s);
// `trainer: {kind: builtin|external, endpoint, timeout_seconds}`.
void readTrainer(MapReader& worker, TrainerSettings& t);

}  // namespace tern::config
