// grail-fuse: late fusion of a GraIL model with KGE models (the GraIL paper's ensembles):
// fits a linear classifier over their scores on validation facts against negatives, and
// writes one archive that grail-eval scores with. With --member: an ensemble of path-family
// models (the path preset, ULTRA zero-shot or fine-tuned), GraIL models and KGE models, its
// rule (and each KGE member's score of an entity it does not know) fitted on the validation
// facts' rankings (model/ensemble/ensemble_model.h), one archive that grail-eval and
// grail-server take as any other.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "common/command_line.h"
#include "common/durable_file.h"
#include "eval/ensemble_evaluation.h"
#include "graph/model_graph.h"
#include "graph/triple_file.h"
#include "model/core/runtime.h"
#include "model/ensemble/ensemble_fit.h"
#include "model/families.h"
#include "model/fusion/fusion_model.h"
#include "train/fusion_trainer.h"

ABSL_FLAG(std::string, grail, "", "the GraIL model (grail-train's archive)");
ABSL_FLAG(std::string, kge, "",
          "a KGE model (grail-kge-train's archive); repeat the flag or separate archives with "
          "commas for several");
ABSL_FLAG(std::string, member, "",
          "an ensemble's member: a path-family archive (grail-train --family path or ultra, "
          "grail-tools import-ultra), a GraIL archive (grail-train) or a KGE archive "
          "(grail-kge-train); repeat the flag or separate archives with commas");
ABSL_FLAG(size_t, max_valid_facts, 500,
          "ensemble: validation facts the rule is fitted on, at most (each a tail and a head "
          "query); 0: all");
ABSL_FLAG(bool, equal_weights, false,
          "ensemble: every member weighs the same (only the calibration's scale and bias are "
          "fitted), instead of the weights fitted on the validation rankings");
ABSL_FLAG(std::string, graph, "", "the graph the models reason over (triple file)");
ABSL_FLAG(std::string, valid, "", "validation facts (triple file), not in --graph");
ABSL_FLAG(std::string, out, "", "where to write the fusion archive (.pt)");
ABSL_FLAG(uint64_t, seed, 0,
          "seed of the validation facts' negatives (an ensemble's: of its calibration's, and of "
          "the candidates whose KGE scores its fit hides)");
ABSL_FLAG(int, threads, 2, "GraIL's scoring workers");

namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 1;
}

// Every value of the flag `name` (--kge, --member): it may be repeated (Abseil keeps only the
// last) and hold lists.
std::vector<std::string> RepeatedPaths(int argc, char** argv, absl::string_view name) {
  std::vector<std::string> paths;
  auto add = [&paths](absl::string_view list) {
    for (absl::string_view p : absl::StrSplit(list, ',', absl::SkipEmpty())) {
      paths.emplace_back(p);
    }
  };
  const std::string flag = absl::StrCat("--", name);
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == flag && i + 1 < argc) {
      add(argv[++i]);
    } else if (absl::StartsWith(arg, flag + "=")) {
      add(arg.substr(flag.size() + 1));
    }
  }
  return paths;
}

// --graph's facts and --valid's.
struct GraphAndValid {
  std::vector<grail::NamedTriple> graph, valid;
};
absl::StatusOr<GraphAndValid> ReadGraphAndValid() {
  absl::StatusOr<std::vector<grail::NamedTriple>> graph =
      grail::ReadTripleFile(absl::GetFlag(FLAGS_graph));
  if (!graph.ok()) return graph.status();
  absl::StatusOr<std::vector<grail::NamedTriple>> valid =
      grail::ReadTripleFile(absl::GetFlag(FLAGS_valid));
  if (!valid.ok()) return valid.status();
  return GraphAndValid{*std::move(graph), *std::move(valid)};
}

