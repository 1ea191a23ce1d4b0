// grail-eval: the paper's evaluation protocol for a trained model on an (unseen) graph.
// Progress goes to stderr; the last line on stdout is the JSON result.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/command_line.h"
#include "common/json.h"
#include "eval/ensemble_evaluation.h"
#include "eval/evaluation.h"
#include "eval/grail_ranking.h"
#include "eval/kge_evaluation.h"
#include "eval/path_evaluation.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "model/core/archive_probe.h"
#include "model/core/blas_kernels.h"
#include "model/core/runtime.h"
#include "model/families.h"
#include "model/fusion/fusion_model.h"
#include "model/grail/fact_scoring.h"
#include "model/grail/grail_model.h"
#include "model/path/path_model.h"

ABSL_FLAG(std::string, model, "",
          "model archive written by grail-train, grail-kge-train or grail-fuse");
ABSL_FLAG(std::string, graph, "", "the graph to reason over (triple file)");
ABSL_FLAG(std::string, test, "", "the facts to predict (triple file), not in --graph");
ABSL_FLAG(uint64_t, seed, 0, "seed of the negatives");
ABSL_FLAG(int, negatives, 49, "negatives per test fact and side for ranking");
ABSL_FLAG(int, runs, 1,
          "evaluate this many times with seeds S, S+1, ...: each run draws new negatives; the "
          "JSON holds the means, the run count and AUC-PR's standard deviation");
ABSL_FLAG(int, threads, 2, "worker threads (each extracts and runs forwards)");
ABSL_FLAG(int, batch_size, 256, "subgraphs per forward");
ABSL_FLAG(std::string, device, "cpu", "cpu or cuda[:N]");
ABSL_FLAG(int, batch_queries, 16, "path family: queries per forward");
ABSL_FLAG(
    bool, full_ranking, true,
    "path family and KGE models: also rank every test fact against every entity (filtered MRR and "
    "Hits@1/3/10 as full_*)");
ABSL_FLAG(bool, grail_full_ranking, false,
          "GraIL: also rank every test fact against every entity as GraIL ranks them (each "
          "entity within k + 1 hops of the query's source on its own enclosing subgraph, the "
          "others sharing the trivial subgraph's score; full_* as for the path family). One "
          "subgraph per such entity per query: most of a dense graph");
ABSL_FLAG(std::string, filter, "",
          "path family, KGE models and --grail-full-ranking: comma-separated triple files whose "
          "facts the full "
          "ranking also leaves out of the candidates (the usual filtered setting of "
          "transductive benchmarks filters the validation facts too)");
ABSL_FLAG(bool, score_only, false,
          "instead of evaluating, score just the test facts (no negatives) and print the "
          "throughput as JSON: the model's raw batched speed on those subgraphs");
ABSL_FLAG(std::string, scores_out, "",
          "with --score-only: also write every scored test fact with its score, "
          "head<TAB>relation<TAB>tail<TAB>score per line (to compare devices or builds); a "
          "fusion archive adds a fifth column, fused or grail (the scorer, as grail-server's "
          "scored_by)");

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 1;
}

