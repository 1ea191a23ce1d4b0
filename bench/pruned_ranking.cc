// Pruned propagation against exact ranking (model/path/path_batch.h, PathBudget): for a path
// model, a graph and test facts, every test fact's tail query (h, r, ?) and head query
// (t, r^-1, ?) ranked over every entity, exactly and with a budget of a fraction of the
// graph's entities and message edges. Prints one JSON line per budget: filtered MRR and
// Hits@10 (ties as the mean of the optimistic and pessimistic rank: RankAmong, the evaluator's),
// the mean overlap of each query's filtered top 10 with the exact one, how many queries were
// pruned, the mean entities a query visited, and the seconds it took.
//
//   pruned_ranking --model M --graph G --test T [--filter F1,F2] [--ratios 0.05,0.1,0.25]
//                  [--edge-factor 0] [--max-facts 300] [--seed 0] [--threads 2]
//                  [--priority model|walks]
// A model with a learned priority (PathConfig::priority) prunes each layer to the budget's
// entities over the exact neighbourhood; "visited" is then the entities its pass reached.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/command_line.h"
#include "common/seeded_random.h"
#include "eval/path_evaluation.h"
#include "eval/ranking_metrics.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "model/core/blas_kernels.h"
#include "model/core/runtime.h"
#include "model/families.h"
#include "model/path/path_model.h"

ABSL_FLAG(std::string, model, "", "a path-family archive (learned or ULTRA)");
ABSL_FLAG(std::string, graph, "", "the graph the queries run on (triple file)");
ABSL_FLAG(std::string, test, "", "the facts whose heads and tails are ranked");
ABSL_FLAG(std::string, filter, "", "more known facts to filter (comma-separated files)");
ABSL_FLAG(std::string, ratios, "0.05,0.1,0.25",
          "budgets, as fractions of the graph's entities and message edges");
ABSL_FLAG(double, edge_factor, 0,
          "the edge budget as a multiple of the node ratio's share of the graph's message "
          "edges (0: no edge budget)");
ABSL_FLAG(int, max_facts, 300, "test facts drawn (seeded) when there are more");
ABSL_FLAG(uint64_t, seed, 0, "seed of the drawn facts");
ABSL_FLAG(int, threads, 2, "workers");
ABSL_FLAG(int, batch_queries, 8, "queries per forward");
ABSL_FLAG(std::string, priority, "model",
          "which priority prunes: 'model' (a model's learned priority where it has one, else "
          "the walks'), or 'walks' (the parameter-free one, PathBudget, whatever the model)");

