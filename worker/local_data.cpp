#include "worker/local_data.hpp"

#include <algorithm>

namespace tern::worker {

LocalData localDataOf(std::shared_ptr<const ml::Dataset> shard) {
  LocalData d;
  d.rows = shard->rows();
  d.label_histogram.assign(size_t(std::max(shard->num_classes, 1)), 0);
  for (int32_t l : shard->labels) {
    if (l >= 0 && size_t(l) < d.label_histogram.size()) ++d.label_histogram[size_t(l)];
  }
  d.shard = std::move(shard);
  return d;
}

}  // namespace tern::worker
