// grail-server's metrics with the real Prometheus tools: promtool lints the live /metrics
// of a server that has handled traffic, and a real Prometheus server (Debian's
// `prometheus`) scrapes it on loopback; its HTTP API must report what the traffic did.
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"
#include "model/grail/grail_model.h"
#include "tests/testing/saved_model.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::HasSubstr;

// Fails under CI (where scripts/setup.sh installed it), skips elsewhere.
#define REQUIRE_TOOL(name)                                                                     \
  if (std::system("command -v " name " >/dev/null 2>&1") != 0) {                               \
    if (std::getenv("CI") != nullptr) FAIL() << name " not found (Debian package prometheus)"; \
    GTEST_SKIP() << name " not found (Debian package prometheus)";                             \
  }

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string Scrape(int port) {
  httplib::Client client("127.0.0.1", port);
  httplib::Result result = client.Get("/metrics");
  return result && result->status == 200 ? result->body : "";
}

class PrometheusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        SaveUntrainedModel(dir_.Sub("model.pt"), {"likes", "knows"}, /*seed=*/1, GrailConfig{})
            .ok());
    ASSERT_TRUE(
        server_.Start({"--model=" + dir_.Sub("model.pt"), "--data-dir=" + dir_.Sub("store")},
                      dir_.Sub("server.log")));
    stub_ = kg::v1::KnowledgeGraph::NewStub(
        grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials()));
    // Traffic: one chunk of 30 facts, then `ok_calls_` scores and `not_found_calls_` misses.
    grpc::ClientContext add_context;
    auto stream = stub_->AddTriples(&add_context);
    kg::v1::AddTriplesRequest chunk;
    for (int i = 0; i < 30; ++i) {
      kg::v1::Triple* t = chunk.add_triples();
      t->set_head(absl::StrCat("p", i % 10));
      t->set_relation(i % 2 ? "likes" : "knows");
      t->set_tail(absl::StrCat("p", (i * 3 + 1) % 10));
      if (t->head() == t->tail()) t->set_tail("p9"), t->set_head("p0");
    }
    ASSERT_TRUE(stream->Write(chunk));
    kg::v1::AddTriplesAck ack;
    ASSERT_TRUE(stream->Read(&ack));
    facts_ = ack.facts_added();
    stream->WritesDone();
    ASSERT_TRUE(stream->Finish().ok());
    for (int i = 0; i < ok_calls_ + not_found_calls_; ++i) {
      grpc::ClientContext context;
      kg::v1::ScoreTripletRequest request;
      request.mutable_triple()->set_head(i < ok_calls_ ? "p1" : "stranger");
      request.mutable_triple()->set_relation("likes");
      request.mutable_triple()->set_tail(absl::StrCat("p", 2 + i % 7));
      kg::v1::ScoreTripletResponse response;
      const grpc::Status status = stub_->ScoreTriplet(&context, request, &response);
      ASSERT_EQ(status.ok(), i < ok_calls_) << status.error_message();
    }
  }

  ScopedTempDir dir_;
  ServerProcess server_;
  std::unique_ptr<kg::v1::KnowledgeGraph::Stub> stub_;
  uint32_t facts_ = 0;
  const int ok_calls_ = 37;
  const int not_found_calls_ = 5;
};