namespace grail {
namespace {

struct QueryResult {
  double rank = 0;
  std::vector<EntityId> top10;
  int64_t visited = 0;
  int64_t messages = 0;
  bool pruned = false;
};

int Run() {
  SetComputeThreads(1);
  absl::StatusOr<AnyModel> loaded = LoadAnyModel(absl::GetFlag(FLAGS_model), "cpu");
  if (!loaded.ok() || loaded->path == nullptr) {
    std::fprintf(stderr, "pruned_ranking: %s\n",
                 loaded.ok() ? "not a path-family archive" : loaded.status().ToString().c_str());
    return 1;
  }
  const PathModel& model = *loaded->path;
  const auto read = [](const std::string& path) {
    absl::StatusOr<std::vector<NamedTriple>> facts = ReadTripleFile(path);
    if (!facts.ok()) {
      std::fprintf(stderr, "pruned_ranking: %s\n", facts.status().ToString().c_str());
      std::exit(1);
    }
    return *std::move(facts);
  };
  IndexedTriples indexed;
  indexed.relations = Vocabulary(model.relations());
  IndexTriples(read(absl::GetFlag(FLAGS_graph)), &indexed);
  const StaticGraph graph(indexed.entities.size(), indexed.triples);
  const RelationMap relations =
      model.open_vocabulary() ? RelationMap()
                              : MapRelationsByName(indexed.relations.names(), model.relations());
  const int32_t num_relations = model.NumRelations(graph);
  // Known answers of every query: the graph's facts, the test's and the filter files'.
  absl::flat_hash_map<std::pair<EntityId, int32_t>, absl::flat_hash_set<EntityId>> answers;
  const auto know = [&](EntityId h, int32_t r, EntityId t) {
    answers[{h, r}].insert(t);
    answers[{t, r + num_relations}].insert(h);
  };
  for (const Triple& t : indexed.triples) {
    if (relations(t.relation) >= 0 && relations(t.relation) < num_relations) {
      know(t.head, relations(t.relation), t.tail);
    }
  }
  std::vector<Triple> test;
  const auto add_known = [&](const std::vector<NamedTriple>& facts, bool is_test) {
    for (const NamedTriple& f : facts) {
      const auto h = indexed.entities.Find(f.head), t = indexed.entities.Find(f.tail);
      const auto r = indexed.relations.Find(f.relation);
      if (!h || !t || !r || *h == *t) continue;
      const int32_t m = relations(*r);
      if (m < 0 || m >= num_relations) continue;
      know(*h, m, *t);
      if (is_test && !graph.HasFact(*h, *r, *t))
        test.push_back({*h, static_cast<RelationId>(m), *t});
    }
  };
  add_known(read(absl::GetFlag(FLAGS_test)), true);
  for (absl::string_view path :
       absl::StrSplit(absl::GetFlag(FLAGS_filter), ',', absl::SkipEmpty())) {
    add_known(read(std::string(path)), false);
  }
  SeededRandom random(absl::GetFlag(FLAGS_seed));
  random.Shuffle(test);
  if (static_cast<int>(test.size()) > absl::GetFlag(FLAGS_max_facts)) {
    test.resize(absl::GetFlag(FLAGS_max_facts));
  }
  std::vector<PathQuery> queries;
  std::vector<EntityId> answer;
  for (const Triple& t : test) {
    queries.emplace_back(t.head, static_cast<int32_t>(t.relation));
    answer.push_back(t.tail);
    queries.emplace_back(t.tail, static_cast<int32_t>(t.relation) + num_relations);
    answer.push_back(t.head);
  }
  std::fprintf(stderr, "pruned_ranking: %u entities, %zu facts, %zu queries\n",
               graph.num_entities(), indexed.triples.size(), queries.size());

  std::vector<double> ratios = {0};
  for (absl::string_view r : absl::StrSplit(absl::GetFlag(FLAGS_ratios), ',', absl::SkipEmpty())) {
    double ratio = 0;
    if (absl::SimpleAtod(r, &ratio)) ratios.push_back(ratio);
  }
  std::vector<QueryResult> exact;
  for (const double ratio : ratios) {
    PathScoringOptions options;
    options.threads = absl::GetFlag(FLAGS_threads);
    options.batch_queries = absl::GetFlag(FLAGS_batch_queries);
    if (ratio > 0) {
      options.prune.nodes =
          std::max<int64_t>(2, static_cast<int64_t>(ratio * graph.num_entities()));
      // A learned priority prunes each layer to the budget over the exact neighbourhood.
      if (model.config().priority && absl::GetFlag(FLAGS_priority) == "model") {
        options.prune = PathBudget{0, 0, options.prune.nodes};
      }
      const double edge_factor = absl::GetFlag(FLAGS_edge_factor);
      options.prune.edges =
          edge_factor <= 0
              ? 0
              : std::max<int64_t>(
                    2, static_cast<int64_t>(edge_factor * ratio * 2 * indexed.triples.size()));
    }
    std::vector<QueryResult> results(queries.size());
    const auto start = std::chrono::steady_clock::now();
    const absl::Status status = RunPathQueries(
        model, graph, relations, queries, options,
        [&](size_t i, const PathBatch& batch, int64_t q, const PathScores& scores) {
          const PathQuery& query = queries[i];
          const auto it = answers.find(std::make_pair(query.source, query.relation));
          std::vector<std::pair<float, EntityId>> ranked;
          std::vector<float> negatives;  // the filtered non-answers' scores
          const float truth = scores.Of(batch, q, answer[i]);
          for (EntityId e = 0; e < graph.num_entities(); ++e) {
            if (e == query.source || e == answer[i]) continue;
            if (it != answers.end() && it->second.contains(e)) continue;
            negatives.push_back(scores.Of(batch, q, e));
            ranked.emplace_back(negatives.back(), e);
          }
          ranked.emplace_back(truth, answer[i]);
          const size_t k = std::min<size_t>(10, ranked.size());
          std::partial_sort(ranked.begin(), ranked.begin() + k, ranked.end(),
                            [](const auto& a, const auto& b) {
                              return a.first != b.first ? a.first > b.first : a.second < b.second;
                            });
          QueryResult& r = results[i];
          r.rank = RankAmong(truth, negatives);
          for (size_t j = 0; j < k; ++j) r.top10.push_back(ranked[j].second);
          r.visited = scores.reached.empty() ? batch.node_begin[q + 1] - batch.node_begin[q]
                                             : scores.reached[q];
          // Every layer passes a message along every edge of the query's graph (a shared
          // batch's one graph is every query's: it has no edge_begin), or along the edges the
          // learned priority chose.
          const int64_t edges =
              batch.shared() ? batch.num_edges() : batch.edge_begin[q + 1] - batch.edge_begin[q];
          r.messages =
              scores.messages.empty() ? model.config().num_layers * edges : scores.messages[q];
          r.pruned = batch.query_pruned[q] != 0;
        });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!status.ok()) {
      std::fprintf(stderr, "pruned_ranking: %s\n", status.ToString().c_str());
      return 1;
    }
    if (ratio == 0) exact = results;
    double mrr = 0, hits10 = 0, overlap = 0, visited = 0, messages = 0;
    int64_t pruned = 0;
    for (size_t i = 0; i < results.size(); ++i) {
      mrr += 1 / results[i].rank;
      hits10 += results[i].rank <= 10;
      int common = 0;
      for (EntityId e : results[i].top10) {
        common += std::count(exact[i].top10.begin(), exact[i].top10.end(), e) > 0;
      }
      overlap += exact[i].top10.empty() ? 1.0 : common / static_cast<double>(exact[i].top10.size());
      visited += static_cast<double>(results[i].visited);
      messages += static_cast<double>(results[i].messages);
      pruned += results[i].pruned;
    }
    const double n = static_cast<double>(results.size());
    std::printf(
        "{\"ratio\":%g,\"budget_nodes\":%lld,\"budget_edges\":%lld,\"layer_nodes\":%lld,"
        "\"queries\":%zu,"
        "\"mrr\":%.4f,\"hits_at_10\":%.4f,\"top10_overlap\":%.4f,\"pruned_queries\":%lld,"
        "\"mean_visited\":%.0f,\"mean_messages\":%.0f,\"entities\":%u,\"seconds\":%.1f}\n",
        ratio, static_cast<long long>(options.prune.nodes),
        static_cast<long long>(options.prune.edges),
        static_cast<long long>(options.prune.layer_nodes), results.size(), mrr / n, hits10 / n,
        overlap / n, static_cast<long long>(pruned), visited / n, messages / n,
        graph.num_entities(), seconds);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace grail

int main(int argc, char** argv) {
  grail::UseFastestBlasKernels(argv);  // before anything else: it may start the program again
  grail::ParseCommandLine(argc, argv);
  return grail::Run();
}
