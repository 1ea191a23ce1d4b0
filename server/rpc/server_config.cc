#include "server/rpc/server_config.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/core/runtime.h"

// Every grail-server flag. tests/deploy/grail_sources.py reads these lines (name, type,
// default) to hold deploy/ to them.
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
          "nodes of the largest enclosing subgraph or query neighbourhood scored; a call "
          "needing a larger one fails with RESOURCE_EXHAUSTED, or, with a path-family model "
          "and --pruning, is pruned to it");
ABSL_FLAG(int, max_subgraph_edges, 262144,
          "edges of the largest enclosing subgraph or query neighbourhood scored; a call "
          "needing a larger one fails with RESOURCE_EXHAUSTED, or, with a path-family model "
          "and --pruning, is pruned to it");
ABSL_FLAG(int, score_max_subgraph_nodes, 0,
          "path-family models with --pruning: the entities a ScoreTriplet(s) query's pass "
          "propagates over, below the rankings' --max-subgraph-nodes to make single facts "
          "cheaper (pruned, and so approximate, past it: ScoreTripletResponse.pruned); 0: "
          "--max-subgraph-nodes");
ABSL_FLAG(int, score_max_subgraph_edges, 0,
          "path-family models with --pruning: the edges a ScoreTriplet(s) query's pass "
          "propagates over (as --score-max-subgraph-nodes); 0: --max-subgraph-edges");
ABSL_FLAG(bool, pruning, true,
          "path-family models: a query whose neighbourhood passes --max-subgraph-nodes or "
          "--max-subgraph-edges propagates over that many entities and edges, chosen from the "
          "query entity by priority (approximate: RankResponse.candidates_pruned, "
          "ScoreTripletResponse.pruned), instead of failing with RESOURCE_EXHAUSTED; calls "
          "may ask for less (RankOptions.max_visited_nodes)");
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
ABSL_FLAG(int64_t, max_relation_pairs, int64_t{1} << 20,
          "most pairs of relation sides (relation, head or tail end) that may meet at some "
          "entity: the nodes ULTRA's graph of relations joins, 8 edges a pair. They grow with "
          "the square of the distinct relations meeting at an entity; while such a model "
          "serves, an AddTriples fact that would pass the bound is refused (RESOURCE_EXHAUSTED "
          "naming its line), and a reload to one refuses a graph past it. The default "
          "is a quarter of the 4.5 million pairs that took ULTRA 6.6 s and 2.4 GB a call on 2 "
          "cores; the dense FB15k-237 graph (228 relations) makes 6,451 pairs, WN18RR 201");
ABSL_FLAG(int64_t, pass_cache_bytes, int64_t{256} << 20,
          "bytes of path-family passes kept so that a query asked again on the same graph "
          "(ScoreTriplet, RankTails, RankHeads) costs a lookup, not a propagation; least recently "
          "used passes are evicted past it (0: none). A pass holds 13 bytes per entity it "
          "scores: 0.16 MB on the 12k-entity FB15k-237 graph, 0.85 MB at a 65,536-entity budget");
ABSL_FLAG(int, max_name_bytes, 1024, "longest entity or relation name, in bytes");
ABSL_FLAG(int, max_message_bytes, 64 << 20, "largest gRPC message received or sent, in bytes");
ABSL_FLAG(bool, allow_unknown_relations, false,
          "let AddTriples store relations outside the model's vocabulary (their edges are "
          "ignored by the model)");
ABSL_FLAG(bool, sync_writes, false,
          "fsync every AddTriples chunk before acknowledging it (survives machine crashes, not "
          "just process crashes)");
ABSL_FLAG(int, drain_seconds, 20, "on SIGTERM, how long calls in flight get to finish");
ABSL_FLAG(int64_t, max_model_bytes, int64_t{1} << 30,
          "largest model archive loaded (at start and by ReloadModel / SIGHUP), in bytes; a "
          "load holds about three times the file at its peak (the bytes, the probe's tensors, "
          "the model's), beside the model serving (the archives written here are 0.7-12 MB)");
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
ABSL_FLAG(double, online_eval_rate, 0,
          "share of the facts AddTriples brings that are first ranked against every entity on "
          "the graph they arrive at, for the served model's online accuracy "
          "(grail_online_mrr and the like; 0: off, 1: every fact)");
