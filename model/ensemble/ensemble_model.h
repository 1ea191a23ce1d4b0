// An ensemble of models served as one: path-family models (the path preset, i.e. NBFNet and
// A*Net, and ULTRA zero-shot or fine-tuned), each scoring every entity of a query in its own
// pass, GraIL models, each scoring a query's candidates on their own enclosing subgraphs, and
// KGE models, each scoring every entity it was trained on, in any number, combined per entity
// by a linear rule fitted on validation facts (ensemble_fit.h):
//   s(h, r, t) = b + sum_m w_m s_m(h, r, t)
// where s_m is member m's score (a logit). The weights are each member's temperature: ranking
// is invariant to b and to a common scale, and a per-member weight lets a sharp member and a
// flat one add as they should. The rule is per fact, not per query (no standardisation over a
// query's candidates), so a fact's score is the same whether ScoreTriplet asks for it alone or
// RankTails ranks it among every entity.
//
// An entity beyond a member's neighbourhood has that member's far score (a GraIL member's: the
// score every candidate whose enclosing subgraph is trivial shares), so an entity beyond every
// member's shares the ensemble's far score, b + sum_m w_m far_m: a ranking over every entity
// still scores only the union of the members' neighbourhoods on their own.
//
// A KGE member knows only the entities and relations it was trained on (by name). A fact with
// an entity it does not know (one added to the graph since) gets the member's unknown score
// instead of its own, a value fitted with the rule (unknown_score(); the fit sees validation
// candidates whose KGE score is hidden at random, eval/ensemble_evaluation.h): in a ranking
// that is its far score, so the entities it knows are its neighbourhood, at most its
// vocabulary whatever the graph's size.
//
// Relations: a member with a vocabulary (the path preset, GraIL, KGE) scores only its
// relations; ULTRA scores any. The ensemble scores a relation when every member does: its
// vocabulary is the relations every member with a vocabulary knows (in the first such member's
// order), and it has none (any relation) when all its members are ULTRA's.
//
// The archive is a TorchScript module holding each member's module as a submodule
// (`member_0`, `member_1`, ...) with the weights, the bias and the unknown scores as
// attributes; each member loads as its own archive would. A fusion archive (GraIL with KGE
// models, model/fusion/) is not a member: its parts are.
#ifndef GRAIL_MODEL_ENSEMBLE_ENSEMBLE_MODEL_H_
#define GRAIL_MODEL_ENSEMBLE_ENSEMBLE_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "graph/relation_map.h"
#include "graph/vocabulary.h"
#include "model/fusion/linear_fusion.h"
#include "model/grail/grail_model.h"
#include "model/kge/kge_model.h"
#include "model/path/path_model.h"

namespace grail {

inline constexpr char kEnsembleModelFormat[] = "grail-kg-ensemble/1";

struct OpenedArchive;  // model/core/torch_util.h (LibTorch inside)

// The network of a path-family member archive of `format` (LoadAnyModel's list:
// model/families.h), or null.
using PathNetworkOf = std::function<const PathNetworkDefinition*(const std::string& format)>;

// One member: exactly one of the three is set.
struct EnsembleMember {
  std::unique_ptr<PathModel> path;    // a path-family model, ULTRA's included
  std::unique_ptr<GrailModel> grail;  // a GraIL model
  std::unique_ptr<KgeModel> kge;      // a KGE model

  bool open_vocabulary() const { return path != nullptr && path->open_vocabulary(); }
  // Its relations in its id order (empty for ULTRA's: any).
  const std::vector<std::string>& relations() const {
    return path ? path->relations() : grail ? grail->relations() : kge->relations();
  }
};

class EnsembleModel {
 public:
  // `unknown`: each member's unknown score (empty: all 0). Errors: INVALID_ARGUMENT without a
  // member, with a missing one (none or several set), for `rule` of the wrong width (one weight
  // per member) or `unknown`, for members on different devices, or for members that share no
  // relation.
  static absl::StatusOr<std::unique_ptr<EnsembleModel>> Create(std::vector<EnsembleMember> members,
                                                               LinearFusion rule,
                                                               std::vector<double> unknown = {});
  // Path-family members only.
  static absl::StatusOr<std::unique_ptr<EnsembleModel>> Create(
      std::vector<std::unique_ptr<PathModel>> members, LinearFusion rule);
  // The model of an archive already opened from `path` (LoadAnyModel); `network_of` gives each
  // member's network by its format. Errors name the path and what is wrong (with a member's
  // own loader's message for a bad member).
  static absl::StatusOr<std::unique_ptr<EnsembleModel>> FromArchive(
      OpenedArchive& opened, const std::string& path, absl::string_view device,
      const PathNetworkOf& network_of);
  ~EnsembleModel();

