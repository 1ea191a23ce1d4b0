// The Prometheus metrics module: exact text exposition, exact totals under concurrent
// updates, name validation, process metrics, the HTTP endpoint over a real loopback socket,
// and Prometheus' own linter (promtool) on a registry with every kind of metric.
#include "server/metrics.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics_http.h"
#include "server/process_metrics.h"

namespace grail {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kInf = std::numeric_limits<double>::infinity();

// The value of the sample line that starts with `series` (name and labels, exactly), or
// nullopt if there is none.
std::optional<double> SampleValue(const std::string& exposition, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::ConsumePrefix(&line, series) || !absl::ConsumePrefix(&line, " ")) continue;
    if (line == "+Inf") return kInf;
    double value;
    if (absl::SimpleAtod(line, &value)) return value;
  }
  return std::nullopt;
}

TEST(MetricsExpositionTest, SmallRegistryRendersExactly) {
  MetricsRegistry registry;
  CounterFamily* calls =
      registry.AddCounter("rpc_calls_total", "Calls finished.", {"method", "code"}).value();
  calls->WithLabels({"Score", "OK"}).Increment(3);
  calls->WithLabels({"Rank", "NOT_FOUND"}).Increment();
  calls->WithLabels({"a\\b\"c\nd", "OK"}).Increment(0.5);
  GaugeFamily* depth =
      registry.AddGauge("queue_depth", "Waiting requests.\nBackslash \\ and \"quotes\" kept.")
          .value();
  depth->WithLabels().Set(2.5);
  HistogramFamily* latency =
      registry.AddHistogram("latency_seconds", "Latency.", {0.25, 1}, {"method"}).value();
  Histogram& score = latency->WithLabels({"Score"});
  for (double seconds : {0.125, 0.25, 0.5, 7.0}) score.Observe(seconds);
  // Labelled families without children are left out.
  ASSERT_TRUE(registry.AddGauge("unused_gauge", "No children yet.", {"x"}).ok());

  EXPECT_EQ(registry.Render(),
            "# HELP latency_seconds Latency.\n"
            "# TYPE latency_seconds histogram\n"
            "latency_seconds_bucket{method=\"Score\",le=\"0.25\"} 2\n"
            "latency_seconds_bucket{method=\"Score\",le=\"1\"} 3\n"
            "latency_seconds_bucket{method=\"Score\",le=\"+Inf\"} 4\n"
            "latency_seconds_sum{method=\"Score\"} 7.875\n"
            "latency_seconds_count{method=\"Score\"} 4\n"
            "# HELP queue_depth Waiting requests.\\nBackslash \\\\ and \"quotes\" kept.\n"
            "# TYPE queue_depth gauge\n"
            "queue_depth 2.5\n"
            "# HELP rpc_calls_total Calls finished.\n"
            "# TYPE rpc_calls_total counter\n"
            "rpc_calls_total{method=\"Rank\",code=\"NOT_FOUND\"} 1\n"
            "rpc_calls_total{method=\"Score\",code=\"OK\"} 3\n"
            "rpc_calls_total{method=\"a\\\\b\\\"c\\nd\",code=\"OK\"} 0.5\n");
}

TEST(MetricsExpositionTest, FamiliesWithoutLabelsExportZeroFromRegistration) {
  MetricsRegistry registry;
  ASSERT_TRUE(registry.AddCounter("events_total", "Events.").ok());
  ASSERT_TRUE(registry.AddHistogram("size", "Sizes.", {1}).ok());
  EXPECT_EQ(registry.Render(),
            "# HELP events_total Events.\n"
            "# TYPE events_total counter\n"
            "events_total 0\n"
            "# HELP size Sizes.\n"
            "# TYPE size histogram\n"
            "size_bucket{le=\"1\"} 0\n"
            "size_bucket{le=\"+Inf\"} 0\n"
            "size_sum 0\n"
            "size_count 0\n");
}

