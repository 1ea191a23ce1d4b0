// Prometheus metrics on prometheus-cpp (Debian's prometheus-cpp-dev, core library only).
//
// Counters, gauges and histograms updated by the code live in a prometheus::Registry
// (prometheus::BuildCounter() ... .Register(registry), then Family::Add(labels) once per
// series, keeping the reference). What is read when Prometheus scrapes instead (graph
// sizes, what the engine holds, process CPU and memory, info gauges) lives in a
// ScrapeTimeMetrics, a prometheus::Collectable whose families call a function at every
// Collect(). RenderExposition serializes any set of collectables with prometheus-cpp's
// TextSerializer, which is what GET /metrics returns (server/metrics/metrics_http.h).
//
//   prometheus::Registry registry;
//   prometheus::Counter& ok = prometheus::BuildCounter()
//       .Name("grail_requests_total").Help("Calls finished.").Register(registry)
//       .Add({{"method", "ScoreTriplet"}, {"code", "OK"}});  // keep this reference
//   ok.Increment();
//   ScrapeTimeMetrics scraped;
//   scraped.AddGauge("grail_graph_facts", "Facts stored.", [&] { return store.facts(); });
//   std::string text = RenderExposition({&registry, &scraped});
#ifndef GRAIL_SERVER_METRICS_METRICS_H_
#define GRAIL_SERVER_METRICS_METRICS_H_

#include <functional>
#include <initializer_list>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"
#include "prometheus/metric_type.h"

namespace grail {

// One sample of a labelled scrape-time metric family: label values in the order of its label names.
struct ScrapedSample {
  std::vector<std::string> label_values;
  double value = 0;
};

// Families whose samples are computed at every scrape. Thread-safe: families may be added
// while another thread collects. A callback runs on the scraping thread, so it must be
// thread-safe and quick, and must not call back into this object.
class ScrapeTimeMetrics final : public prometheus::Collectable {
 public:
  ScrapeTimeMetrics();
  ~ScrapeTimeMetrics() override;
  ScrapeTimeMetrics(const ScrapeTimeMetrics&) = delete;
  ScrapeTimeMetrics& operator=(const ScrapeTimeMetrics&) = delete;

  // A counter or gauge without labels; `read` returning nullopt leaves the sample out of
  // that scrape (the source could not be read). Errors for every Add*: INVALID_ARGUMENT
  // for a metric or label name Prometheus does not accept (prometheus::CheckMetricName,
  // CheckLabelName), a label name given twice, or help text that is empty or holds a
  // backslash or line break (the text format would need them escaped); ALREADY_EXISTS for a
  // name added before.
  absl::Status AddCounter(absl::string_view name, absl::string_view help,
                          std::function<std::optional<double>()> read);
  absl::Status AddGauge(absl::string_view name, absl::string_view help,
                        std::function<std::optional<double>()> read);
  // The labelled form: `read` returns every sample of the metric family for this scrape; samples
  // with a different number of label values than `label_names` are left out. `type` must
  // be Counter or Gauge (INVALID_ARGUMENT otherwise).
  absl::Status AddMetricFamily(prometheus::MetricType type, absl::string_view name,
                               absl::string_view help, std::vector<std::string> label_names,
                               std::function<std::vector<ScrapedSample>()> read);

  // Calls every metric family's function; families without a sample this time are left out.
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  struct ScrapedMetric {
    std::string name;
    std::string help;
    prometheus::MetricType type;
    std::vector<std::string> label_names;
    std::function<std::vector<ScrapedSample>()> read;
  };

  mutable std::mutex mu_;
  std::vector<ScrapedMetric> scraped_;  // guarded by mu_
};

// Content-Type of RenderExposition's text.
inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// Every metric family of `collectables`, in the text exposition format 0.0.4.
std::string RenderExposition(std::initializer_list<const prometheus::Collectable*> collectables);

// Bucket upper bounds: `count` values start, start*factor, start*factor^2, ... Requires
// start > 0, factor > 1, count >= 1 (aborts otherwise: a programming error).
std::vector<double> ExponentialBuckets(double start, double factor, int count);
// Bucket upper bounds for latencies in seconds, 0.5 ms to 10 s in 1-2.5-5 steps.
std::vector<double> LatencyBucketsSeconds();
// Bucket upper bounds for sizes and counts (batch size, subgraph nodes): 1, 2, 4, ... 65536.
std::vector<double> SizeBuckets();

}  // namespace grail

#endif  // GRAIL_SERVER_METRICS_METRICS_H_
