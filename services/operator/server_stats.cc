#include "services/operator/server_stats.h"

#include <string>

#include <prometheus/metric_family.h>

#include "absl/strings/match.h"
#include "absl/time/clock.h"

namespace tessera::operator_api {
namespace {

v1::MetricSample* AddSample(v1::ServerStats* stats, const std::string& name, const prometheus::ClientMetric& metric,
                            double value) {
  v1::MetricSample* sample = stats->add_samples();
  sample->set_name(name);
  for (const prometheus::ClientMetric::Label& label : metric.label) (*sample->mutable_labels())[label.name] = label.value;
  sample->set_value(value);
  return sample;
}

}  // namespace

v1::ServerStats CollectServerStats(const prometheus::Registry& registry) {
  v1::ServerStats stats;
  stats.set_unix_ms(absl::ToUnixMillis(absl::Now()));
  for (const prometheus::MetricFamily& family : registry.Collect()) {
    if (!absl::StartsWith(family.name, "tessera_")) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      switch (family.type) {
        case prometheus::MetricType::Counter:
          AddSample(&stats, family.name, metric, metric.counter.value);
          break;
        case prometheus::MetricType::Gauge:
          AddSample(&stats, family.name, metric, metric.gauge.value);
          break;
        case prometheus::MetricType::Untyped:
          AddSample(&stats, family.name, metric, metric.untyped.value);
          break;
        case prometheus::MetricType::Histogram:
          AddSample(&stats, family.name + "_count", metric, static_cast<double>(metric.histogram.sample_count));
          AddSample(&stats, family.name + "_sum", metric, metric.histogram.sample_sum);
          break;
        case prometheus::MetricType::Summary:
          AddSample(&stats, family.name + "_count", metric, static_cast<double>(metric.summary.sample_count));
          AddSample(&stats, family.name + "_sum", metric, metric.summary.sample_sum);
          break;
        default:
          break;
      }
    }
  }
  return stats;
}

}  // namespace tessera::operator_api