TEST_F(PrometheusTest, PromtoolAcceptsTheLiveExposition) {
  REQUIRE_TOOL("promtool");
  const std::string text = Scrape(server_.metrics_port());
  ASSERT_THAT(text, HasSubstr("grail_requests_total{"));
  // Lines the traffic must have produced (the exposition is long: no dump on failure).
  for (const std::string& line :
       {absl::StrCat("grail_requests_total{code=\"OK\",method=\"ScoreTriplet\"} ", ok_calls_),
        absl::StrCat("grail_requests_total{code=\"NOT_FOUND\",method=\"ScoreTriplet\"} ",
                     not_found_calls_),
        absl::StrCat("grail_request_duration_seconds_count{method=\"ScoreTriplet\"} ",
                     ok_calls_ + not_found_calls_),
        absl::StrCat("grail_graph_facts ", facts_), std::string("grail_model_info{"),
        // No request holds an older version once the traffic is over.
        std::string("grail_graph_retained_bytes 0"), std::string("grail_build_info{version="),
        std::string("process_resident_memory_bytes ")}) {
    EXPECT_NE(text.find("\n" + line), std::string::npos) << "missing: " << line;
  }
  const std::string path = dir_.Sub("metrics.txt");
  std::ofstream(path) << text;
  const std::string output_path = dir_.Sub("promtool.out");
  const int status =
      std::system(("promtool check metrics < " + path + " > " + output_path + " 2>&1").c_str());
  std::ifstream in(output_path);
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output, "") << "promtool complained:\n" << output;
}

TEST_F(PrometheusTest, RealPrometheusScrapesRequestCountsAndLatencyQuantiles) {
  REQUIRE_TOOL("prometheus");
  const int port = FreePort();
  const std::string config = dir_.Sub("prometheus.yml");
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                        << "scrape_configs:\n  - job_name: grail\n    static_configs:\n"
                        << "      - targets: ['127.0.0.1:" << server_.metrics_port() << "']\n";
  const pid_t prometheus = fork();
  if (prometheus == 0) {
    const std::string log = dir_.Sub("prometheus.log");
    freopen(log.c_str(), "w", stderr);
    freopen(log.c_str(), "a", stdout);
    execlp("prometheus", "prometheus", ("--config.file=" + config).c_str(),
           ("--storage.tsdb.path=" + dir_.Sub("tsdb")).c_str(),
           ("--web.listen-address=127.0.0.1:" + std::to_string(port)).c_str(), nullptr);
    _exit(127);
  }
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
  } reaper{prometheus};

  // Asks Prometheus `query` until it answers a single value (or gives up after a minute:
  // a bound on waiting, not a timing assertion).
  httplib::Client api("127.0.0.1", port);
  auto query = [&](const std::string& promql) -> std::optional<double> {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < give_up) {
      httplib::Result r =
          api.Get("/api/v1/query", httplib::Params{{"query", promql}}, httplib::Headers{});
      std::smatch m;
      if (r && r->status == 200 &&
          std::regex_search(r->body, m, std::regex(R"re("value":\[[0-9.]+,"([^"]+)"\])re"))) {
        return std::stod(m[1]);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return std::nullopt;
  };

  std::optional<double> ok =
      query("grail_requests_total{job=\"grail\",method=\"ScoreTriplet\",code=\"OK\"}");
  ASSERT_TRUE(ok.has_value()) << "Prometheus never reported the counter";
  EXPECT_EQ(*ok, ok_calls_);
  std::optional<double> not_found =
      query("grail_requests_total{job=\"grail\",method=\"ScoreTriplet\",code=\"NOT_FOUND\"}");
  ASSERT_TRUE(not_found.has_value());
  EXPECT_EQ(*not_found, not_found_calls_);
  std::optional<double> count =
      query("grail_request_duration_seconds_count{job=\"grail\",method=\"ScoreTriplet\"}");
  ASSERT_TRUE(count.has_value());
  EXPECT_EQ(*count, ok_calls_ + not_found_calls_);
  // The p99 over every call so far: a latency that Prometheus computed from our buckets.
  std::optional<double> p99 = query(
      "histogram_quantile(0.99, sum by (le) "
      "(grail_request_duration_seconds_bucket{job=\"grail\",method=\"ScoreTriplet\"}))");
  ASSERT_TRUE(p99.has_value());
  EXPECT_GT(*p99, 0.0);
  EXPECT_LE(*p99, 10.0);  // the largest finite bucket
  std::optional<double> facts = query("grail_graph_facts{job=\"grail\"}");
  ASSERT_TRUE(facts.has_value());
  EXPECT_EQ(*facts, facts_);
}

}  // namespace
}  // namespace grail