  absl::Status Save(const std::string& path) const;

  // Replaces the rule and the unknown scores (grail-fuse fits them after the members are
  // assembled). Errors as Create().
  absl::Status SetRule(LinearFusion rule, std::vector<double> unknown = {});

  // The fit's columns (eval/ensemble_evaluation.h, CollectValidationQueries): one per member,
  // its score (0 where a KGE member does not know the candidate), then one per KGE member, in
  // member order, 1 where it does not know the candidate.
  size_t fit_columns() const;
  // Sets the rule from one fitted over fit_columns(): a KGE member's unknown score is its
  // column's weight over its score's. Errors: as SetRule, for the wrong width.
  absl::Status SetFittedRule(const LinearFusion& fitted);

  size_t size() const { return members_.size(); }
  const EnsembleMember& member(size_t m) const { return members_[m]; }
  // Member m if it is a path-family model (else null).
  const PathModel* path_member(size_t m) const { return members_[m].path.get(); }
  // Member m if it is a GraIL model (else null).
  const GrailModel* grail_member(size_t m) const { return members_[m].grail.get(); }
  // Member m if it is a KGE model (else null).
  const KgeModel* kge_member(size_t m) const { return members_[m].kge.get(); }
  // Member m's score of a fact it does not know (a KGE member's fitted value; 0 for others).
  double unknown_score(size_t m) const { return unknown_[m]; }
  const std::vector<double>& unknown_scores() const { return unknown_; }
  // KGE member m's id of an entity, by name; nullopt if it was not trained on it.
  std::optional<uint32_t> KgeEntity(size_t m, absl::string_view name) const {
    return kge_entities_[m].Find(name);
  }
  // Member m as a shared pointer that keeps the whole ensemble alive (the server serves each
  // member as a model of its own; a KGE member through the ensemble, ServeKgeMember); null if
  // it is of another family.
  std::shared_ptr<const PathModel> SharedPathMember(std::shared_ptr<const EnsembleModel> self,
                                                    size_t m) const;
  std::shared_ptr<const GrailModel> SharedGrailMember(std::shared_ptr<const EnsembleModel> self,
                                                      size_t m) const;
  // The first GraIL member, whose enclosing subgraphs explain a fact's score; -1 for none.
  int explaining_member() const;
  const LinearFusion& rule() const { return rule_; }

  // The relations the ensemble scores, in its id order (empty: any, all members ULTRA's).
  const std::vector<std::string>& relations() const { return relations_; }
  bool open_vocabulary() const { return relations_.empty(); }
  // Whether a member builds a graph of relations (ULTRA's), whose size the server bounds.
  bool reads_relation_graph() const;
  // Member m's id of the ensemble's relation `r` (a closed ensemble's; -1 for ULTRA's members,
  // whose ids are the graph's).
  int32_t MemberRelation(size_t m, int32_t r) const { return member_relation_[m][r]; }
  // Member m's map from a graph's relations (names in graph id order) to its own ids.
  RelationMap MemberRelations(size_t m, absl::Span<const std::string> graph_relations) const;

  int64_t num_parameters() const;
  // Every member's training fingerprint, joined by '+'.
  std::string training_fingerprint() const;
  const std::string& device() const;

  // The combined score from the members' scores of one fact, in member order.
  double Combine(absl::Span<const double> member_scores) const {
    return rule_.Logit(member_scores);
  }

 private:
  EnsembleModel(std::vector<EnsembleMember> members, LinearFusion rule, std::vector<double> unknown,
                std::vector<std::string> relations);

  std::vector<EnsembleMember> members_;
  LinearFusion rule_;
  std::vector<double> unknown_;           // per member
  std::vector<Vocabulary> kge_entities_;  // per member: a KGE member's entities (else empty)
  std::vector<std::string> relations_;
  std::vector<std::vector<int32_t>> member_relation_;  // [member][ensemble relation]
};

}  // namespace grail

#endif  // GRAIL_MODEL_ENSEMBLE_ENSEMBLE_MODEL_H_
