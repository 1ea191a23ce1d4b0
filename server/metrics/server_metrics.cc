#include "server/metrics/server_metrics.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/metrics/metrics.h"
#include "server/metrics/metrics_http.h"
#include "server/metrics/process_metrics.h"
#include "store/triple_store.h"

namespace grail {
namespace {

// The methods of kg.v1.KnowledgeGraph, in a fixed order for per-method lookup tables.
constexpr std::array<absl::string_view, 8> kMethods = {
    "ScoreTriplet", "ScoreTriplets", "RankTails", "RankHeads",
    "AddTriples",   "RemoveTriples", "GetStats",  "ReloadModel"};
int MethodIndex(absl::string_view method) {
  for (size_t i = 0; i < kMethods.size(); ++i) {
    if (kMethods[i] == method) return static_cast<int>(i);
  }
  return -1;
}

// Registration of our fixed set of names can only fail through a programming error.
void Must(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "metrics registration: %s\n", status.ToString().c_str());
    std::abort();
  }
}

// A family whose series all carry the label names given at registration, so the names are
// declared once, beside the metric's name: Add takes the values in that order.
template <typename Metric>
class Labelled {
 public:
  Labelled(prometheus::Family<Metric>& family, std::vector<std::string> label_names)
      : family_(&family), label_names_(std::move(label_names)) {}

  // The series for `values` (one per label name), created on first use; takes the family's
  // mutex, so hot paths keep the reference. `args` construct a new series (histogram bounds).
  template <typename... Args>
  Metric& Add(std::initializer_list<absl::string_view> values, const Args&... args) const {
    if (values.size() != label_names_.size()) {
      std::fprintf(stderr, "metric %s: %zu label values for %zu label names\n",
                   family_->GetName().c_str(), values.size(), label_names_.size());
      std::abort();
    }
    prometheus::Labels labels;
    const absl::string_view* value = values.begin();
    for (const std::string& name : label_names_) labels.emplace(name, std::string(*value++));
    return family_->Add(labels, args...);
  }

 private:
  prometheus::Family<Metric>* family_;
  std::vector<std::string> label_names_;
};

// A family of `Metric` in `registry` (prometheus::BuildCounter() and the like, by type).
template <typename Metric>
prometheus::Family<Metric>& Register(prometheus::Registry& registry, const std::string& name,
                                     const std::string& help) {
  return prometheus::detail::Builder<Metric>().Name(name).Help(help).Register(registry);
}

Labelled<prometheus::Counter> Counters(prometheus::Registry& registry, const std::string& name,
                                       const std::string& help,
                                       std::vector<std::string> label_names) {
  return {Register<prometheus::Counter>(registry, name, help), std::move(label_names)};
}

Labelled<prometheus::Gauge> Gauges(prometheus::Registry& registry, const std::string& name,
                                   const std::string& help, std::vector<std::string> label_names) {
  return {Register<prometheus::Gauge>(registry, name, help), std::move(label_names)};
}

Labelled<prometheus::Histogram> Histograms(prometheus::Registry& registry, const std::string& name,
                                           const std::string& help,
                                           std::vector<std::string> label_names) {
  return {Register<prometheus::Histogram>(registry, name, help), std::move(label_names)};
}

// Series without labels.
prometheus::Counter& Counter(prometheus::Registry& registry, const std::string& name,
                             const std::string& help) {
  return Register<prometheus::Counter>(registry, name, help).Add({});
}

prometheus::Histogram& Histogram(prometheus::Registry& registry, const std::string& name,
                                 const std::string& help, const std::vector<double>& bounds) {
  return Register<prometheus::Histogram>(registry, name, help).Add({}, bounds);
}

prometheus::Gauge& Gauge(prometheus::Registry& registry, const std::string& name,
                         const std::string& help) {
  return Register<prometheus::Gauge>(registry, name, help).Add({});
}

}  // namespace

