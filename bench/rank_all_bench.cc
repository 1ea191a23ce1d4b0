// Ranking every entity for one query, offline (no server): the path-based scorer's one pass
// (model/path/path_model.h) against GraIL's one enclosing subgraph per candidate within k + 1 hops
// of the fixed entity (every farther candidate shares one score, as the server ranks).
// And scoring one fact (ScoreTriplet's work): the path model on the source's whole
// neighbourhood, on the entities of paths of at most L facts to the tail (a query with
// targets, model/path/path_batch.h), and GraIL on its enclosing subgraph.
// Untrained models of the default configurations: the cost does not depend on the weights.
// The path model also without the reach mask (`_unmasked`, NBFNet's own computation): a
// ranking then covers the whole graph, a fact the entities within L hops of its tail.
//
// Graphs from $GRAIL_DATA_DIR (default ../shared/data): the full WN18RR training graph
// (40.9k entities), FB15k-237's valid+test facts (14.5k entities, dense, hub-heavy) and
// fb237_v4_ind. Each benchmark ranks for the same 8 seeded query heads of the graph (heads of
// stored facts, so the queries are ones users would send); the GraIL side may take minutes
// per query on the dense graph, so it runs its queries once.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/data_dir.h"
#include "common/seeded_random.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "model/core/blas_kernels.h"
#include "model/core/runtime.h"
#include "model/grail/enclosing_subgraph.h"
#include "model/grail/fact_scoring.h"
#include "model/grail/grail_model.h"
#include "model/path/path_batch.h"
#include "model/path/path_model.h"

