#include "server/server_metrics.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/metrics.h"
#include "server/metrics_http.h"
#include "server/process_metrics.h"

namespace grail {
namespace {

// The methods of kg.v1.KnowledgeGraph, in a fixed order for per-method lookup tables.
constexpr std::array<absl::string_view, 6> kMethods = {"ScoreTriplet", "ScoreTriplets", "RankTails",
                                                       "RankHeads",    "AddTriples",    "GetStats"};
// gRPC status code names by number (grpc::StatusCode).
constexpr std::array<const char*, 17> kCodeNames = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

int MethodIndex(absl::string_view method) {
  for (size_t i = 0; i < kMethods.size(); ++i) {
    if (kMethods[i] == method) return static_cast<int>(i);
  }
  return -1;
}

// Registration of our fixed set of names can only fail through a programming error.
template <typename T>
T Must(absl::StatusOr<T> value) {
  if (!value.ok()) {
    std::fprintf(stderr, "metrics registration: %s\n", value.status().ToString().c_str());
    std::abort();
  }
  return *value;
}
void Must(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "metrics registration: %s\n", status.ToString().c_str());
    std::abort();
  }
}

}  // namespace

struct ServerMetrics::Instruments {
  MetricsRegistry registry;
  CounterFamily* requests = nullptr;
  // requests_by[method][code], created on first use (child creation takes a mutex; the
  // table keeps it off the hot path after that).
  std::array<std::array<std::atomic<Counter*>, kCodeNames.size()>, kMethods.size()> requests_by{};
  std::array<Histogram*, kMethods.size()> latency{};
  Histogram* queue_wait = nullptr;
  Histogram* batch_size = nullptr;
  Histogram* subgraph_nodes = nullptr;
  Histogram* subgraph_edges = nullptr;
  Histogram* extraction_seconds = nullptr;
  Histogram* forward_seconds = nullptr;
  Counter* batches = nullptr;
  Counter* facts_ingested = nullptr;
  Counter* chunks = nullptr;
  Counter* entities_created = nullptr;
  Counter* duplicates = nullptr;
  Histogram* chunk_seconds = nullptr;
  std::array<Counter*, 2> dropped{};  // by DropReason
  std::array<Counter*, 2> dropped_calls{};
  CounterFamily* rejected = nullptr;
  CounterFamily* auth = nullptr;
  CounterFamily* token_reloads = nullptr;
  Gauge* tokens = nullptr;
  std::unique_ptr<MetricsHttpServer> http;
};

