// Prometheus metrics: a registry of metric families (counters, gauges, histograms, and
// values computed at scrape time), rendered in the text exposition format 0.0.4.
//
// A family has a name, help text and label names; each distinct tuple of label values is a
// child (one time series, or one histogram). Callers look a child up once with WithLabels()
// and keep the reference: updating a child (Counter::Increment, Gauge::Set,
// Histogram::Observe) is a few atomic operations and never takes a lock. Only creating a
// new child, registering a family and rendering take a mutex.
//
//   MetricsRegistry registry;
//   CounterFamily& calls = *registry.AddCounter("grail_requests_total", "Calls finished.",
//                                               {"method", "code"}).value();
//   Counter& ok = calls.WithLabels({"ScoreTriplet", "OK"});  // cache this
//   ok.Increment();
//   HistogramFamily& latency = *registry.AddHistogram("grail_request_duration_seconds",
//       "Call latency.", LatencyBucketsSeconds(), {"method"}).value();
//   latency.WithLabels({"ScoreTriplet"}).Observe(0.0042);
//   std::string text = registry.Render();  // what GET /metrics returns
//
// Names follow the Prometheus data model: metric names match [a-zA-Z_:][a-zA-Z0-9_:]*,
// label names match [a-zA-Z_][a-zA-Z0-9_]* and must not start with "__" (reserved).
// Registration validates them and returns INVALID_ARGUMENT; misuse that can only be a
// programming error on a hot path (a negative counter increment, the wrong number of label
// values) aborts the process with a message naming the metric.
#ifndef GRAIL_SERVER_METRICS_H_
#define GRAIL_SERVER_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace grail {

template <typename Metric>
class MetricFamily;

// The family kinds, as the exposition's "# TYPE" line names them.
enum class MetricType { kCounter, kGauge, kHistogram };

// OK if `name` is a valid metric name, else INVALID_ARGUMENT saying why.
absl::Status ValidateMetricName(absl::string_view name);
// OK if `name` is a valid label name (and not reserved: "__" prefix), else INVALID_ARGUMENT.
absl::Status ValidateLabelName(absl::string_view name);

// A value that only goes up: events, bytes, seconds spent. Integer increments are
// accumulated exactly (a uint64), fractional ones in a separate double; Value() is their
// sum. Thread-safe and lock-free.
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  // Adds 1.
  void Increment() { whole_.fetch_add(1, std::memory_order_relaxed); }
  // Adds `n` exactly. A negative `n` aborts (counters never go down).
  template <typename Int, std::enable_if_t<std::is_integral<Int>::value, int> = 0>
  void Increment(Int n) {
    if constexpr (std::is_signed<Int>::value) {
      if (n < 0) DieNegative(static_cast<double>(n));
    }
    whole_.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
  }
  // Adds `delta`. A negative or NaN `delta` aborts.
  void Increment(double delta);

  // The total so far.
  double Value() const;

 private:
  friend class MetricFamily<Counter>;
  [[noreturn]] static void DieNegative(double delta);
  // The exposition's value: exact digits while only integers were added.
  std::string FormatValue() const;

  std::atomic<uint64_t> whole_{0};
  std::atomic<double> fraction_{0.0};
};