TEST(MetricsExpositionTest, FormatsValuesAsPrometheusParsesThem) {
  EXPECT_EQ(FormatMetricValue(kInf), "+Inf");
  EXPECT_EQ(FormatMetricValue(-kInf), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::nan("")), "NaN");
  // As Go's strconv.FormatFloat(v, 'g', -1, 64), so "le" values match the other clients'.
  EXPECT_EQ(FormatMetricValue(0), "0");
  EXPECT_EQ(FormatMetricValue(0.0005), "0.0005");
  EXPECT_EQ(FormatMetricValue(0.0001), "0.0001");
  EXPECT_EQ(FormatMetricValue(0.00001), "1e-05");
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(2.5), "2.5");
  EXPECT_EQ(FormatMetricValue(-2.5), "-2.5");
  EXPECT_EQ(FormatMetricValue(42), "42");
  EXPECT_EQ(FormatMetricValue(65536), "65536");
  EXPECT_EQ(FormatMetricValue(999999.5), "999999.5");
  EXPECT_EQ(FormatMetricValue(1e6), "1e+06");
  EXPECT_EQ(FormatMetricValue(-1234567), "-1.234567e+06");
  EXPECT_EQ(FormatMetricValue(1e300), "1e+300");
  EXPECT_EQ(FormatMetricValue(-0.00123), "-0.00123");
  // Shortest round trip, not a fixed precision.
  for (double value : {1e-05, 1.0 / 3, 2.0 / 3 * 1e5, 1e300, 123456789.125, 5e-324}) {
    double parsed = 0;
    ASSERT_TRUE(absl::SimpleAtod(FormatMetricValue(value), &parsed)) << value;
    EXPECT_EQ(parsed, value);
  }
}

TEST(CounterTest, IntegerIncrementsStayExactBeyondDoublePrecision) {
  MetricsRegistry registry;
  Counter& bytes = registry.AddCounter("bytes_total", "Bytes.").value()->WithLabels();
  bytes.Increment(uint64_t{1} << 53);
  bytes.Increment();
  EXPECT_THAT(registry.Render(), HasSubstr("\nbytes_total 9007199254740993\n"));
}

TEST(CounterTest, MixesIntegerAndFractionalIncrements) {
  Counter counter;
  counter.Increment(0.25);
  counter.Increment(2);
  counter.Increment(size_t{3});
  counter.Increment(0.75);
  EXPECT_EQ(counter.Value(), 6.0);
}

TEST(CounterDeathTest, NegativeIncrementAborts) {
  Counter counter;
  EXPECT_DEATH(counter.Increment(-1), "must be >= 0");
  EXPECT_DEATH(counter.Increment(-0.5), "must be >= 0");
  EXPECT_DEATH(counter.Increment(std::nan("")), "must be >= 0");
}

TEST(GaugeTest, SetsAndAdds) {
  Gauge gauge;
  gauge.Set(10);
  gauge.Add(-2.5);
  gauge.Add(0.5);
  EXPECT_EQ(gauge.Value(), 8.0);
}

TEST(HistogramTest, BucketsAreCumulativeAndUpperBoundsInclusive) {
  const std::vector<double> bounds = {1, 2, 4};
  Histogram histogram(bounds);
  for (double value : {-3.0, 1.0, 1.5, 2.0, 4.0, 4.5, kInf}) histogram.Observe(value);
  histogram.Observe(std::nan(""));  // goes to +Inf
  const Histogram::Snapshot snapshot = histogram.Read();
  EXPECT_THAT(snapshot.cumulative, ::testing::ElementsAre(2, 4, 5, 8));
  EXPECT_EQ(snapshot.count, 8u);
  EXPECT_TRUE(std::isnan(snapshot.sum));
}

TEST(FamilyTest, WithLabelsReturnsTheSameChildForTheSameValues) {
  MetricsRegistry registry;
  CounterFamily* family = registry.AddCounter("calls_total", "Calls.", {"method"}).value();
  Counter& first = family->WithLabels({"Score"});
  EXPECT_EQ(&family->WithLabels({"Score"}), &first);
  const std::vector<std::string> values = {"Score"};
  EXPECT_EQ(&family->WithLabels(values), &first);
  EXPECT_NE(&family->WithLabels({"Rank"}), &first);
}

TEST(FamilyDeathTest, WrongNumberOfLabelValuesAborts) {
  MetricsRegistry registry;
  CounterFamily* family = registry.AddCounter("calls_total", "Calls.", {"method", "code"}).value();
  EXPECT_DEATH(family->WithLabels({"Score"}), "calls_total has 2 labels");
}

