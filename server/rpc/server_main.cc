// grail-server: serves a model of any family (model/families.h) over a live knowledge graph
// stored in RocksDB.
//
//   grail-server --model MODEL.pt --data-dir DIR --port P --metrics-port M [--device cpu|cuda]
//
// Start-up order, so that orchestrators see progress: the gRPC port opens first with the
// health service answering NOT_SERVING, then the model is loaded and the graph index is
// rebuilt from the store, then health turns SERVING. SIGTERM or SIGINT drains: health
// turns NOT_SERVING, gRPC refuses new calls, calls received get --drain-seconds to finish,
// the store is flushed, and the process exits 0. SIGHUP re-reads --auth-tokens and --model.
// The flags, and the environment variables that set them, are in server_config.cc.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
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
#include "common/durable_file.h"
#include "common/json.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/impl/server_builder_option.h"
#include "grpcpp/impl/server_builder_plugin.h"
#include "model/core/archive_probe.h"
#include "model/core/blas_kernels.h"
#include "model/core/runtime.h"
#include "server/engine/inference_engine.h"
#include "server/metrics/server_metrics.h"
#include "server/replication/replication.h"
#include "server/replication/sequence_gate.h"
#include "server/rpc/access_tokens.h"
#include "server/rpc/graph_service.h"
#include "server/rpc/malformed_requests.h"
#include "server/rpc/server_config.h"
#include "server/rpc/transport_security.h"
#include "server/scoring/link_predictor.h"
#include "server/scoring/model_reloader.h"
#include "server/scoring/served_model.h"
#include "store/triple_store.h"

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

// The gRPC port's credentials and the access tokens, checked before anything listens.
struct Security {
  std::shared_ptr<grpc::ServerCredentials> credentials;
  std::unique_ptr<AccessTokens> tokens;  // null without --auth-tokens
};

// On an error, `*during` names what failed (the log line's "during").
absl::StatusOr<Security> LoadSecurity(const ServerConfig& config, ServerMetrics& metrics,
                                      std::string* during) {
  Security security;
  security.credentials = grpc::InsecureServerCredentials();
  if (config.use_tls()) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> made =
        MakeTlsServerCredentials(config.tls);
    if (!made.ok()) {
      *during = "reading the TLS files";
      return made.status();
    }
    security.credentials = *std::move(made);
  }
  if (!config.auth_tokens.empty()) {
    absl::StatusOr<std::unique_ptr<AccessTokens>> opened = AccessTokens::Open(config.auth_tokens);
    if (!opened.ok()) {
      *during = "reading the token file";
      return opened.status();
    }
    security.tokens = *std::move(opened);
    metrics.OnTokensLoaded(true, security.tokens->names().size());
  }
  Log("security", {{"tls", config.use_tls()},
                   {"mutual_tls", !config.tls.client_ca.empty()},
                   {"tokens", security.tokens ? security.tokens->names().size() : 0},
                   {"reflection", config.reflection}});
  if ((!config.use_tls() || security.tokens == nullptr) && !IsLoopback(config.host)) {
    std::vector<std::string> missing;
    if (!config.use_tls()) missing.push_back("TLS (--tls-cert, --tls-key)");
    if (security.tokens == nullptr) missing.push_back("bearer tokens (--auth-tokens)");
    Log("warning", {{"message", absl::StrCat("listening on ", config.host, " without ",
                                             absl::StrJoin(missing, " or "),
                                             ": whoever reaches the port can call it")}});
  }
  return security;
}

// The gRPC server, listening, with health NOT_SERVING until the model and the graph are ready.
std::unique_ptr<grpc::Server> StartGrpc(const ServerConfig& config, const Security& security,
                                        KnowledgeGraphService& service, ServerMetrics& metrics,
                                        int* port) {
  grpc::EnableDefaultHealthCheckService(true);
  // Linking the reflection library registers its plugin for every ServerBuilder (a static
  // initialiser); --reflection=false takes it out of this builder again.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  if (!config.reflection) builder.SetOption(std::make_unique<WithoutReflection>());
  builder.AddListeningPort(absl::StrCat(config.host, ":", config.port), security.credentials, port);
  builder.SetMaxReceiveMessageSize(config.max_message_bytes);
  builder.SetMaxSendMessageSize(config.max_message_bytes);
  builder.RegisterService(&service);
  // Unary requests that do not parse get INVALID_ARGUMENT saying so
  // (server/rpc/malformed_requests.h), counted in grail_requests_total like every other call.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<MalformedRequestInterceptorFactory>(
      [&metrics](absl::string_view method, int code, double seconds) {
        metrics.OnCall(method, code, seconds);
      }));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *port == 0) return nullptr;
  server->GetHealthCheckService()->SetServingStatus(false);
  return server;
}

