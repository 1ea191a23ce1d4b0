// The GraIL paper's late-fusion tables (Section 5.2, Tables 3-5, and the appendix's Hits@10):
// each member alone and every pair of members — GraIL and KGE models, or two KGE models —
// fused by a logistic regression fitted on the validation facts against one negative each
// (as grail-fuse fits it: model/fusion/fusion_model.h), then evaluated on the test facts with the
// GraIL protocol (AUC-PR against one negative per fact, Hits@10 among 49 + 49 negatives; the
// negatives grail-eval draws for the same seed). Every member scores each fact once: the
// pairs reuse the scores.
//
//   fusion_table --grail G.pt --kge T.pt,D.pt,C.pt,R.pt --graph train.txt --valid valid.txt
//                --test test.txt [--seed 0] [--runs 1] [--threads 2] [--json FILE]
//
// Prints two Markdown tables (AUC-PR, Hits@10; the diagonal is each member alone, above it the
// pairs), the paper's gain G(M1, M2) = (P(M1, M2) - max(P(M1), P(M2))) / max(P(M1), P(M2))
// of fusing each KGE model with GraIL, and its average; --json writes every figure.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/json.h"
#include "eval/evaluation.h"
#include "graph/model_graph.h"
#include "graph/triple_file.h"
#include "model/core/runtime.h"
#include "model/fusion/fusion_model.h"
#include "model/fusion/linear_fusion.h"
#include "train/fusion_trainer.h"

ABSL_FLAG(std::string, grail, "", "the GraIL model (grail-train's archive)");
ABSL_FLAG(std::string, kge, "", "comma-separated KGE models (grail-kge-train's archives)");
ABSL_FLAG(std::string, graph, "", "the graph GraIL reasons over (triple file)");
ABSL_FLAG(std::string, valid, "", "validation facts: the classifiers' training data");
ABSL_FLAG(std::string, test, "", "test facts");
ABSL_FLAG(uint64_t, seed, 0, "seed of the validation and test negatives");
ABSL_FLAG(int, runs, 1, "test draws of negatives (seeds seed, seed + 1, ...), averaged");
ABSL_FLAG(int, threads, 2, "GraIL's scoring workers");
ABSL_FLAG(std::string, json, "", "also write every figure to this file");

namespace {

using Key = std::tuple<uint32_t, uint32_t, uint32_t>;

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 1;
}

struct Cell {
  std::vector<size_t> members;  // one or two columns
  grail::EvaluationResult result;
  grail::LinearFusion classifier;  // pairs only
};

