// The GraIL network's forward (inference) and forward + backward (training) throughput on
// real batches: the training facts of a benchmark graph and one corrupted negative each,
// extracted as the trainer does, 16 positives + 16 negatives per batch.
// Data comes from $GRAIL_DATA_DIR (default: ../shared/data beside the source tree); the graphs
// from $GRAIL_BENCH_SPLITS (default "fb237_v1 WN18RR_v1").
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "bench/data_dir.h"
#include "common/seeded_random.h"
#include "graph/negative_sampling.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "model/core/blas_kernels.h"
#include "model/core/runtime.h"
#include "model/grail/enclosing_subgraph.h"
#include "model/grail/grail_model.h"
#include "model/grail/subgraph_batch.h"
#include "train/grail_trainer.h"

namespace grail {
// Defined in model_bench_train_step.cc: one optimiser-free training step (forward, margin
// loss, backward) on `batch` whose first `positives` graphs are the positives.
double TrainingStep(GrailModel& model, const SubgraphBatch& batch, int64_t positives);

namespace {

struct Workload {
  std::unique_ptr<GrailModel> model;
  std::vector<SubgraphBatch> batches;  // each: 16 positives then their 16 negatives
  double mean_nodes = 0, mean_edges = 0;
};

std::unique_ptr<Workload> LoadWorkload(const std::string& name, int num_batches) {
  absl::StatusOr<std::vector<NamedTriple>> facts =
      ReadTripleFile(BenchmarkDataDir() + "/" + name + "/train.txt");
  if (!facts.ok()) return nullptr;
  IndexedTriples indexed;
  IndexTriples(*facts, &indexed);
  const StaticGraph graph(indexed.entities.size(), indexed.triples);
  auto w = std::make_unique<Workload>();
  w->model = *GrailModel::Create(GrailConfig{}, indexed.relations.names(), 1);
  SubgraphExtractor extractor(w->model->config().extraction());
  EnclosingSubgraph subgraph;
  SeededRandom random(5);
  std::vector<Triple> all = graph.Facts();
  random.Shuffle(all);
  size_t next = 0;
  double nodes = 0, edges = 0, graphs = 0;
  for (int b = 0; b < num_batches; ++b) {
    std::vector<Triple> positives, negatives;
    while (positives.size() < 16 && next < all.size()) {
      const Triple& p = all[next++];
      std::optional<Triple> n = CorruptHeadOrTail(graph, p, random);
      if (p.head == p.tail || !n) continue;
      positives.push_back(p);
      negatives.push_back(*n);
    }
    SubgraphBatch batch;
    for (const std::vector<Triple>* list : {&positives, &negatives}) {
      for (const Triple& t : *list) {
        if (!extractor.Extract(graph, t.head, t.relation, t.tail, false, &subgraph).ok()) continue;
        batch.Add(subgraph, t.relation, {});
        nodes += subgraph.num_nodes();
        edges += subgraph.num_edges();
        graphs += 1;
      }
    }
    w->batches.push_back(std::move(batch));
  }
  w->mean_nodes = nodes / graphs;
  w->mean_edges = edges / graphs;
  return w;
}

void Report(benchmark::State& state, const Workload& w, int64_t subgraphs) {
  state.counters["subgraphs/s"] = benchmark::Counter(subgraphs, benchmark::Counter::kIsRate);
  state.counters["mean_nodes"] = w.mean_nodes;
  state.counters["mean_edges"] = w.mean_edges;
}

void BM_Forward(benchmark::State& state, const Workload* w) {
  int64_t subgraphs = 0;
  size_t i = 0;
  for (auto _ : state) {
    const SubgraphBatch& batch = w->batches[i++ % w->batches.size()];
    benchmark::DoNotOptimize(w->model->Score(batch));
    subgraphs += batch.num_graphs();
  }
  Report(state, *w, subgraphs);
}

void BM_TrainingStep(benchmark::State& state, const Workload* w) {
  int64_t subgraphs = 0;
  size_t i = 0;
  for (auto _ : state) {
    const SubgraphBatch& batch = w->batches[i++ % w->batches.size()];
    benchmark::DoNotOptimize(TrainingStep(*w->model, batch, batch.num_graphs() / 2));
    subgraphs += batch.num_graphs();
  }
  Report(state, *w, subgraphs);
}

}  // namespace
}  // namespace grail

int main(int argc, char** argv) {
  grail::UseFastestBlasKernels(argv);  // before anything else: it may start the program again
  grail::KeepFreedMemoryForReuse();
  static std::vector<std::unique_ptr<grail::Workload>> workloads;
  // GRAIL_BENCH_SPLITS="fb237_v2 fb237_v4" picks other benchmark graphs.
  const char* splits = std::getenv("GRAIL_BENCH_SPLITS");
  const std::vector<std::string> names =
      absl::StrSplit(splits != nullptr ? splits : "fb237_v1 WN18RR_v1", ' ', absl::SkipEmpty());
  for (const std::string& name : names) {
    std::unique_ptr<grail::Workload> w = grail::LoadWorkload(name, 8);
    if (!w) {
      std::fprintf(stderr, "skipping %s: not found under %s\n", name.c_str(),
                   grail::BenchmarkDataDir().c_str());
      continue;
    }
    benchmark::RegisterBenchmark((name + "/forward").c_str(), grail::BM_Forward, w.get())
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((name + "/forward_backward").c_str(), grail::BM_TrainingStep,
                                 w.get())
        ->Unit(benchmark::kMillisecond);
    workloads.push_back(std::move(w));
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
