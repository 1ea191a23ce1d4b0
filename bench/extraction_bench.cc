// Enclosing-subgraph extraction throughput on the benchmark graphs.
//
// Workload: for each inductive test graph (<name>_ind/train.txt), the subgraphs of its test
// facts (scoring) and of the same heads against random tails (ranking candidates), k = 3.
// Baseline, same queries in the same run: the plain set-based reference implementation.
// Data comes from $GRAIL_DATA_DIR (default: ../shared/data beside the source tree).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench/data_dir.h"
#include "common/seeded_random.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "model/grail/enclosing_subgraph.h"
#include "tests/testing/reference_extraction.h"

namespace grail {
namespace {

struct Workload {
  IndexedTriples indexed;
  std::unique_ptr<StaticGraph> graph;
  std::vector<Triple> positives;  // test facts whose entities are in the graph
  std::vector<Triple> random_tails;
};

std::unique_ptr<Workload> LoadWorkload(const std::string& name) {
  const std::string dir = BenchmarkDataDir() + "/" + name;
  absl::StatusOr<std::vector<NamedTriple>> graph = ReadTripleFile(dir + "/train.txt");
  absl::StatusOr<std::vector<NamedTriple>> test = ReadTripleFile(dir + "/test.txt");
  if (!graph.ok() || !test.ok()) return nullptr;
  auto w = std::make_unique<Workload>();
  IndexTriples(*graph, &w->indexed);
  w->graph = std::make_unique<StaticGraph>(w->indexed.entities.size(), w->indexed.triples);
  SeededRandom rng(7);
  for (const NamedTriple& t : *test) {
    auto h = w->indexed.entities.Find(t.head);
    auto r = w->indexed.relations.Find(t.relation);
    auto v = w->indexed.entities.Find(t.tail);
    if (!h || !r || !v || *h == *v) continue;
    w->positives.push_back({*h, *r, *v});
    EntityId random_tail = static_cast<EntityId>(rng.Uniform(w->graph->num_entities()));
    if (random_tail != *h) w->random_tails.push_back({*h, *r, random_tail});
  }
  return w;
}

void ReportSizes(benchmark::State& state, int64_t subgraphs, int64_t nodes, int64_t edges) {
  state.counters["subgraphs/s"] = benchmark::Counter(subgraphs, benchmark::Counter::kIsRate);
  state.counters["mean_nodes"] = static_cast<double>(nodes) / std::max<int64_t>(subgraphs, 1);
  state.counters["mean_edges"] = static_cast<double>(edges) / std::max<int64_t>(subgraphs, 1);
}

void BM_Extract(benchmark::State& state, const Workload* w, const std::vector<Triple>* queries,
                int max_nodes_per_hop) {
  ExtractionConfig config;
  config.hops = 3;
  config.max_nodes_per_hop = max_nodes_per_hop;
  SubgraphExtractor extractor(config);
  EnclosingSubgraph out;
  int64_t count = 0, nodes = 0, edges = 0;
  size_t i = 0;
  for (auto _ : state) {
    const Triple& q = (*queries)[i++ % queries->size()];
    if (!extractor.Extract(*w->graph, q.head, q.relation, q.tail, false, &out).ok()) {
      state.SkipWithError("extraction failed");
      return;
    }
    ++count;
    nodes += out.num_nodes();
    edges += out.num_edges();
  }
  ReportSizes(state, count, nodes, edges);
}

void BM_ReferenceExtract(benchmark::State& state, const Workload* w,
                         const std::vector<Triple>* queries) {
  int64_t count = 0, nodes = 0, edges = 0;
  size_t i = 0;
  for (auto _ : state) {
    const Triple& q = (*queries)[i++ % queries->size()];
    ReferenceSubgraph out = ReferenceExtract(*w->graph, q.head, q.relation, q.tail, 3, true);
    ++count;
    nodes += static_cast<int64_t>(out.labels.size());
    edges += static_cast<int64_t>(out.edges.size());
    benchmark::DoNotOptimize(out);
  }
  ReportSizes(state, count, nodes, edges);
}

}  // namespace
}  // namespace grail

int main(int argc, char** argv) {
  using grail::Workload;
  static std::vector<std::unique_ptr<Workload>> workloads;
  for (const char* name : {"fb237_v4_ind", "WN18RR_v4_ind", "fb237_v1_ind", "WN18RR_v1_ind"}) {
    std::unique_ptr<Workload> w = grail::LoadWorkload(name);
    if (!w) {
      std::fprintf(stderr, "skipping %s: not found under %s\n", name,
                   grail::BenchmarkDataDir().c_str());
      continue;
    }
    const Workload* p = w.get();
    const std::string n = name;
    benchmark::RegisterBenchmark((n + "/test_facts").c_str(), grail::BM_Extract, p, &p->positives,
                                 0);
    benchmark::RegisterBenchmark((n + "/random_tails").c_str(), grail::BM_Extract, p,
                                 &p->random_tails, 0);
    benchmark::RegisterBenchmark((n + "/test_facts/cap100").c_str(), grail::BM_Extract, p,
                                 &p->positives, 100);
    benchmark::RegisterBenchmark((n + "/test_facts/reference").c_str(), grail::BM_ReferenceExtract,
                                 p, &p->positives);
    workloads.push_back(std::move(w));
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