ServerMetrics::ServerMetrics(const std::string& version) : instruments_(new Instruments) {
  Instruments& m = *instruments_;
  MetricsRegistry& r = m.registry;
  m.requests =
      Must(r.AddCounter("grail_requests_total", "gRPC calls finished, by method and status code.",
                        {"method", "code"}));
  HistogramFamily* latency = Must(r.AddHistogram(
      "grail_request_duration_seconds", "Time from a call's arrival to its answer, by method.",
      LatencyBucketsSeconds(), {"method"}));
  for (size_t i = 0; i < kMethods.size(); ++i) {
    m.latency[i] = &latency->WithLabels({std::string(kMethods[i])});
  }
  m.queue_wait = &Must(r.AddHistogram("grail_queue_wait_seconds",
                                      "How long the oldest subgraph of a batch waited for it.",
                                      LatencyBucketsSeconds()))
                      ->WithLabels();
  m.batch_size =
      &Must(r.AddHistogram("grail_batch_size", "Subgraphs per model forward.", SizeBuckets()))
           ->WithLabels();
  m.batches = &Must(r.AddCounter("grail_batches_total", "Model forwards run."))->WithLabels();
  m.subgraph_nodes =
      &Must(r.AddHistogram("grail_subgraph_nodes", "Nodes of each extracted enclosing subgraph.",
                           SizeBuckets()))
           ->WithLabels();
  m.subgraph_edges =
      &Must(r.AddHistogram("grail_subgraph_edges", "Edges of each extracted enclosing subgraph.",
                           SizeBuckets()))
           ->WithLabels();
  m.extraction_seconds = &Must(r.AddHistogram("grail_extraction_seconds",
                                              "Time to extract and label one enclosing subgraph.",
                                              ExponentialBuckets(1e-6, 4, 12)))
                              ->WithLabels();
  m.forward_seconds =
      &Must(r.AddHistogram("grail_forward_seconds", "Time of one model forward over a batch.",
                           LatencyBucketsSeconds()))
           ->WithLabels();
  m.facts_ingested =
      &Must(r.AddCounter("grail_facts_ingested_total", "New facts stored through AddTriples."))
           ->WithLabels();
  m.chunks =
      &Must(r.AddCounter("grail_ingest_chunks_total", "AddTriples chunks stored and acknowledged."))
           ->WithLabels();
  m.entities_created =
      &Must(r.AddCounter("grail_entities_created_total", "Entities created through AddTriples."))
           ->WithLabels();
  m.duplicates = &Must(r.AddCounter("grail_duplicate_facts_total",
                                    "Facts sent to AddTriples that were already stored."))
                      ->WithLabels();
  m.chunk_seconds = &Must(r.AddHistogram("grail_ingest_chunk_duration_seconds",
                                         "Time to validate, store durably and index one chunk.",
                                         LatencyBucketsSeconds()))
                         ->WithLabels();

  CounterFamily* dropped = Must(r.AddCounter(
      "grail_dropped_subgraphs_total",
      "Facts of calls that ended by deadline or cancellation before they were scored (dropped "
      "before extraction or before the forward), by reason.",
      {"reason"}));
  m.dropped[static_cast<int>(DropReason::kDeadline)] = &dropped->WithLabels({"deadline"});
  m.dropped[static_cast<int>(DropReason::kCancelled)] = &dropped->WithLabels({"cancelled"});
  CounterFamily* dropped_calls =
      Must(r.AddCounter("grail_dropped_calls_total",
                        "Scoring calls ended by deadline or cancellation, by reason.", {"reason"}));
  m.dropped_calls[static_cast<int>(DropReason::kDeadline)] =
      &dropped_calls->WithLabels({"deadline"});
  m.dropped_calls[static_cast<int>(DropReason::kCancelled)] =
      &dropped_calls->WithLabels({"cancelled"});
  m.rejected = Must(r.AddCounter(
      "grail_rejected_calls_total",
      "Calls refused with RESOURCE_EXHAUSTED, by the limit (flag) they reached.", {"limit"}));
  for (const char* limit :
       {"max_calls_in_flight", "max_pending_subgraphs", "max_queued_bytes", "max_rank_subgraphs",
        "max_rank_results", "max_subgraph_nodes", "max_subgraph_edges"}) {
    m.rejected->WithLabels({limit});  // every series exists from the start, at 0
  }
  m.auth = Must(r.AddCounter("grail_auth_requests_total",
                             "KnowledgeGraph calls whose bearer token was checked, by the token's "
                             "name (never its secret; \"\" when none or an unknown one was sent), "
                             "method and outcome (ok, missing, malformed, unknown, "
                             "insufficient_scope).",
                             {"token", "method", "outcome"}));
  m.token_reloads = Must(r.AddCounter(
      "grail_auth_token_reloads_total",
      "Re-reads of the --auth-tokens file after it changed or on SIGHUP, by result (ok, error: "
      "the tokens in use stay).",
      {"result"}));
  m.token_reloads->WithLabels({"ok"});
  m.token_reloads->WithLabels({"error"});
  m.tokens = &Must(r.AddGauge("grail_auth_tokens", "Bearer tokens in use (0: no authentication)."))
                  ->WithLabels();

  // What the scheduler holds, read at scrape time.
  auto engine_gauge = [this](const char* name, const char* help,
                             std::function<double(const EngineLoad&)> read) {
    Must(instruments_->registry.AddCallbackGauge(
        name, help, [this, read = std::move(read)]() -> std::optional<double> {
          const LinkPredictor* predictor = predictor_.load(std::memory_order_acquire);
          if (predictor == nullptr) return std::nullopt;
          return read(predictor->engine().Load());
        }));
  };
  engine_gauge("grail_scoring_calls", "Scoring calls admitted by the engine and not finished.",
               [](const EngineLoad& l) { return static_cast<double>(l.calls); });
  engine_gauge("grail_pending_subgraphs",
               "Facts admitted and not yet scored, summed over calls (--max-pending-subgraphs).",
               [](const EngineLoad& l) { return static_cast<double>(l.pending_subgraphs); });
  engine_gauge("grail_queued_subgraphs", "Extracted subgraphs waiting for a model forward.",
               [](const EngineLoad& l) { return static_cast<double>(l.queued_subgraphs); });
  engine_gauge("grail_queued_bytes", "Bytes held by admitted scoring work (--max-queued-bytes).",
               [](const EngineLoad& l) { return static_cast<double>(l.held_bytes); });
  Must(instruments_->registry.AddCallbackGauge(
      "grail_calls_in_flight",
      "KnowledgeGraph calls and streams in progress (--max-calls-in-flight).",
      [this]() -> std::optional<double> {
        const KnowledgeGraphService* service = service_.load(std::memory_order_acquire);
        if (service == nullptr) return std::nullopt;
        return static_cast<double>(service->calls_in_flight());
      }));

  // The graph, read at scrape time from the latest snapshot.
  auto graph_gauge = [this](const char* name, const char* help,
                            std::function<double(const GraphSnapshot&)> read) {
    Must(instruments_->registry.AddCallbackGauge(
        name, help, [this, read = std::move(read)]() -> std::optional<double> {
          const LinkPredictor* predictor = predictor_.load(std::memory_order_acquire);
          if (predictor == nullptr) return std::nullopt;
          return read(*predictor->store().Snapshot());
        }));
  };
  graph_gauge("grail_graph_entities", "Entities stored in the graph.",
              [](const GraphSnapshot& g) { return g.num_entities(); });
  graph_gauge("grail_graph_relations", "Relations stored in the graph.",
              [](const GraphSnapshot& g) { return g.num_relations(); });
  graph_gauge("grail_graph_facts", "Facts stored in the graph.",
              [](const GraphSnapshot& g) { return static_cast<double>(g.num_facts()); });
  graph_gauge("grail_graph_sequence", "AddTriples chunks stored so far (the graph version).",
              [](const GraphSnapshot& g) { return static_cast<double>(g.sequence()); });

  Must(r.AddCallbackFamily(
      MetricType::kGauge, "grail_model_info",
      "The served model (value 1): format, device, subgraph hops, layers, dimension, relation "
      "count and training-data fingerprint.",
      {"format", "device", "hops", "layers", "dim", "relations", "fingerprint"},
      [this]() -> std::vector<CallbackSample> {
        const LinkPredictor* predictor = predictor_.load(std::memory_order_acquire);
        if (predictor == nullptr) return {};
        const GrailModel& model = predictor->model();
        return {CallbackSample{
            {kModelFormat, model.device(), absl::StrCat(model.config().hops),
             absl::StrCat(model.config().num_layers), absl::StrCat(model.config().dim),
             absl::StrCat(model.relations().size()), model.training_fingerprint()},
            1.0}};
      }));
  Must(r.AddCallbackFamily(MetricType::kGauge, "grail_build_info", "The server's build (value 1).",
                           {"version"}, [version]() -> std::vector<CallbackSample> {
                             return {CallbackSample{{version}, 1.0}};
                           }));
  Must(RegisterProcessMetrics(r));
}

