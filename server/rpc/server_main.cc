// grail-server: serves a GraIL model over a live knowledge graph stored in RocksDB.
//
//   grail-server --model MODEL.pt --data-dir DIR --port P --metrics-port M [--device cpu|cuda]
//
// Start-up order, so that orchestrators see progress: the gRPC port opens first with the
// health service answering NOT_SERVING, then the model is loaded and the graph index is
// rebuilt from the store, then health turns SERVING. SIGTERM or SIGINT drains: health
// turns NOT_SERVING, gRPC refuses new calls, calls received get --drain-seconds to finish,
// the store is flushed, and the process exits 0. SIGHUP re-reads --auth-tokens. Every flag can also
// be set through the environment as GRAIL_<FLAG> (e.g. GRAIL_DATA_DIR); the command line wins.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/command_line.h"
#include "common/json.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "model/core/archive_loading.h"
#include "model/core/blas_kernels.h"
#include "model/core/runtime.h"
#include "model/grail/grail_model.h"
#include "server/engine/inference_engine.h"
#include "server/metrics/server_metrics.h"
#include "server/replication/replication.h"
#include "server/replication/sequence_gate.h"
#include "server/rpc/access_tokens.h"
#include "server/rpc/graph_service.h"
#include "server/rpc/request_parsing.h"
#include "server/rpc/transport_security.h"
#include "server/scoring/link_predictor.h"
#include "server/scoring/model_reloader.h"
#include "server/scoring/served_model.h"
#include "store/triple_store.h"

ABSL_FLAG(std::string, model, "", "the model file written by grail-train (required)");
ABSL_FLAG(std::string, data_dir, "",
          "directory of the RocksDB triple store; created if empty (required)");
ABSL_FLAG(std::string, host, "127.0.0.1",
          "address to listen on (gRPC and metrics); 0.0.0.0 for every interface (with "
          "--tls-cert and --auth-tokens when the network is not trusted)");
ABSL_FLAG(int, port, 50051, "gRPC port (0: pick a free one)");
ABSL_FLAG(int, metrics_port, 9090,
          "HTTP port of /metrics, /healthz and /readyz (0: pick one; -1: off)");
ABSL_FLAG(std::string, device, "cpu", "where the model runs: cpu or cuda[:N]");
ABSL_FLAG(int, max_batch_size, 256, "subgraphs per model forward (dynamic batching)");
ABSL_FLAG(int, max_batch_nodes, 4096,
          "nodes per model forward (a larger subgraph runs alone); small forwards keep a call "
          "from waiting long behind another's");
ABSL_FLAG(int, max_batch_edges, 8192,
          "edges per model forward (a larger subgraph runs alone); small forwards keep a call "
          "from waiting long behind another's");
ABSL_FLAG(int, max_subgraph_nodes, 65536,
          "nodes of the largest enclosing subgraph scored; a call needing a larger one fails "
          "with RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_subgraph_edges, 262144,
          "edges of the largest enclosing subgraph scored; a call needing a larger one fails "
          "with RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_queue_delay_us, 2000,
          "longest a queued subgraph waits for its batch to fill, in microseconds");
ABSL_FLAG(int, extraction_threads, 0, "threads extracting subgraphs (0: one per core)");
ABSL_FLAG(int, compute_threads, 0, "threads inside one model forward (0: one per core)");
ABSL_FLAG(int, max_request_triples, 10000, "most triples in one ScoreTriplets call");
ABSL_FLAG(int, max_candidates, 100000, "most explicit candidates in one RankTails/RankHeads call");
ABSL_FLAG(int, max_rank_subgraphs, 100000,
          "most candidates one RankTails/RankHeads scores on their own subgraphs (over every "
          "entity: those within k+1 hops of the fixed entity; the rest share one score)");
ABSL_FLAG(int, max_rank_results, 1000000,
          "most entries one ranking over every entity returns when top_k is 0");
ABSL_FLAG(int, max_calls_in_flight, 1000,
          "KnowledgeGraph calls and AddTriples streams served at once; beyond, RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, max_pending_subgraphs, 1000000,
          "facts admitted and not yet scored, over all calls; a call beyond is refused "
          "(RESOURCE_EXHAUSTED)");
ABSL_FLAG(double, max_caller_share, 0.5,
          "the fraction of --max-calls-in-flight, --max-pending-subgraphs and --max-queued-bytes "
          "one caller may hold at once (a token's name; one connection when tokens are off), so "
          "that no caller can lock out the others (1: no per-caller limit)");
ABSL_FLAG(int64_t, max_queued_bytes, 1073741824,
          "bytes held by admitted scoring work (fact lists, per-call search state, subgraphs "
          "waiting for the model); a call arriving beyond is refused (RESOURCE_EXHAUSTED)");
