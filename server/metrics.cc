#include "server/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace grail {
namespace {

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "metrics: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// `value` += `delta`, atomically (std::atomic<double> has no fetch_add before C++20).
void AtomicAdd(std::atomic<double>& value, double delta) {
  double current = value.load(std::memory_order_relaxed);
  while (!value.compare_exchange_weak(current, current + delta, std::memory_order_relaxed)) {
  }
}

// Label values escape backslash, double quote and line feed; help text the first and last.
void AppendEscaped(absl::string_view text, bool escape_quote, std::string* out) {
  for (char c : text) {
    switch (c) {
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '"':
        if (escape_quote) {
          out->append("\\\"");
        } else {
          out->push_back(c);
        }
        break;
      default:
        out->push_back(c);
    }
  }
}

// Appends one sample line: NAME{l1="v1",...,le="LE"} VALUE. `le` empty: no le label.
void AppendSample(absl::string_view name, absl::Span<const std::string> label_names,
                  absl::Span<const std::string> label_values, absl::string_view le,
                  absl::string_view value, std::string* out) {
  out->append(name.data(), name.size());
  if (!label_names.empty() || !le.empty()) {
    out->push_back('{');
    for (size_t i = 0; i < label_names.size(); ++i) {
      if (i > 0) out->push_back(',');
      absl::StrAppend(out, label_names[i], "=\"");
      AppendEscaped(label_values[i], /*escape_quote=*/true, out);
      out->push_back('"');
    }
    if (!le.empty()) absl::StrAppend(out, label_names.empty() ? "" : ",", "le=\"", le, "\"");
    out->push_back('}');
  }
  absl::StrAppend(out, " ", value, "\n");
}

void AppendChild(const MetricFamilyBase& family, absl::Span<const std::string> label_values,
                 const Gauge& gauge, std::string* out) {
  AppendSample(family.name(), family.label_names(), label_values, "",
               FormatMetricValue(gauge.Value()), out);
}

void AppendChild(const MetricFamilyBase& family, absl::Span<const std::string> label_values,
                 const Histogram& histogram, std::string* out) {
  const Histogram::Snapshot snapshot = histogram.Read();
  const std::string bucket = absl::StrCat(family.name(), "_bucket");
  const absl::Span<const double> bounds = histogram.bounds();
  for (size_t i = 0; i < bounds.size(); ++i) {
    AppendSample(bucket, family.label_names(), label_values, FormatMetricValue(bounds[i]),
                 absl::StrCat(snapshot.cumulative[i]), out);
  }
  AppendSample(bucket, family.label_names(), label_values, "+Inf", absl::StrCat(snapshot.count),
               out);
  AppendSample(absl::StrCat(family.name(), "_sum"), family.label_names(), label_values, "",
               FormatMetricValue(snapshot.sum), out);
  AppendSample(absl::StrCat(family.name(), "_count"), family.label_names(), label_values, "",
               absl::StrCat(snapshot.count), out);
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// A family whose samples a function computes at every scrape.
class CallbackFamily final : public MetricFamilyBase {
 public:
  CallbackFamily(std::string name, std::string help, MetricType type,
                 std::vector<std::string> label_names,
                 std::function<std::vector<CallbackSample>()> read)
      : MetricFamilyBase(std::move(name), std::move(help), type, std::move(label_names)),
        read_(std::move(read)) {}

 private:
  void AppendSamples(std::string* out) const override {
    std::vector<CallbackSample> samples = read_();
    std::sort(samples.begin(), samples.end(), [](const CallbackSample& a, const CallbackSample& b) {
      return a.label_values < b.label_values;
    });
    for (const CallbackSample& sample : samples) {
      if (sample.label_values.size() != label_names().size()) continue;
      AppendSample(name(), label_names(), sample.label_values, "", FormatMetricValue(sample.value),
                   out);
    }
  }

  const std::function<std::vector<CallbackSample>()> read_;
};

// Checks what every family needs: a valid name, non-empty help, valid distinct label names.
absl::Status ValidateFamily(absl::string_view name, absl::string_view help,
                            const std::vector<std::string>& label_names) {
  if (absl::Status status = ValidateMetricName(name); !status.ok()) return status;
  if (help.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("metric ", name, ": help text is empty"));
  }
  for (size_t i = 0; i < label_names.size(); ++i) {
    if (absl::Status status = ValidateLabelName(label_names[i]); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("metric ", name, ": ", status.message()));
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

}  // namespace

absl::Status ValidateMetricName(absl::string_view name) {
  bool valid = !name.empty() && (IsNameStart(name[0]) || name[0] == ':');
  for (size_t i = 1; valid && i < name.size(); ++i) {
    valid = IsNameStart(name[i]) || IsDigit(name[i]) || name[i] == ':';
  }
  if (valid) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "metric name \"", name, "\" is not valid: it must match [a-zA-Z_:][a-zA-Z0-9_:]*"));
}