struct ServerMetrics::Instruments {
  prometheus::Registry registry;
  // Values read at scrape time.
  ScrapeTimeMetrics scraped;
  std::optional<Labelled<prometheus::Counter>> requests;
  // requests_by[method][code], created on first use (Family::Add takes a mutex; the table
  // keeps it off the hot path after that).
  std::array<std::array<std::atomic<prometheus::Counter*>, kNumStatusCodes>, kMethods.size()>
      requests_by{};
  std::array<prometheus::Histogram*, kMethods.size()> latency{};
  prometheus::Histogram* queue_wait = nullptr;
  prometheus::Histogram* batch_size = nullptr;
  prometheus::Histogram* subgraph_nodes = nullptr;
  prometheus::Histogram* subgraph_edges = nullptr;
  prometheus::Histogram* extraction_seconds = nullptr;
  prometheus::Histogram* forward_seconds = nullptr;
  prometheus::Counter* batches = nullptr;
  prometheus::Counter* facts_ingested = nullptr;
  prometheus::Counter* chunks = nullptr;
  prometheus::Counter* entities_created = nullptr;
  prometheus::Counter* duplicates = nullptr;
  prometheus::Histogram* chunk_seconds = nullptr;
  std::array<prometheus::Counter*, 2> reloads{};  // error, ok
  prometheus::Gauge* wal_truncated = nullptr;
  prometheus::Histogram* reload_seconds = nullptr;
  prometheus::Counter* facts_removed = nullptr;
  prometheus::Counter* facts_exported = nullptr;
  prometheus::Counter* removal_chunks = nullptr;
  prometheus::Histogram* removal_seconds = nullptr;
  std::array<prometheus::Counter*, 2> dropped{};  // by DropReason
  std::array<prometheus::Counter*, 2> dropped_calls{};
  std::optional<Labelled<prometheus::Counter>> rejected;
  std::optional<Labelled<prometheus::Counter>> auth;
  std::array<prometheus::Counter*, 2> token_reloads{};      // error, ok
  std::array<prometheus::Counter*, kScorerCount> scores{};  // by ScoredBy
  prometheus::Counter* pruned_answers = nullptr;
  prometheus::Gauge* tokens = nullptr;
  // Online evaluation (--online-eval-rate), per model version.
  std::optional<Labelled<prometheus::Histogram>> online_rank;
  std::optional<Labelled<prometheus::Gauge>> online_mrr, online_hits, online_window;
  std::optional<Labelled<prometheus::Counter>> online_skipped;
  std::unique_ptr<MetricsHttpServer> http;
};

