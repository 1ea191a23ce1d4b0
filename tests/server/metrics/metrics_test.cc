// The Prometheus metrics module: scrape-time values and their validation, the exposition of
// prometheus-cpp's registry beside them, process metrics, the HTTP endpoint over a real
// loopback socket, and Prometheus' own linter (promtool) on every kind of metric.
#include "server/metrics/metrics.h"

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
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/metrics/metrics_http.h"
#include "server/metrics/process_metrics.h"
#include "tests/testing/temp_dir.h"

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

// A registry with one series of each kind the server uses, and the scrape-time values.
struct Collectables {
  prometheus::Registry registry;
  ScrapeTimeMetrics scraped;
  std::string Render() const { return RenderExposition({&registry, &scraped}); }
};

TEST(ScrapeTimeMetricsTest, ValuesAreReadAtScrapeTime) {
  ScrapeTimeMetrics metrics;
  std::atomic<double> facts{10};
  std::atomic<bool> readable{true};
  ASSERT_TRUE(metrics
                  .AddGauge("graph_facts", "Facts.",
                            [&]() -> std::optional<double> {
                              if (!readable.load()) return std::nullopt;
                              return facts.load();
                            })
                  .ok());
  ASSERT_TRUE(metrics.AddCounter("ticks_total", "Ticks.", [] { return 7.0; }).ok());
  ASSERT_TRUE(metrics
                  .AddMetricFamily(prometheus::MetricType::Gauge, "relation_facts",
                                   "Facts by relation.", {"relation"},
                                   [] {
                                     return std::vector<ScrapedSample>{
                                         {{"part_of"}, 3}, {{"has_part"}, 2}, {{"a", "b"}, 9}};
                                   })
                  .ok());
  EXPECT_EQ(SampleValue(RenderExposition({&metrics}), "graph_facts"), 10);
  facts.store(12);
  EXPECT_EQ(SampleValue(RenderExposition({&metrics}), "graph_facts"), 12);
  readable.store(false);
  const std::string text = RenderExposition({&metrics});
  // A family without a sample this time is left out entirely, header included.
  EXPECT_THAT(text, Not(HasSubstr("graph_facts")));
  EXPECT_THAT(text, HasSubstr("# TYPE ticks_total counter\nticks_total 7\n"));
  EXPECT_EQ(SampleValue(text, "relation_facts{relation=\"part_of\"}"), 3);
  EXPECT_EQ(SampleValue(text, "relation_facts{relation=\"has_part\"}"), 2);
  // The sample with the wrong number of label values is left out.
  EXPECT_THAT(text, Not(HasSubstr("9")));
}