// The ensemble of `member_paths`: its rule fitted on the validation facts' rankings, saved.
int FitEnsemble(const std::vector<std::string>& member_paths, const std::string& out) {
  std::vector<grail::EnsembleMember> members;
  for (const std::string& path : member_paths) {
    absl::StatusOr<grail::AnyModel> loaded = grail::LoadAnyModel(path);
    if (!loaded.ok()) return Fail(loaded.status());
    if (loaded->path == nullptr && loaded->grail == nullptr && loaded->kge == nullptr) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat(path,
                       " is not a path-family (the path preset or ULTRA's), GraIL or KGE model: "
                       "an ensemble's members are archives of one model each (a fusion "
                       "archive's parts are members on their own)")));
    }
    members.push_back({std::move(loaded->path), std::move(loaded->grail), std::move(loaded->kge)});
  }
  const size_t count = members.size();
  absl::StatusOr<std::unique_ptr<grail::EnsembleModel>> ensemble = grail::EnsembleModel::Create(
      std::move(members), grail::LinearFusion{std::vector<double>(count, 1.0), 0});
  if (!ensemble.ok()) return Fail(ensemble.status());
  const grail::EnsembleModel& model = **ensemble;
  absl::StatusOr<GraphAndValid> read = ReadGraphAndValid();
  if (!read.ok()) return Fail(read.status());
  const std::vector<grail::NamedTriple>& graph_facts = read->graph;
  const std::vector<grail::NamedTriple>& valid_facts = read->valid;
  const grail::ModelGraph indexed(graph_facts, model.relations(), model.open_vocabulary());
  const std::vector<grail::Triple> valid = indexed.NewFacts(valid_facts);
  grail::ValidationQueryOptions options;
  options.max_facts = absl::GetFlag(FLAGS_max_valid_facts);
  options.scoring.threads = absl::GetFlag(FLAGS_threads);
  options.seed = absl::GetFlag(FLAGS_seed);
  grail::SetComputeThreads(1);
  absl::StatusOr<std::vector<grail::QueryCandidates>> queries =
      grail::CollectValidationQueries(model, indexed.graph, indexed.indexed.entities.names(),
                                      indexed.indexed.relations.names(), valid, {}, options);
  if (!queries.ok()) return Fail(queries.status());
  // One column per member, then one per KGE member (EnsembleModel::fit_columns).
  const size_t columns = model.fit_columns();
  grail::EnsembleFitOptions fit_options;
  fit_options.seed = absl::GetFlag(FLAGS_seed);
  fit_options.fit_weights = !absl::GetFlag(FLAGS_equal_weights);
  fit_options.offsets = columns - count;
  absl::StatusOr<grail::EnsembleFit> fit = grail::FitEnsembleRule(*queries, columns, fit_options);
  if (!fit.ok()) return Fail(fit.status());
  if (absl::Status s = (*ensemble)->SetFittedRule(fit->rule); !s.ok()) return Fail(s);
  std::fprintf(stderr,
               "grail-fuse: %zu validation queries (of %zu facts); MRR on their candidates:",
               queries->size(), valid.size());
  std::vector<double> equal(columns, 0.0);
  for (size_t m = 0; m < count; ++m) {
    std::vector<double> alone(columns, 0.0);
    alone[m] = 1.0;
    equal[m] = 1.0;
    std::fprintf(stderr, " %s %.4f,", member_paths[m].c_str(),
                 grail::CandidateMrr(*queries, alone));
  }
  std::fprintf(stderr,
               " equal weights %.4f, fitted %.4f\n  weights:", grail::CandidateMrr(*queries, equal),
               grail::CandidateMrr(*queries, fit->rule.weights));
  for (size_t m = 0; m < count; ++m) {
    std::fprintf(stderr, " %.6g", model.rule().weights[m]);
    if (model.kge_member(m) != nullptr) {
      std::fprintf(stderr, " (unknown entities: %.6g)", model.unknown_score(m));
    }
  }
  std::fprintf(stderr, ", bias %.6g; loss %.4f (equal weights %.4f)\n", fit->rule.bias, fit->loss,
               fit->loss_equal_weights);
  if (absl::Status saved = (*ensemble)->Save(out); !saved.ok()) return Fail(saved);
  std::fprintf(stderr, "saved %s\n", out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "grail-fuse --grail G.pt --kge K.pt [--kge K2.pt ...] --graph FILE --valid FILE --out F.pt\n"
      "  [--seed S] [--threads T]\n"
      "grail-fuse --member A.pt --member B.pt [...] --graph FILE --valid FILE --out E.pt\n"
      "  [--max-valid-facts N] [--equal-weights] [--seed S] [--threads T]");
  const std::vector<std::string> kge_paths = RepeatedPaths(argc, argv, "kge");
  const std::vector<std::string> member_paths = RepeatedPaths(argc, argv, "member");
  grail::ParseCommandLine(argc, argv);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (!member_paths.empty()) {
    if (!absl::GetFlag(FLAGS_grail).empty() || !kge_paths.empty() ||
        absl::GetFlag(FLAGS_graph).empty() || absl::GetFlag(FLAGS_valid).empty() || out.empty()) {
      std::fprintf(stderr,
                   "an ensemble (--member) needs --graph, --valid and --out, and neither --grail "
                   "nor --kge (see --help)\n");
      return 2;
    }
    absl::Status usable = grail::CheckOutputPath(
        "out", out, {{"graph", absl::GetFlag(FLAGS_graph)}, {"valid", absl::GetFlag(FLAGS_valid)}});
    for (const std::string& path : member_paths) {
      if (usable.ok()) usable = grail::CheckOutputPath("out", out, {{"member", path}});
    }
    if (!usable.ok()) {
      std::fprintf(stderr, "%s\n", std::string(usable.message()).c_str());
      return 2;
    }
    return FitEnsemble(member_paths, out);
  }
  if (absl::GetFlag(FLAGS_grail).empty() || kge_paths.empty() ||
      absl::GetFlag(FLAGS_graph).empty() || absl::GetFlag(FLAGS_valid).empty() || out.empty()) {
    std::fprintf(stderr,
                 "grail-fuse needs --grail, --kge, --graph, --valid and --out (see --help)\n");
    return 2;
  }
  absl::Status usable = grail::CheckOutputPath("out", out,
                                               {{"grail", absl::GetFlag(FLAGS_grail)},
                                                {"graph", absl::GetFlag(FLAGS_graph)},
                                                {"valid", absl::GetFlag(FLAGS_valid)}});
  for (const std::string& path : kge_paths) {
    if (usable.ok()) usable = grail::CheckOutputPath("out", out, {{"kge", path}});
  }
  if (!usable.ok()) {
    std::fprintf(stderr, "%s\n", std::string(usable.message()).c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<grail::GrailModel>> grail_model =
      grail::GrailModel::Load(absl::GetFlag(FLAGS_grail));
  if (!grail_model.ok()) return Fail(grail_model.status());
  std::vector<std::unique_ptr<grail::KgeModel>> members;
  for (const std::string& path : kge_paths) {
    absl::StatusOr<std::unique_ptr<grail::KgeModel>> member = grail::KgeModel::Load(path);
    if (!member.ok()) return Fail(member.status());
    members.push_back(*std::move(member));
  }
  absl::StatusOr<GraphAndValid> read = ReadGraphAndValid();
  if (!read.ok()) return Fail(read.status());
  const std::vector<grail::NamedTriple>& graph_facts = read->graph;
  const std::vector<grail::NamedTriple>& valid_facts = read->valid;

  // As grail-eval indexes the graph: GraIL's relations first, so its ids are the model's.
  const grail::ModelGraph indexed(graph_facts, (*grail_model)->relations());
  const std::vector<grail::Triple> valid = indexed.NewFacts(valid_facts);

  const size_t count = members.size();
  grail::LinearFusion unfitted_fused{std::vector<double>(1 + count, 0.0), 0};
  grail::LinearFusion unfitted_grail{{0.0}, 0};
  absl::StatusOr<std::unique_ptr<grail::FusionModel>> fused = grail::FusionModel::Create(
      *std::move(grail_model), std::move(members), unfitted_fused, unfitted_grail);
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
  absl::StatusOr<grail::FusionFit> fit =
      grail::FitFusion(**fused, indexed.graph, indexed.relations, vocabulary, valid,
                       absl::GetFlag(FLAGS_seed), scoring);
  if (!fit.ok()) return Fail(fit.status());
  if (absl::Status s = (*fused)->SetClassifiers(fit->fused, fit->grail_only); !s.ok()) {
    return Fail(s);
  }
  std::fprintf(stderr, "grail-fuse: %lld validation facts, %lld known to every KGE model\n",
               static_cast<long long>(fit->facts), static_cast<long long>(fit->fused_facts));
  std::fprintf(stderr, "  valid AUC-PR: GraIL %.4f", fit->member_auc_pr[0]);
  for (size_t m = 0; m < count; ++m) {
    std::fprintf(stderr, ", %s %.4f", kge_paths[m].c_str(), fit->member_auc_pr[1 + m]);
  }
  std::fprintf(stderr, ", fused %.4f\n  fused weights:", fit->fused_auc_pr);
  for (double w : fit->fused.weights) std::fprintf(stderr, " %.6g", w);
  std::fprintf(stderr, ", bias %.6g; GraIL alone: weight %.6g, bias %.6g\n", fit->fused.bias,
               fit->grail_only.weights[0], fit->grail_only.bias);
  if (absl::Status saved = (*fused)->Save(out); !saved.ok()) return Fail(saved);
  std::fprintf(stderr, "saved %s\n", out.c_str());
  return 0;
}