// --score-only: scores `test` with `score` (GraIL's or a fusion archive's; `fused` empty for
// GraIL), prints the throughput as JSON and, with --scores-out, writes each fact with its score.
int ScoreOnly(const grail::IndexedTriples& indexed, const std::vector<grail::Triple>& test,
              const std::function<absl::StatusOr<grail::FusedScores>()>& score) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<grail::FusedScores> scores = score();
  if (!scores.ok()) return Fail(scores.status());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const size_t n = scores->score.size();
  const grail::Json result = {
      {"subgraphs", n},
      {"seconds", grail::RoundTo(seconds, 6)},
      {"subgraphs_per_second", grail::RoundTo(seconds > 0 ? n / seconds : 0.0, 1)}};
  if (const std::string out = absl::GetFlag(FLAGS_scores_out); !out.empty()) {
    std::ofstream file(out, std::ios::trunc);
    char text[32];
    for (size_t i = 0; i < test.size(); ++i) {
      std::snprintf(text, sizeof(text), "%.9g", scores->score[i]);
      file << indexed.entities.Name(test[i].head) << '\t'
           << indexed.relations.Name(test[i].relation) << '\t'
           << indexed.entities.Name(test[i].tail) << '\t' << text;
      if (!scores->fused.empty()) file << '\t' << (scores->fused[i] ? "fused" : "grail");
      file << '\n';
    }
    file.flush();
    if (!file) return Fail(absl::InternalError(absl::StrCat("cannot write ", out)));
  }
  std::printf("%s\n", grail::JsonLine(result).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (const int probe = grail::RunArchiveProbeIfAsked(argc, argv); probe >= 0) return probe;
  grail::UseFastestBlasKernels(argv);  // before anything else: it may start the program again
  grail::IsolateArchiveLoads({});      // the model may come from anywhere
  absl::SetProgramUsageMessage(
      "grail-eval --model MODEL.pt --graph FILE --test FILE [--seed S] [--negatives 49]\n"
      "  [--runs N]");
  grail::ParseCommandLine(argc, argv);
  grail::KeepFreedMemoryForReuse();
  const std::string model_path = absl::GetFlag(FLAGS_model);
  const std::string graph_path = absl::GetFlag(FLAGS_graph);
  const std::string test_path = absl::GetFlag(FLAGS_test);
  if (model_path.empty() || graph_path.empty() || test_path.empty()) {
    std::fprintf(stderr, "grail-eval needs --model, --graph and --test (see --help)\n");
    return 2;
  }
  if (!absl::GetFlag(FLAGS_scores_out).empty() && !absl::GetFlag(FLAGS_score_only)) {
    std::fprintf(stderr, "--scores-out needs --score-only\n");
    return 2;
  }
  absl::StatusOr<grail::AnyModel> loaded =
      grail::LoadAnyModel(model_path, absl::GetFlag(FLAGS_device));
  if (!loaded.ok()) return Fail(loaded.status());
  std::unique_ptr<grail::GrailModel> grail_model = std::move(loaded->grail);
  std::unique_ptr<grail::PathModel> path_model = std::move(loaded->path);
  std::unique_ptr<grail::KgeModel> kge_model = std::move(loaded->kge);
  std::unique_ptr<grail::FusionModel> fusion_model = std::move(loaded->fusion);
  std::unique_ptr<grail::EnsembleModel> ensemble = std::move(loaded->ensemble);
  const std::vector<std::string>& model_relations = path_model  ? path_model->relations()
                                                    : kge_model ? kge_model->relations()
                                                    : fusion_model
                                                        ? fusion_model->grail().relations()
                                                    : ensemble ? ensemble->relations()
                                                               : grail_model->relations();
  absl::StatusOr<std::vector<grail::NamedTriple>> graph_facts = grail::ReadTripleFile(graph_path);
  if (!graph_facts.ok()) return Fail(graph_facts.status());
  absl::StatusOr<std::vector<grail::NamedTriple>> test_facts = grail::ReadTripleFile(test_path);
  if (!test_facts.ok()) return Fail(test_facts.status());

  // Relation ids of the graph start with the model's vocabulary, so a known relation has the
  // same id in both; relations the model never saw get later ids and map to -1. A KGE model's
  // entities likewise: they all take part, as candidates, even those in no fact of the graph.
  grail::IndexedTriples indexed;
  indexed.relations = grail::Vocabulary(model_relations);
  if (kge_model) indexed.entities = grail::Vocabulary(kge_model->entities());
  grail::IndexTriples(*graph_facts, &indexed);
  const grail::StaticGraph graph(indexed.entities.size(), indexed.triples);
  // An ULTRA model scores any relation: graph ids are its own (an empty map); so does an
  // ensemble of them.
  const bool open_vocabulary = (path_model != nullptr && path_model->open_vocabulary()) ||
                               (ensemble != nullptr && ensemble->open_vocabulary());
  const grail::RelationMap relations =
      open_vocabulary ? grail::RelationMap()
                      : grail::MapRelationsByName(indexed.relations.names(), model_relations);

  std::vector<grail::Triple> test;
  size_t unknown_entity = 0, unknown_relation = 0, in_graph = 0;
  for (const grail::NamedTriple& t : *test_facts) {
    auto h = indexed.entities.Find(t.head);
    auto r = indexed.relations.Find(t.relation);
    auto v = indexed.entities.Find(t.tail);
    if (!h || !v || *h == *v) {
      ++unknown_entity;
    } else if (!r || (!open_vocabulary && *r >= model_relations.size())) {
      ++unknown_relation;
    } else if (graph.HasFact(*h, *r, *v)) {
      ++in_graph;
    } else {
      test.push_back({*h, *r, *v});
    }
  }
  std::fprintf(stderr,
               "grail-eval: graph %u entities, %llu facts; %zu test facts (skipped: %zu with an "
               "entity not in the graph, %zu with a relation unknown to the model, %zu already "
               "in the graph)\n",
               graph.num_entities(), static_cast<unsigned long long>(graph.num_facts()),
               test.size(), unknown_entity, unknown_relation, in_graph);

  // Early fusion: a GraIL model with node features reads each graph entity's row.
  const grail::GrailModel* grail_network =
      fusion_model ? &fusion_model->grail() : grail_model.get();
  const std::vector<int32_t> feature_rows =
      grail_network != nullptr ? grail_network->NodeFeatureRows(indexed.entities.names())
                               : std::vector<int32_t>();

  std::vector<grail::Triple> known;  // --filter's facts that the graph's vocabularies name
  for (absl::string_view path :
       absl::StrSplit(absl::GetFlag(FLAGS_filter), ',', absl::SkipEmpty())) {
    absl::StatusOr<std::vector<grail::NamedTriple>> facts =
        grail::ReadTripleFile(std::string(path));
    if (!facts.ok()) return Fail(facts.status());
    for (const grail::NamedTriple& t : *facts) {
      auto h = indexed.entities.Find(t.head);
      auto r = indexed.relations.Find(t.relation);
      auto v = indexed.entities.Find(t.tail);
      if (h && r && v) known.push_back({*h, *r, *v});
    }
  }
  if (path_model && absl::GetFlag(FLAGS_score_only)) {
    grail::SetComputeThreads(1);
    grail::PathScoringOptions options;
    options.threads = absl::GetFlag(FLAGS_threads);
    options.batch_queries = absl::GetFlag(FLAGS_batch_queries);
    return ScoreOnly(indexed, test, [&]() -> absl::StatusOr<grail::FusedScores> {
      absl::StatusOr<std::vector<float>> scores =
          grail::ScorePathFacts(*path_model, graph, relations, test, options);
      if (!scores.ok()) return scores.status();
      grail::FusedScores out;
      out.score = *std::move(scores);
      return out;
    });
  }
  if (path_model || kge_model || ensemble) {
    if (absl::GetFlag(FLAGS_score_only)) {
      std::fprintf(stderr, "--score-only is for GraIL, path and fused models\n");
      return 2;
    }
    grail::SetComputeThreads(kge_model ? absl::GetFlag(FLAGS_threads) : 1);
    // Each run draws new negatives; the full ranking has none to draw, so only run 1 does it.
    absl::StatusOr<grail::EvaluationResult> result =
        grail::MeanOverRuns(absl::GetFlag(FLAGS_runs), [&](int r) {
          grail::RankingEvaluationOptions run;
          run.negatives = absl::GetFlag(FLAGS_negatives);
          run.seed = absl::GetFlag(FLAGS_seed) + static_cast<uint64_t>(r);
          run.full_ranking = r == 0 && absl::GetFlag(FLAGS_full_ranking);
          run.known_facts = known;
          if (kge_model) {
            grail::KgeEvaluationOptions options;
            static_cast<grail::RankingEvaluationOptions&>(options) = run;
            return grail::EvaluateKge(*kge_model, graph, relations, test, options);
          }
          grail::PathEvaluationOptions options;
          static_cast<grail::RankingEvaluationOptions&>(options) = run;
          options.scoring.threads = absl::GetFlag(FLAGS_threads);  // parallel workers
          options.scoring.batch_queries = absl::GetFlag(FLAGS_batch_queries);
          if (ensemble) {
            // Test facts and queries in the graph's ids; each member maps them to its own.
            return grail::EvaluateEnsemble(*ensemble, graph, indexed.entities.names(),
                                           indexed.relations.names(), test, options);
          }
          return grail::EvaluatePath(*path_model, graph, relations, test, options);
        });
    if (!result.ok()) return Fail(result.status());
    const grail::EvaluationResult& mean = *result;
    std::fprintf(stderr, "grail-eval: ran %lld queries in %.2f s (%.1f queries/s; %d threads)\n",
                 static_cast<long long>(mean.subgraphs_scored), mean.scoring_seconds,
                 mean.scoring_seconds > 0 ? mean.subgraphs_scored / mean.scoring_seconds : 0.0,
                 absl::GetFlag(FLAGS_threads));
    std::printf("%s\n", mean.ToJson().c_str());
    return 0;
  }
  if (fusion_model) {
    // Late fusion: the GraIL protocol on the same negatives, each fact scored by the fused
    // classifier where every KGE member knows it, by GraIL's alone otherwise.
    const grail::FusionVocabulary vocabulary =
        fusion_model->MapVocabulary(indexed.entities.names(), indexed.relations.names());
    grail::EvaluationOptions options;
    options.negatives = absl::GetFlag(FLAGS_negatives);
    options.scoring.threads = absl::GetFlag(FLAGS_threads);
    options.scoring.batch_size = absl::GetFlag(FLAGS_batch_size);
    options.scoring.node_feature_rows = &feature_rows;
    grail::SetComputeThreads(1);
    if (absl::GetFlag(FLAGS_score_only)) {
      return ScoreOnly(indexed, test, [&] {
        return fusion_model->Score(graph, relations, vocabulary, test, options.scoring);
      });
    }
    int64_t fused_scores = 0, scores = 0;
    absl::StatusOr<grail::EvaluationResult> result =
        grail::MeanOverRuns(absl::GetFlag(FLAGS_runs), [&](int r) {
          grail::EvaluationOptions run = options;
          run.seed = absl::GetFlag(FLAGS_seed) + static_cast<uint64_t>(r);
          return grail::EvaluateFacts(
              graph, test, run,
              [&](absl::Span<const grail::Triple> facts) -> absl::StatusOr<std::vector<float>> {
                absl::StatusOr<grail::FusedScores> scored =
                    fusion_model->Score(graph, relations, vocabulary, facts, run.scoring);
                if (!scored.ok()) return scored.status();
                for (uint8_t f : scored->fused) fused_scores += f;
                scores += static_cast<int64_t>(scored->fused.size());
                return std::move(scored->score);
              });
        });
    if (!result.ok()) return Fail(result.status());
    std::fprintf(stderr, "grail-eval: %lld of %lld scores fused, the rest GraIL's alone\n",
                 static_cast<long long>(fused_scores), static_cast<long long>(scores));
    std::printf("%s\n", result->ToJson().c_str());
    return 0;
  }
  const grail::GrailModel& model = *grail_model;

  if (absl::GetFlag(FLAGS_score_only)) {
    grail::GrailScoringOptions scoring;
    scoring.threads = absl::GetFlag(FLAGS_threads);
    scoring.batch_size = absl::GetFlag(FLAGS_batch_size);
    scoring.node_feature_rows = &feature_rows;
    grail::SetComputeThreads(1);
    return ScoreOnly(indexed, test, [&]() -> absl::StatusOr<grail::FusedScores> {
      absl::StatusOr<std::vector<float>> scores =
          grail::ScoreGrailFacts(model, graph, relations, test, scoring);
      if (!scores.ok()) return scores.status();
      return grail::FusedScores{*std::move(scores), {}};
    });
  }

  grail::EvaluationOptions options;
  options.seed = absl::GetFlag(FLAGS_seed);
  options.negatives = absl::GetFlag(FLAGS_negatives);
  options.scoring.threads = absl::GetFlag(FLAGS_threads);
  options.scoring.batch_size = absl::GetFlag(FLAGS_batch_size);
  options.scoring.node_feature_rows = &feature_rows;
  grail::SetComputeThreads(1);  // parallelism comes from the workers
  absl::StatusOr<grail::EvaluationResult> result =
      grail::EvaluateGrailRuns(model, graph, relations, test, options, absl::GetFlag(FLAGS_runs));
  if (!result.ok()) return Fail(result.status());
  if (absl::GetFlag(FLAGS_grail_full_ranking)) {
    absl::StatusOr<grail::EvaluationResult> full = grail::EvaluateGrailFullRanking(
        model, graph, relations, indexed.relations.names(), test, known, options.scoring);
    if (!full.ok()) return Fail(full.status());
    result->full = std::move(full->full);
  }
  std::fprintf(
      stderr,
      "grail-eval: scored %lld subgraphs in %.2f s (%.0f subgraphs/s; batches of %d, %d "
      "threads)\n",
      static_cast<long long>(result->subgraphs_scored), result->scoring_seconds,
      result->scoring_seconds > 0 ? result->subgraphs_scored / result->scoring_seconds : 0.0,
      options.scoring.batch_size, options.scoring.threads);
  std::printf("%s\n", result->ToJson().c_str());
  return 0;
}
