#pragma once
// Prometheus metrics of a daemon, kept in prometheus-cpp's core registry and rendered with its
// text serializer (the exposition format scraped from /metrics). The event loop sets values;
// the HTTP thread only calls scrape(): prometheus-cpp's metrics and families lock internally, and
// this wrapper's own lookup tables are touched by the setting thread alone.
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tern::telemetry {

using Labels = std::map<std::string, std::string>;

class MetricsRegistry {
 public:
  MetricsRegistry();

  // The first call for a name registers the family with its help text; later calls reuse it.
  void setGauge(const std::string& name, const std::string& help, const Labels& labels,
                double value);
  // Counters mirror cumulative totals kept elsewhere (the cores count; we export): the counter
  // is advanced to `total`. A total below the exported value (a restarted source) is ignored,
  // since Prometheus counters never decrease.
  void setCounterTotal(const std::string& name, const std::string& help, const Labels& labels,
                       double total);
  void observe(const std::string& name, const std::string& help, const std::vector<double>& buckets,
               double value);

  // Drops the series with exactly these labels from every gauge and counter family (a worker
  // that is no longer listed, or that now has another id), so scrapes stop showing stale values.
  void removeSeries(const Labels& labels);
  // Drops one gauge series (a value that has become unknown), if it is there.
  void removeGauge(const std::string& name, const Labels& labels);

  // Prometheus text exposition format 0.0.4. Safe to call from any thread.
  std::string scrape() const;

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> gauges_;
  std::map<std::string, prometheus::Family<prometheus::Counter>*> counters_;
  std::map<std::string, prometheus::Histogram*> histograms_;
  // Exported total per (name, labels): increments are computed from exact integers.
  std::map<std::pair<std::string, Labels>, double> exported_;
};

}  // namespace tern::telemetry