ABSL_FLAG(int, max_chunk_facts, 100000, "most facts in one AddTriples chunk");
ABSL_FLAG(int, max_name_bytes, 1024, "longest entity or relation name, in bytes");
ABSL_FLAG(int, max_message_bytes, 64 << 20, "largest gRPC message received or sent, in bytes");
ABSL_FLAG(bool, allow_unknown_relations, false,
          "let AddTriples store relations outside the model's vocabulary (their edges are "
          "ignored by the model)");
ABSL_FLAG(bool, sync_writes, false,
          "fsync every AddTriples chunk before acknowledging it (survives machine crashes, not "
          "just process crashes)");
ABSL_FLAG(int, drain_seconds, 20, "on SIGTERM, how long calls in flight get to finish");
ABSL_FLAG(int64_t, max_model_bytes, int64_t{16} << 30,
          "largest model archive loaded (at start and by ReloadModel / SIGHUP), in bytes");
ABSL_FLAG(int, model_load_timeout_seconds, 300,
          "how long loading a model archive may take (it is loaded in a child process first; "
          "one that takes longer is refused and the previous model keeps serving)");
ABSL_FLAG(bool, truncate_corrupted_wal, false,
          "start on a store whose write-ahead log is corrupted before its end, keeping what "
          "precedes the corruption (the chunks after it are lost; logged and in /metrics); "
          "without it such a store is refused");
ABSL_FLAG(int, warmup_batches, 3,
          "model forwards run on stored facts before serving, at start and on each reload, so "
          "that the first calls are not the slow ones (0: none)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain: serve gRPC over TLS (with --tls-key); rotated files are "
          "picked up within --tls-reload-seconds");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: mutual TLS, every client must present a certificate it signed");
ABSL_FLAG(int, tls_reload_seconds, 10, "how often the TLS files are checked for changes");
ABSL_FLAG(std::string, auth_tokens, "",
          "file of bearer tokens, lines 'TOKEN SCOPE [NAME]' (scopes read < write < admin): "
          "every KnowledgeGraph call then needs 'authorization: Bearer TOKEN'; re-read when it "
          "changes and on SIGHUP");
ABSL_FLAG(bool, reflection, true,
          "serve gRPC server reflection (the API's schema, for grpcurl and the like)");
ABSL_FLAG(std::string, nats_url, "",
          "NATS server URL(s), comma-separated: replicate the graph through the JetStream stream "
          "--nats-stream, shared by every replica (empty: this server's graph is its own)");
ABSL_FLAG(std::string, nats_stream, "",
          "the JetStream stream of the graph's chunks (with --nats-url)");
ABSL_FLAG(std::string, nats_subject, "",
          "the stream's subject (empty: grail.<stream>.chunks); used when creating the stream");
ABSL_FLAG(std::string, replica_name, "",
          "this replica's durable consumer name, unique per replica (empty: the host name, a "
          "StatefulSet pod's stable name)");
ABSL_FLAG(int, nats_stream_replicas, 1,
          "copies JetStream keeps of the stream (1, 3 or 5), used when this server creates it");
ABSL_FLAG(int64_t, nats_stream_max_chunks, 0,
          "most chunks the stream keeps, used when this server creates it (0: all; a replica "
          "behind the oldest kept must start from a checkpoint: deploy/README.md)");
ABSL_FLAG(int, replication_timeout_ms, 30000,
          "how long an AddTriples chunk may take to be logged in the stream (retried through a "
          "NATS failover) and then applied here, before the call fails UNAVAILABLE");
ABSL_FLAG(int, max_sequence_wait_ms, 10000,
          "longest a call with min_graph_sequence waits for this replica to apply that far "
          "(within the call's deadline) before it fails UNAVAILABLE");
ABSL_FLAG(std::string, ready_file, "",
          "once serving, write {\"port\":P,\"metrics_port\":M} to this file (for scripts and "
          "tests that start the server on port 0)");

