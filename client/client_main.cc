// grail-client: a command-line client for every KnowledgeGraph RPC, and a load generator.
//
//   grail-client [--target HOST:PORT] [--deadline-ms MS] [--json] COMMAND ARGS...
//
// Output is made for scripts as much as for people: plain results go to stdout one per line
// with TAB-separated fields (or one JSON object with --json); progress and errors go to
// stderr. Errors read `error: <STATUS_CODE>: <message>`. Exit status: 0 success, 1 an RPC or
// input error, 2 a usage error (unknown command or flag, wrong arguments).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "client/channel.h"
#include "client/load_generator.h"
#include "client/triple_export.h"
#include "client/triple_source.h"
#include "client/triple_upload.h"
#include "common/command_line.h"
#include "common/grpc_status.h"
#include "common/json.h"
#include "grpcpp/grpcpp.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"

ABSL_FLAG(std::string, target, grail::DefaultTarget(),
          "the server, HOST:PORT (default: the environment's GRAIL_TARGET, else "
          "localhost:50051)");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA bundle: connect over TLS, trusting server certificates it signed");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate, for mutual TLS (with --tls-key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls-cert");
ABSL_FLAG(std::string, tls_server_name, "",
          "name the server's certificate must carry, if not the target's host");
ABSL_FLAG(std::string, token, "",
          "bearer token sent with every call (default: the environment's GRAIL_TOKEN)");
ABSL_FLAG(int64_t, deadline_ms, 30000,
          "deadline of each call in milliseconds (add, remove: longest wait for an "
          "acknowledgement); "
          "0: none");
ABSL_FLAG(bool, json, false, "print one JSON object (score-file: one per line) instead of text");
ABSL_FLAG(bool, wait_for_ready, false,
          "wait (within the deadline) for the server to come up instead of failing UNAVAILABLE");
ABSL_FLAG(int, batch, 256, "score-file: facts per ScoreTriplets call");
ABSL_FLAG(bool, explain, false,
          "score: also print the strongest paths from head to tail behind the score");
ABSL_FLAG(int, paths, 3, "score --explain: how many paths (1..100)");
ABSL_FLAG(int, top_k, 0, "rank-*, load: return only the best K (0: all)");
ABSL_FLAG(std::string, candidates, "",
          "rank-*: file of candidate entities, one per line (default: every entity)");
ABSL_FLAG(bool, filter_known, false, "rank-*: leave out candidates that complete a stored fact");
ABSL_FLAG(int64_t, max_visited_nodes, 0,
          "rank-*, load: a path-family ranking's budget of entities (RankOptions; 0: the "
          "server's)");
ABSL_FLAG(int64_t, max_visited_edges, 0,
          "rank-*, load: a path-family ranking's budget of message edges (0: the server's)");
ABSL_FLAG(int, chunk, 0,
          "add, remove: facts per chunk (0: 10000); remove-entities, remove-relations: names per "
          "chunk (0: 1000)");
ABSL_FLAG(int, window, 8, "add, remove: chunks sent and not yet acknowledged, at most");
ABSL_FLAG(uint64_t, since_sequence, 0,
          "export: only the facts added after this graph sequence (0: every fact)");
ABSL_FLAG(uint32_t, page, 0, "export: facts per message (0: the server's default, 10000)");
ABSL_FLAG(int, concurrency, 4, "load: concurrent callers");
ABSL_FLAG(int, connections, 1,
          "load: connections the callers are spread over, each its own caller to a server "
          "without tokens (1: every caller shares one, and so one caller's share)");
ABSL_FLAG(int64_t, requests, 1000, "load: measured requests in total");
ABSL_FLAG(int64_t, warmup, 0, "load: requests issued before the measured ones, not measured");
ABSL_FLAG(std::string, method, "score", "load: score or rank-tails");
ABSL_FLAG(std::string, triples, "", "load: triple file the requests are drawn from");
ABSL_FLAG(int, candidates_per_request, 50,
          "load --method rank-tails: candidates per request, the true tail among them (0: every "
          "entity)");
ABSL_FLAG(uint64_t, seed, 1, "load: seed of the request choice");
ABSL_FLAG(double, zipf_heads, 0,
          "load: draw facts by head, the head of popularity rank k (most facts first) with "
          "probability proportional to 1/k^S (1: popular entities asked often, as real traffic "
          "is); 0: every fact equally likely");
ABSL_FLAG(uint64_t, max_staleness_sequences, 0,
          "score, score-file, load --method score: accept a path-family score computed on a "
          "graph version up to this many versions behind (kg.v1.Staleness); 0: exact");
ABSL_FLAG(uint32_t, max_staleness_ms, 0,
          "score, score-file, load --method score: accept a path-family score computed up to "
          "this many milliseconds ago (kg.v1.Staleness); 0: exact");
ABSL_FLAG(uint64_t, min_graph_sequence, 0,
          "score, score-file, rank-*, stats, load: answer on this graph version or later (an "
          "add/remove last_sequence, e.g. from another replica); 0: any");

