#pragma once
// Reading one data source section (data, test_data, train_data) of a configuration: the keys its
// format reads, refused when the format would ignore them, and checked against the generators'
// budgets and the train/test split.
#include "common/config/yaml_reader.hpp"
#include "common/ml/data_source.hpp"

namespace tern::config {

// Reads the section `m` into d for `split`; fails at the offending key's position.
void readDataSource(MapReader& m, ml::DataSource& d, ml::DataSource::Split split);

}  // namespace tern::config