ServerMetrics::ServerMetrics(const std::string& version) : instruments_(new Instruments) {
  Instruments& m = *instruments_;
  prometheus::Registry& r = m.registry;
  m.requests = Counters(r, "grail_requests_total",
                        "gRPC calls finished, by method and status code.", {"method", "code"});
  const Labelled<prometheus::Histogram> latency =
      Histograms(r, "grail_request_duration_seconds",
                 "Time from a call's arrival to its answer, by method.", {"method"});
  for (size_t i = 0; i < kMethods.size(); ++i) {
    m.latency[i] = &latency.Add({kMethods[i]}, LatencyBucketsSeconds());
  }
  m.queue_wait =
      &Histogram(r, "grail_queue_wait_seconds",
                 "How long the oldest subgraph of a batch waited for it.", LatencyBucketsSeconds());
  m.batch_size = &Histogram(r, "grail_batch_size", "Subgraphs per model forward.", SizeBuckets());
  m.batches = &Counter(r, "grail_batches_total", "Model forwards run.");
  m.subgraph_nodes = &Histogram(r, "grail_subgraph_nodes",
                                "Nodes of each extracted enclosing subgraph.", SizeBuckets());
  m.subgraph_edges = &Histogram(r, "grail_subgraph_edges",
                                "Edges of each extracted enclosing subgraph.", SizeBuckets());
  m.extraction_seconds =
      &Histogram(r, "grail_extraction_seconds", "Time to extract and label one enclosing subgraph.",
                 ExponentialBuckets(1e-6, 4, 12));
  m.forward_seconds =
      &Histogram(r, "grail_forward_seconds", "Time of one model forward over a batch.",
                 LatencyBucketsSeconds());
  m.facts_ingested =
      &Counter(r, "grail_facts_ingested_total", "New facts stored through AddTriples.");
  m.chunks = &Counter(r, "grail_ingest_chunks_total", "AddTriples chunks stored and acknowledged.");
  m.entities_created =
      &Counter(r, "grail_entities_created_total", "Entities created through AddTriples.");
  m.duplicates = &Counter(r, "grail_duplicate_facts_total",
                          "Facts sent to AddTriples that were already stored.");
  m.chunk_seconds =
      &Histogram(r, "grail_ingest_chunk_duration_seconds",
                 "Time to validate, store durably and index one chunk.", LatencyBucketsSeconds());
  m.facts_removed =
      &Counter(r, "grail_facts_removed_total", "Stored facts removed through RemoveTriples.");
  m.facts_exported = &Counter(r, "grail_facts_exported_total", "Facts sent by ExportTriples.");
  const Labelled<prometheus::Counter> reloads =
      Counters(r, "grail_model_reloads_total",
               "Model reloads (ReloadModel, SIGHUP), by result: ok (now serving) or error (the "
               "old model kept serving).",
               {"result"});
  m.reloads = {&reloads.Add({"error"}), &reloads.Add({"ok"})};
  m.wal_truncated = &Gauge(r, "grail_store_wal_truncated",
                           "1 if the store was opened past a corrupted write-ahead log "
                           "(--truncate-corrupted-wal): chunks after the corruption were lost.");
  m.reload_seconds = &Histogram(r, "grail_model_reload_duration_seconds",
                                "Time to load, check and warm up a model before it serves.",
                                LatencyBucketsSeconds());
  m.removal_chunks =
      &Counter(r, "grail_removal_chunks_total", "RemoveTriples chunks applied and acknowledged.");
  m.online_rank = Histograms(
      r, "grail_online_rank",
      "Online evaluation (--online-eval-rate): the rank of each sampled added fact's answer "
      "among every entity, filtered, on the graph before its chunk (a tail and a head query "
      "each), by the model version that ranked it.",
      {"model_version"});
  m.online_mrr = Gauges(r, "grail_online_mrr",
                        "Online evaluation: mean reciprocal rank over the window of the last "
                        "ranks (--online-eval-window), by model version.",
                        {"model_version"});
  m.online_hits = Gauges(r, "grail_online_hits_at_10",
                         "Online evaluation: the share of the window's answers ranked in the "
                         "first 10, by model version.",
                         {"model_version"});
  m.online_window =
      Gauges(r, "grail_online_window_ranks",
             "Online evaluation: ranks in the window so far, by model version.", {"model_version"});
  m.online_skipped = Counters(
      r, "grail_online_eval_skipped_total",
      "Online evaluation: sampled queries not ranked, by reason: busy (within the CPU share's "
      "pause), new_entity, known (already stored), unscorable, dropped (its chunk was refused) "
      "or error.",
      {"reason"});
  for (const char* reason : {"busy", "new_entity", "known", "unscorable", "dropped", "error"}) {
    m.online_skipped->Add({reason});
  }
  m.removal_seconds = &Histogram(r, "grail_removal_chunk_duration_seconds",
                                 "Time to validate, remove durably and index one RemoveTriples "
                                 "chunk.",
                                 LatencyBucketsSeconds());

  const Labelled<prometheus::Counter> dropped = Counters(
      r, "grail_dropped_subgraphs_total",
      "Facts of calls that ended by deadline or cancellation before they were scored (dropped "
      "before extraction or before the forward), by reason.",
      {"reason"});
  const Labelled<prometheus::Counter> dropped_calls =
      Counters(r, "grail_dropped_calls_total",
               "Scoring calls ended by deadline or cancellation, by reason.", {"reason"});
  for (const auto& [reason, label] : {std::pair{DropReason::kDeadline, "deadline"},
                                      std::pair{DropReason::kCancelled, "cancelled"}}) {
    m.dropped[static_cast<int>(reason)] = &dropped.Add({label});
    m.dropped_calls[static_cast<int>(reason)] = &dropped_calls.Add({label});
  }
  m.rejected = Counters(r, "grail_rejected_calls_total",
                        "Calls refused with RESOURCE_EXHAUSTED, by the limit (flag) they reached.",
                        {"limit"});
  for (const char* limit :
       {"max_calls_in_flight", "max_caller_share", "max_pending_subgraphs", "max_queued_bytes",
        "max_rank_subgraphs", "max_rank_results", "max_subgraph_nodes", "max_subgraph_edges"}) {
    m.rejected->Add({limit});  // every series exists from the start, at 0
  }
  m.auth = Counters(r, "grail_auth_requests_total",
                    "KnowledgeGraph calls whose bearer token was checked, by the token's "
                    "name (never its secret; \"\" when none or an unknown one was sent), "
                    "method and outcome (ok, missing, malformed, unknown, "
                    "insufficient_scope).",
                    {"token", "method", "outcome"});
  const Labelled<prometheus::Counter> token_reloads = Counters(
      r, "grail_auth_token_reloads_total",
      "Re-reads of the --auth-tokens file after it changed or on SIGHUP, by result (ok, error: "
      "the tokens in use stay).",
      {"result"});
  m.token_reloads[0] = &token_reloads.Add({"error"});
  m.token_reloads[1] = &token_reloads.Add({"ok"});
  m.tokens = &Gauge(r, "grail_auth_tokens", "Bearer tokens in use (0: no authentication).");
  const Labelled<prometheus::Counter> scores = Counters(
      r, "grail_scores_total",
      "Scores returned (ScoreTriplet(s) results, RankTails/RankHeads entries), by the scorer "
      "that produced them: grail, path, or fused (a fusion archive's classifier over GraIL's and "
      "its KGE models' scores; its facts without embeddings count as grail).",
      {"scored_by"});
  for (ScoredBy scorer : kScorers) {
    m.scores[static_cast<size_t>(scorer)] = &scores.Add({std::string(ScorerName(scorer))});
  }
  m.pruned_answers = &Counter(
      r, "grail_pruned_answers_total",
      "Calls (ScoreTriplet, RankTails, RankHeads) answered by a path-family propagation pruned to "
      "--max-subgraph-nodes/-edges or the call's budget: approximate answers.");

  // What the scheduler holds, read at scrape time.
  auto engine_gauge = [this](const char* name, const char* help,
                             std::function<double(const EngineLoad&)> read) {
    Must(instruments_->scraped.AddGauge(
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
  Must(instruments_->scraped.AddGauge(
      "grail_calls_in_flight",
      "KnowledgeGraph calls and streams in progress (--max-calls-in-flight).",
      [this]() -> std::optional<double> {
        const ServiceLoad* service = service_.load(std::memory_order_acquire);
        if (service == nullptr) return std::nullopt;
        return static_cast<double>(service->calls_in_flight());
      }));

  // The path family's pass cache (--pass-cache-bytes), read at scrape time.
  auto pass_metric = [this](bool counter, const char* name, const char* help,
                            std::function<double(const PassCacheStats&)> read) {
    auto scrape = [this, read = std::move(read)]() -> std::optional<double> {
      const LinkPredictor* predictor = predictor_.load(std::memory_order_acquire);
      if (predictor == nullptr) return std::nullopt;
      return read(predictor->passes().Stats());
    };
    Must(counter ? instruments_->scraped.AddCounter(name, help, std::move(scrape))
                 : instruments_->scraped.AddGauge(name, help, std::move(scrape)));
  };
  pass_metric(true, "grail_pass_cache_hits_total",
              "Path-family queries answered by a pass already made (cached, or made by another "
              "call's forward meanwhile) instead of a propagation of their own.",
              [](const PassCacheStats& s) { return static_cast<double>(s.hits); });
  pass_metric(true, "grail_pass_cache_misses_total",
              "Path-family queries that ran a propagation (the cache had no pass they accept).",
              [](const PassCacheStats& s) { return static_cast<double>(s.misses); });
  pass_metric(true, "grail_pass_cache_evictions_total",
              "Passes evicted, least recently used first, to stay within --pass-cache-bytes.",
              [](const PassCacheStats& s) { return static_cast<double>(s.evictions); });
  pass_metric(false, "grail_pass_cache_bytes", "Bytes the kept passes hold (--pass-cache-bytes).",
              [](const PassCacheStats& s) { return static_cast<double>(s.bytes); });
  pass_metric(false, "grail_pass_cache_entries", "Passes kept, by key.",
              [](const PassCacheStats& s) { return static_cast<double>(s.entries); });

  // The store, read at scrape time; the graph's gauges from its latest snapshot.
  auto store_gauge = [this](const char* name, const char* help,
                            std::function<double(const TripleStore&)> read) {
    Must(instruments_->scraped.AddGauge(
        name, help, [this, read = std::move(read)]() -> std::optional<double> {
          const LinkPredictor* predictor = predictor_.load(std::memory_order_acquire);
          if (predictor == nullptr) return std::nullopt;
          return read(predictor->store());
        }));
  };
  auto graph_gauge = [&store_gauge](const char* name, const char* help,
                                    std::function<double(const GraphSnapshot&)> read) {
    store_gauge(name, help, [read = std::move(read)](const TripleStore& store) {
      return read(*store.Snapshot());
    });
  };
  graph_gauge("grail_graph_entities", "Entities stored in the graph.",
              [](const GraphSnapshot& g) { return g.num_live_entities(); });
  graph_gauge("grail_graph_relations", "Relations stored in the graph.",
              [](const GraphSnapshot& g) { return g.num_relations(); });
  graph_gauge("grail_graph_facts", "Facts stored in the graph.",
              [](const GraphSnapshot& g) { return static_cast<double>(g.num_facts()); });
  graph_gauge("grail_graph_relation_side_pairs",
              "Pairs of relation sides that meet at some entity: the graph of relations a model "
              "of any relation (ULTRA) reads, bounded by --max-relation-pairs. 0 while the "
              "served model reads none (the store then does not follow them).",
              [](const GraphSnapshot& g) { return static_cast<double>(g.SidePairs()->size()); });
  graph_gauge("grail_graph_sequence",
              "The graph version: AddTriples and RemoveTriples chunks applied so far (with "
              "replication, the stream sequence of the last one applied).",
              [](const GraphSnapshot& g) { return static_cast<double>(g.sequence()); });
  store_gauge("grail_graph_retained_bytes",
              "Bytes of adjacency lists that later chunks replaced, kept because a request still "
              "reads an older version of the graph; back near 0 once no request does.",
              [](const TripleStore& s) { return static_cast<double>(s.retained_index_bytes()); });
  store_gauge("grail_store_writable",
              "1 while the store takes writes; 0 while they fail for want of disk space (they "
              "resume by themselves once space is freed).",
              [](const TripleStore& s) { return s.writable() ? 1.0 : 0.0; });

  // Replication (--nats-url), read at scrape time; absent without it.
  auto replication_gauge = [this](const char* name, const char* help,
                                  std::function<double(const ReplicationStats&)> read) {
    Must(instruments_->scraped.AddGauge(
        name, help, [this, read = std::move(read)]() -> std::optional<double> {
          const Replicator* replicator = replicator_.load(std::memory_order_acquire);
          if (replicator == nullptr) return std::nullopt;
          return read(replicator->stats());
        }));
  };
  replication_gauge("grail_replication_applied_sequence",
                    "Stream sequence of the last chunk this replica applied.",
                    [](const ReplicationStats& r) { return static_cast<double>(r.applied); });
  replication_gauge("grail_replication_pending_chunks",
                    "Chunks in the stream after the last one this replica applied, as of the "
                    "last one it read: the replication lag, in chunks.",
                    [](const ReplicationStats& r) { return static_cast<double>(r.pending); });
  replication_gauge("grail_replication_published_chunks",
                    "Chunks this replica logged in the stream (AddTriples and RemoveTriples).",
                    [](const ReplicationStats& r) { return static_cast<double>(r.published); });
  replication_gauge(
      "grail_replication_publish_retries",
      "Publishes retried for want of a JetStream acknowledgement in time (a NATS failover).",
      [](const ReplicationStats& r) { return static_cast<double>(r.publish_retries); });
  replication_gauge("grail_replication_skipped_chunks",
                    "Stream chunks this replica's store rejected and skipped (replicas "
                    "configured with different vocabularies).",
                    [](const ReplicationStats& r) { return static_cast<double>(r.skipped); });
  replication_gauge("grail_replication_connected", "1 while connected to a NATS server.",
                    [](const ReplicationStats& r) { return r.connected ? 1.0 : 0.0; });
  replication_gauge("grail_replication_stalled",
                    "1 once the stream was trimmed past what this replica had applied: it "
                    "applies nothing more and must be bootstrapped from a checkpoint.",
                    [](const ReplicationStats& r) { return r.stalled ? 1.0 : 0.0; });

  Must(m.scraped.AddMetricFamily(
      prometheus::MetricType::Gauge, "grail_model_info",
      "The served model (value 1): format, device, subgraph hops, layers, dimension, relation "
      "count, training-data fingerprint, version (path@archive SHA-256 prefix) and generation "
      "(1 at start, +1 per reload).",
      {"format", "device", "hops", "layers", "dim", "relations", "fingerprint", "version",
       "generation"},
      [this]() -> std::vector<ScrapedSample> {
        const LinkPredictor* predictor = predictor_.load(std::memory_order_acquire);
        if (predictor == nullptr) return {};
        const std::shared_ptr<const ServedModel> served = predictor->served_model();
        const ModelSummary model = served->Summary();
        return {ScrapedSample{
            {model.format, model.device, absl::StrCat(model.hops), absl::StrCat(model.layers),
             absl::StrCat(model.dim), absl::StrCat(served->relations().size()),
             model.training_fingerprint, served->version(), absl::StrCat(served->generation())},
            1.0}};
      }));
  Must(m.scraped.AddMetricFamily(prometheus::MetricType::Gauge, "grail_build_info",
                                 "The server's build (value 1).", {"version"},
                                 [version]() -> std::vector<ScrapedSample> {
                                   return {ScrapedSample{{version}, 1.0}};
                                 }));
  Must(RegisterProcessMetrics(m.scraped));
}

ServerMetrics::~ServerMetrics() { StopHttp(); }

absl::Status ServerMetrics::StartHttp(const std::string& host, int port,
                                      std::function<bool()> ready) {
  instruments_->http =
      std::make_unique<MetricsHttpServer>([this] { return Render(); }, std::move(ready));
  return instruments_->http->Start(host, port);
}

void ServerMetrics::StopHttp() {
  if (instruments_->http != nullptr) instruments_->http->Stop();
}

int ServerMetrics::http_port() const {
  return instruments_->http != nullptr ? instruments_->http->port() : -1;
}

void ServerMetrics::AttachReplication(const Replicator& replicator) {
  replicator_.store(&replicator, std::memory_order_release);
}

void ServerMetrics::Attach(const LinkPredictor& predictor, const ServiceLoad& service) {
  predictor_.store(&predictor, std::memory_order_release);
  service_.store(&service, std::memory_order_release);
}

std::string ServerMetrics::Render() const {
  return RenderExposition({&instruments_->registry, &instruments_->scraped});
}

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
  if (m < 0 || grpc_code < 0 || grpc_code >= kNumStatusCodes) return;
  std::atomic<prometheus::Counter*>& slot = instruments_->requests_by[m][grpc_code];
  prometheus::Counter* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    counter = &instruments_->requests->Add(
        {method, StatusCodeName(static_cast<grpc::StatusCode>(grpc_code))});
    slot.store(counter, std::memory_order_release);
  }
  counter->Increment();
  instruments_->latency[m]->Observe(seconds);
}

void ServerMetrics::OnWorkDropped(DropReason reason, int64_t subgraphs) {
  instruments_->dropped_calls[static_cast<int>(reason)]->Increment();
  instruments_->dropped[static_cast<int>(reason)]->Increment(static_cast<double>(subgraphs));
}

void ServerMetrics::OnCallRejected(absl::string_view limit) {
  instruments_->rejected->Add({limit}).Increment();
}

void ServerMetrics::OnServiceLimit(absl::string_view limit) { OnCallRejected(limit); }

void ServerMetrics::OnScoresReturned(ScoredBy scored_by, size_t count) {
  instruments_->scores[static_cast<size_t>(scored_by)]->Increment(static_cast<double>(count));
}

void ServerMetrics::OnPrunedAnswer() { instruments_->pruned_answers->Increment(); }

void ServerMetrics::OnAccess(absl::string_view method, absl::string_view outcome,
                             absl::string_view token_name) {
  instruments_->auth->Add({token_name, method, outcome}).Increment();
}

void ServerMetrics::OnTokensLoaded(bool ok, size_t tokens) {
  instruments_->token_reloads[ok ? 1 : 0]->Increment();
  if (ok) instruments_->tokens->Set(static_cast<double>(tokens));
}

void ServerMetrics::OnStoreRecoveredFromCorruption() { instruments_->wal_truncated->Set(1); }

void ServerMetrics::OnOnlineRank(const std::string& model_version, double rank, double window_mrr,
                                 double window_hits_at_10, size_t window_ranks) {
  Instruments& m = *instruments_;
  static const std::vector<double> kRankBounds = {1,   2,    3,   5,   10,  20, 50,
                                                  100, 1000, 1e4, 1e5, 1e6, 1e7};
  m.online_rank->Add({model_version}, kRankBounds).Observe(rank);
  m.online_mrr->Add({model_version}).Set(window_mrr);
  m.online_hits->Add({model_version}).Set(window_hits_at_10);
  m.online_window->Add({model_version}).Set(static_cast<double>(window_ranks));
}

void ServerMetrics::OnOnlineSkipped(const std::string& reason, size_t queries) {
  instruments_->online_skipped->Add({reason}).Increment(static_cast<double>(queries));
}

void ServerMetrics::OnModelReload(bool ok, double seconds) {
  instruments_->reloads[ok ? 1 : 0]->Increment();
  if (ok) instruments_->reload_seconds->Observe(seconds);
}

void ServerMetrics::OnChunkRemoved(const ChunkResult& result, size_t facts, double seconds) {
  instruments_->removal_chunks->Increment();
  instruments_->facts_removed->Increment(static_cast<double>(result.facts_removed));
  instruments_->removal_seconds->Observe(seconds);
}

void ServerMetrics::OnFactsExported(size_t facts) {
  instruments_->facts_exported->Increment(static_cast<double>(facts));
}

void ServerMetrics::OnChunkStored(const ChunkResult& result, size_t facts, double seconds) {
  instruments_->chunks->Increment();
  instruments_->facts_ingested->Increment(static_cast<double>(result.facts_added));
  instruments_->entities_created->Increment(static_cast<double>(result.entities_created));
  instruments_->duplicates->Increment(static_cast<double>(result.duplicate_facts));
  instruments_->chunk_seconds->Observe(seconds);
}

}  // namespace grail