namespace grail {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

constexpr const char kUsage[] =
    R"(usage: grail-client [--target HOST:PORT] [--deadline-ms MS] [--json] [--wait-for-ready]
                    [--tls-ca FILE [--tls-cert FILE --tls-key FILE] [--tls-server-name N]]
                    [--token T]  COMMAND ARGS...

commands:
  score H R T [--explain [--paths K]]
      Scores one fact. Prints the score; --json: an object with head, relation, tail,
      score, probability, known_fact, subgraph_nodes, subgraph_edges, graph_sequence,
      scored_by (grail, path, or fused: a fusion archive's classifier over GraIL and KGE).
      --explain: then the K (default 3) strongest paths from H to T behind the score, one
      per line: weight<TAB>rule body<TAB>the entities it runs through (--json: "paths").
  score-file FILE [--batch N]
      Scores every fact of a triple file (head<TAB>relation<TAB>tail per line), N per call.
      Prints head<TAB>relation<TAB>tail<TAB>score per fact; --json: one object per line.
  rank-tails H R [--top-k K] [--candidates FILE] [--filter-known]
  rank-heads R T [--top-k K] [--candidates FILE] [--filter-known]
      Ranks candidate tails (heads), best first: every entity of the graph, or the names
      in FILE (one per line). Prints rank<TAB>entity<TAB>score per entity; --json: an
      object with ranked (rank, entity, score, known_fact, scored_by, pruned),
      candidates_scored, candidates_filtered, candidates_shared_score (candidates far from
      the fixed entity, which share one exact score), candidates_pruned (the ones a pruned
      propagation did not visit, each marked pruned; --max-visited-nodes N /
      --max-visited-edges E ask for a budget below the server's), graph_sequence.
  add FILE [--chunk N] [--window W]
      Streams a triple file into the graph in chunks of N facts (default 10000), at most W
      unacknowledged. Prints a summary: chunks_acknowledged, facts_added,
      duplicate_facts, entities_created, ..., facts_per_second.
  remove FILE [--chunk N] [--window W]
      Removes a triple file's facts from the graph, streamed like add. Prints a summary:
      chunks_acknowledged, facts_removed, facts_not_present, ..., facts_per_second.
  remove-entities FILE [--chunk N]
      Removes the entities named in FILE (one per line), each with all its facts; their
      names are unknown afterwards until a fact names them again. Prints
      chunks_acknowledged, entities_removed, entities_not_present, facts_removed.
  remove-relations FILE [--chunk N]
      Removes every fact of the relations named in FILE (one per line): they no longer
      count in stats or in a reloaded model's vocabulary check. Prints chunks_acknowledged,
      relations_removed, relations_not_present, facts_removed.
  export FILE [--since-sequence S] [--page N]
      Writes the facts of one version of the graph into FILE as a triple file, in order of
      addition (the last lines are the most recent facts); with S (the graph_sequence of an
      earlier export), only the facts added after it and still stored. FILE appears only
      once the export is whole (it is written as FILE.partial, then renamed). Needs a write
      token when the server checks tokens. --deadline-ms bounds the wait for each page, not
      the export. Prints graph_sequence, facts, pages, seconds and facts_per_second.
  checkpoint DIR
      Writes a consistent copy of the server's graph store into DIR, an absolute path on
      the server's machine that must not exist (admin token when the server checks tokens);
      a new replica starts on a copy of it (deploy/README.md, "Replication"). Prints the
      dir and the graph_sequence it holds.
  reload-model PATH
      Makes the server serve the model archive PATH (a path on the server's machine; ""
      for its --model file again) without a restart; calls in flight finish on the old
      model. Needs an admin token when the server checks tokens. Prints the new version,
      generation, previous_version, load_seconds and warmup_seconds.
  health
      Asks the standard health service (grpc.health.v1) whether the server is serving.
      Prints SERVING, NOT_SERVING or UNKNOWN; exit status 0 only for SERVING (for probes).
  stats
      Prints the graph's and the model's statistics as one JSON object (entities,
      relations, facts, graph_sequence, model, limits).
  load --triples FILE [--concurrency N] [--requests M] [--method score|rank-tails]
       [--candidates-per-request C] [--top-k K] [--warmup W] [--seed S]
      Load generator: N threads issue M requests drawn from FILE's facts. Prints
      throughput, latency percentiles (ms) and outcomes by status code.

Replicas: with --min-graph-sequence S (the last_sequence an add or remove printed, from any
replica of the graph) reads wait until the replica has applied S, or fail UNAVAILABLE.
TLS: --tls-ca turns it on; --tls-cert and --tls-key add a client certificate (mutual TLS).
A bearer token (--token, or GRAIL_TOKEN in the environment) goes with every call; the server
is --target, or GRAIL_TARGET in the environment, or localhost:50051.
Flags may come anywhere after the program name; `--` ends them. Exit status: 0 success,
1 an RPC or input error (printed as `error: STATUS_CODE: message`), 2 a usage error.
)";

// --- Command line ---------------------------------------------------------------------------

// The whole usage text only when no command was given; otherwise a pointer to it.
int PrintUsageError(const std::string& message, bool full_usage = false) {
  if (full_usage) {
    std::fprintf(stderr, "error: %s\n\n%s", message.c_str(), kUsage);
  } else {
    std::fprintf(stderr, "error: %s\n(grail-client --help shows the usage)\n", message.c_str());
  }
  return kExitUsage;
}

int PrintError(const absl::Status& status) {
  std::fprintf(stderr, "error: %s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  return kExitError;
}

int PrintError(const grpc::Status& status) { return PrintError(ToAbslStatus(status)); }

void PrintLine(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
}

// --- Calls ----------------------------------------------------------------------------------

struct CallSettings {
  int64_t deadline_ms = 0;
  bool wait_for_ready = false;

  void Apply(grpc::ClientContext* context) const {
    if (deadline_ms > 0) {
      context->set_deadline(std::chrono::system_clock::now() +
                            std::chrono::milliseconds(deadline_ms));
    }
    context->set_wait_for_ready(wait_for_ready);
  }
};

struct Session {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<kg::v1::KnowledgeGraph::Stub> stub;
  CallSettings call;
  bool json = false;
  // The graph version reads ask for (--min-graph-sequence); add and remove raise it to their
  // last ack, so later reads of the same process see what it wrote.
  mutable uint64_t min_graph_sequence = 0;
  // How stale a score may be (--max-staleness-sequences, --max-staleness-ms).
  kg::v1::Staleness staleness;
  // What made `channel`, to open more connections like it (load --connections).
  ChannelOptions channel_options;
  grpc::ChannelArguments channel_args;
};

// The scorer's name as the JSON output gives it: grail, path, fused or ensemble ("" if unset).
std::string ScoredByName(kg::v1::ScoredBy scored_by) {
  switch (scored_by) {
    case kg::v1::SCORED_BY_GRAIL:
      return "grail";
    case kg::v1::SCORED_BY_PATH:
      return "path";
    case kg::v1::SCORED_BY_FUSED:
      return "fused";
    case kg::v1::SCORED_BY_ENSEMBLE:
      return "ensemble";
    default:
      return "";
  }
}

std::string ScoreJson(const kg::v1::Triple& triple, const kg::v1::ScoreTripletResponse& result) {
  return JsonLine({{"head", triple.head()},
                   {"relation", triple.relation()},
                   {"tail", triple.tail()},
                   {"score", JsonFloat(result.score())},
                   {"probability", JsonFloat(result.probability())},
                   {"known_fact", result.known_fact()},
                   {"subgraph_nodes", result.subgraph_nodes()},
                   {"subgraph_edges", result.subgraph_edges()},
                   {"graph_sequence", result.graph_sequence()},
                   {"scored_by", ScoredByName(result.scored_by())},
                   {"pruned", result.pruned()}});
}

// One explanation path as text: weight, rule body, and the entities it runs through.
std::string PathText(const kg::v1::ExplanationPath& path) {
  std::string through;
  for (int i = 0; i < path.steps_size(); ++i) {
    const kg::v1::PathStep& step = path.steps(i);
    if (i == 0) through = step.from_entity();
    absl::StrAppend(&through, step.inverse() ? " <-" : " -", step.relation(),
                    step.inverse() ? "- " : "-> ", step.to_entity());
  }
  return absl::StrCat(FormatFloat(static_cast<float>(path.weight())), "\t", path.rule(), "\t",
                      through);
}

int RunScore(const Session& session, const std::vector<std::string>& args) {
  kg::v1::ScoreTripletRequest request;
  request.mutable_triple()->set_head(args[0]);
  request.mutable_triple()->set_relation(args[1]);
  request.mutable_triple()->set_tail(args[2]);
  request.set_min_graph_sequence(session.min_graph_sequence);
  *request.mutable_max_staleness() = session.staleness;
  if (absl::GetFlag(FLAGS_explain)) {
    const int paths = absl::GetFlag(FLAGS_paths);
    if (paths < 1 || paths > 100) return PrintUsageError("--paths takes 1..100");
    request.set_explain(true);
    request.set_max_paths(static_cast<uint32_t>(paths));
  }
  kg::v1::ScoreTripletResponse response;
  grpc::ClientContext context;
  session.call.Apply(&context);
  const grpc::Status status = session.stub->ScoreTriplet(&context, request, &response);
  if (!status.ok()) return PrintError(status);
  if (session.json) {
    Json json = Json::parse(ScoreJson(request.triple(), response));
    if (request.explain()) {
      json["paths"] = Json::array();
      for (const kg::v1::ExplanationPath& path : response.paths()) {
        Json steps = Json::array();
        for (const kg::v1::PathStep& step : path.steps()) {
          Json attention = Json::array();
          for (float a : step.attention()) attention.push_back(JsonFloat(a));
          steps.push_back({{"from", step.from_entity()},
                           {"relation", step.relation()},
                           {"to", step.to_entity()},
                           {"inverse", step.inverse()},
                           {"attention", attention}});
        }
        Json layer_weights = Json::array();
        for (double w : path.layer_weights()) layer_weights.push_back(w);
        json["paths"].push_back({{"rule", path.rule()},
                                 {"weight", path.weight()},
                                 {"layer_weights", layer_weights},
                                 {"steps", steps}});
      }
    }
    PrintLine(JsonLine(json));
    return kExitOk;
  }
  PrintLine(FormatFloat(response.score()));
  for (const kg::v1::ExplanationPath& path : response.paths()) PrintLine(PathText(path));
  return kExitOk;
}

int RunScoreFile(const Session& session, const std::vector<std::string>& args) {
  const int batch = absl::GetFlag(FLAGS_batch);
  if (batch < 1) return PrintUsageError("--batch must be at least 1");
  absl::StatusOr<std::unique_ptr<TripleChunkReader>> reader =
      TripleChunkReader::Open(args[0], static_cast<size_t>(batch));
  if (!reader.ok()) return PrintError(reader.status());
  TripleChunk chunk;
  kg::v1::ScoreTripletsRequest request;
  kg::v1::ScoreTripletsResponse response;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&chunk);
    if (!more.ok()) return PrintError(more.status());
    if (!*more) break;
    request.Clear();
    request.set_min_graph_sequence(session.min_graph_sequence);
    *request.mutable_max_staleness() = session.staleness;
    for (const SourceTriple& t : chunk.triples) {
      kg::v1::Triple* triple = request.add_triples();
      triple->set_head(t.head);
      triple->set_relation(t.relation);
      triple->set_tail(t.tail);
    }
    response.Clear();
    grpc::ClientContext context;
    session.call.Apply(&context);
    const grpc::Status status = session.stub->ScoreTriplets(&context, request, &response);
    if (!status.ok()) return PrintError(status);
    if (response.results_size() != request.triples_size()) {
      return PrintError(
          absl::InternalError(absl::StrCat("the server returned ", response.results_size(),
                                           " scores for ", request.triples_size(), " facts")));
    }
    for (int i = 0; i < request.triples_size(); ++i) {
      const kg::v1::Triple& t = request.triples(i);
      PrintLine(session.json ? ScoreJson(t, response.results(i))
                             : absl::StrCat(t.head(), "\t", t.relation(), "\t", t.tail(), "\t",
                                            FormatFloat(response.results(i).score())));
    }
  }
  return kExitOk;
}

// The call's budget for pruned propagation (--max-visited-nodes, --max-visited-edges).
absl::Status SetBudget(kg::v1::RankOptions* options) {
  const int64_t nodes = absl::GetFlag(FLAGS_max_visited_nodes);
  const int64_t edges = absl::GetFlag(FLAGS_max_visited_edges);
  constexpr int64_t kMax = std::numeric_limits<uint32_t>::max();
  if (nodes < 0 || edges < 0 || nodes > kMax || edges > kMax) {
    return absl::InvalidArgumentError("--max-visited-nodes and --max-visited-edges take 0..2^32-1");
  }
  options->set_max_visited_nodes(static_cast<uint32_t>(nodes));
  options->set_max_visited_edges(static_cast<uint32_t>(edges));
  return absl::OkStatus();
}

// rank-tails (fixed = head) and rank-heads (fixed = tail).
int RunRank(const Session& session, bool tails, const std::vector<std::string>& args) {
  const int top_k = absl::GetFlag(FLAGS_top_k);
  if (top_k < 0) return PrintUsageError("--top-k must be at least 0");
  kg::v1::RankOptions options;
  options.set_top_k(static_cast<uint32_t>(top_k));
  options.set_filter_known_facts(absl::GetFlag(FLAGS_filter_known));
  if (absl::Status budget = SetBudget(&options); !budget.ok()) {
    return PrintUsageError(std::string(budget.message()));
  }
  if (const std::string path = absl::GetFlag(FLAGS_candidates); !path.empty()) {
    absl::StatusOr<std::vector<std::string>> names = ReadNameList(path);
    if (!names.ok()) return PrintError(names.status());
    for (std::string& name : *names) options.add_candidates(std::move(name));
  }
  kg::v1::RankResponse response;
  grpc::ClientContext context;
  session.call.Apply(&context);
  grpc::Status status;
  Json json = Json::object();
  if (tails) {
    kg::v1::RankTailsRequest request;
    request.set_head(args[0]);
    request.set_relation(args[1]);
    *request.mutable_options() = std::move(options);
    request.set_min_graph_sequence(session.min_graph_sequence);
    status = session.stub->RankTails(&context, request, &response);
    json["head"] = args[0];
    json["relation"] = args[1];
  } else {
    kg::v1::RankHeadsRequest request;
    request.set_relation(args[0]);
    request.set_tail(args[1]);
    *request.mutable_options() = std::move(options);
    request.set_min_graph_sequence(session.min_graph_sequence);
    status = session.stub->RankHeads(&context, request, &response);
    json["relation"] = args[0];
    json["tail"] = args[1];
  }
  if (!status.ok()) return PrintError(status);
  if (session.json) {
    Json& ranked = json["ranked"] = Json::array();
    for (const kg::v1::RankedEntity& entity : response.ranked()) {
      ranked.push_back({{"rank", entity.rank()},
                        {"entity", entity.entity()},
                        {"score", JsonFloat(entity.score())},
                        {"known_fact", entity.known_fact()},
                        {"scored_by", ScoredByName(entity.scored_by())},
                        {"pruned", entity.pruned()}});
    }
    json["candidates_scored"] = response.candidates_scored();
    json["candidates_filtered"] = response.candidates_filtered();
    json["candidates_shared_score"] = response.candidates_shared_score();
    json["candidates_pruned"] = response.candidates_pruned();
    json["graph_sequence"] = response.graph_sequence();
    PrintLine(JsonLine(json));
  } else {
    for (const kg::v1::RankedEntity& entity : response.ranked()) {
      PrintLine(
          absl::StrCat(entity.rank(), "\t", entity.entity(), "\t", FormatFloat(entity.score())));
    }
  }
  return kExitOk;
}

std::string UploadSummaryText(const UploadReport& report, bool remove) {
  if (remove) {
    return absl::StrFormat(
        "chunks_acknowledged=%d facts_acknowledged=%d facts_removed=%d facts_not_present=%d "
        "last_sequence=%d seconds=%.3f facts_per_second=%.1f",
        report.chunks_acknowledged, report.facts_acknowledged, report.facts_removed,
        report.facts_not_present, report.last_sequence, report.seconds, report.facts_per_second());
  }
  return absl::StrFormat(
      "chunks_acknowledged=%d facts_acknowledged=%d facts_added=%d duplicate_facts=%d "
      "entities_created=%d relations_created=%d last_sequence=%d seconds=%.3f "
      "facts_per_second=%.1f",
      report.chunks_acknowledged, report.facts_acknowledged, report.facts_added,
      report.duplicate_facts, report.entities_created, report.relations_created,
      report.last_sequence, report.seconds, report.facts_per_second());
}

// --chunk, or the command's default where it is 0.
int ChunkSize(int command_default) {
  const int chunk = absl::GetFlag(FLAGS_chunk);
  return chunk == 0 ? command_default : chunk;
}

// add and remove: stream a triple file into AddTriples or RemoveTriples.
int RunUpload(const Session& session, const std::vector<std::string>& args, bool remove) {
  // 10,000 facts a chunk: at 10^7 entities a stream takes about twice as many facts a
  // second as with 1,000 (docs/BENCHMARKS-log.md, "Streaming at 10^7").
  const int chunk = ChunkSize(10000);
  const int window = absl::GetFlag(FLAGS_window);
  if (chunk < 1) return PrintUsageError("--chunk must be at least 1");
  if (window < 1) return PrintUsageError("--window must be at least 1");
  const std::string& path = args[0];
  absl::StatusOr<std::unique_ptr<TripleChunkReader>> reader =
      TripleChunkReader::Open(path, static_cast<size_t>(chunk));
  if (!reader.ok()) return PrintError(reader.status());

  UploadOptions options;
  options.window = static_cast<size_t>(window);
  options.ack_timeout_ms = session.call.deadline_ms;
  options.wait_for_ready = session.call.wait_for_ready;
  options.remove = remove;
  double next_progress = 2.0;
  options.on_ack = [&next_progress, remove](const UploadReport& report) {
    if (report.seconds < next_progress) return;
    next_progress = report.seconds + 2.0;
    std::fprintf(stderr, "progress: %s\n", UploadSummaryText(report, remove).c_str());
  };
  const UploadReport report = UploadTriples(session.stub.get(), reader->get(), options);
  session.min_graph_sequence = std::max(session.min_graph_sequence, report.last_sequence);

  if (!report.source_error.ok()) PrintError(report.source_error);
  if (!report.status.ok()) PrintError(report.status);
  if (!report.ok()) {
    std::fprintf(stderr, "%s before the error: %llu chunks, %llu facts (last sequence %llu)\n",
                 remove ? "applied" : "stored",
                 static_cast<unsigned long long>(report.chunks_acknowledged),
                 static_cast<unsigned long long>(report.facts_acknowledged),
                 static_cast<unsigned long long>(report.last_sequence));
    if (report.first_unacknowledged) {
      std::fprintf(stderr, "first unacknowledged chunk: %s lines %llu-%llu (chunk %llu)\n",
                   path.c_str(),
                   static_cast<unsigned long long>(report.first_unacknowledged->first_line),
                   static_cast<unsigned long long>(report.first_unacknowledged->last_line),
                   static_cast<unsigned long long>(report.first_unacknowledged->chunk_index));
    }
  }
  if (session.json) {
    Json json = {{"ok", report.ok()},
                 {"chunks_sent", report.chunks_sent},
                 {"chunks_acknowledged", report.chunks_acknowledged},
                 {"facts_acknowledged", report.facts_acknowledged}};
    if (remove) {
      json["facts_removed"] = report.facts_removed;
      json["facts_not_present"] = report.facts_not_present;
    } else {
      json["facts_added"] = report.facts_added;
      json["duplicate_facts"] = report.duplicate_facts;
      json["entities_created"] = report.entities_created;
      json["relations_created"] = report.relations_created;
    }
    json["last_sequence"] = report.last_sequence;
    json["seconds"] = report.seconds;
    json["facts_per_second"] = report.facts_per_second();
    const absl::Status error =
        !report.source_error.ok() ? report.source_error : ToAbslStatus(report.status);
    if (!error.ok()) {
      json["error"] = {{"code", absl::StatusCodeToString(error.code())},
                       {"message", error.message()}};
    }
    if (report.first_unacknowledged) {
      json["first_unacknowledged"] = {{"chunk_index", report.first_unacknowledged->chunk_index},
                                      {"first_line", report.first_unacknowledged->first_line},
                                      {"last_line", report.first_unacknowledged->last_line}};
    }
    PrintLine(JsonLine(json));
  } else {
    PrintLine(UploadSummaryText(report, remove));
  }
  return report.ok() ? kExitOk : kExitError;
}

// remove-entities / remove-relations FILE: the names in FILE (one per line), --chunk per
// RemoveTriples chunk, each chunk's ack read before the next is sent.
int RunRemoveNames(const Session& session, const std::vector<std::string>& args, bool relations) {
  // An entity's removal takes all its facts with it: fewer names a chunk than facts.
  const int chunk = ChunkSize(1000);
  if (chunk < 1) return PrintUsageError("--chunk must be at least 1");
  absl::StatusOr<std::vector<std::string>> names = ReadNameList(args[0]);
  if (!names.ok()) return PrintError(names.status());
  grpc::ClientContext context;
  session.call.Apply(&context);
  auto stream = session.stub->RemoveTriples(&context);
  uint64_t chunks = 0, removed = 0, not_present = 0, facts_removed = 0;
  uint64_t last_sequence = 0;
  for (size_t begin = 0; begin < names->size(); begin += static_cast<size_t>(chunk)) {
    kg::v1::RemoveTriplesRequest request;
    const size_t end = std::min(names->size(), begin + static_cast<size_t>(chunk));
    for (size_t i = begin; i < end; ++i) {
      if (relations) {
        request.add_relations((*names)[i]);
      } else {
        request.add_entities((*names)[i]);
      }
    }
    kg::v1::RemoveTriplesAck ack;
    if (!stream->Write(request) || !stream->Read(&ack)) break;
    ++chunks;
    removed += relations ? ack.relations_removed() : ack.entities_removed();
    not_present += relations ? ack.relations_not_present() : ack.entities_not_present();
    facts_removed += ack.facts_removed();
    last_sequence = ack.sequence();
  }
  session.min_graph_sequence = std::max(session.min_graph_sequence, last_sequence);
  stream->WritesDone();
  const grpc::Status status = stream->Finish();
  if (!status.ok()) PrintError(status);
  const std::string kind = relations ? "relations" : "entities";
  if (session.json) {
    PrintLine(JsonLine({{"ok", status.ok()},
                        {"chunks_acknowledged", chunks},
                        {kind + "_removed", removed},
                        {kind + "_not_present", not_present},
                        {"facts_removed", facts_removed},
                        {"last_sequence", last_sequence}}));
  } else {
    PrintLine(
        absl::StrFormat("chunks_acknowledged=%d %s_removed=%d %s_not_present=%d facts_removed=%d "
                        "last_sequence=%d",
                        chunks, kind, removed, kind, not_present, facts_removed, last_sequence));
  }
  return status.ok() ? kExitOk : kExitError;
}

int RunRemoveEntities(const Session& session, const std::vector<std::string>& args) {
  return RunRemoveNames(session, args, /*relations=*/false);
}

int RunRemoveRelations(const Session& session, const std::vector<std::string>& args) {
  return RunRemoveNames(session, args, /*relations=*/true);
}

int RunReloadModel(const Session& session, const std::vector<std::string>& args) {
  kg::v1::ReloadModelRequest request;
  request.set_path(args[0]);
  kg::v1::ReloadModelResponse response;
  grpc::ClientContext context;
  session.call.Apply(&context);
  const grpc::Status status = session.stub->ReloadModel(&context, request, &response);
  if (!status.ok()) return PrintError(status);
  if (session.json) {
    PrintLine(JsonLine({{"version", response.model().version()},
                        {"generation", response.model().generation()},
                        {"previous_version", response.previous_version()},
                        {"load_seconds", response.load_seconds()},
                        {"warmup_seconds", response.warmup_seconds()}}));
  } else {
    PrintLine(absl::StrFormat(
        "version=%s generation=%d previous_version=%s load_seconds=%.3f "
        "warmup_seconds=%.3f",
        response.model().version(), response.model().generation(), response.previous_version(),
        response.load_seconds(), response.warmup_seconds()));
  }
  return kExitOk;
}

int RunExport(const Session& session, const std::vector<std::string>& args) {
  ExportOptions options;
  options.since_sequence = absl::GetFlag(FLAGS_since_sequence);
  options.page_facts = absl::GetFlag(FLAGS_page);
  options.page_timeout_ms = session.call.deadline_ms;
  options.prepare = [&](grpc::ClientContext* context) {
    CallSettings per_stream = session.call;
    per_stream.deadline_ms = 0;  // a stream as long as the graph: the wait per page is bounded
    per_stream.Apply(context);
  };
  absl::StatusOr<ExportSummary> summary = ExportTriplesToFile(*session.stub, options, args[0]);
  if (!summary.ok()) return PrintError(summary.status());
  const double rate = summary->seconds > 0 ? summary->facts / summary->seconds : 0;
  if (session.json) {
    PrintLine(JsonLine({{"file", args[0]},
                        {"graph_sequence", summary->graph_sequence},
                        {"since_sequence", options.since_sequence},
                        {"facts", summary->facts},
                        {"pages", summary->pages},
                        {"seconds", summary->seconds},
                        {"facts_per_second", rate}}));
  } else {
    PrintLine(absl::StrFormat(
        "file=%s graph_sequence=%d since_sequence=%d facts=%d pages=%d seconds=%.3f "
        "facts_per_second=%.0f",
        args[0], summary->graph_sequence, options.since_sequence, summary->facts, summary->pages,
        summary->seconds, rate));
  }
  return kExitOk;
}

int RunCheckpoint(const Session& session, const std::vector<std::string>& args) {
  kg::v1::CreateCheckpointRequest request;
  request.set_dir(args[0]);
  kg::v1::CreateCheckpointResponse response;
  grpc::ClientContext context;
  session.call.Apply(&context);
  const grpc::Status status = session.stub->CreateCheckpoint(&context, request, &response);
  if (!status.ok()) return PrintError(status);
  if (session.json) {
    PrintLine(JsonLine({{"dir", response.dir()}, {"graph_sequence", response.graph_sequence()}}));
  } else {
    PrintLine(
        absl::StrFormat("dir=%s graph_sequence=%d", response.dir(), response.graph_sequence()));
  }
  return kExitOk;
}

int RunHealth(const Session& session, const std::vector<std::string>& args) {
  const int64_t deadline_ms = session.call.deadline_ms > 0 ? session.call.deadline_ms : 30000;
  absl::StatusOr<int> health = CheckHealth(session.channel, std::chrono::milliseconds(deadline_ms));
  if (!health.ok()) return PrintError(health.status());
  const char* name = *health == 1 ? "SERVING" : *health == 2 ? "NOT_SERVING" : "UNKNOWN";
  PrintLine(session.json ? JsonLine({{"status", name}}) : name);
  return *health == 1 ? kExitOk : kExitError;
}

// Every field of ModelInfo, by its proto name: version and generation are what a caller
// reads after a reload's DEADLINE_EXCEEDED to learn whether it was applied.
Json ModelInfoJson(const kg::v1::ModelInfo& model) {
  Json kge = Json::array();
  for (const kg::v1::KgeModelInfo& member : model.kge_models()) {
    kge.push_back({{"kind", member.kind()},
                   {"dim", member.dim()},
                   {"entities", member.entities()},
                   {"relations", member.relations()},
                   {"weight", member.weight()}});
  }
  return {
      {"path", model.path()},
      {"format", model.format()},
      {"relations", std::vector<std::string>(model.relations().begin(), model.relations().end())},
      {"hops", model.hops()},
      {"layers", model.layers()},
      {"dim", model.dim()},
      {"parameters", model.parameters()},
      {"training_fingerprint", model.training_fingerprint()},
      {"device", model.device()},
      {"version", model.version()},
      {"generation", model.generation()},
      {"loaded_at_unix_seconds", model.loaded_at_unix_seconds()},
      {"kge_models", std::move(kge)}};
}

int RunStats(const Session& session, const std::vector<std::string>& args) {
  kg::v1::GetStatsResponse response;
  grpc::ClientContext context;
  session.call.Apply(&context);
  kg::v1::GetStatsRequest request;
  request.set_min_graph_sequence(session.min_graph_sequence);
  const grpc::Status status = session.stub->GetStats(&context, request, &response);
  if (!status.ok()) return PrintError(status);
  PrintLine(JsonLine({{"entities", response.entities()},
                      {"relations", response.relations()},
                      {"facts", response.facts()},
                      {"graph_sequence", response.graph_sequence()},
                      {"model", ModelInfoJson(response.model())},
                      {"max_batch_size", response.max_batch_size()},
                      {"max_chunk_facts", response.max_chunk_facts()},
                      {"max_request_triples", response.max_request_triples()},
                      {"uptime_seconds", response.uptime_seconds()},
                      {"version", response.version()}}));
  return kExitOk;
}

int RunLoadCommand(const Session& session, const std::vector<std::string>& args) {
  const std::string method = absl::GetFlag(FLAGS_method);
  const std::string path = absl::GetFlag(FLAGS_triples);
  LoadOptions options;
  options.concurrency = absl::GetFlag(FLAGS_concurrency);
  options.requests = absl::GetFlag(FLAGS_requests);
  options.warmup = absl::GetFlag(FLAGS_warmup);
  const int candidates = absl::GetFlag(FLAGS_candidates_per_request);
  const int top_k = absl::GetFlag(FLAGS_top_k);
  if (method != "score" && method != "rank-tails") {
    return PrintUsageError("--method must be score or rank-tails, not " + method);
  }
  kg::v1::RankOptions budget;  // merged into every ranking request
  if (absl::Status status = SetBudget(&budget); !status.ok()) {
    return PrintUsageError(std::string(status.message()));
  }
  if (path.empty()) return PrintUsageError("load needs --triples FILE");
  if (options.concurrency < 1) return PrintUsageError("--concurrency must be at least 1");
  if (options.requests < 1) return PrintUsageError("--requests must be at least 1");
  if (options.warmup < 0) return PrintUsageError("--warmup must be at least 0");
  if (candidates < 0) return PrintUsageError("--candidates-per-request must be at least 0");
  if (top_k < 0) return PrintUsageError("--top-k must be at least 0");
  absl::StatusOr<std::vector<SourceTriple>> triples = ReadAllTriples(path);
  if (!triples.ok()) return PrintError(triples.status());
  if (triples->empty()) return PrintError(absl::InvalidArgumentError(path + " has no facts"));
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  const double zipf = absl::GetFlag(FLAGS_zipf_heads);
  if (!(zipf >= 0 && zipf <= 10)) return PrintUsageError("--zipf-heads takes 0..10");
  const LoadWorkload workload(*std::move(triples), seed, candidates, zipf);
  const int connections = absl::GetFlag(FLAGS_connections);
  if (connections < 1 || connections > options.concurrency) {
    return PrintUsageError("--connections takes 1..--concurrency");
  }

  // Each connection its own subchannel (gRPC would otherwise share one between channels to
  // the same target), so the server sees one caller per connection; each thread keeps one.
  std::vector<std::unique_ptr<kg::v1::KnowledgeGraph::Stub>> stubs;
  for (int c = 1; c < connections; ++c) {
    grpc::ChannelArguments arguments = session.channel_args;
    arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
        MakeChannel(session.channel_options, arguments);
    if (!channel.ok()) return PrintError(channel.status());
    stubs.push_back(kg::v1::KnowledgeGraph::NewStub(*channel));
  }
  std::atomic<int> threads_seen{0};
  auto stub_of_thread = [&]() -> kg::v1::KnowledgeGraph::Stub* {
    thread_local int slot = -1;
    if (slot < 0) slot = threads_seen.fetch_add(1) % connections;
    return slot == 0 ? session.stub.get() : stubs[slot - 1].get();
  };
  const CallSettings& call = session.call;
  std::function<grpc::StatusCode(int64_t)> issue;
  if (method == "score") {
    issue = [&](int64_t index) {
      kg::v1::KnowledgeGraph::Stub* stub = stub_of_thread();
      kg::v1::ScoreTripletRequest request;
      workload.ScoreRequest(index, &request);
      request.set_min_graph_sequence(session.min_graph_sequence);
      *request.mutable_max_staleness() = session.staleness;
      kg::v1::ScoreTripletResponse response;
      grpc::ClientContext context;
      call.Apply(&context);
      return stub->ScoreTriplet(&context, request, &response).error_code();
    };
  } else {
    issue = [&](int64_t index) {
      kg::v1::KnowledgeGraph::Stub* stub = stub_of_thread();
      kg::v1::RankTailsRequest request;
      workload.RankTailsRequest(index, top_k, &request);
      request.mutable_options()->MergeFrom(budget);
      request.set_min_graph_sequence(session.min_graph_sequence);
      kg::v1::RankResponse response;
      grpc::ClientContext context;
      call.Apply(&context);
      return stub->RankTails(&context, request, &response).error_code();
    };
  }
  const LoadResult result = RunLoad(options, issue);
  const LatencySummary& latency = result.latency_ms;

  if (session.json) {
    Json statuses = Json::object();
    for (const auto& [name, count] : result.status_counts) statuses[name] = count;
    PrintLine(JsonLine({{"method", method},
                        {"concurrency", options.concurrency},
                        {"requests", result.requests},
                        {"warmup", options.warmup},
                        {"seed", seed},
                        {"candidates_per_request", method == "rank-tails" ? candidates : 0},
                        {"errors", result.errors},
                        {"seconds", result.seconds},
                        {"requests_per_second", result.requests_per_second},
                        // Milliseconds to the microsecond, so the JSON stays readable.
                        {"latency_ms",
                         {{"min", RoundTo(latency.min, 3)},
                          {"mean", RoundTo(latency.mean, 3)},
                          {"p50", RoundTo(latency.p50, 3)},
                          {"p90", RoundTo(latency.p90, 3)},
                          {"p99", RoundTo(latency.p99, 3)},
                          {"max", RoundTo(latency.max, 3)}}},
                        {"status_counts", statuses}}));
  } else {
    std::vector<std::string> statuses;
    for (const auto& [name, count] : result.status_counts) {
      statuses.push_back(absl::StrCat(name, "=", count));
    }
    PrintLine(absl::StrFormat(
        "method=%s concurrency=%d requests=%d errors=%d seconds=%.3f requests_per_second=%.1f",
        method, options.concurrency, result.requests, result.errors, result.seconds,
        result.requests_per_second));
    PrintLine(absl::StrFormat("latency_ms p50=%.3f p90=%.3f p99=%.3f max=%.3f mean=%.3f",
                              latency.p50, latency.p90, latency.p99, latency.max, latency.mean));
    PrintLine(absl::StrCat("status ", absl::StrJoin(statuses, " ")));
  }
  if (result.errors == result.requests) {
    std::fprintf(stderr, "error: every measured request failed\n");
    return kExitError;
  }
  return kExitOk;
}

struct Command {
  const char* name;
  size_t args;  // positional arguments after the command's name
  const char* synopsis;
  int (*run)(const Session&, const std::vector<std::string>&);
};

const Command kCommands[] = {
    {"score", 3, "score H R T", RunScore},
    {"score-file", 1, "score-file FILE", RunScoreFile},
    {"rank-tails", 2, "rank-tails H R",
     [](const Session& s, const std::vector<std::string>& a) { return RunRank(s, true, a); }},
    {"rank-heads", 2, "rank-heads R T",
     [](const Session& s, const std::vector<std::string>& a) { return RunRank(s, false, a); }},
    {"add", 1, "add FILE",
     [](const Session& s, const std::vector<std::string>& a) { return RunUpload(s, a, false); }},
    {"remove", 1, "remove FILE",
     [](const Session& s, const std::vector<std::string>& a) { return RunUpload(s, a, true); }},
    {"stats", 0, "stats", RunStats},
    {"reload-model", 1, "reload-model PATH", RunReloadModel},
    {"checkpoint", 1, "checkpoint DIR", RunCheckpoint},
    {"export", 1, "export FILE", RunExport},
    {"remove-entities", 1, "remove-entities FILE", RunRemoveEntities},
    {"remove-relations", 1, "remove-relations FILE", RunRemoveRelations},
    {"health", 0, "health", RunHealth},
    {"load", 0, "load --triples FILE", RunLoadCommand},
};

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  // Flags anywhere after the program name; a usage error exits 2 (common/command_line.h).
  std::vector<std::string> positional = ParseCommandLine(argc, argv);
  positional.erase(positional.begin());  // the program
  if (positional.empty()) return PrintUsageError("no command given", /*full_usage=*/true);
  const Command* command = nullptr;
  for (const Command& c : kCommands) {
    if (positional[0] == c.name) command = &c;
  }
  if (command == nullptr) return PrintUsageError("unknown command '" + positional[0] + "'");
  const std::vector<std::string> args(positional.begin() + 1, positional.end());
  if (args.size() != command->args) {
    return PrintUsageError(absl::StrCat(command->name, " takes ", command->args,
                                        " argument(s), got ", args.size(),
                                        " (usage: ", command->synopsis, ")"));
  }