absl::Status ValidateLabelName(absl::string_view name) {
  bool valid = !name.empty() && IsNameStart(name[0]);
  for (size_t i = 1; valid && i < name.size(); ++i) {
    valid = IsNameStart(name[i]) || IsDigit(name[i]);
  }
  if (!valid) {
    return absl::InvalidArgumentError(absl::StrCat(
        "label name \"", name, "\" is not valid: it must match [a-zA-Z_][a-zA-Z0-9_]*"));
  }
  if (absl::StartsWith(name, "__")) {
    return absl::InvalidArgumentError(
        absl::StrCat("label name \"", name, "\" is reserved: names starting with __ are"));
  }
  return absl::OkStatus();
}

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Shortest round-trip digits in scientific form, "-d.ddde+XX" (locale-independent).
  char buffer[64];
  const std::to_chars_result result =
      std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  const absl::string_view scientific(buffer, result.ptr - buffer);
  // Laid out as Go's strconv.FormatFloat(value, 'g', -1, 64), which the official clients
  // write: scientific below 1e-4 and from 1e6 on, else positional. Same value either way,
  // but "le" label values are compared as strings by queries, so they should be the
  // conventional ones ("0.0005", not "5e-04").
  const size_t e = scientific.find('e');
  int exponent = 0;
  std::from_chars(scientific.data() + e + 1 + (scientific[e + 1] == '+' ? 1 : 0),
                  scientific.data() + scientific.size(), exponent);
  if (exponent < -4 || exponent >= 6) return std::string(scientific);
  const bool negative = scientific[0] == '-';
  std::string digits;
  for (char c : scientific.substr(negative ? 1 : 0, e - (negative ? 1 : 0))) {
    if (c != '.') digits.push_back(c);
  }
  // The decimal point goes after `point` digits.
  const int point = exponent + 1;
  std::string out = negative ? "-" : "";
  if (point <= 0) {
    absl::StrAppend(&out, "0.", std::string(-point, '0'), digits);
  } else if (static_cast<size_t>(point) >= digits.size()) {
    absl::StrAppend(&out, digits, std::string(point - digits.size(), '0'));
  } else {
    absl::StrAppend(&out, digits.substr(0, point), ".", digits.substr(point));
  }
  return out;
}

// Counter ------------------------------------------------------------------------------------

void Counter::Increment(double delta) {
  if (!(delta >= 0)) DieNegative(delta);
  AtomicAdd(fraction_, delta);
}

double Counter::Value() const {
  return static_cast<double>(whole_.load(std::memory_order_relaxed)) +
         fraction_.load(std::memory_order_relaxed);
}

void Counter::DieNegative(double delta) {
  Die(absl::StrCat("Counter::Increment(", FormatMetricValue(delta),
                   "): a counter's increment must be >= 0"));
}

std::string Counter::FormatValue() const {
  const uint64_t whole = whole_.load(std::memory_order_relaxed);
  const double fraction = fraction_.load(std::memory_order_relaxed);
  if (fraction == 0) return absl::StrCat(whole);
  return FormatMetricValue(static_cast<double>(whole) + fraction);
}

// Gauge --------------------------------------------------------------------------------------

void Gauge::Add(double delta) { AtomicAdd(value_, delta); }

// Histogram ----------------------------------------------------------------------------------