TEST(ScrapeTimeMetricsTest, RejectsWhatTheTextFormatCannotCarry) {
  ScrapeTimeMetrics metrics;
  auto one = [] { return 1.0; };
  auto samples = [] { return std::vector<ScrapedSample>{}; };
  const auto code = [](const absl::Status& status) { return status.code(); };
  EXPECT_EQ(code(metrics.AddGauge("9lives", "Help.", one)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(metrics.AddGauge("a-b", "Help.", one)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(metrics.AddGauge("g", "", one)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(metrics.AddGauge("g", "Two\nlines.", one)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(metrics.AddGauge("g", "Back\\slash.", one)), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(metrics.AddMetricFamily(prometheus::MetricType::Gauge, "g", "Help.",
                                         {"__reserved"}, samples)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      code(metrics.AddMetricFamily(prometheus::MetricType::Gauge, "g", "Help.", {"1x"}, samples)),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(metrics.AddMetricFamily(prometheus::MetricType::Gauge, "g", "Help.", {"a", "a"},
                                         samples)),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      code(metrics.AddMetricFamily(prometheus::MetricType::Histogram, "g", "Help.", {}, samples)),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(metrics.AddMetricFamily(prometheus::MetricType::Gauge, "g", "Help.", {}, nullptr)),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(metrics.AddGauge("g", "Help.", one).ok());
  const absl::Status again = metrics.AddCounter("g", "Help.", one);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr("g"));
  // Nothing rejected was added.
  EXPECT_EQ(RenderExposition({&metrics}), "# HELP g Help.\n# TYPE g gauge\ng 1\n");
}

TEST(RenderExpositionTest, JoinsCollectablesAndEscapesLabelValues) {
  Collectables c;
  prometheus::BuildCounter()
      .Name("calls_total")
      .Help("Calls.")
      .Register(c.registry)
      .Add({{"method", "odd \\ \"name\"\nline"}})
      .Increment(3);
  prometheus::BuildHistogram()
      .Name("latency_seconds")
      .Help("Latency.")
      .Register(c.registry)
      .Add({}, LatencyBucketsSeconds())
      .Observe(0.0007);
  ASSERT_TRUE(c.scraped.AddGauge("facts", "Facts.", [] { return 5.0; }).ok());
  const std::string text = c.Render();
  EXPECT_EQ(SampleValue(text, "calls_total{method=\"odd \\\\ \\\"name\\\"\\nline\"}"), 3);
  // Bucket bounds are written as Prometheus' own clients write them.
  EXPECT_EQ(SampleValue(text, "latency_seconds_bucket{le=\"0.0005\"}"), 0);
  EXPECT_EQ(SampleValue(text, "latency_seconds_bucket{le=\"0.001\"}"), 1);
  EXPECT_EQ(SampleValue(text, "latency_seconds_bucket{le=\"+Inf\"}"), 1);
  EXPECT_EQ(SampleValue(text, "latency_seconds_count"), 1);
  EXPECT_EQ(SampleValue(text, "facts"), 5);
}

TEST(BucketsTest, DefaultBucketSets) {
  EXPECT_THAT(ExponentialBuckets(1, 10, 3), ::testing::ElementsAre(1, 10, 100));
  const std::vector<double> latency = LatencyBucketsSeconds();
  EXPECT_EQ(latency.front(), 0.0005);
  EXPECT_EQ(latency.back(), 10);
  const std::vector<double> sizes = SizeBuckets();
  EXPECT_EQ(sizes.size(), 17u);
  EXPECT_EQ(sizes.front(), 1);
  EXPECT_EQ(sizes.back(), 65536);
  for (const std::vector<double>* bounds : {&latency, &sizes}) {
    EXPECT_TRUE(std::is_sorted(bounds->begin(), bounds->end()));
    EXPECT_EQ(std::adjacent_find(bounds->begin(), bounds->end()), bounds->end());
  }
}

TEST(ProcessMetricsTest, ReportsThisProcess) {
  ScrapeTimeMetrics metrics;
  ASSERT_TRUE(RegisterProcessMetrics(metrics).ok());
  EXPECT_EQ(RegisterProcessMetrics(metrics).code(), absl::StatusCode::kAlreadyExists);
  const std::string text = RenderExposition({&metrics});
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
  ScrapeTimeMetrics metrics;
  ASSERT_TRUE(RegisterProcessMetrics(metrics).ok());
  const double before =
      SampleValue(RenderExposition({&metrics}), "process_cpu_seconds_total").value();
  // Spin until the kernel has charged this process at least 50 ms more (clock ticks are
  // 10 ms), or give up after 10 s of wall time.
  volatile double sink = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  double after = before;
  while (after < before + 0.05 && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 1000000; ++i) sink = sink + std::sqrt(static_cast<double>(i));
    after = SampleValue(RenderExposition({&metrics}), "process_cpu_seconds_total").value();
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
  Collectables c;
  prometheus::BuildCounter()
      .Name("calls_total")
      .Help("Calls.")
      .Register(c.registry)
      .Add({{"method", "Score"}})
      .Increment(4);
  std::atomic<bool> ready{false};
  MetricsHttpServer server([&] { return c.Render(); }, [&] { return ready.load(); });
  EXPECT_EQ(server.port(), -1);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  ASSERT_GT(server.port(), 0);

  httplib::Result metrics = Get(server.port(), "/metrics");
  ASSERT_TRUE(metrics) << httplib::to_string(metrics.error());
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(metrics->body, c.Render());
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
  Collectables c;
  for (int i = 0; i < 200; ++i) {  // a /metrics response of some size
    prometheus::BuildGauge()
        .Name(absl::StrCat("filler_", i))
        .Help("A gauge.")
        .Register(c.registry)
        .Add({})
        .Set(i);
  }
  MetricsHttpServer server([&] { return c.Render(); }, [] { return true; });
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
  MetricsHttpOptions options;
  options.max_connections = 4;
  options.threads = 1;  // the cap is shared out among the threads; one makes it exact
  MetricsHttpServer server(nullptr, nullptr, options);
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
  MetricsHttpOptions options;
  options.idle_timeout_seconds = 1;
  MetricsHttpServer server(nullptr, nullptr, options);
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
  MetricsHttpServer server(nullptr, nullptr);
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(server.Start("127.0.0.1", 0).ok()) << round;
    httplib::Result ready = Get(server.port(), "/readyz");
    ASSERT_TRUE(ready);
    EXPECT_EQ(ready->status, 200);
    server.Stop();
  }
}

TEST(MetricsHttpTest, StartStopAtOnceDoesNotHang) {
  for (int i = 0; i < 20; ++i) {
    MetricsHttpServer server(nullptr, nullptr);
    ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
    server.Stop();
  }
}

TEST(MetricsHttpTest, ReportsErrorsAsStatus) {
  MetricsHttpServer first(nullptr, nullptr);
  ASSERT_TRUE(first.Start("127.0.0.1", 0).ok());
  EXPECT_EQ(first.Start("127.0.0.1", 0).code(), absl::StatusCode::kFailedPrecondition);

  MetricsHttpServer second(nullptr, nullptr);
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

  Collectables c;
  auto& calls = prometheus::BuildCounter()
                    .Name("grail_requests_total")
                    .Help("Calls finished.")
                    .Register(c.registry);
  calls.Add({{"method", "ScoreTriplet"}, {"code", "OK"}}).Increment(3);
  calls.Add({{"method", "RankTails"}, {"code", "NOT_FOUND"}}).Increment(0.5);
  calls.Add({{"method", "odd \\ \"name\"\nline"}, {"code", "OK"}}).Increment();
  prometheus::BuildCounter()
      .Name("grail_facts_ingested_total")
      .Help("Facts stored.")
      .Register(c.registry)
      .Add({});
  prometheus::BuildGauge()
      .Name("grail_queue_depth")
      .Help("Subgraphs waiting.")
      .Register(c.registry)
      .Add({})
      .Set(-1.5);
  auto& latency = prometheus::BuildHistogram()
                      .Name("grail_request_duration_seconds")
                      .Help("Call latency.")
                      .Register(c.registry);
  for (double seconds : {0.0001, 0.003, 0.2, 42.0}) {
    latency.Add({{"method", "ScoreTriplet"}}, LatencyBucketsSeconds()).Observe(seconds);
  }
  prometheus::BuildHistogram()
      .Name("grail_batch_size")
      .Help("Subgraphs per forward.")
      .Register(c.registry)
      .Add({}, SizeBuckets())
      .Observe(17);
  ASSERT_TRUE(c.scraped.AddGauge("grail_graph_facts", "Facts stored.", [] { return 9.0; }).ok());
  ASSERT_TRUE(
      c.scraped.AddCounter("grail_ingest_chunks_total", "Chunks.", [] { return 2.0; }).ok());
  ASSERT_TRUE(c.scraped
                  .AddMetricFamily(prometheus::MetricType::Gauge, "grail_model_info",
                                   "Model, always 1.", {"device", "hops"},
                                   [] {
                                     return std::vector<ScrapedSample>{{{"cpu", "3"}, 1}};
                                   })
                  .ok());
  ASSERT_TRUE(c.scraped
                  .AddMetricFamily(
                      prometheus::MetricType::Gauge, "grail_relation_facts", "Facts by relation.",
                      {"relation"},
                      [] {
                        return std::vector<ScrapedSample>{{{"part_of"}, 3}, {{"hypernym"}, kInf}};
                      })
                  .ok());
  ASSERT_TRUE(RegisterProcessMetrics(c.scraped).ok());

  MetricsHttpServer server([&] { return c.Render(); }, nullptr);
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  httplib::Result metrics = Get(server.port(), "/metrics");
  ASSERT_TRUE(metrics);
  ASSERT_EQ(metrics->status, 200);
  // Every kind made it into the text.
  for (const char* type : {"counter", "gauge", "histogram"}) {
    EXPECT_THAT(metrics->body, HasSubstr(absl::StrCat(" ", type, "\n"))) << type;
  }

  const std::string path = ProcessTempPath("metrics_promtool.txt");
  std::ofstream(path, std::ios::binary) << metrics->body;
  const auto [exit_code, output] = RunShell("promtool check metrics < '" + path + "' 2>&1");
  EXPECT_EQ(exit_code, 0) << output << "\n--- input:\n" << metrics->body;
  EXPECT_EQ(output, "") << "--- input:\n" << metrics->body;
}

}  // namespace
}  // namespace grail