namespace grail {
namespace {

using Clock = std::chrono::steady_clock;

#ifndef GRAIL_VERSION
#define GRAIL_VERSION "dev"
#endif

// One structured log line on stderr: a JSON object with a timestamp, the event, and `fields`.
void Log(absl::string_view event, const Json& fields = Json::object()) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  Json line = {{"ts", RoundTo(now, 3)}, {"event", event}};
  line.update(fields);
  std::fputs((JsonLine(line) + "\n").c_str(), stderr);
  std::fflush(stderr);
}

// libprotobuf's own log lines (e.g. a request string that is not valid UTF-8) as JSON log
// lines like every other, instead of free text on stderr.
void LogFromProtobuf(google::protobuf::LogLevel level, const char* filename, int line,
                     const std::string& message) {
  static constexpr const char* kLevels[] = {"info", "warning", "error", "fatal"};
  Log("protobuf", {{"level", kLevels[std::clamp(static_cast<int>(level), 0, 3)]},
                   {"message", message},
                   {"source", absl::StrCat(filename, ":", line)}});
}

int Fail(absl::string_view what, const absl::Status& status) {
  Log("error", {{"during", what}, {"error", status.ToString()}});
  return 1;
}

// Drops server reflection's plugin from a ServerBuilder.
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const std::unique_ptr<grpc::ServerBuilderPlugin>& plugin) {
                                    return plugin->name() == "proto_server_reflection";
                                  }),
                   plugins->end());
  }
};

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || absl::StartsWith(host, "127.");
}

// Every numeric flag's accepted range: a value outside is a usage error naming the flag and
// the range, never silently clamped or wrapped.
struct FlagRange {
  const char* name;
  int64_t value;
  int64_t min;
  int64_t max;
};

std::vector<FlagRange> NumericFlags() {
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  return {
      {"port", absl::GetFlag(FLAGS_port), 0, 65535},
      {"metrics_port", absl::GetFlag(FLAGS_metrics_port), -1, 65535},
      {"max_batch_size", absl::GetFlag(FLAGS_max_batch_size), 1, 1 << 20},
      {"max_batch_nodes", absl::GetFlag(FLAGS_max_batch_nodes), 2, 1 << 26},
      {"max_batch_edges", absl::GetFlag(FLAGS_max_batch_edges), 1, 1 << 28},
      {"max_subgraph_nodes", absl::GetFlag(FLAGS_max_subgraph_nodes), 2, 1 << 26},
      {"max_subgraph_edges", absl::GetFlag(FLAGS_max_subgraph_edges), 1, 1 << 28},
      {"max_queue_delay_us", absl::GetFlag(FLAGS_max_queue_delay_us), 0, 10000000},
      // 0: one per core. More threads than this helps no machine and costs start-up time.
      {"extraction_threads", absl::GetFlag(FLAGS_extraction_threads), 0, 1024},
      {"compute_threads", absl::GetFlag(FLAGS_compute_threads), 0, 1024},
      {"max_request_triples", absl::GetFlag(FLAGS_max_request_triples), 1, 10000000},
      {"max_candidates", absl::GetFlag(FLAGS_max_candidates), 1, 100000000},
      {"max_rank_subgraphs", absl::GetFlag(FLAGS_max_rank_subgraphs), 1, kMaxInt},
      {"max_rank_results", absl::GetFlag(FLAGS_max_rank_results), 1, kMaxInt},
      {"max_calls_in_flight", absl::GetFlag(FLAGS_max_calls_in_flight), 1, 10000000},
      {"max_pending_subgraphs", absl::GetFlag(FLAGS_max_pending_subgraphs), 1, int64_t{1} << 40},
      {"max_queued_bytes", absl::GetFlag(FLAGS_max_queued_bytes), 1 << 20, int64_t{1} << 46},
      {"max_chunk_facts", absl::GetFlag(FLAGS_max_chunk_facts), 1, 100000000},
      {"max_name_bytes", absl::GetFlag(FLAGS_max_name_bytes), 1, 1 << 20},
      // Below a few KiB no call or answer fits: the server would look healthy and answer
      // nothing.
      {"max_message_bytes", absl::GetFlag(FLAGS_max_message_bytes), 4096, kMaxInt},
      {"drain_seconds", absl::GetFlag(FLAGS_drain_seconds), 0, 86400},
      {"max_model_bytes", absl::GetFlag(FLAGS_max_model_bytes), 1 << 10, int64_t{1} << 46},
      {"model_load_timeout_seconds", absl::GetFlag(FLAGS_model_load_timeout_seconds), 1, 86400},
      {"warmup_batches", absl::GetFlag(FLAGS_warmup_batches), 0, 1000},
      {"tls_reload_seconds", absl::GetFlag(FLAGS_tls_reload_seconds), 1, 86400},
      {"nats_stream_replicas", absl::GetFlag(FLAGS_nats_stream_replicas), 1, 5},
      {"nats_stream_max_chunks", absl::GetFlag(FLAGS_nats_stream_max_chunks), 0, int64_t{1} << 50},
      {"replication_timeout_ms", absl::GetFlag(FLAGS_replication_timeout_ms), 100, 3600000},
      {"max_sequence_wait_ms", absl::GetFlag(FLAGS_max_sequence_wait_ms), 0, 3600000},
  };
}