ABSL_FLAG(double, online_eval_cpu_share, 0.1,
          "the online evaluation's rankings' share of the time, in (0, 1]: after a chunk's "
          "rankings took d seconds, none starts for d * (1 / share - 1)");
ABSL_FLAG(int, online_eval_window, 1000,
          "ranks (a tail and a head query per fact) the online MRR and Hits@10 average");
ABSL_FLAG(std::string, ready_file, "",
          "once serving, write {\"port\":P,\"metrics_port\":M} to this file (for scripts and "
          "tests that start the server on port 0)");

namespace grail {
namespace {

// A numeric flag's value into its option, and back for the log: counts as themselves,
// durations in the flag's unit.
template <typename T>
void Assign(T& field, int64_t value) {
  field = static_cast<T>(value);
}
template <typename Rep, typename Period>
void Assign(std::chrono::duration<Rep, Period>& field, int64_t value) {
  field = std::chrono::duration<Rep, Period>(value);
}
template <typename T>
Json Logged(const T& field) {
  return field;
}
template <typename Rep, typename Period>
Json Logged(const std::chrono::duration<Rep, Period>& field) {
  return field.count();
}

// The flag table: one row per numeric flag, with its accepted range (a value outside is a
// usage error naming the flag and the range, never silently clamped or wrapped) and the
// option it sets, which the start log reads back under the flag's name.
struct NumericFlag {
  const char* name;
  int64_t value;
  int64_t min;
  int64_t max;
  void (*set)(ServerConfig&, int64_t);
  Json (*logged)(const ServerConfig&);
};

#define GRAIL_NUMERIC_FLAG(flag, min, max, field)                                                 \
  NumericFlag {                                                                                   \
#flag, static_cast < int64_t>(absl::GetFlag(FLAGS_##flag)), min, max,                         \
        [](ServerConfig & c,                                                                      \
           int64_t v) { Assign(c.field, v); },                                                    \
                                            [](const ServerConfig& c) { return Logged(c.field); } \
  }

std::vector<NumericFlag> NumericFlags() {
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  return {
      GRAIL_NUMERIC_FLAG(port, 0, 65535, port),
      GRAIL_NUMERIC_FLAG(metrics_port, -1, 65535, metrics_port),
      GRAIL_NUMERIC_FLAG(max_batch_size, 1, 1 << 20, engine.max_batch_size),
      GRAIL_NUMERIC_FLAG(max_batch_nodes, 2, 1 << 26, engine.max_batch_nodes),
      GRAIL_NUMERIC_FLAG(max_batch_edges, 1, 1 << 28, engine.max_batch_edges),
      GRAIL_NUMERIC_FLAG(max_subgraph_nodes, 2, 1 << 26, engine.max_subgraph_nodes),
      GRAIL_NUMERIC_FLAG(max_subgraph_edges, 1, 1 << 28, engine.max_subgraph_edges),
      GRAIL_NUMERIC_FLAG(score_max_subgraph_nodes, 0, 1 << 26, rank_limits.score_budget.nodes),
      GRAIL_NUMERIC_FLAG(score_max_subgraph_edges, 0, 1 << 28, rank_limits.score_budget.edges),
      GRAIL_NUMERIC_FLAG(max_queue_delay_us, 0, 10000000, engine.max_queue_delay),
      // 0: one per core. More threads than this helps no machine and costs start-up time.
      GRAIL_NUMERIC_FLAG(extraction_threads, 0, 1024, engine.extraction_threads),
      GRAIL_NUMERIC_FLAG(compute_threads, 0, 1024, compute_threads),
      GRAIL_NUMERIC_FLAG(max_request_triples, 1, 10000000, limits.max_request_triples),
      GRAIL_NUMERIC_FLAG(max_candidates, 1, 100000000, limits.max_candidates),
      GRAIL_NUMERIC_FLAG(max_rank_subgraphs, 1, kMaxInt, rank_limits.max_rank_subgraphs),
      GRAIL_NUMERIC_FLAG(max_rank_results, 1, kMaxInt, rank_limits.max_rank_results),
      GRAIL_NUMERIC_FLAG(max_calls_in_flight, 1, 10000000, limits.max_calls_in_flight),
      GRAIL_NUMERIC_FLAG(max_pending_subgraphs, 1, int64_t{1} << 40, engine.max_pending_subgraphs),
      GRAIL_NUMERIC_FLAG(max_queued_bytes, 1 << 20, int64_t{1} << 46, engine.max_queued_bytes),
      GRAIL_NUMERIC_FLAG(max_chunk_facts, 1, 100000000, limits.max_chunk_facts),
      GRAIL_NUMERIC_FLAG(max_relation_pairs, 1, int64_t{1} << 40, store.max_relation_side_pairs),
      GRAIL_NUMERIC_FLAG(pass_cache_bytes, 0, int64_t{1} << 46, pass_cache_bytes),
      GRAIL_NUMERIC_FLAG(max_name_bytes, 1, 1 << 20, limits.max_name_bytes),
      // Below a few KiB no call or answer fits: the server would look healthy and answer
      // nothing.
      GRAIL_NUMERIC_FLAG(max_message_bytes, 4096, kMaxInt, max_message_bytes),
      GRAIL_NUMERIC_FLAG(drain_seconds, 0, 86400, drain_seconds),
      GRAIL_NUMERIC_FLAG(max_model_bytes, 1 << 10, int64_t{1} << 46, archive_limits.max_bytes),
      GRAIL_NUMERIC_FLAG(model_load_timeout_seconds, 1, 86400, archive_limits.timeout),
      GRAIL_NUMERIC_FLAG(warmup_batches, 0, 1000, warmup.batches),
      GRAIL_NUMERIC_FLAG(tls_reload_seconds, 1, 86400, tls.reload_seconds),
      GRAIL_NUMERIC_FLAG(nats_stream_replicas, 1, 5, replication.stream_replicas),
      GRAIL_NUMERIC_FLAG(nats_stream_max_chunks, 0, int64_t{1} << 50,
                         replication.stream_max_chunks),
      GRAIL_NUMERIC_FLAG(replication_timeout_ms, 100, 3600000, replication.publish_timeout),
      GRAIL_NUMERIC_FLAG(max_sequence_wait_ms, 0, 3600000, max_sequence_wait_ms),
      GRAIL_NUMERIC_FLAG(online_eval_window, 1, 10000000, online_eval.window),
  };
}

#undef GRAIL_NUMERIC_FLAG

absl::Status UsageError(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

// A fraction flag's `value`: in (0, 1], or [0, 1] where `zero` is allowed; a usage error
// naming --`flag` otherwise.
absl::StatusOr<double> Fraction(absl::string_view flag, double value, bool zero) {
  if (!((zero ? value >= 0 : value > 0) && value <= 1)) {
    return UsageError(absl::StrFormat("--%s=%g is out of range: it takes %s0, 1]", flag, value,
                                      zero ? "[" : "("));
  }
  return value;
}

}  // namespace

absl::StatusOr<ServerConfig> ReadServerConfig() {
  ServerConfig c;
  for (const NumericFlag& f : NumericFlags()) {
    if (f.value < f.min || f.value > f.max) {
      std::string flag = f.name;
      std::replace(flag.begin(), flag.end(), '_', '-');
      return UsageError(absl::StrCat("--", flag, "=", f.value, " is out of range: it takes ", f.min,
                                     "..", f.max));
    }
    f.set(c, f.value);
  }
  const absl::StatusOr<double> caller_share =
      Fraction("max-caller-share", absl::GetFlag(FLAGS_max_caller_share), /*zero=*/false);
  if (!caller_share.ok()) return caller_share.status();
  c.engine.max_caller_share = *caller_share;
  c.limits.max_caller_share = *caller_share;
  const absl::StatusOr<double> rate =
      Fraction("online-eval-rate", absl::GetFlag(FLAGS_online_eval_rate), /*zero=*/true);
  if (!rate.ok()) return rate.status();
  c.online_eval.rate = *rate;
  const absl::StatusOr<double> cpu_share =
      Fraction("online-eval-cpu-share", absl::GetFlag(FLAGS_online_eval_cpu_share),
               /*zero=*/false);
  if (!cpu_share.ok()) return cpu_share.status();
  c.online_eval.cpu_share = *cpu_share;
  c.model_path = absl::GetFlag(FLAGS_model);
  c.data_dir = absl::GetFlag(FLAGS_data_dir);
  if (c.model_path.empty() || c.data_dir.empty()) {
    return UsageError("--model and --data-dir are required");
  }
  c.replication.url = absl::GetFlag(FLAGS_nats_url);
  c.replication.stream = absl::GetFlag(FLAGS_nats_stream);
  if (c.replication.url.empty() != c.replication.stream.empty()) {
    return UsageError("--nats-url and --nats-stream go together");
  }
  c.replication.subject = absl::GetFlag(FLAGS_nats_subject);
  c.replication.replica = absl::GetFlag(FLAGS_replica_name);
  if (c.replicated() && c.replication.replica.empty()) {  // a replica's name: its host's
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    c.replication.replica = name;
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (c.engine.extraction_threads == 0) c.engine.extraction_threads = cores;
  if (c.compute_threads == 0) c.compute_threads = cores;
  c.host = absl::GetFlag(FLAGS_host);
  c.device = absl::GetFlag(FLAGS_device);
  c.store.sync = absl::GetFlag(FLAGS_sync_writes);
  c.store.truncate_corrupted_wal = absl::GetFlag(FLAGS_truncate_corrupted_wal);
  c.store.max_name_bytes = c.limits.max_name_bytes;  // what calls may send, the store keeps
  c.store.max_chunk_facts = c.limits.max_chunk_facts;
  c.allow_unknown_relations = absl::GetFlag(FLAGS_allow_unknown_relations);
  const PathBudget& score = c.rank_limits.score_budget;  // 0: the server's
  if (absl::GetFlag(FLAGS_pruning)) {
    c.rank_limits.budget = {c.engine.max_subgraph_nodes, c.engine.max_subgraph_edges};
  } else if (score.nodes > 0 || score.edges > 0) {
    return UsageError(
        "--score-max-subgraph-nodes and -edges prune a score's pass, and --pruning=false "
        "turns pruning off");
  }
  if (score.nodes > c.engine.max_subgraph_nodes || score.edges > c.engine.max_subgraph_edges) {
    return UsageError(absl::StrCat(
        "--score-max-subgraph-nodes=", score.nodes, " and -edges=", score.edges,
        " are above --max-subgraph-nodes=", c.engine.max_subgraph_nodes,
        " and -edges=", c.engine.max_subgraph_edges, ": a score's budget is at most the server's"));
  }
  c.engine.release_memory = ReleaseFreedMemory;   // after a burst (model/core/runtime.h)
  c.warmup.batch_size = c.engine.max_batch_size;  // the warm-up runs the shapes served
  c.warmup.max_batch_nodes = c.engine.max_batch_nodes;
  c.warmup.max_batch_edges = c.engine.max_batch_edges;
  c.warmup.path_budget = c.rank_limits.ScoreBudget();  // a path model's warm-up prunes as a
  c.warmup.path_cap = c.rank_limits.budget;            // ScoreTriplet's pass does
  c.warmup.max_subgraph_nodes = c.engine.max_subgraph_nodes;
  c.tls.cert = absl::GetFlag(FLAGS_tls_cert);
  c.tls.key = absl::GetFlag(FLAGS_tls_key);
  c.tls.client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  c.auth_tokens = absl::GetFlag(FLAGS_auth_tokens);
  c.reflection = absl::GetFlag(FLAGS_reflection);
  c.ready_file = absl::GetFlag(FLAGS_ready_file);
  return c;
}

Json ConfigLogFields(const ServerConfig& config) {
  Json fields = {{"model", config.model_path},
                 {"data_dir", config.data_dir},
                 {"host", config.host},
                 {"device", config.device}};
  for (const NumericFlag& f : NumericFlags()) fields[f.name] = f.logged(config);
  fields["max_caller_share"] = config.engine.max_caller_share;
  fields["online_eval_rate"] = config.online_eval.rate;
  fields["online_eval_cpu_share"] = config.online_eval.cpu_share;
  fields["allow_unknown_relations"] = config.allow_unknown_relations;
  fields["pruning"] = config.rank_limits.budget.nodes > 0;
  fields["sync_writes"] = config.store.sync;
  fields["truncate_corrupted_wal"] = config.store.truncate_corrupted_wal;
  return fields;
}

}  // namespace grail