namespace grail {
namespace {

struct Workload {
  IndexedTriples indexed;
  StaticGraph graph;
  std::vector<Triple> queries;  // (head, relation, -): rank every tail
  std::unique_ptr<PathModel> path;
  std::unique_ptr<PathModel> path_unmasked;  // reach_mask = false
  std::unique_ptr<GrailModel> grail;
};

const std::map<std::string, std::string>& Graphs() {
  static const auto* graphs = new std::map<std::string, std::string>{
      {"WN18RR", "WN18RR/train.txt"},
      {"FB15k-237_validtest", "FB15k-237_validtest/graph.txt"},
      {"fb237_v4_ind", "fb237_v4_ind/train.txt"}};
  return *graphs;
}

Workload* Load(const std::string& name) {
  static auto* cache = new std::map<std::string, std::unique_ptr<Workload>>();
  auto it = cache->find(name);
  if (it != cache->end()) return it->second.get();
  absl::StatusOr<std::vector<NamedTriple>> facts =
      ReadTripleFile(BenchmarkDataDir() + "/" + Graphs().at(name));
  if (!facts.ok()) return nullptr;
  auto w = std::make_unique<Workload>();
  IndexTriples(*facts, &w->indexed);
  w->graph = StaticGraph(w->indexed.entities.size(), w->indexed.triples);
  SeededRandom random(3);
  const std::vector<Triple> all = w->graph.Facts();
  while (w->queries.size() < 8) w->queries.push_back(all[random.Uniform(all.size())]);
  w->path = *PathModel::Create(PathConfig{}, w->indexed.relations.names(), 1);
  PathConfig unmasked;
  unmasked.reach_mask = false;
  w->path_unmasked = *PathModel::Create(unmasked, w->indexed.relations.names(), 1);
  w->grail = *GrailModel::Create(GrailConfig{}, w->indexed.relations.names(), 1);
  return (*cache)[name] = std::move(w), (*cache)[name].get();
}

void BM_PathRankAll(benchmark::State& state, const std::string& name, bool masked) {
  Workload* w = Load(name);
  if (w == nullptr) return state.SkipWithError("data not found");
  const PathModel& model = masked ? *w->path : *w->path_unmasked;
  SetComputeThreads(2);
  PathBatchBuilder builder(w->graph, {}, model.num_relations(), model.config().radius());
  size_t next = 0;
  int64_t nodes = 0, edges = 0;
  for (auto _ : state) {
    const Triple& q = w->queries[next++ % w->queries.size()];
    PathBatch batch;
    if (!builder.Add({q.head, static_cast<int32_t>(q.relation), {}, std::nullopt}, &batch).ok()) {
      return state.SkipWithError("neighbourhood failed");
    }
    absl::StatusOr<PathScores> scores = model.Score(batch);
    if (!scores.ok()) return state.SkipWithError("forward failed");
    benchmark::DoNotOptimize(scores->far.data());
    nodes += batch.num_nodes();
    edges += batch.num_edges();
  }
  state.counters["queries/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["entities"] = w->graph.num_entities();
  state.counters["pass_nodes"] = static_cast<double>(nodes) / state.iterations();
  state.counters["pass_edges"] = static_cast<double>(edges) / state.iterations();
}

void BM_GrailRankAll(benchmark::State& state, const std::string& name) {
  Workload* w = Load(name);
  if (w == nullptr) return state.SkipWithError("data not found");
  SetComputeThreads(1);  // parallelism comes from the scoring workers
  GrailScoringOptions scoring;
  scoring.threads = 2;
  const int reach = TrivialSubgraphDistance(w->grail->config().extraction()) - 1;
  size_t next = 0;
  int64_t subgraphs = 0;
  for (auto _ : state) {
    const Triple& q = w->queries[next++ % w->queries.size()];
    std::optional<std::vector<EntityId>> near =
        EntitiesWithinHops(w->graph, q.head, reach, w->graph.num_entities() + 1);
    std::vector<Triple> facts;
    for (EntityId e : *near) {
      if (e != q.head) facts.push_back({q.head, q.relation, e});
    }
    // One far candidate stands for all the others (they share the trivial subgraph).
    for (EntityId e = 0; e < w->graph.num_entities(); ++e) {
      if (e != q.head && !std::binary_search(near->begin(), near->end(), e)) {
        facts.push_back({q.head, q.relation, e});
        break;
      }
    }
    absl::StatusOr<std::vector<float>> scores =
        ScoreGrailFacts(*w->grail, w->graph, {}, facts, scoring);
    if (!scores.ok()) return state.SkipWithError("scoring failed");
    subgraphs += static_cast<int64_t>(facts.size());
  }
  state.counters["queries/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["entities"] = w->graph.num_entities();
  state.counters["subgraphs"] = static_cast<double>(subgraphs) / state.iterations();
}

// One fact (head, relation, tail) of the graph per iteration, each of the 8 queries in turn.
// With `forward` false, only the neighbourhood search: the part of a fact's cost before the
// model runs.
void BM_PathScoreFact(benchmark::State& state, const std::string& name, bool targeted, bool forward,
                      bool masked) {
  Workload* w = Load(name);
  if (w == nullptr) return state.SkipWithError("data not found");
  const PathModel& model = masked ? *w->path : *w->path_unmasked;
  SetComputeThreads(2);
  const RelationMap identity;
  const PathNeighbourhoodSpec spec = model.Neighbourhood(&w->graph, &identity, 0);
  PathBatchBuilder builder;
  size_t next = 0;
  int64_t nodes = 0, edges = 0;
  for (auto _ : state) {
    const Triple& f = w->queries[next++ % w->queries.size()];
    PathBatch batch;
    std::vector<EntityId> targets;
    if (targeted) targets.push_back(f.tail);
    const PathQuery query(f.head, static_cast<int32_t>(f.relation), {}, std::nullopt, targets);
    if (!builder.Add(spec, query, &batch).ok()) return state.SkipWithError("neighbourhood failed");
    if (forward) {
      absl::StatusOr<PathScores> scores = model.Score(batch);
      if (!scores.ok()) return state.SkipWithError("forward failed");
      benchmark::DoNotOptimize(scores->Of(batch, 0, f.tail));
    }
    nodes += batch.num_nodes();
    edges += batch.num_edges();
  }
  state.counters["facts/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["pass_nodes"] = static_cast<double>(nodes) / state.iterations();
  state.counters["pass_edges"] = static_cast<double>(edges) / state.iterations();
}

void BM_GrailScoreFact(benchmark::State& state, const std::string& name) {
  Workload* w = Load(name);
  if (w == nullptr) return state.SkipWithError("data not found");
  SetComputeThreads(2);
  GrailScoringOptions scoring;
  scoring.threads = 1;
  size_t next = 0;
  for (auto _ : state) {
    const Triple& f = w->queries[next++ % w->queries.size()];
    absl::StatusOr<std::vector<float>> scores =
        ScoreGrailFacts(*w->grail, w->graph, {}, {f}, scoring);
    if (!scores.ok()) return state.SkipWithError("scoring failed");
    benchmark::DoNotOptimize(scores->data());
  }
  state.counters["facts/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void Register() {
  for (const auto& [name, file] : Graphs()) {
    for (bool masked : {true, false}) {
      const char* suffix = masked ? "" : "_unmasked";
      for (bool targeted : {false, true}) {
        for (bool forward : {true, false}) {
          const std::string label = absl::StrCat(forward ? "path_score_fact_" : "path_search_fact_",
                                                 targeted ? "paths" : "ball", suffix, "/", name);
          benchmark::RegisterBenchmark(label.c_str(), BM_PathScoreFact, name, targeted, forward,
                                       masked)
              ->Unit(benchmark::kMillisecond)
              ->UseRealTime();
        }
      }
      benchmark::RegisterBenchmark(absl::StrCat("path_rank_all", suffix, "/", name).c_str(),
                                   BM_PathRankAll, name, masked)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
    benchmark::RegisterBenchmark(("grail_score_fact/" + name).c_str(), BM_GrailScoreFact, name)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark(("grail_rank_all/" + name).c_str(), BM_GrailRankAll, name)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(name == "FB15k-237_validtest" ? 1 : 8);
  }
}

}  // namespace
}  // namespace grail

int main(int argc, char** argv) {
  grail::UseFastestBlasKernels(argv);  // before anything else: it may start the program again
  grail::KeepFreedMemoryForReuse();
  grail::Register();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
