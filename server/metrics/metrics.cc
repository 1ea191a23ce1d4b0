#include "server/metrics/metrics.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "prometheus/check_names.h"
#include "prometheus/client_metric.h"
#include "prometheus/text_serializer.h"

namespace grail {
namespace {

// What every metric family needs: a valid name, help the text format can carry unescaped, valid
// distinct label names.
absl::Status ValidateMetricFamily(absl::string_view name, absl::string_view help,
                                  const std::vector<std::string>& label_names) {
  if (!prometheus::CheckMetricName(std::string(name))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metric name \"", name, "\" is not valid: it must match [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  if (help.empty() || help.find_first_of("\\\n") != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric ", name, ": help text must be non-empty, without \\ or line breaks"));
  }
  for (size_t i = 0; i < label_names.size(); ++i) {
    if (!prometheus::CheckLabelName(label_names[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", name, ": label name \"", label_names[i],
                       "\" is not valid (it must match [a-zA-Z_][a-zA-Z0-9_]* and not start "
                       "with __)"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (label_names[j] == label_names[i]) {
        return absl::InvalidArgumentError(
            absl::StrCat("metric ", name, ": label \"", label_names[i], "\" given twice"));
      }
    }
  }
  return absl::OkStatus();
}

// A labelless metric family from a function of one value.
std::function<std::vector<ScrapedSample>()> OneSample(std::function<std::optional<double>()> read) {
  return [read = std::move(read)]() -> std::vector<ScrapedSample> {
    const std::optional<double> value = read == nullptr ? std::nullopt : read();
    if (!value.has_value()) return {};
    return {ScrapedSample{{}, *value}};
  };
}

}  // namespace

ScrapeTimeMetrics::ScrapeTimeMetrics() = default;
ScrapeTimeMetrics::~ScrapeTimeMetrics() = default;

absl::Status ScrapeTimeMetrics::AddCounter(absl::string_view name, absl::string_view help,
                                           std::function<std::optional<double>()> read) {
  return AddMetricFamily(prometheus::MetricType::Counter, name, help, {},
                         OneSample(std::move(read)));
}

absl::Status ScrapeTimeMetrics::AddGauge(absl::string_view name, absl::string_view help,
                                         std::function<std::optional<double>()> read) {
  return AddMetricFamily(prometheus::MetricType::Gauge, name, help, {}, OneSample(std::move(read)));
}

absl::Status ScrapeTimeMetrics::AddMetricFamily(prometheus::MetricType type, absl::string_view name,
                                                absl::string_view help,
                                                std::vector<std::string> label_names,
                                                std::function<std::vector<ScrapedSample>()> read) {
  if (absl::Status status = ValidateMetricFamily(name, help, label_names); !status.ok())
    return status;
  if (type != prometheus::MetricType::Counter && type != prometheus::MetricType::Gauge) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metric ", name, ": a scrape-time metric family must be a counter or a gauge"));
  }
  if (read == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("metric ", name, ": no function to read it"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const ScrapedMetric& scraped : scraped_) {
    if (scraped.name == name) {
      return absl::AlreadyExistsError(absl::StrCat("metric ", name, " is already registered"));
    }
  }
  scraped_.push_back(ScrapedMetric{std::string(name), std::string(help), type,
                                   std::move(label_names), std::move(read)});
  return absl::OkStatus();
}

std::vector<prometheus::MetricFamily> ScrapeTimeMetrics::Collect() const {
  std::vector<prometheus::MetricFamily> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const ScrapedMetric& scraped : scraped_) {
    prometheus::MetricFamily collected{scraped.name, scraped.help, scraped.type, {}};
    for (const ScrapedSample& sample : scraped.read()) {
      if (sample.label_values.size() != scraped.label_names.size()) continue;
      prometheus::ClientMetric metric;
      for (size_t i = 0; i < sample.label_values.size(); ++i) {
        metric.label.push_back({scraped.label_names[i], sample.label_values[i]});
      }
      if (scraped.type == prometheus::MetricType::Counter) {
        metric.counter.value = sample.value;
      } else {
        metric.gauge.value = sample.value;
      }
      collected.metric.push_back(std::move(metric));
    }
    if (!collected.metric.empty()) out.push_back(std::move(collected));
  }
  return out;
}

std::string RenderExposition(std::initializer_list<const prometheus::Collectable*> collectables) {
  std::vector<prometheus::MetricFamily> families;
  for (const prometheus::Collectable* collectable : collectables) {
    std::vector<prometheus::MetricFamily> some = collectable->Collect();
    families.insert(families.end(), std::make_move_iterator(some.begin()),
                    std::make_move_iterator(some.end()));
  }
  return prometheus::TextSerializer().Serialize(families);
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  if (!(start > 0) || !(factor > 1) || count < 1) {
    std::fprintf(stderr,
                 "ExponentialBuckets(%g, %g, %d): needs start > 0, factor > 1, count >= 1\n", start,
                 factor, count);
    std::abort();
  }
  std::vector<double> bounds;
  bounds.reserve(count);
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) bounds.push_back(bound);
  return bounds;
}

std::vector<double> LatencyBucketsSeconds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

std::vector<double> SizeBuckets() { return ExponentialBuckets(1, 2, 17); }

}  // namespace grail