double Gain(double pair, double a, double b) {
  const double best = std::max(a, b);
  return best > 0 ? (pair - best) / best : 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "fusion_table --grail G.pt --kge K1.pt,K2.pt,... --graph FILE --valid FILE --test FILE");
  absl::ParseCommandLine(argc, argv);
  const std::vector<std::string> kge_paths =
      absl::StrSplit(absl::GetFlag(FLAGS_kge), ',', absl::SkipEmpty());
  if (absl::GetFlag(FLAGS_grail).empty() || kge_paths.empty() ||
      absl::GetFlag(FLAGS_graph).empty() || absl::GetFlag(FLAGS_valid).empty() ||
      absl::GetFlag(FLAGS_test).empty()) {
    std::fprintf(stderr, "fusion_table needs --grail, --kge, --graph, --valid and --test\n");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<grail::GrailModel>> grail_model =
      grail::GrailModel::Load(absl::GetFlag(FLAGS_grail));
  if (!grail_model.ok()) return Fail(grail_model.status());
  std::vector<std::string> names = {"GraIL"};
  std::vector<std::unique_ptr<grail::KgeModel>> members;
  for (const std::string& path : kge_paths) {
    absl::StatusOr<std::unique_ptr<grail::KgeModel>> member = grail::KgeModel::Load(path);
    if (!member.ok()) return Fail(member.status());
    names.push_back(grail::KgeKindName((*member)->config().kind));
    members.push_back(*std::move(member));
  }
  absl::StatusOr<std::vector<grail::NamedTriple>> graph_facts =
      grail::ReadTripleFile(absl::GetFlag(FLAGS_graph));
  absl::StatusOr<std::vector<grail::NamedTriple>> valid_facts =
      grail::ReadTripleFile(absl::GetFlag(FLAGS_valid));
  absl::StatusOr<std::vector<grail::NamedTriple>> test_facts =
      grail::ReadTripleFile(absl::GetFlag(FLAGS_test));
  for (const auto* facts : {&graph_facts, &valid_facts, &test_facts}) {
    if (!facts->ok()) return Fail(facts->status());
  }
  const grail::ModelGraph indexed(*graph_facts, (*grail_model)->relations());
  const std::vector<grail::Triple> valid = indexed.NewFacts(*valid_facts);
  const std::vector<grail::Triple> test = indexed.NewFacts(*test_facts);
  const size_t columns = 1 + members.size();
  absl::StatusOr<std::unique_ptr<grail::FusionModel>> fused = grail::FusionModel::Create(
      *std::move(grail_model), std::move(members),
      grail::LinearFusion{std::vector<double>(columns, 0.0), 0}, grail::LinearFusion{{0.0}, 0});
  if (!fused.ok()) return Fail(fused.status());
  const grail::FusionVocabulary vocabulary =
      (*fused)->MapVocabulary(indexed.indexed.entities.names(), indexed.indexed.relations.names());
  grail::GrailScoringOptions scoring;
  scoring.threads = absl::GetFlag(FLAGS_threads);
  // Early fusion: a GraIL model with node features reads each graph entity's row.
  const std::vector<int32_t> feature_rows =
      (*fused)->grail().NodeFeatureRows(indexed.indexed.entities.names());
  scoring.node_feature_rows = &feature_rows;
  grail::SetComputeThreads(1);
  std::fprintf(stderr, "fusion_table: %zu validation facts, %zu test facts, %zu members\n",
               valid.size(), test.size(), columns);

  absl::StatusOr<grail::FusionRows> rows =
      grail::ValidationRows(**fused, indexed.graph, indexed.relations, vocabulary, valid,
                            absl::GetFlag(FLAGS_seed), scoring);
  if (!rows.ok()) return Fail(rows.status());

  // Every member's scores of every fact the protocol asks for, computed once: each evaluation
  // below draws the same negatives for the same seed.
  absl::flat_hash_map<Key, std::vector<double>> cache;
  auto member_scores = [&](absl::Span<const grail::Triple> facts)
      -> absl::StatusOr<std::vector<const std::vector<double>*>> {
    std::vector<grail::Triple> missing;
    for (const grail::Triple& f : facts) {
      if (!cache.contains(Key{f.head, f.relation, f.tail})) missing.push_back(f);
    }
    if (!missing.empty()) {
      absl::StatusOr<std::vector<std::vector<double>>> scored =
          (*fused)->MemberScores(indexed.graph, indexed.relations, vocabulary, missing, scoring);
      if (!scored.ok()) return scored.status();
      for (size_t i = 0; i < missing.size(); ++i) {
        cache[Key{missing[i].head, missing[i].relation, missing[i].tail}] = (*scored)[i];
      }
    }
    std::vector<const std::vector<double>*> out;
    for (const grail::Triple& f : facts) out.push_back(&cache.at(Key{f.head, f.relation, f.tail}));
    return out;
  };

  std::vector<Cell> cells;
  for (size_t a = 0; a < columns; ++a) {
    for (size_t b = a; b < columns; ++b) {
      Cell cell;
      cell.members = a == b ? std::vector<size_t>{a} : std::vector<size_t>{a, b};
      if (a != b) {
        absl::StatusOr<grail::LinearFusion> fit = grail::FitLogistic(
            rows->Restricted(cell.members).scores, rows->Restricted(cell.members).is_true);
        if (!fit.ok()) return Fail(fit.status());
        cell.classifier = *std::move(fit);
      }
      int64_t unknown = 0;
      absl::StatusOr<grail::EvaluationResult> result =
          grail::MeanOverRuns(absl::GetFlag(FLAGS_runs), [&](int run) {
            grail::EvaluationOptions options;
            options.seed = absl::GetFlag(FLAGS_seed) + static_cast<uint64_t>(run);
            return grail::EvaluateFacts(
                indexed.graph, test, options,
                [&](absl::Span<const grail::Triple> facts) -> absl::StatusOr<std::vector<float>> {
                  absl::StatusOr<std::vector<const std::vector<double>*>> scored =
                      member_scores(facts);
                  if (!scored.ok()) return scored.status();
                  std::vector<float> out;
                  for (const std::vector<double>* row : *scored) {
                    std::vector<double> x;
                    bool known = true;
                    for (size_t c : cell.members) {
                      x.push_back((*row)[c]);
                      known = known && !std::isnan(x.back());
                    }
                    if (!known) ++unknown;  // ranks last: the member cannot score it
                    out.push_back(!known   ? -std::numeric_limits<float>::max()
                                  : a == b ? static_cast<float>(x[0])
                                           : static_cast<float>(cell.classifier.Logit(x)));
                  }
                  return out;
                });
          });
      if (!result.ok()) return Fail(result.status());
      if (unknown > 0) {
        std::fprintf(stderr, "fusion_table: %s + %s: %lld scores unknown to a member\n",
                     names[a].c_str(), names[b].c_str(), static_cast<long long>(unknown));
      }
      cell.result = *std::move(result);
      cells.push_back(std::move(cell));
    }
  }

  auto at = [&](size_t a, size_t b) -> const Cell& {
    for (const Cell& c : cells) {
      if (c.members.front() == std::min(a, b) && c.members.back() == std::max(a, b)) return c;
    }
    return cells.front();
  };
  // The paper's order: the KGE models, then GraIL last.
  std::vector<size_t> order;
  for (size_t c = 1; c < columns; ++c) order.push_back(c);
  order.push_back(0);
  for (const auto& [title, metric] : {std::pair<const char*, double grail::EvaluationResult::*>{
                                          "AUC-PR", &grail::EvaluationResult::auc_pr},
                                      {"Hits@10", &grail::EvaluationResult::hits_at_10}}) {
    std::printf("\n%s (%%; diagonal: alone; above it: fused pairs)\n\n|   |", title);
    for (size_t c : order) std::printf(" %s |", names[c].c_str());
    std::printf("\n|---|");
    for (size_t i = 0; i < order.size(); ++i) std::printf("---:|");
    std::printf("\n");
    for (size_t i = 0; i < order.size(); ++i) {
      std::printf("| %s |", names[order[i]].c_str());
      for (size_t j = 0; j < order.size(); ++j) {
        if (j < i) {
          std::printf("   |");
        } else {
          std::printf(" %.2f |", 100 * (at(order[i], order[j]).result.*metric));
        }
      }
      std::printf("\n");
    }
    double total = 0;
    std::printf("\nG(M, GraIL) on %s:", title);
    for (size_t m = 1; m < columns; ++m) {
      const double g =
          Gain(at(m, 0).result.*metric, at(m, m).result.*metric, at(0, 0).result.*metric);
      total += g;
      std::printf(" %s %+.2f%%", names[m].c_str(), 100 * g);
    }
    std::printf("; average %+.2f%%\n", 100 * total / static_cast<double>(columns - 1));
  }

  if (const std::string path = absl::GetFlag(FLAGS_json); !path.empty()) {
    grail::Json out = grail::Json::array();
    for (const Cell& c : cells) {
      grail::Json cell = grail::Json::parse(c.result.ToJson());
      grail::Json members = grail::Json::array();
      for (size_t m : c.members) members.push_back(names[m]);
      cell["members"] = members;
      if (c.members.size() == 2) {
        cell["weights"] = c.classifier.weights;
        cell["bias"] = c.classifier.bias;
      }
      out.push_back(cell);
    }
    std::ofstream file(path, std::ios::trunc);
    file << out.dump(1) << '\n';
    if (!file) return Fail(absl::InternalError(absl::StrCat("cannot write ", path)));
  }
  return 0;
}