// The model at --model, loaded in-process: nothing is served yet, so a crash of LibTorch's
// loader ends the start with a JSON error line rather than a bare SIGSEGV.
absl::StatusOr<std::shared_ptr<const ServedModel>> LoadStartModel(const ServerConfig& config) {
  const LoaderCrashGuard guard(
      JsonLine({{"event", "error"},
                {"during", "loading the model"},
                {"error", absl::StrCat("INVALID_ARGUMENT: loading model ", config.model_path,
                                       " crashed LibTorch's loader: the file is damaged or "
                                       "not a model archive")}}) +
      "\n");
  return LoadServedModel(config.model_path, config.device, /*generation=*/1);
}

// The store at --data-dir, accepting the relations `model` knows (all, with
// --allow-unknown-relations or a model of any relation); every commit advances `gate`.
absl::StatusOr<std::unique_ptr<TripleStore>> OpenStore(const ServerConfig& config,
                                                       const ServedModel& model, SequenceGate& gate,
                                                       ServerMetrics& metrics) {
  StoreOptions options = config.store;
  options.on_commit = [&gate](uint64_t sequence) { gate.Advance(sequence); };
  options.log = [](absl::string_view level, absl::string_view message) {
    Log("store", {{"level", level}, {"message", message}});
  };
  if (!config.allow_unknown_relations) options.allowed_relations = model.relations();
  if (model.open_vocabulary()) options.allowed_relations.reset();
  // Only a model of any relation reads which relation sides meet; a reload to one counts them.
  options.track_relation_sides = model.reads_relation_graph();
  absl::StatusOr<std::unique_ptr<TripleStore>> store = TripleStore::Open(config.data_dir, options);
  if (!store.ok()) return store;
  gate.Advance((*store)->Snapshot()->sequence());
  if (!(*store)->recovery_note().empty()) {
    metrics.OnStoreRecoveredFromCorruption();
    Log("store_recovered_with_loss", {{"data_dir", config.data_dir},
                                      {"sequence", (*store)->Snapshot()->sequence()},
                                      {"message", (*store)->recovery_note()}});
  }
  if (const std::vector<std::string> unknown = UnknownRelations(model, *(*store)->Snapshot());
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
  return store;
}

// Replication through NATS JetStream, once this replica holds what the stream held at start:
// a new replica does not answer from a half-built graph.
absl::StatusOr<std::unique_ptr<Replicator>> StartReplication(const ServerConfig& config,
                                                             TripleStore& store) {
  ReplicationOptions replication = config.replication;
  replication.log = [](absl::string_view event, absl::string_view message) {
    Log(event, {{"message", message}});
  };
  absl::StatusOr<std::unique_ptr<Replicator>> started = Replicator::Start(replication, store);
  if (!started.ok()) return started;
  const Replicator& replicator = **started;
  Log("replication", {{"nats_url", replication.url},
                      {"stream", replication.stream},
                      {"replica", replication.replica},
                      {"applied", store.Snapshot()->sequence()},
                      {"stream_last", replicator.last_sequence_at_start()}});
  while (!(*started)->WaitCaughtUp(std::chrono::seconds(5))) {
    Log("replication_catching_up", {{"applied", store.Snapshot()->sequence()},
                                    {"target", replicator.last_sequence_at_start()}});
  }
  return started;
}

// Waits for SIGTERM or SIGINT (blocked in every thread since main's start) and returns it.
// Meanwhile re-reads the token file when it changes (checked every second) or on SIGHUP,
// and on SIGHUP reloads the model from --model.
int WaitForShutdownSignal(KnowledgeGraphService& service, AccessTokens* tokens,
                          ServerMetrics& metrics) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  std::string last_token_error;
  for (;;) {
    const timespec second{1, 0};
    const int signal_number = sigtimedwait(&signals, nullptr, &second);
    if (signal_number == SIGTERM || signal_number == SIGINT) return signal_number;
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
}

// Writes {"port":P,"metrics_port":M} to `path` whole under another name, then replaces it
// (common/durable_file.h): a reader never sees half a file. A failure is logged; the server
// serves either way.
void WriteReadyFile(const std::string& path, int port, int metrics_port) {
  const absl::Status written =
      WriteAndReplaceFile(path, JsonLine({{"port", port}, {"metrics_port", metrics_port}}) + "\n");
  if (!written.ok()) {
    Log("error", {{"during", "writing the ready file"}, {"error", written.ToString()}});
  }
}

// The stages in order: configuration, metrics, security, gRPC (NOT_SERVING), the model, the
// store, warm-up, the engine and the domain, replication, SERVING; then the signals, and the
// drain.
int Run(const ServerConfig& config) {
  Json start = ConfigLogFields(config);
  start["version"] = GRAIL_VERSION;
  Log("start", start);
  // A misspelt GRAIL_* setting would otherwise be ignored without a word.
  if (const std::vector<std::string> unknown =
          UnknownFlagVariables("GRAIL_", {"GRAIL_TOKEN", "GRAIL_TARGET"});
      !unknown.empty()) {
    Log("warning", {{"message", "environment variables that are no grail-server flag were ignored"},
                    {"variables", unknown}});
  }
  UseServingAllocator();
  SetComputeThreads(config.compute_threads);
  SetArchiveLoadLimits(config.archive_limits);
  google::protobuf::SetLogHandler(&LogFromProtobuf);

  // Declared before the metrics, whose HTTP endpoint reads it until the metrics are destroyed.
  std::atomic<bool> ready{false};
  ServerMetrics metrics(GRAIL_VERSION);
  if (config.metrics_port >= 0) {
    absl::Status started =
        metrics.StartHttp(config.host, config.metrics_port, [&ready] { return ready.load(); });
    if (!started.ok()) return Fail("starting the metrics endpoint", started);
  }
  std::string during;
  absl::StatusOr<Security> security = LoadSecurity(config, metrics, &during);
  if (!security.ok()) return Fail(during, security.status());

  KnowledgeGraphService service(config.limits, &metrics, security->tokens.get());
  int port = 0;
  std::unique_ptr<grpc::Server> server = StartGrpc(config, *security, service, metrics, &port);
  if (server == nullptr) {
    return Fail(
        "starting the gRPC server",
        absl::UnavailableError(absl::StrCat("cannot listen on ", config.host, ":", config.port)));
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  Log("listening", {{"port", port}, {"metrics_port", metrics.http_port()}});

  const Clock::time_point load_start = Clock::now();
  absl::StatusOr<std::shared_ptr<const ServedModel>> model = LoadStartModel(config);
  if (!model.ok()) return Fail("loading the model", model.status());
  // From now on, every archive (ReloadModel, SIGHUP) is loaded in a child process first: one
  // that would crash LibTorch's loader is refused while the server keeps serving.
  IsolateArchiveLoads(config.archive_limits);
  // Every commit (a local chunk, or one applied from the stream) releases the calls waiting
  // for that graph version. Declared before the store, which calls it.
  SequenceGate sequence_gate(0);
  absl::StatusOr<std::unique_ptr<TripleStore>> store =
      OpenStore(config, **model, sequence_gate, metrics);
  if (!store.ok()) return Fail("opening the store", store.status());
  if (absl::Status fits = CheckRelationGraphFits(**model, *(*store)->Snapshot(),
                                                 config.store.max_relation_side_pairs);
      !fits.ok()) {
    return Fail("checking the graph of relations", fits);
  }
  const Clock::time_point warmup_start = Clock::now();
  const absl::StatusOr<int> warmup_forwards = WarmUp(**model, *(*store)->Snapshot(), config.warmup);
  if (!warmup_forwards.ok()) return Fail("warming up the model", warmup_forwards.status());
  const double warmup_seconds = std::chrono::duration<double>(Clock::now() - warmup_start).count();

  InferenceEngine engine(config.engine, &metrics);
  LinkPredictor predictor(*model, **store, engine, config.rank_limits, config.pass_cache_bytes);
  ReloadOptions reload_options;
  reload_options.default_path = config.model_path;
  reload_options.device = config.device;
  reload_options.allow_unknown_relations = config.allow_unknown_relations;
  reload_options.max_relation_side_pairs = config.store.max_relation_side_pairs;
  reload_options.warmup = config.warmup;
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
                                 {"warmup_seconds", outcome->warmup_seconds},
                                 {"relation_sides_seconds", outcome->relation_sides_seconds}});
        } else {
          Log("model_not_reloaded", {{"error", outcome.status().ToString()}});
        }
      });
  if (absl::Status warm =
          WarmUpServingPath(predictor, config.warmup.batches, config.warmup.batch_size);
      !warm.ok()) {
    return Fail("warming up the serving path", warm);
  }
  std::unique_ptr<Replicator> replicator;
  if (config.replicated()) {
    absl::StatusOr<std::unique_ptr<Replicator>> started = StartReplication(config, **store);
    if (!started.ok()) return Fail("starting replication", started.status());
    replicator = *std::move(started);
    service.UseReplicator(replicator.get());
    metrics.AttachReplication(*replicator);
  }
  service.UseSequenceGate(&sequence_gate, std::chrono::milliseconds(config.max_sequence_wait_ms));
  // Declared after the engine, so destroyed first: it waits for its rankings, which the
  // engine still runs.
  std::unique_ptr<OnlineEvaluator> online;
  if (config.online_eval.rate > 0) {
    online = std::make_unique<OnlineEvaluator>(predictor, config.online_eval, &metrics);
    service.UseOnlineEvaluation(online.get());
  }
  metrics.Attach(predictor, service);
  // From here on a scrape reads the predictor, the engine and the service: on every way out
  // of Run() the endpoint stops before they are destroyed (they were declared after the
  // metrics, so they would go first).
  absl::Cleanup stop_metrics_http = [&metrics] { metrics.StopHttp(); };
  service.Activate(&predictor, &reloader, ServedModelInfo{GRAIL_VERSION},
                   static_cast<uint32_t>(config.engine.max_batch_size));
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
  if (!config.ready_file.empty()) WriteReadyFile(config.ready_file, port, metrics.http_port());

  const int signal_number = WaitForShutdownSignal(service, security->tokens.get(), metrics);

  const Clock::time_point drain_start = Clock::now();
  Log("draining", {{"signal", signal_number == SIGTERM ? "SIGTERM" : "SIGINT"},
                   {"drain_seconds", config.drain_seconds}});
  ready.store(false);
  health->SetServingStatus(false);
  // A reload in progress must not hold the drain: its load (a child process) is killed and
  // its warm-up stops at the next forward.
  reloader.Cancel();
  CancelArchiveLoads();
  service.BeginDrain();
  // Stops accepting calls, lets the ones received finish until the deadline, then cancels
  // the rest. It also waits (within the deadline) for idle client connections to close.
  const Clock::time_point drain_deadline = drain_start + std::chrono::seconds(config.drain_seconds);
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
  // A child started to load a model archive first (model/core/archive_probe.h).
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
      "Serves kg.v1.KnowledgeGraph: scores and ranks facts of a live graph with a model of any\n"
      "family grail-train, grail-fuse or grail-tools import-ultra writes.\n"
      "Every flag can also be given as the environment variable GRAIL_<FLAG>.");
  const absl::Status from_environment = grail::ApplyFlagsFromEnvironment("GRAIL_");
  if (!from_environment.ok()) {
    std::fprintf(stderr, "grail-server: %s\n", from_environment.ToString().c_str());
    return 2;
  }
  grail::ParseCommandLine(argc, argv);
  const absl::StatusOr<grail::ServerConfig> config = grail::ReadServerConfig();
  if (!config.ok()) {
    std::fprintf(stderr, "grail-server: %s\n", std::string(config.status().message()).c_str());
    if (absl::StartsWith(config.status().message(), "--model and --data-dir")) {
      std::fprintf(stderr, "%s\n", absl::ProgramUsageMessage().data());
    }
    return 2;
  }
  return grail::Run(*config);
}