Histogram::Histogram(absl::Span<const double> bounds)
    : bounds_(bounds), counts_(new std::atomic<uint64_t>[bounds.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double value) {
  const size_t bucket =
      std::isnan(value) ? bounds_.size()
                        : std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, value);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot snapshot;
  snapshot.cumulative.resize(bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
    snapshot.cumulative[i] = total;
  }
  snapshot.count = total;
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

// Families -----------------------------------------------------------------------------------

MetricFamilyBase::MetricFamilyBase(std::string name, std::string help, MetricType type,
                                   std::vector<std::string> label_names)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)) {}

template <typename Metric>
MetricFamily<Metric>::MetricFamily(std::string name, std::string help, MetricType type,
                                   std::vector<std::string> label_names, std::vector<double> bounds)
    : MetricFamilyBase(std::move(name), std::move(help), type, std::move(label_names)),
      bounds_(std::move(bounds)) {
  // A family without labels has exactly one series: export it (as 0) from the start.
  if (MetricFamilyBase::label_names().empty()) WithLabels();
}

template <typename Metric>
Metric& MetricFamily<Metric>::WithLabels(absl::Span<const std::string> label_values) {
  if (label_values.size() != label_names().size()) {
    Die(absl::StrCat("metric ", name(), " has ", label_names().size(), " labels (",
                     absl::StrJoin(label_names(), ","), ") but WithLabels got ",
                     label_values.size(), " values (", absl::StrJoin(label_values, ","), ")"));
  }
  std::vector<std::string> key(label_values.begin(), label_values.end());
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<Metric>& child = children_[std::move(key)];
  if (child == nullptr) {
    if constexpr (std::is_same<Metric, Histogram>::value) {
      child = std::make_unique<Histogram>(bounds_);
    } else {
      child = std::make_unique<Metric>();
    }
  }
  return *child;
}

template <typename Metric>
void MetricFamily<Metric>::AppendSamples(std::string* out) const {
  // Keys and children are stable (node map, never erased), so they can be read unlocked.
  std::vector<std::pair<const std::vector<std::string>*, const Metric*>> children;
  {
    std::lock_guard<std::mutex> lock(mu_);
    children.reserve(children_.size());
    for (const auto& [key, child] : children_) children.emplace_back(&key, child.get());
  }
  std::sort(children.begin(), children.end(),
            [](const auto& a, const auto& b) { return *a.first < *b.first; });
  for (const auto& [key, child] : children) {
    if constexpr (std::is_same<Metric, Counter>::value) {
      AppendSample(name(), label_names(), *key, "", child->FormatValue(), out);
    } else {
      AppendChild(*this, *key, *child, out);
    }
  }
}

template class MetricFamily<Counter>;
template class MetricFamily<Gauge>;
template class MetricFamily<Histogram>;

// Registry -----------------------------------------------------------------------------------

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

absl::StatusOr<CounterFamily*> MetricsRegistry::AddCounter(absl::string_view name,
                                                           absl::string_view help,
                                                           std::vector<std::string> label_names) {
  if (absl::Status status = ValidateFamily(name, help, label_names); !status.ok()) return status;
  auto family = std::unique_ptr<CounterFamily>(new CounterFamily(
      std::string(name), std::string(help), MetricType::kCounter, std::move(label_names), {}));
  CounterFamily* result = family.get();
  if (absl::Status status = Register(std::move(family)); !status.ok()) return status;
  return result;
}

absl::StatusOr<GaugeFamily*> MetricsRegistry::AddGauge(absl::string_view name,
                                                       absl::string_view help,
                                                       std::vector<std::string> label_names) {
  if (absl::Status status = ValidateFamily(name, help, label_names); !status.ok()) return status;
  auto family = std::unique_ptr<GaugeFamily>(new GaugeFamily(
      std::string(name), std::string(help), MetricType::kGauge, std::move(label_names), {}));
  GaugeFamily* result = family.get();
  if (absl::Status status = Register(std::move(family)); !status.ok()) return status;
  return result;
}

