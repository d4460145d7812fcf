#include "common/telemetry/metrics_registry.hpp"

#include <prometheus/text_serializer.h>

#include <sstream>

namespace tern::telemetry {

MetricsRegistry::MetricsRegistry() : registry_(std::make_shared<prometheus::Registry>()) {}

void MetricsRegistry::setGauge(const std::string& name, const std::string& help,
                               const Labels& labels, double value) {
  auto it = gauges_.find(name);
  if (it == gauges_.end()) {
    auto& family = prometheus::BuildGauge().Name(name).Help(help).Register(*registry_);
    it = gauges_.emplace(name, &family).first;
  }
  // Family::Add returns the existing series for labels it already holds.
  it->second->Add(labels).Set(value);
}

void MetricsRegistry::removeSeries(const Labels& labels) {
  for (auto& [name, family] : gauges_) {
    if (family->Has(labels)) family->Remove(&family->Add(labels));
  }
  for (auto& [name, family] : counters_) {
    if (family->Has(labels)) family->Remove(&family->Add(labels));
    exported_.erase({name, labels});
  }
}

void MetricsRegistry::removeGauge(const std::string& name, const Labels& labels) {
  auto it = gauges_.find(name);
  if (it != gauges_.end() && it->second->Has(labels)) it->second->Remove(&it->second->Add(labels));
}

void MetricsRegistry::setCounterTotal(const std::string& name, const std::string& help,
                                      const Labels& labels, double total) {
  auto it = counters_.find(name);
  if (it == counters_.end()) {
    auto& family = prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
    it = counters_.emplace(name, &family).first;
  }
  auto& counter = it->second->Add(labels);
  double& exported = exported_[{name, labels}];
  if (total > exported) {
    counter.Increment(total - exported);
    exported = total;
  }
}

void MetricsRegistry::observe(const std::string& name, const std::string& help,
                              const std::vector<double>& buckets, double value) {
  auto it = histograms_.find(name);
  if (it == histograms_.end()) {
    auto& family = prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_);
    it = histograms_.emplace(name, &family.Add({}, buckets)).first;
  }
  it->second->Observe(value);
}

std::string MetricsRegistry::scrape() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace tern::telemetry
