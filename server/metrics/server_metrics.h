// The server's Prometheus metrics: what the engine and the gRPC handlers report, the graph's
// size read at scrape time, the model and build info, the process; served as text format
// 0.0.4 on GET /metrics of the metrics HTTP endpoint, with /healthz and /readyz beside it.
//
// Names (base units, Prometheus suffixes):
//   grail_requests_total{method,code}              calls finished, by gRPC status code name
//   grail_request_duration_seconds{method}         histogram of call latency
//   grail_queue_wait_seconds                       histogram: oldest subgraph's wait per batch
//   grail_batch_size                               histogram: subgraphs per forward
//   grail_subgraph_nodes, grail_subgraph_edges     histograms per extracted subgraph
//   grail_extraction_seconds, grail_forward_seconds histograms
//   grail_graph_entities, grail_graph_relations, grail_graph_facts, grail_graph_sequence
//   grail_facts_ingested_total, grail_ingest_chunks_total, grail_entities_created_total
//   grail_duplicate_facts_total
//   grail_facts_removed_total, grail_removal_chunks_total
//   grail_removal_chunk_duration_seconds            histogram
//   grail_facts_exported_total                     facts sent by ExportTriples
//   grail_dropped_calls_total{reason}              calls ended by deadline/cancellation
//   grail_dropped_subgraphs_total{reason}          and their facts never scored
//   grail_rejected_calls_total{limit}              calls refused with RESOURCE_EXHAUSTED
//   grail_scores_total{scored_by}                  scores returned, by scorer (grail, path,
//                                                  fused)
//   grail_pruned_answers_total                     calls answered by a pruned propagation
//   grail_pass_cache_hits_total, grail_pass_cache_misses_total,
//   grail_pass_cache_evictions_total, grail_pass_cache_bytes, grail_pass_cache_entries
//                                                  the path family's passes (--pass-cache-bytes)
//   grail_auth_requests_total{token,method,outcome} bearer-token checks, by token name
//   grail_auth_token_reloads_total{result}, grail_auth_tokens   the --auth-tokens file
//   grail_calls_in_flight, grail_scoring_calls, grail_pending_subgraphs,
//   grail_queued_subgraphs, grail_queued_bytes     what the service and its engine hold
//   grail_ingest_chunk_duration_seconds            histogram
//   grail_model_info{format,device,hops,layers,dim,relations,fingerprint,version,generation}
//                                                  gauge, always 1
//   grail_model_reloads_total{result}, grail_model_reload_duration_seconds (histogram)
//   grail_store_wal_truncated                      gauge: 1 if the store started past a
//                                                  corrupted WAL (--truncate-corrupted-wal)
//   grail_store_writable                           gauge: 0 while writes fail on a full disk
//   grail_replication_applied_sequence, grail_replication_pending_chunks,
//   grail_replication_published_chunks, grail_replication_publish_retries,
//   grail_replication_skipped_chunks, grail_replication_connected,
//   grail_replication_stalled
//                                                  with --nats-url (AttachReplication)
//   grail_online_rank{model_version}               histogram: with --online-eval-rate, each
//                                                  sampled added fact's answer's rank
//   grail_online_mrr, grail_online_hits_at_10, grail_online_window_ranks {model_version}
//                                                  gauges over the window of the last ranks
//   grail_online_eval_skipped_total{reason}        sampled queries not ranked
//   grail_build_info{version}                      gauge, always 1
//   process_*                                      CPU, memory, file descriptors, start time
//
// Thread safety: the observer methods are called concurrently from engine and gRPC threads.
#ifndef GRAIL_SERVER_METRICS_SERVER_METRICS_H_
#define GRAIL_SERVER_METRICS_SERVER_METRICS_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "server/engine/inference_engine.h"
#include "server/metrics/service_observer.h"
#include "server/replication/replication.h"
#include "server/scoring/link_predictor.h"
#include "server/scoring/online_evaluation.h"

namespace grail {

class ServerMetrics final : public EngineObserver,
                            public ServiceObserver,
                            public OnlineEvalObserver {
 public:
  explicit ServerMetrics(const std::string& version);
  ~ServerMetrics() override;

  // Serves /metrics, /healthz and /readyz (200 while `ready()` is true, else 503) on
  // host:port (0: a free port; see http_port()).
  absl::Status StartHttp(const std::string& host, int port, std::function<bool()> ready);
  void StopHttp();
  // The bound port, or -1 if the endpoint is off.
  int http_port() const;

  // From now on the graph gauges read `predictor`'s store, the load gauges its engine and
  // `service`, and the model info describes its model; both must outlive the metrics' HTTP
  // endpoint.
  void Attach(const LinkPredictor& predictor, const ServiceLoad& service);

  // The exposition text, as GET /metrics returns it.
  std::string Render() const;

  // EngineObserver
  void OnSubgraphExtracted(int nodes, int edges, double seconds) override;
  void OnBatch(int size, int64_t nodes, int64_t edges, double oldest_wait_seconds,
               double forward_seconds) override;
  void OnWorkDropped(DropReason reason, int64_t subgraphs) override;
  void OnCallRejected(absl::string_view limit) override;
  // ServiceObserver
  void OnCall(absl::string_view method, int grpc_code, double seconds) override;
  void OnChunkStored(const ChunkResult& result, size_t facts, double seconds) override;
  void OnChunkRemoved(const ChunkResult& result, size_t facts, double seconds) override;
  void OnFactsExported(size_t facts) override;
  void OnServiceLimit(absl::string_view limit) override;
  void OnScoresReturned(ScoredBy scored_by, size_t count) override;
  void OnPrunedAnswer() override;
  void OnAccess(absl::string_view method, absl::string_view outcome,
                absl::string_view token_name) override;

  // From now on the replication gauges read `replicator`, which must outlive the metrics'
  // HTTP endpoint.
  void AttachReplication(const Replicator& replicator);

  // The store was opened past a corrupted write-ahead log, losing what followed it.
  void OnStoreRecoveredFromCorruption();

  // A model reload finished: `ok` (the new model serves; `seconds` to load, check and warm
  // it up) or not.
  void OnModelReload(bool ok, double seconds);
  // OnlineEvalObserver.
  void OnOnlineRank(const std::string& model_version, double rank, double window_mrr,
                    double window_hits_at_10, size_t window_ranks) override;
  void OnOnlineSkipped(const std::string& reason, size_t queries) override;

  // The --auth-tokens file was (re)read: `ok` with `tokens` in use, or not (the old ones stay).
  void OnTokensLoaded(bool ok, size_t tokens);

 private:
  struct Instruments;
  std::unique_ptr<Instruments> instruments_;
  std::atomic<const LinkPredictor*> predictor_{nullptr};
  std::atomic<const ServiceLoad*> service_{nullptr};
  std::atomic<const Replicator*> replicator_{nullptr};
};

}  // namespace grail

#endif  // GRAIL_SERVER_METRICS_SERVER_METRICS_H_
