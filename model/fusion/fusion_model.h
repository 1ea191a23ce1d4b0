// Late fusion of GraIL with KGE models (GraIL paper, Section 5.2), as one archive: the
// GraIL model, one or more KGE models, and two linear classifiers (model/fusion/linear_fusion.h)
// trained on validation facts against negatives — one over every member's score, one over
// GraIL's score alone. A fact whose head, tail and relation every KGE model knows gets the
// fused score; any other fact (an entity added after the KGE models were trained) gets the
// GraIL-only classifier's. Both are log-odds that the fact is true, so the two kinds of
// scores rank together.
//
// The archive is a TorchScript module holding the members' modules as submodules (`grail`,
// `kge_0`, `kge_1`, ...) with the classifiers as attributes; each member loads as its own
// family would.
#ifndef GRAIL_MODEL_FUSION_FUSION_MODEL_H_
#define GRAIL_MODEL_FUSION_FUSION_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "graph/graph_view.h"
#include "graph/vocabulary.h"
#include "model/fusion/linear_fusion.h"
#include "model/grail/fact_scoring.h"
#include "model/grail/grail_model.h"
#include "model/kge/kge_model.h"

namespace grail {

inline constexpr char kFusionModelFormat[] = "grail-kg-fused-model/1";

// A fact by its names (FusionModel::KgeScores); the views must outlive the call.
struct OpenedArchive;  // model/core/torch_util.h (LibTorch inside)

struct FactNames {
  absl::string_view head, relation, tail;
};

// Where a graph's ids lie in each KGE model's vocabularies (-1: unknown to that model).
struct FusionVocabulary {
  std::vector<std::vector<int64_t>> entity;    // [member][graph entity id]
  std::vector<std::vector<int64_t>> relation;  // [member][graph relation id]
};

struct FusedScores {
  std::vector<float> score;
  std::vector<uint8_t> fused;  // 1: the fused classifier's score; 0: GraIL's alone
};

class FusionModel {
 public:
  // Errors: INVALID_ARGUMENT without a KGE model, or for classifiers of the wrong width
  // (`fused`: 1 + kge.size() weights, GraIL's first; `grail_only`: 1).
  static absl::StatusOr<std::unique_ptr<FusionModel>> Create(
      std::unique_ptr<GrailModel> grail, std::vector<std::unique_ptr<KgeModel>> kge,
      LinearFusion fused, LinearFusion grail_only);
  // Opens an archive written by Save(). Errors name the path and what is wrong (with a
  // member's own loader's message for a bad member).
  static absl::StatusOr<std::unique_ptr<FusionModel>> Load(const std::string& path,
                                                           absl::string_view device = "cpu");
  // The model of an archive already opened from `path` (LoadAnyModel), checked as Load() does.
  static absl::StatusOr<std::unique_ptr<FusionModel>> FromArchive(OpenedArchive& opened,
                                                                  const std::string& path,
                                                                  absl::string_view device);
  ~FusionModel();

  absl::Status Save(const std::string& path) const;

  // Replaces the classifiers (grail-fuse fits them after the members are assembled).
  // Errors: INVALID_ARGUMENT for the wrong widths, as Create().
  absl::Status SetClassifiers(LinearFusion fused, LinearFusion grail_only);

  const GrailModel& grail() const { return *grail_; }
  const std::vector<std::unique_ptr<KgeModel>>& kge() const { return kge_; }
  const LinearFusion& fused_classifier() const { return fused_; }
  const LinearFusion& grail_classifier() const { return grail_only_; }

  // The KGE models' ids of a graph's entities and relations, matched by name.
  FusionVocabulary MapVocabulary(absl::Span<const std::string> graph_entities,
                                 absl::Span<const std::string> graph_relations) const;
  // KGE member m's id of an entity or a relation, by name; nullopt if it has none.
  std::optional<uint32_t> MemberEntity(size_t m, absl::string_view name) const {
    return member_entities_[m].Find(name);
  }
  std::optional<uint32_t> MemberRelation(size_t m, absl::string_view name) const {
    return member_relations_[m].Find(name);
  }
  // The fact (head, relation, tail) in each KGE member's ids, members in order; nullopt if a
  // member does not know one of the three (the fact then gets GraIL's score alone).
  std::optional<std::vector<Triple>> MemberFacts(absl::string_view head, absl::string_view relation,
                                                 absl::string_view tail) const;

  // Each fact's KGE scores by name: one per member, in order, or an empty row for a fact that
  // some member does not know (Combine then gives GraIL's score alone). Errors: a member's
  // scoring failing.
  absl::StatusOr<std::vector<std::vector<double>>> KgeScores(
      absl::Span<const FactNames> facts) const;

  // A fact's final score from its members' raw scores: with `kge` (one score per KGE member)
  // the fused classifier's over GraIL's and theirs; with `kge` empty the GraIL-only
  // classifier's. Every fused score, the evaluator's and the server's, is computed here.
  float Combine(double grail, absl::Span<const double> kge) const;

  // The members' raw scores of `facts` (ids of `graph`; `relations` maps them to GraIL's):
  // column 0 GraIL's, column 1 + m the KGE model m's, NaN where that model does not know the
  // fact's entities or relation. Errors: as ScoreGrailFacts for GraIL.
  absl::StatusOr<std::vector<std::vector<double>>> MemberScores(
      const GraphView& graph, const RelationMap& relations, const FusionVocabulary& vocabulary,
      absl::Span<const Triple> facts, const GrailScoringOptions& scoring) const;

  // Each fact's score: the fused classifier's where every member knows it, GraIL's alone
  // otherwise. Errors: as MemberScores.
  absl::StatusOr<FusedScores> Score(const GraphView& graph, const RelationMap& relations,
                                    const FusionVocabulary& vocabulary,
                                    absl::Span<const Triple> facts,
                                    const GrailScoringOptions& scoring) const;

 private:
  FusionModel(std::unique_ptr<GrailModel> grail, std::vector<std::unique_ptr<KgeModel>> kge,
              LinearFusion fused, LinearFusion grail_only);

  std::unique_ptr<GrailModel> grail_;
  std::vector<std::unique_ptr<KgeModel>> kge_;
  LinearFusion fused_;
  LinearFusion grail_only_;
  // Each member's vocabularies by name, for MemberFacts (built once: names are looked up per
  // scored fact).
  std::vector<Vocabulary> member_entities_;
  std::vector<Vocabulary> member_relations_;
};

}  // namespace grail

#endif  // GRAIL_MODEL_FUSION_FUSION_MODEL_H_