// A value that goes up and down: sizes, queue lengths, flags. Thread-safe and lock-free.
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  // Adds `delta` (negative to subtract).
  void Add(double delta);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Counts observations into buckets with fixed upper bounds (fixed when the family is
// registered), plus their sum and count. Thread-safe and lock-free: Observe is one atomic
// increment and one compare-and-swap loop on the sum.
class Histogram {
 public:
  // What a scrape sees. `cumulative[i]` counts the observations <= bounds[i]; the last
  // entry (index bounds.size()) is the +Inf bucket and equals `count`. A snapshot taken
  // while other threads observe may have a `sum` that includes an observation its buckets
  // do not yet count, or the reverse; buckets and count always agree.
  struct Snapshot {
    std::vector<uint64_t> cumulative;
    double sum = 0;
    uint64_t count = 0;
  };

  // `bounds` must be finite and strictly increasing, and outlive the histogram (the
  // family owns them); HistogramFamily checks this at registration.
  explicit Histogram(absl::Span<const double> bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // Counts `value` in the first bucket whose upper bound is >= value (NaN and values above
  // the last bound go to +Inf) and adds it to the sum.
  void Observe(double value);

  Snapshot Read() const;
  absl::Span<const double> bounds() const { return bounds_; }

 private:
  const absl::Span<const double> bounds_;
  // Non-cumulative: counts_[i] for bucket i; counts_[bounds.size()] is (last bound, +Inf).
  const std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0.0};
};

// What every family has; the registry renders families through this interface.
class MetricFamilyBase {
 public:
  virtual ~MetricFamilyBase() = default;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

 protected:
  MetricFamilyBase(std::string name, std::string help, MetricType type,
                   std::vector<std::string> label_names);

 private:
  friend class MetricsRegistry;
  // Appends this family's sample lines (not the # HELP / # TYPE header).
  virtual void AppendSamples(std::string* out) const = 0;

  const std::string name_;
  const std::string help_;
  const MetricType type_;
  const std::vector<std::string> label_names_;
};

// A family of Counter, Gauge or Histogram children, one per tuple of label values.
// Thread-safe. Created by MetricsRegistry, which owns it.
template <typename Metric>
class MetricFamily final : public MetricFamilyBase {
 public:
  // The child for `label_values` (one per label name, in the order of label_names()),
  // created on first use. The reference stays valid as long as the registry: look it up
  // once and keep it, since this lookup takes the family's mutex. Aborts if the number of
  // values differs from the number of label names. A family without labels has one child,
  // WithLabels(), which exists (and is exported as 0) from registration on.
  Metric& WithLabels(absl::Span<const std::string> label_values = {});

 private:
  friend class MetricsRegistry;
  MetricFamily(std::string name, std::string help, MetricType type,
               std::vector<std::string> label_names, std::vector<double> bounds);
  void AppendSamples(std::string* out) const override;

  // Histogram upper bounds (empty for counters and gauges); children point into it.
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  // Guarded by mu_. A node map and never erased from, so a key's address and its child stay
  // put: rendering collects pointers under mu_ and reads them after releasing it.
  absl::node_hash_map<std::vector<std::string>, std::unique_ptr<Metric>> children_;
};

using CounterFamily = MetricFamily<Counter>;
using GaugeFamily = MetricFamily<Gauge>;
using HistogramFamily = MetricFamily<Histogram>;

extern template class MetricFamily<Counter>;
extern template class MetricFamily<Gauge>;
extern template class MetricFamily<Histogram>;

// One sample of a labelled callback family: label values in the order of its label names.
struct CallbackSample {
  std::vector<std::string> label_values;
  double value = 0;
};

// Owns the families and renders them. Thread-safe: registration, child creation, updates
// and Render may all run concurrently. Families are never removed.
class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Registers a family; the pointer is owned by the registry and valid for its lifetime.
  // Errors for all of Add*: INVALID_ARGUMENT for an invalid metric or label name, a label
  // name given twice, or empty help; ALREADY_EXISTS if any series name the family would
  // export (for a histogram NAME: NAME_bucket, NAME_sum, NAME_count too) is already
  // exported by a registered family.
  absl::StatusOr<CounterFamily*> AddCounter(absl::string_view name, absl::string_view help,
                                            std::vector<std::string> label_names = {});
  absl::StatusOr<GaugeFamily*> AddGauge(absl::string_view name, absl::string_view help,
                                        std::vector<std::string> label_names = {});
  // `bounds`: the buckets' upper bounds, finite and strictly increasing (a trailing +Inf is
  // accepted and dropped: the +Inf bucket is always there). INVALID_ARGUMENT otherwise,
  // and for a label named "le".
  absl::StatusOr<HistogramFamily*> AddHistogram(absl::string_view name, absl::string_view help,
                                                std::vector<double> bounds,
                                                std::vector<std::string> label_names = {});

  // A counter or gauge without labels whose value `read` computes at every Render (graph
  // sizes, process CPU time). `read` runs on the scraping thread, so must be thread-safe,
  // quick, and must not call back into the registry; returning nullopt omits the sample
  // from that scrape (e.g. the source could not be read).
  absl::Status AddCallbackCounter(absl::string_view name, absl::string_view help,
                                  std::function<std::optional<double>()> read);
  absl::Status AddCallbackGauge(absl::string_view name, absl::string_view help,
                                std::function<std::optional<double>()> read);
  // The labelled form: `read` returns every sample of the family for this scrape. `type`
  // must be kCounter or kGauge (INVALID_ARGUMENT otherwise). Samples whose number of label
  // values differs from `label_names` are dropped.
  absl::Status AddCallbackFamily(MetricType type, absl::string_view name, absl::string_view help,
                                 std::vector<std::string> label_names,
                                 std::function<std::vector<CallbackSample>()> read);

  // Every family in the text exposition format 0.0.4, families sorted by name, children by
  // label values. A labelled family that has no child yet is left out.
  std::string Render() const;

 private:
  // Validates and adds `family`, reserving the series names it exports.
  absl::Status Register(std::unique_ptr<MetricFamilyBase> family);

  mutable std::mutex mu_;
  // By name, so Render's order is deterministic.
  std::map<std::string, std::unique_ptr<MetricFamilyBase>, std::less<>> families_;
  // Every series name that some family exports.
  absl::flat_hash_set<std::string> series_names_;
};

// Content-Type of MetricsRegistry::Render's text.
inline constexpr char kExpositionContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// Bucket upper bounds: `count` values start, start*factor, start*factor^2, ... Requires
// start > 0, factor > 1, count >= 1.
std::vector<double> ExponentialBuckets(double start, double factor, int count);
// Bucket upper bounds for latencies in seconds, 0.5 ms to 10 s in 1-2.5-5 steps.
std::vector<double> LatencyBucketsSeconds();
// Bucket upper bounds for sizes and counts (batch size, subgraph nodes): 1, 2, 4, ... 65536.
std::vector<double> SizeBuckets();

// Formats `value` the way the exposition writes sample values and "le" labels, as the
// official Go client does (strconv.FormatFloat(value, 'g', -1, 64)): the shortest digits
// that read back as the same double, positional from 1e-4 up to 1e6 ("0.0005", "42",
// "999999.5"), scientific outside ("1e-05", "1.234567e+06"); "+Inf", "-Inf", "NaN".
// Independent of the locale.
std::string FormatMetricValue(double value);

}  // namespace grail

#endif  // GRAIL_SERVER_METRICS_H_