absl::StatusOr<HistogramFamily*> MetricsRegistry::AddHistogram(
    absl::string_view name, absl::string_view help, std::vector<double> bounds,
    std::vector<std::string> label_names) {
  if (absl::Status status = ValidateFamily(name, help, label_names); !status.ok()) return status;
  if (std::find(label_names.begin(), label_names.end(), "le") != label_names.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("histogram ", name, ": label \"le\" is reserved for the bucket bound"));
  }
  if (!bounds.empty() && bounds.back() == HUGE_VAL) bounds.pop_back();
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i])) {
      return absl::InvalidArgumentError(absl::StrCat("histogram ", name, ": bucket bound ", i,
                                                     " is ", FormatMetricValue(bounds[i])));
    }
    if (i > 0 && !(bounds[i - 1] < bounds[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "histogram ", name, ": bucket bounds must increase strictly, but ",
          FormatMetricValue(bounds[i - 1]), " comes before ", FormatMetricValue(bounds[i])));
    }
  }
  auto family = std::unique_ptr<HistogramFamily>(
      new HistogramFamily(std::string(name), std::string(help), MetricType::kHistogram,
                          std::move(label_names), std::move(bounds)));
  HistogramFamily* result = family.get();
  if (absl::Status status = Register(std::move(family)); !status.ok()) return status;
  return result;
}

absl::Status MetricsRegistry::AddCallbackCounter(absl::string_view name, absl::string_view help,
                                                 std::function<std::optional<double>()> read) {
  return AddCallbackFamily(MetricType::kCounter, name, help, {},
                           [read = std::move(read)]() -> std::vector<CallbackSample> {
                             const std::optional<double> value = read();
                             if (!value.has_value()) return {};
                             return {CallbackSample{{}, *value}};
                           });
}

absl::Status MetricsRegistry::AddCallbackGauge(absl::string_view name, absl::string_view help,
                                               std::function<std::optional<double>()> read) {
  return AddCallbackFamily(MetricType::kGauge, name, help, {},
                           [read = std::move(read)]() -> std::vector<CallbackSample> {
                             const std::optional<double> value = read();
                             if (!value.has_value()) return {};
                             return {CallbackSample{{}, *value}};
                           });
}

absl::Status MetricsRegistry::AddCallbackFamily(MetricType type, absl::string_view name,
                                                absl::string_view help,
                                                std::vector<std::string> label_names,
                                                std::function<std::vector<CallbackSample>()> read) {
  if (absl::Status status = ValidateFamily(name, help, label_names); !status.ok()) return status;
  if (type != MetricType::kCounter && type != MetricType::kGauge) {
    return absl::InvalidArgumentError(
        absl::StrCat("metric ", name, ": a callback family must be a counter or a gauge"));
  }
  if (read == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("metric ", name, ": no callback"));
  }
  return Register(std::make_unique<CallbackFamily>(std::string(name), std::string(help), type,
                                                   std::move(label_names), std::move(read)));
}

absl::Status MetricsRegistry::Register(std::unique_ptr<MetricFamilyBase> family) {
  std::vector<std::string> series = {family->name()};
  if (family->type() == MetricType::kHistogram) {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      series.push_back(absl::StrCat(family->name(), suffix));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& name : series) {
    if (series_names_.contains(name)) {
      return absl::AlreadyExistsError(absl::StrCat("metric ", family->name(), ": series name ",
                                                   name, " is already registered"));
    }
  }
  series_names_.insert(series.begin(), series.end());
  std::string name = family->name();
  families_.emplace(std::move(name), std::move(family));
  return absl::OkStatus();
}

std::string MetricsRegistry::Render() const {
  std::string out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, family] : families_) {
    std::string samples;
    family->AppendSamples(&samples);
    if (samples.empty()) continue;
    absl::StrAppend(&out, "# HELP ", name, " ");
    AppendEscaped(family->help(), /*escape_quote=*/false, &out);
    absl::StrAppend(&out, "\n# TYPE ", name, " ", TypeName(family->type()), "\n", samples);
  }
  return out;
}

// Buckets ------------------------------------------------------------------------------------

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  if (!(start > 0) || !(factor > 1) || count < 1) {
    Die(absl::StrCat("ExponentialBuckets(", FormatMetricValue(start), ", ",
                     FormatMetricValue(factor), ", ", count,
                     "): needs start > 0, factor > 1, count >= 1"));
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