TEST(MetricsConcurrencyTest, ConcurrentUpdatesGiveExactTotals) {
  MetricsRegistry registry;
  CounterFamily* calls = registry.AddCounter("calls_total", "Calls.", {"method"}).value();
  HistogramFamily* sizes = registry.AddHistogram("sizes", "Sizes.", {1, 2}, {"method"}).value();
  GaugeFamily* level = registry.AddGauge("level", "Level.").value();
  constexpr int kThreads = 8;
  constexpr int kIterations = 50000;
  std::atomic<bool> done{false};
  // Scrapes while the writers run; each render must be well formed.
  std::thread scraper([&] {
    while (!done.load()) {
      const std::string text = registry.Render();
      ASSERT_TRUE(text.empty() || text.back() == '\n');
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      // Half the threads share one child; each thread also creates its own, concurrently.
      Counter& shared = calls->WithLabels({"shared"});
      Counter& own = calls->WithLabels({absl::StrCat("thread", t)});
      Histogram& histogram = sizes->WithLabels({"shared"});
      Gauge& gauge = level->WithLabels();
      for (int i = 0; i < kIterations; ++i) {
        shared.Increment();
        own.Increment(0.5);
        histogram.Observe(static_cast<double>(i % 3));  // 0, 1, 2: exact sums
        gauge.Add(1);
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  done.store(true);
  scraper.join();

  EXPECT_EQ(calls->WithLabels({"shared"}).Value(), static_cast<double>(kThreads) * kIterations);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(calls->WithLabels({absl::StrCat("thread", t)}).Value(), kIterations * 0.5);
  }
  const Histogram::Snapshot snapshot = sizes->WithLabels({"shared"}).Read();
  const uint64_t total = uint64_t{kThreads} * kIterations;
  EXPECT_EQ(snapshot.count, total);
  uint64_t zeros = 0, ones = 0, twos = 0;
  for (int i = 0; i < kIterations; ++i) (i % 3 == 0 ? zeros : i % 3 == 1 ? ones : twos)++;
  EXPECT_EQ(snapshot.cumulative[0], kThreads * (zeros + ones));
  EXPECT_EQ(snapshot.cumulative[1], total);
  EXPECT_EQ(snapshot.sum, static_cast<double>(kThreads * (ones + 2 * twos)));
  EXPECT_EQ(level->WithLabels().Value(), static_cast<double>(total));
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr(absl::StrCat("\ncalls_total{method=\"shared\"} ", total, "\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("\nsizes_count{method=\"shared\"} ", total, "\n")));
}

TEST(MetricsValidationTest, MetricNames) {
  for (const char* name : {"a", "_x", "rpc:calls_total", ":x", "A9_b"}) {
    EXPECT_TRUE(ValidateMetricName(name).ok()) << name;
  }
  for (const char* name : {"", "9a", "a-b", "a b", "a.b", "é"}) {
    const absl::Status status = ValidateMetricName(name);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(status.message(), HasSubstr("[a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
}

TEST(MetricsValidationTest, LabelNames) {
  for (const char* name : {"method", "_x", "a9"}) {
    EXPECT_TRUE(ValidateLabelName(name).ok()) << name;
  }
  for (const char* name : {"", "9a", "a:b", "a-b", "__name__", "__x"}) {
    EXPECT_EQ(ValidateLabelName(name).code(), absl::StatusCode::kInvalidArgument) << name;
  }
  EXPECT_THAT(ValidateLabelName("__x").message(), HasSubstr("reserved"));
}

TEST(MetricsValidationTest, RegistrationRejectsMisuse) {
  MetricsRegistry registry;
  EXPECT_EQ(registry.AddCounter("bad-name", "Help.").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddCounter("calls_total", "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddCounter("calls_total", "Help.", {"__reserved"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(registry.AddCounter("calls_total", "Help.", {"a", "a"}).status().message(),
              HasSubstr("given twice"));
  EXPECT_EQ(registry.AddHistogram("h", "Help.", {1}, {"le"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogram("h", "Help.", {1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogram("h", "Help.", {2, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogram("h", "Help.", {std::nan("")}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogram("h", "Help.", {-kInf, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry
                .AddCallbackFamily(MetricType::kHistogram, "cb", "Help.", {},
                                   [] { return std::vector<CallbackSample>{}; })
                .code(),
            absl::StatusCode::kInvalidArgument);
  // Nothing above was registered.
  EXPECT_EQ(registry.Render(), "");

  // A trailing +Inf bound is accepted (and implicit).
  HistogramFamily* h = registry.AddHistogram("h", "Help.", {1, kInf}).value();
  EXPECT_EQ(h->WithLabels().bounds().size(), 1u);
  // Names, including the series a histogram exports, are unique across kinds.
  EXPECT_EQ(registry.AddGauge("h", "Help.").status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddCounter("h_count", "Help.").status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.AddCallbackGauge("h_sum", "Help.", [] { return 1.0; }).code(),
            absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(registry.AddCounter("x_bucket", "Help.").ok());
  EXPECT_EQ(registry.AddHistogram("x", "Help.", {1}).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(MetricsCallbackTest, ValuesAreReadAtScrapeTime) {
  MetricsRegistry registry;
  std::atomic<double> facts{10};
  std::atomic<bool> readable{true};
  ASSERT_TRUE(registry
                  .AddCallbackGauge("graph_facts", "Facts.",
                                    [&]() -> std::optional<double> {
                                      if (!readable.load()) return std::nullopt;
                                      return facts.load();
                                    })
                  .ok());
  ASSERT_TRUE(registry.AddCallbackCounter("ticks_total", "Ticks.", [] { return 7.0; }).ok());
  ASSERT_TRUE(registry
                  .AddCallbackFamily(MetricType::kGauge, "relation_facts", "Facts by relation.",
                                     {"relation"},
                                     [] {
                                       return std::vector<CallbackSample>{
                                           {{"part_of"}, 3}, {{"has_part"}, 2}, {{"a", "b"}, 9}};
                                     })
                  .ok());
  EXPECT_EQ(SampleValue(registry.Render(), "graph_facts"), 10);
  facts.store(12);
  EXPECT_EQ(SampleValue(registry.Render(), "graph_facts"), 12);
  readable.store(false);
  const std::string text = registry.Render();
  EXPECT_THAT(text, Not(HasSubstr("graph_facts")));
  EXPECT_THAT(text, HasSubstr("# TYPE ticks_total counter\nticks_total 7\n"));
  // Sorted by label values; the sample with the wrong number of labels is dropped.
  EXPECT_THAT(text, HasSubstr("# TYPE relation_facts gauge\n"
                              "relation_facts{relation=\"has_part\"} 2\n"
                              "relation_facts{relation=\"part_of\"} 3\n#"));
}

TEST(BucketsTest, DefaultBucketSets) {
  EXPECT_THAT(ExponentialBuckets(1, 10, 3), ::testing::ElementsAre(1, 10, 100));
  const std::vector<double> latency = LatencyBucketsSeconds();
  EXPECT_EQ(latency.front(), 0.0005);
  EXPECT_EQ(latency.back(), 10);
  const std::vector<double> sizes = SizeBuckets();
  EXPECT_EQ(sizes.front(), 1);
  EXPECT_EQ(sizes.back(), 65536);
  for (const std::vector<double>* bounds : {&latency, &sizes}) {
    MetricsRegistry registry;
    EXPECT_TRUE(registry.AddHistogram("h", "Help.", *bounds).ok());
  }
}

TEST(ProcessMetricsTest, ReportsThisProcess) {
  MetricsRegistry registry;
  ASSERT_TRUE(RegisterProcessMetrics(registry).ok());
  EXPECT_EQ(RegisterProcessMetrics(registry).code(), absl::StatusCode::kAlreadyExists);
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE process_cpu_seconds_total counter\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE process_resident_memory_bytes gauge\n"));

  const std::optional<double> cpu = SampleValue(text, "process_cpu_seconds_total");
  ASSERT_TRUE(cpu.has_value());
  EXPECT_GE(*cpu, 0);
  const std::optional<double> resident = SampleValue(text, "process_resident_memory_bytes");
  const std::optional<double> virtual_bytes = SampleValue(text, "process_virtual_memory_bytes");
  ASSERT_TRUE(resident.has_value() && virtual_bytes.has_value());
  EXPECT_GT(*resident, 1 << 20);  // a gtest binary holds more than 1 MiB
  EXPECT_GE(*virtual_bytes, *resident);
  const std::optional<double> open_fds = SampleValue(text, "process_open_fds");
  ASSERT_TRUE(open_fds.has_value());
  EXPECT_GE(*open_fds, 3);  // stdin, stdout, stderr
  rlimit limit;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  const double expected_max =
      limit.rlim_cur == RLIM_INFINITY ? kInf : static_cast<double>(limit.rlim_cur);
  EXPECT_EQ(SampleValue(text, "process_max_fds"), expected_max);
  const std::optional<double> start = SampleValue(text, "process_start_time_seconds");
  ASSERT_TRUE(start.has_value());
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  // This test process started moments ago (seconds, give or take clock-tick rounding).
  EXPECT_LE(*start, now + 1);
  EXPECT_GT(*start, now - 3600);
}

TEST(ProcessMetricsTest, CpuTimeGrowsWithWork) {
  MetricsRegistry registry;
  ASSERT_TRUE(RegisterProcessMetrics(registry).ok());
  const double before = SampleValue(registry.Render(), "process_cpu_seconds_total").value();
  // Spin until the kernel has charged this process at least 50 ms more (clock ticks are
  // 10 ms), or give up after 10 s of wall time.
  volatile double sink = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  double after = before;
  while (after < before + 0.05 && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 1000000; ++i) sink = sink + std::sqrt(static_cast<double>(i));
    after = SampleValue(registry.Render(), "process_cpu_seconds_total").value();
  }
  EXPECT_GE(after, before + 0.05);
}

// GETs `path` from the server on 127.0.0.1:`port`.
httplib::Result Get(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  return client.Get(path.c_str());
}

TEST(MetricsHttpTest, ServesMetricsHealthAndReadiness) {
  MetricsRegistry registry;
  registry.AddCounter("calls_total", "Calls.", {"method"})
      .value()
      ->WithLabels({"Score"})
      .Increment(4);
  std::atomic<bool> ready{false};
  MetricsHttpServer server(&registry, [&] { return ready.load(); });
  EXPECT_EQ(server.port(), -1);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  ASSERT_GT(server.port(), 0);

  httplib::Result metrics = Get(server.port(), "/metrics");
  ASSERT_TRUE(metrics) << httplib::to_string(metrics.error());
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(metrics->body, registry.Render());
  EXPECT_THAT(metrics->body, HasSubstr("calls_total{method=\"Score\"} 4\n"));

  httplib::Result health = Get(server.port(), "/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok");

  httplib::Result not_ready = Get(server.port(), "/readyz");
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->status, 503);
  ready.store(true);
  httplib::Result now_ready = Get(server.port(), "/readyz");
  ASSERT_TRUE(now_ready);
  EXPECT_EQ(now_ready->status, 200);
  EXPECT_EQ(now_ready->body, "ready");

  httplib::Result missing = Get(server.port(), "/nothing");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);

  const int port = server.port();
  server.Stop();
  EXPECT_EQ(server.port(), -1);
  EXPECT_FALSE(Get(port, "/healthz"));
}

// A TCP connection to 127.0.0.1:port (closed when destroyed), or fd -1.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~RawConnection() {
    if (fd_ >= 0) close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;
  bool Send(const std::string& bytes) {
    return fd_ >= 0 && send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
                           static_cast<ssize_t>(bytes.size());
  }
  // Everything the server sends until it closes the connection, or until nothing has come
  // for `wait` (a bound, not a timing assertion).
  // `closed`: whether it ended because the server closed the connection.
  std::string ReadAll(std::chrono::seconds wait = std::chrono::seconds(30),
                      bool* closed = nullptr) {
    timeval bound{static_cast<time_t>(wait.count()), 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof(bound));
    std::string out;
    char buffer[4096];
    for (;;) {
      const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (closed != nullptr) *closed = n == 0 || (n < 0 && errno == ECONNRESET);
      if (n <= 0) break;
      out.append(buffer, static_cast<size_t>(n));
    }
    return out;
  }
  bool open() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

TEST(MetricsHttpTest, ProbesAnswerWhileIdleAndSlowConnectionsAreOpen) {
  MetricsRegistry registry;
  for (int i = 0; i < 200; ++i) {  // a /metrics response of some size
    absl::StatusOr<GaugeFamily*> gauge = registry.AddGauge(absl::StrCat("filler_", i), "A gauge.");
    ASSERT_TRUE(gauge.ok());
    (*gauge)->WithLabels().Set(i);
  }
  MetricsHttpServer server(&registry, [] { return true; });
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  std::vector<std::unique_ptr<RawConnection>> idle, slow, unread;
  for (int i = 0; i < 20; ++i) {
    idle.push_back(std::make_unique<RawConnection>(server.port()));
    slow.push_back(std::make_unique<RawConnection>(server.port()));
    ASSERT_TRUE(idle.back()->open() && slow.back()->open());
    ASSERT_TRUE(slow.back()->Send("GET /metrics HTTP/1.1\r\nHost: x\r\n"));
    // Asks for /metrics, many times over, and never reads the answers.
    unread.push_back(std::make_unique<RawConnection>(server.port()));
    std::string requests;
    for (int r = 0; r < 50; ++r) requests += "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_TRUE(unread.back()->Send(requests));
  }
  // The slow ones go on trickling header bytes while the probes are made.
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    while (!done.load()) {
      for (auto& c : slow) c->Send("X");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  for (int round = 0; round < 3; ++round) {
    httplib::Result health = Get(server.port(), "/healthz");
    ASSERT_TRUE(health) << httplib::to_string(health.error());
    EXPECT_EQ(health->status, 200);
    httplib::Result ready = Get(server.port(), "/readyz");
    ASSERT_TRUE(ready) << httplib::to_string(ready.error());
    EXPECT_EQ(ready->status, 200);
    httplib::Result metrics = Get(server.port(), "/metrics");
    ASSERT_TRUE(metrics) << httplib::to_string(metrics.error());
    EXPECT_EQ(metrics->status, 200);
  }
  done.store(true);
  trickle.join();
}

TEST(MetricsHttpTest, ConnectionsBeyondTheCapWaitForAPlace) {
  MetricsRegistry registry;
  MetricsHttpOptions options;
  options.max_connections = 4;
  options.threads = 1;  // the cap is shared out among the threads; one makes it exact
  MetricsHttpServer server(&registry, nullptr, options);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < options.max_connections; ++i) {
    held.push_back(std::make_unique<RawConnection>(server.port()));
    ASSERT_TRUE(held.back()->open());
  }
  // Over the cap the server takes no more connections: this one waits in the kernel's
  // backlog, unanswered, and costs the server nothing ...
  RawConnection extra(server.port());
  ASSERT_TRUE(extra.Send("GET /healthz HTTP/1.0\r\n\r\n"));
  bool closed = true;
  EXPECT_EQ(extra.ReadAll(std::chrono::seconds(2), &closed), "");
  EXPECT_FALSE(closed);
  // ... until a place is free.
  held.pop_back();
  EXPECT_THAT(extra.ReadAll(), HasSubstr("200 OK"));
}

TEST(MetricsHttpTest, IdleConnectionsAreClosed) {
  MetricsRegistry registry;
  MetricsHttpOptions options;
  options.idle_timeout_seconds = 1;
  MetricsHttpServer server(&registry, nullptr, options);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  RawConnection idle(server.port()), partial(server.port());
  ASSERT_TRUE(partial.Send("GET /metrics HTTP/1.1\r\n"));
  bool closed = false;
  EXPECT_EQ(idle.ReadAll(std::chrono::seconds(30), &closed), "");
  EXPECT_TRUE(closed);
  // A request left unfinished may get a 408 or nothing; either way the server hangs up.
  partial.ReadAll(std::chrono::seconds(30), &closed);
  EXPECT_TRUE(closed);
}

TEST(MetricsHttpTest, ReadyWithoutCallbackAndRestartable) {
  MetricsRegistry registry;
  MetricsHttpServer server(&registry, nullptr);
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(server.Start("127.0.0.1", 0).ok()) << round;
    httplib::Result ready = Get(server.port(), "/readyz");
    ASSERT_TRUE(ready);
    EXPECT_EQ(ready->status, 200);
    server.Stop();
  }
}

TEST(MetricsHttpTest, StartStopAtOnceDoesNotHang) {
  MetricsRegistry registry;
  for (int i = 0; i < 20; ++i) {
    MetricsHttpServer server(&registry, nullptr);
    ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
    server.Stop();
  }
}

TEST(MetricsHttpTest, ReportsErrorsAsStatus) {
  MetricsRegistry registry;
  MetricsHttpServer first(&registry, nullptr);
  ASSERT_TRUE(first.Start("127.0.0.1", 0).ok());
  EXPECT_EQ(first.Start("127.0.0.1", 0).code(), absl::StatusCode::kFailedPrecondition);

  MetricsHttpServer second(&registry, nullptr);
  const absl::Status in_use = second.Start("127.0.0.1", first.port());
  EXPECT_EQ(in_use.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(in_use.message(), HasSubstr("in use"));
  EXPECT_EQ(second.port(), -1);
  EXPECT_EQ(second.Start("127.0.0.1", 70000).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(second.Start("no.such.host.invalid", 0).code(), absl::StatusCode::kUnavailable);

  // The first server is unaffected.
  httplib::Result health = Get(first.port(), "/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

// Runs `command` through the shell; exit code (-1 if it did not exit) and output.
std::pair<int, std::string> RunShell(const std::string& command) {
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, "popen failed"};
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// Prometheus' own parser and linter on what /metrics serves for a registry with every kind
// of metric. Debian's `prometheus` package provides promtool (scripts/setup.sh installs
// it); in CI its absence is a failure, elsewhere the test is skipped.
TEST(MetricsPromtoolTest, ExpositionPassesPromtoolCheckMetrics) {
  const auto [found, promtool] = RunShell("command -v promtool");
  if (found != 0) {
    if (std::getenv("CI") != nullptr) FAIL() << "promtool not found (Debian package prometheus)";
    GTEST_SKIP() << "promtool not found (Debian package prometheus)";
  }

  MetricsRegistry registry;
  CounterFamily* calls =
      registry.AddCounter("grail_requests_total", "Calls finished.", {"method", "code"}).value();
  calls->WithLabels({"ScoreTriplet", "OK"}).Increment(3);
  calls->WithLabels({"RankTails", "NOT_FOUND"}).Increment(0.5);
  calls->WithLabels({"odd \\ \"name\"\nline", "OK"}).Increment();
  ASSERT_TRUE(registry.AddCounter("grail_facts_ingested_total", "Facts stored.").ok());
  registry.AddGauge("grail_queue_depth", "Subgraphs waiting.").value()->WithLabels().Set(-1.5);
  registry.AddGauge("grail_model_info", "Model, always 1.", {"device", "hops"})
      .value()
      ->WithLabels({"cpu", "3"})
      .Set(1);
  HistogramFamily* latency = registry
                                 .AddHistogram("grail_request_duration_seconds", "Call latency.",
                                               LatencyBucketsSeconds(), {"method"})
                                 .value();
  for (double seconds : {0.0001, 0.003, 0.2, 42.0}) {
    latency->WithLabels({"ScoreTriplet"}).Observe(seconds);
  }
  registry.AddHistogram("grail_batch_size", "Subgraphs per forward.", SizeBuckets())
      .value()
      ->WithLabels()
      .Observe(17);
  ASSERT_TRUE(
      registry.AddCallbackGauge("grail_graph_facts", "Facts stored.", [] { return 9.0; }).ok());
  ASSERT_TRUE(
      registry.AddCallbackCounter("grail_ingest_chunks_total", "Chunks.", [] { return 2.0; }).ok());
  ASSERT_TRUE(registry
                  .AddCallbackFamily(
                      MetricType::kGauge, "grail_relation_facts", "Facts by relation.",
                      {"relation"},
                      [] {
                        return std::vector<CallbackSample>{{{"part_of"}, 3}, {{"hypernym"}, kInf}};
                      })
                  .ok());
  ASSERT_TRUE(RegisterProcessMetrics(registry).ok());

  MetricsHttpServer server(&registry, nullptr);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  httplib::Result metrics = Get(server.port(), "/metrics");
  ASSERT_TRUE(metrics);
  ASSERT_EQ(metrics->status, 200);
  // Every kind made it into the text.
  for (const char* type : {"counter", "gauge", "histogram"}) {
    EXPECT_THAT(metrics->body, HasSubstr(absl::StrCat(" ", type, "\n"))) << type;
  }

  const std::string path =
      (std::filesystem::path(::testing::TempDir()) / "metrics_promtool.txt").string();
  std::ofstream(path, std::ios::binary) << metrics->body;
  const auto [exit_code, output] = RunShell("promtool check metrics < '" + path + "' 2>&1");
  EXPECT_EQ(exit_code, 0) << output << "\n--- input:\n" << metrics->body;
  EXPECT_EQ(output, "") << "--- input:\n" << metrics->body;
}

}  // namespace
}  // namespace grail