  Session session;
  session.call.deadline_ms = absl::GetFlag(FLAGS_deadline_ms);
  session.call.wait_for_ready = absl::GetFlag(FLAGS_wait_for_ready);
  session.json = absl::GetFlag(FLAGS_json);
  session.min_graph_sequence = absl::GetFlag(FLAGS_min_graph_sequence);
  session.staleness.set_max_sequences(absl::GetFlag(FLAGS_max_staleness_sequences));
  session.staleness.set_max_milliseconds(absl::GetFlag(FLAGS_max_staleness_ms));
  if (session.call.deadline_ms < 0) return PrintUsageError("--deadline-ms must be at least 0");
  const std::string target = absl::GetFlag(FLAGS_target);
  if (target.empty()) return PrintUsageError("--target must not be empty");
  grpc::ChannelArguments channel_args;
  // Ranking every entity of a large graph can exceed gRPC's default 4 MiB; the server has
  // its own limit on what it sends.
  channel_args.SetMaxReceiveMessageSize(-1);
  ChannelOptions channel_options;
  channel_options.target = target;
  channel_options.tls_ca = absl::GetFlag(FLAGS_tls_ca);
  channel_options.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  channel_options.tls_key = absl::GetFlag(FLAGS_tls_key);
  channel_options.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  channel_options.token = TokenOrEnvironment(absl::GetFlag(FLAGS_token));
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      MakeChannel(channel_options, channel_args);
  if (!channel.ok()) {
    return channel.status().code() == absl::StatusCode::kInvalidArgument
               ? PrintUsageError(std::string(channel.status().message()))
               : PrintError(channel.status());
  }
  session.channel = *std::move(channel);
  session.stub = kg::v1::KnowledgeGraph::NewStub(session.channel);
  session.channel_options = channel_options;
  session.channel_args = channel_args;
  const int code = command->run(session, args);
  std::fflush(stdout);
  return code;
}

}  // namespace
}  // namespace grail

int main(int argc, char** argv) { return grail::Main(argc, argv); }