// The first flag out of its range, as a one-line message; empty if all are in range.
std::string CheckFlagRanges() {
  for (const FlagRange& f : NumericFlags()) {
    if (f.value < f.min || f.value > f.max) {
      std::string flag = f.name;
      std::replace(flag.begin(), flag.end(), '_', '-');
      return absl::StrCat("--", flag, "=", f.value, " is out of range: it takes ", f.min, "..",
                          f.max);
    }
  }
  return "";
}

int Run() {
  std::string last_token_error;
  if (const std::string bad = CheckFlagRanges(); !bad.empty()) {
    std::fprintf(stderr, "grail-server: %s\n", bad.c_str());
    return 2;
  }
  const double caller_share = absl::GetFlag(FLAGS_max_caller_share);
  if (!(caller_share > 0 && caller_share <= 1)) {
    std::fprintf(stderr, "grail-server: --max-caller-share=%g is out of range: it takes (0, 1]\n",
                 caller_share);
    return 2;
  }
  const std::string model_path = absl::GetFlag(FLAGS_model);
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  if (model_path.empty() || data_dir.empty()) {
    std::fprintf(stderr, "grail-server: --model and --data-dir are required\n%s\n",
                 absl::ProgramUsageMessage().data());
    return 2;
  }
  const bool replicated = !absl::GetFlag(FLAGS_nats_url).empty();
  if (replicated != !absl::GetFlag(FLAGS_nats_stream).empty()) {
    std::fprintf(stderr, "grail-server: --nats-url and --nats-stream go together\n");
    return 2;
  }
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  auto or_cores = [cores](int n) { return n > 0 ? n : cores; };

  EngineOptions engine_options;
  engine_options.max_batch_size = std::max(1, absl::GetFlag(FLAGS_max_batch_size));
  engine_options.max_queue_delay =
      std::chrono::microseconds(std::max(0, absl::GetFlag(FLAGS_max_queue_delay_us)));
  engine_options.extraction_threads = or_cores(absl::GetFlag(FLAGS_extraction_threads));
  engine_options.max_batch_nodes = std::max(2, absl::GetFlag(FLAGS_max_batch_nodes));
  engine_options.max_batch_edges = std::max(1, absl::GetFlag(FLAGS_max_batch_edges));
  engine_options.max_subgraph_nodes = std::max(2, absl::GetFlag(FLAGS_max_subgraph_nodes));
  engine_options.max_subgraph_edges = std::max(1, absl::GetFlag(FLAGS_max_subgraph_edges));
  engine_options.max_pending_subgraphs = absl::GetFlag(FLAGS_max_pending_subgraphs);
  engine_options.max_queued_bytes = absl::GetFlag(FLAGS_max_queued_bytes);
  engine_options.max_caller_share = caller_share;
  ServiceLimits limits;
  limits.max_request_triples = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_request_triples));
  limits.max_candidates = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_candidates));
  limits.max_chunk_facts = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_chunk_facts));
  limits.max_calls_in_flight = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_calls_in_flight));
  limits.max_caller_share = caller_share;
  limits.max_name_bytes = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_name_bytes));
  RankLimits rank_limits;
  rank_limits.max_rank_subgraphs = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_rank_subgraphs));
  rank_limits.max_rank_results = static_cast<uint32_t>(absl::GetFlag(FLAGS_max_rank_results));
  const int compute_threads = or_cores(absl::GetFlag(FLAGS_compute_threads));

  Log("start", {{"version", GRAIL_VERSION},
                {"model", model_path},
                {"data_dir", data_dir},
                {"host", absl::GetFlag(FLAGS_host)},
                {"port", absl::GetFlag(FLAGS_port)},
                {"metrics_port", absl::GetFlag(FLAGS_metrics_port)},
                {"device", absl::GetFlag(FLAGS_device)},
                {"max_batch_size", engine_options.max_batch_size},
                {"max_batch_nodes", engine_options.max_batch_nodes},
                {"max_batch_edges", engine_options.max_batch_edges},
                {"max_subgraph_nodes", engine_options.max_subgraph_nodes},
                {"max_subgraph_edges", engine_options.max_subgraph_edges},
                {"max_queue_delay_us", engine_options.max_queue_delay.count()},
                {"extraction_threads", engine_options.extraction_threads},
                {"compute_threads", compute_threads},
                {"max_request_triples", limits.max_request_triples},
                {"max_candidates", limits.max_candidates},
                {"max_rank_subgraphs", rank_limits.max_rank_subgraphs},
                {"max_rank_results", rank_limits.max_rank_results},
                {"max_calls_in_flight", limits.max_calls_in_flight},
                {"max_pending_subgraphs", engine_options.max_pending_subgraphs},
                {"max_queued_bytes", engine_options.max_queued_bytes},
                {"max_caller_share", caller_share},
                {"max_chunk_facts", limits.max_chunk_facts},
                {"max_name_bytes", absl::GetFlag(FLAGS_max_name_bytes)},
                {"max_message_bytes", absl::GetFlag(FLAGS_max_message_bytes)},
                {"allow_unknown_relations", absl::GetFlag(FLAGS_allow_unknown_relations)},
                {"sync_writes", absl::GetFlag(FLAGS_sync_writes)},
                {"truncate_corrupted_wal", absl::GetFlag(FLAGS_truncate_corrupted_wal)},
                {"drain_seconds", absl::GetFlag(FLAGS_drain_seconds)},
                {"max_model_bytes", absl::GetFlag(FLAGS_max_model_bytes)},
                {"model_load_timeout_seconds", absl::GetFlag(FLAGS_model_load_timeout_seconds)},
                {"warmup_batches", absl::GetFlag(FLAGS_warmup_batches)}});
  // A misspelt GRAIL_* setting would otherwise be ignored without a word.
  if (const std::vector<std::string> unknown = UnknownFlagVariables("GRAIL_", {"GRAIL_TOKEN"});
      !unknown.empty()) {
    Log("warning", {{"message", "environment variables that are no grail-server flag were ignored"},
                    {"variables", unknown}});
  }

  UseServingAllocator();
  SetComputeThreads(compute_threads);
  const ArchiveLoadLimits archive_limits{
      absl::GetFlag(FLAGS_max_model_bytes),
      std::chrono::seconds(absl::GetFlag(FLAGS_model_load_timeout_seconds))};
  SetArchiveLoadLimits(archive_limits);
  google::protobuf::SetLogHandler(&LogFromProtobuf);

  // Declared before the metrics, whose HTTP endpoint reads it until the metrics are destroyed.
  std::atomic<bool> ready{false};
  ServerMetrics metrics(GRAIL_VERSION);
  if (absl::GetFlag(FLAGS_metrics_port) >= 0) {
    absl::Status started =
        metrics.StartHttp(absl::GetFlag(FLAGS_host), absl::GetFlag(FLAGS_metrics_port),
                          [&ready] { return ready.load(); });
    if (!started.ok()) return Fail("starting the metrics endpoint", started);
  }

  // Transport security and access tokens, checked before anything listens.
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  const ServerTlsFiles tls{absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                           absl::GetFlag(FLAGS_tls_client_ca),
                           absl::GetFlag(FLAGS_tls_reload_seconds)};
  const bool use_tls = !tls.cert.empty() || !tls.key.empty() || !tls.client_ca.empty();
  if (use_tls) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> made = MakeTlsServerCredentials(tls);
    if (!made.ok()) return Fail("reading the TLS files", made.status());
    credentials = *std::move(made);
  }
  std::unique_ptr<AccessTokens> tokens;
  if (!absl::GetFlag(FLAGS_auth_tokens).empty()) {
    absl::StatusOr<std::unique_ptr<AccessTokens>> opened =
        AccessTokens::Open(absl::GetFlag(FLAGS_auth_tokens));
    if (!opened.ok()) return Fail("reading the token file", opened.status());
    tokens = *std::move(opened);
    metrics.OnTokensLoaded(true, tokens->names().size());
  }
  Log("security", {{"tls", use_tls},
                   {"mutual_tls", !tls.client_ca.empty()},
                   {"tokens", tokens ? tokens->names().size() : 0},
                   {"reflection", absl::GetFlag(FLAGS_reflection)}});
  const std::string host = absl::GetFlag(FLAGS_host);
  if ((!use_tls || tokens == nullptr) && !IsLoopback(host)) {
    std::vector<std::string> missing;
    if (!use_tls) missing.push_back("TLS (--tls-cert, --tls-key)");
    if (tokens == nullptr) missing.push_back("bearer tokens (--auth-tokens)");
    Log("warning", {{"message", absl::StrCat("listening on ", host, " without ",
                                             absl::StrJoin(missing, " or "),
                                             ": whoever reaches the port can call it")}});
  }

  // gRPC first, answering health checks with NOT_SERVING while we load.
  KnowledgeGraphService service(limits, &metrics, tokens.get());
  grpc::EnableDefaultHealthCheckService(true);
  // Linking the reflection library registers its plugin for every ServerBuilder (a static
  // initialiser); --reflection=false takes it out of this builder again.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  if (!absl::GetFlag(FLAGS_reflection)) builder.SetOption(std::make_unique<WithoutReflection>());
  int port = 0;
  builder.AddListeningPort(absl::StrCat(host, ":", absl::GetFlag(FLAGS_port)), credentials, &port);
  builder.SetMaxReceiveMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  builder.SetMaxSendMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  builder.RegisterService(&service);
  // Unary requests that do not parse get INVALID_ARGUMENT saying so (server/rpc/request_parsing.h),
  // counted in grail_requests_total like every other call.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<MalformedRequestInterceptorFactory>(
      [&metrics](absl::string_view method, int code, double seconds) {
        metrics.OnCall(method, code, seconds);
      }));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return Fail("starting the gRPC server",
                absl::UnavailableError(absl::StrCat("cannot listen on ", absl::GetFlag(FLAGS_host),
                                                    ":", absl::GetFlag(FLAGS_port))));
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus(false);
  Log("listening", {{"port", port}, {"metrics_port", metrics.http_port()}});

  // The model and the graph.
  const Clock::time_point load_start = Clock::now();
  absl::StatusOr<std::shared_ptr<const ServedModel>> model;
  {
    // Nothing is served yet: a crash of LibTorch's loader ends the start with this line
    // rather than a bare SIGSEGV.
    const LoaderCrashGuard guard(
        JsonLine({{"event", "error"},
                  {"during", "loading the model"},
                  {"error", absl::StrCat("INVALID_ARGUMENT: loading model ", model_path,
                                         " crashed LibTorch's loader: the file is damaged or "
                                         "not a model archive")}}) +
        "\n");
    model = LoadServedModel(model_path, absl::GetFlag(FLAGS_device), /*generation=*/1);
  }
  if (!model.ok()) return Fail("loading the model", model.status());
  // From now on, every archive (ReloadModel, SIGHUP) is loaded in a child process first: one
  // that would crash LibTorch's loader is refused while the server keeps serving.
  IsolateArchiveLoads(archive_limits);
  // Every commit (a local chunk, or one applied from the stream) releases the calls waiting
  // for that graph version. Declared before the store, which calls it.
  SequenceGate sequence_gate(0);
  StoreOptions store_options;
  store_options.on_commit = [&sequence_gate](uint64_t sequence) {
    sequence_gate.Advance(sequence);
  };
  store_options.sync = absl::GetFlag(FLAGS_sync_writes);
  store_options.truncate_corrupted_wal = absl::GetFlag(FLAGS_truncate_corrupted_wal);
  store_options.max_name_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_max_name_bytes));
  store_options.max_chunk_facts = limits.max_chunk_facts;
  store_options.log = [](absl::string_view level, absl::string_view message) {
    Log("store", {{"level", level}, {"message", message}});
  };
  if (!absl::GetFlag(FLAGS_allow_unknown_relations)) {
    store_options.allowed_relations = (*model)->relations();
  }
  if ((*model)->open_vocabulary()) store_options.allowed_relations.reset();
  absl::StatusOr<std::unique_ptr<TripleStore>> store = TripleStore::Open(data_dir, store_options);
  if (!store.ok()) return Fail("opening the store", store.status());
  sequence_gate.Advance((*store)->Snapshot()->sequence());
  if (!(*store)->recovery_note().empty()) {
    metrics.OnStoreRecoveredFromCorruption();
    Log("store_recovered_with_loss", {{"data_dir", data_dir},
                                      {"sequence", (*store)->Snapshot()->sequence()},
                                      {"message", (*store)->recovery_note()}});
  }
  WarmupOptions warmup;
  warmup.batches = absl::GetFlag(FLAGS_warmup_batches);
  warmup.batch_size = engine_options.max_batch_size;
  warmup.max_batch_nodes = engine_options.max_batch_nodes;
  warmup.max_batch_edges = engine_options.max_batch_edges;
  const Clock::time_point warmup_start = Clock::now();
  if (const std::vector<std::string> unknown = UnknownRelations(**model, *(*store)->Snapshot());
      !unknown.empty()) {
    // Served anyway (a restart must not fail on it), but never silently.
    Json names = Json::array();
    for (size_t i = 0; i < std::min<size_t>(unknown.size(), 10); ++i) names.push_back(unknown[i]);
    Log("warning",
        {{"message", absl::StrCat("the model does not know ", unknown.size(),
                                  " of the stored "
                                  "graph's ",
                                  (*store)->Snapshot()->num_live_relations(),
                                  " relations: their facts are left out of every subgraph it "
                                  "scores, and calls naming them as the relation fail")},
         {"unknown_relations", names}});
  }
  const absl::StatusOr<int> warmup_forwards = WarmUp(**model, *(*store)->Snapshot(), warmup);
  if (!warmup_forwards.ok()) return Fail("warming up the model", warmup_forwards.status());
  const double warmup_seconds = std::chrono::duration<double>(Clock::now() - warmup_start).count();
  InferenceEngine engine(engine_options, &metrics);
  LinkPredictor predictor(*model, **store, engine, rank_limits);
  ReloadOptions reload_options;
  reload_options.default_path = model_path;
  reload_options.device = absl::GetFlag(FLAGS_device);
  reload_options.allow_unknown_relations = absl::GetFlag(FLAGS_allow_unknown_relations);
  reload_options.warmup = warmup;
  ModelReloader reloader(
      predictor, reload_options, [&metrics](const absl::StatusOr<ReloadOutcome>& outcome) {
        metrics.OnModelReload(outcome.ok(),
                              outcome.ok() ? outcome->load_seconds + outcome->warmup_seconds : 0);
        if (outcome.ok()) {
          Log("model_reloaded", {{"version", outcome->model->version()},
                                 {"generation", outcome->model->generation()},
                                 {"previous_version", outcome->previous_version},
                                 {"load_seconds", outcome->load_seconds},
                                 {"warmup_forwards", outcome->warmup_forwards},
                                 {"warmup_seconds", outcome->warmup_seconds}});
        } else {
          Log("model_not_reloaded", {{"error", outcome.status().ToString()}});
        }
      });
  if (absl::Status warm = WarmUpServingPath(predictor, warmup.batches, warmup.batch_size);
      !warm.ok()) {
    return Fail("warming up the serving path", warm);
  }
  std::unique_ptr<Replicator> replicator;
  if (replicated) {
    ReplicationOptions replication;
    replication.url = absl::GetFlag(FLAGS_nats_url);
    replication.stream = absl::GetFlag(FLAGS_nats_stream);
    replication.subject = absl::GetFlag(FLAGS_nats_subject);
    replication.replica = absl::GetFlag(FLAGS_replica_name);
    if (replication.replica.empty()) {
      char name[256] = {};
      gethostname(name, sizeof name - 1);
      replication.replica = name;
    }
    replication.stream_replicas = absl::GetFlag(FLAGS_nats_stream_replicas);
    replication.stream_max_chunks = absl::GetFlag(FLAGS_nats_stream_max_chunks);
    replication.publish_timeout =
        std::chrono::milliseconds(absl::GetFlag(FLAGS_replication_timeout_ms));
    replication.log = [](absl::string_view event, absl::string_view message) {
      Log(event, {{"message", message}});
    };
    absl::StatusOr<std::unique_ptr<Replicator>> started = Replicator::Start(replication, **store);
    if (!started.ok()) return Fail("starting replication", started.status());
    replicator = *std::move(started);
    Log("replication", {{"nats_url", replication.url},
                        {"stream", replication.stream},
                        {"replica", replication.replica},
                        {"applied", (*store)->Snapshot()->sequence()},
                        {"stream_last", replicator->last_sequence_at_start()}});
    // Serve only once the graph holds what the stream held at start: a new replica does not
    // answer from a half-built graph.
    while (!replicator->WaitCaughtUp(std::chrono::seconds(5))) {
      Log("replication_catching_up", {{"applied", (*store)->Snapshot()->sequence()},
                                      {"target", replicator->last_sequence_at_start()}});
    }
    service.UseReplicator(replicator.get());
    metrics.AttachReplication(*replicator);
  }
  service.UseSequenceGate(&sequence_gate,
                          std::chrono::milliseconds(absl::GetFlag(FLAGS_max_sequence_wait_ms)));
  metrics.Attach(predictor, service);
  // From here on a scrape reads the predictor, the engine and the service: on every way out
  // of Run() the endpoint stops before they are destroyed (they were declared after the
  // metrics, so they would go first).
  absl::Cleanup stop_metrics_http = [&metrics] { metrics.StopHttp(); };
  service.Activate(&predictor, &reloader, ServedModelInfo{GRAIL_VERSION},
                   static_cast<uint32_t>(engine_options.max_batch_size));
  health->SetServingStatus(true);
  ready.store(true);
  {
    const std::shared_ptr<const GraphSnapshot> graph = (*store)->Snapshot();
    Log("serving",
        {{"load_seconds", std::chrono::duration<double>(Clock::now() - load_start).count()},
         {"entities", graph->num_live_entities()},
         {"relations", graph->num_live_relations()},
         {"facts", graph->num_facts()},
         {"sequence", graph->sequence()},
         {"model_version", (*model)->version()},
         {"model_format", (*model)->Summary().format},
         {"model_relations", (*model)->relations().size()},
         {"parameters", (*model)->Summary().parameters},
         {"warmup_forwards", *warmup_forwards},
         {"warmup_seconds", warmup_seconds}});
  }
  const std::string ready_file = absl::GetFlag(FLAGS_ready_file);
  if (!ready_file.empty()) {
    // Written whole under another name, then renamed: a reader never sees half a file.
    const std::string temporary = ready_file + ".tmp";
    std::ofstream(temporary) << JsonLine({{"port", port}, {"metrics_port", metrics.http_port()}})
                             << "\n";
    std::rename(temporary.c_str(), ready_file.c_str());
  }

  // Wait for SIGTERM/SIGINT (blocked in every thread since main's start). Meanwhile, re-read
  // the token file when it changes (checked every second) or on SIGHUP, and on SIGHUP
  // reload the model from --model.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  int signal_number = 0;
  for (;;) {
    const timespec second{1, 0};
    signal_number = sigtimedwait(&signals, nullptr, &second);
    if (signal_number == SIGTERM || signal_number == SIGINT) break;
    // SIGHUP also re-reads --model (the outcome is logged and counted by the reloader).
    if (signal_number == SIGHUP) service.ReloadFromSignal();
    if (tokens == nullptr) continue;
    const absl::StatusOr<bool> reloaded = tokens->Reload(/*force=*/signal_number == SIGHUP);
    if (!reloaded.ok()) {
      // Logged and counted once per change of the file, not every second.
      if (reloaded.status().message() != last_token_error) {
        last_token_error = std::string(reloaded.status().message());
        metrics.OnTokensLoaded(false, 0);
        Log("tokens_not_reloaded",
            {{"error", reloaded.status().ToString()}, {"tokens_in_use", tokens->names().size()}});
      }
    } else if (*reloaded) {
      last_token_error.clear();
      metrics.OnTokensLoaded(true, tokens->names().size());
      Log("tokens_reloaded", {{"tokens", tokens->names().size()}});
    }
  }

  const Clock::time_point drain_start = Clock::now();
  Log("draining", {{"signal", signal_number == SIGTERM ? "SIGTERM" : "SIGINT"},
                   {"drain_seconds", absl::GetFlag(FLAGS_drain_seconds)}});
  ready.store(false);
  health->SetServingStatus(false);
  // A reload in progress must not hold the drain: its load (a child process) is killed and
  // its warm-up stops at the next forward.
  reloader.Cancel();
  CancelArchiveLoads();
  service.BeginDrain();
  // Stops accepting calls, lets the ones received finish until the deadline, then cancels
  // the rest. It also waits (within the deadline) for idle client connections to close.
  const Clock::time_point drain_deadline =
      drain_start + std::chrono::seconds(std::max(0, absl::GetFlag(FLAGS_drain_seconds)));
  server->Shutdown(std::chrono::system_clock::now() + (drain_deadline - Clock::now()));
  const bool drained = Clock::now() < drain_deadline;
  engine.Shutdown();
  metrics.StopHttp();  // its replication gauges read the replicator
  replicator.reset();  // stops applying before the store is flushed
  const absl::Status synced = (*store)->Sync();
  if (!synced.ok()) return Fail("flushing the store", synced);
  Log("stopped",
      {{"all_calls_finished", drained},
       {"drain_seconds_taken", std::chrono::duration<double>(Clock::now() - drain_start).count()}});
  return 0;
}

}  // namespace
}  // namespace grail

int main(int argc, char** argv) {
  // A child started to load a model archive first (model/core/archive_loading.h).
  if (const int probe = grail::RunArchiveProbeIfAsked(argc, argv); probe >= 0) return probe;
  grail::UseFastestBlasKernels(argv);  // before anything else: it may start the program again
  // Block the shutdown signals before any thread exists, so every thread inherits the mask
  // and only sigwait() in Run() receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  absl::SetProgramUsageMessage(
      "grail-server --model MODEL.pt --data-dir DIR --port P --metrics-port M [--device cpu|cuda]\n"
      "Serves kg.v1.KnowledgeGraph: scores and ranks facts of a live graph with a GraIL model.\n"
      "Every flag can also be given as the environment variable GRAIL_<FLAG>.");
  const absl::Status from_environment = grail::ApplyFlagsFromEnvironment("GRAIL_");
  if (!from_environment.ok()) {
    std::fprintf(stderr, "grail-server: %s\n", from_environment.ToString().c_str());
    return 2;
  }
  grail::ParseCommandLine(argc, argv);
  return grail::Run();
}