ServerMetrics::~ServerMetrics() { StopHttp(); }

absl::Status ServerMetrics::StartHttp(const std::string& host, int port,
                                      std::function<bool()> ready) {
  instruments_->http =
      std::make_unique<MetricsHttpServer>(&instruments_->registry, std::move(ready));
  return instruments_->http->Start(host, port);
}

void ServerMetrics::StopHttp() {
  if (instruments_->http != nullptr) instruments_->http->Stop();
}

int ServerMetrics::http_port() const {
  return instruments_->http != nullptr ? instruments_->http->port() : -1;
}

void ServerMetrics::Attach(const LinkPredictor& predictor, const KnowledgeGraphService& service) {
  predictor_.store(&predictor, std::memory_order_release);
  service_.store(&service, std::memory_order_release);
}

std::string ServerMetrics::Render() const { return instruments_->registry.Render(); }

void ServerMetrics::OnSubgraphExtracted(int nodes, int edges, double seconds) {
  instruments_->subgraph_nodes->Observe(nodes);
  instruments_->subgraph_edges->Observe(edges);
  instruments_->extraction_seconds->Observe(seconds);
}

void ServerMetrics::OnBatch(int size, int64_t nodes, int64_t edges, double oldest_wait_seconds,
                            double forward_seconds) {
  instruments_->batches->Increment();
  instruments_->batch_size->Observe(size);
  instruments_->queue_wait->Observe(oldest_wait_seconds);
  instruments_->forward_seconds->Observe(forward_seconds);
}

void ServerMetrics::OnCall(absl::string_view method, int grpc_code, double seconds) {
  const int m = MethodIndex(method);
  if (m < 0 || grpc_code < 0 || grpc_code >= static_cast<int>(kCodeNames.size())) return;
  std::atomic<Counter*>& slot = instruments_->requests_by[m][grpc_code];
  Counter* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    counter = &instruments_->requests->WithLabels({std::string(method), kCodeNames[grpc_code]});
    slot.store(counter, std::memory_order_release);
  }
  counter->Increment();
  instruments_->latency[m]->Observe(seconds);
}

void ServerMetrics::OnWorkDropped(DropReason reason, int64_t subgraphs) {
  instruments_->dropped_calls[static_cast<int>(reason)]->Increment();
  instruments_->dropped[static_cast<int>(reason)]->Increment(subgraphs);
}

void ServerMetrics::OnCallRejected(absl::string_view limit) {
  instruments_->rejected->WithLabels({std::string(limit)}).Increment();
}

void ServerMetrics::OnServiceLimit(absl::string_view limit) { OnCallRejected(limit); }

void ServerMetrics::OnAccess(absl::string_view method, absl::string_view outcome,
                             absl::string_view token_name) {
  instruments_->auth
      ->WithLabels({std::string(token_name), std::string(method), std::string(outcome)})
      .Increment();
}

void ServerMetrics::OnTokensLoaded(bool ok, size_t tokens) {
  instruments_->token_reloads->WithLabels({ok ? "ok" : "error"}).Increment();
  if (ok) instruments_->tokens->Set(static_cast<double>(tokens));
}

void ServerMetrics::OnChunkStored(const ChunkResult& result, size_t facts, double seconds) {
  instruments_->chunks->Increment();
  instruments_->facts_ingested->Increment(result.facts_added);
  instruments_->entities_created->Increment(result.entities_created);
  instruments_->duplicates->Increment(result.duplicate_facts);
  instruments_->chunk_seconds->Observe(seconds);
}

}  // namespace grail
