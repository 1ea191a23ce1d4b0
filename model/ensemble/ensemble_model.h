// An ensemble of path-family models served as one: the path preset (NBFNet, A*Net), ULTRA
// zero-shot or fine-tuned, in any number, each scoring every entity of a query in its own pass,
// combined per entity by a linear rule fitted on validation facts (ensemble_fit.h):
//   s(h, r, t) = b + sum_m w_m s_m(h, r, t)
// where s_m is member m's score (a logit). The weights are each member's temperature: ranking
// is invariant to b and to a common scale, and a per-member weight lets a sharp member and a
// flat one add as they should. The rule is per fact, not per query (no standardisation over a
// query's candidates), so a fact's score is the same whether ScoreTriplet asks for it alone or
// RankTails ranks it among every entity.
//
// An entity beyond a member's neighbourhood has that member's far score, so an entity beyond
// every member's shares the ensemble's far score, b + sum_m w_m far_m: a ranking over every
// entity still scores only the union of the members' neighbourhoods on their own.
//
// Relations: a member with a vocabulary (the path preset) scores only its relations; ULTRA
// scores any. The ensemble scores a relation when every member does: its vocabulary is the
// relations every member with a vocabulary knows (in the first such member's order), and it
// has none (any relation) when all its members are ULTRA's.
//
// The archive is a TorchScript module holding each member's module as a submodule
// (`member_0`, `member_1`, ...) with the weights and bias as attributes; each member loads as
// its own archive would.
#ifndef GRAIL_MODEL_ENSEMBLE_ENSEMBLE_MODEL_H_
#define GRAIL_MODEL_ENSEMBLE_ENSEMBLE_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "graph/relation_map.h"
#include "model/fusion/linear_fusion.h"
#include "model/path/path_model.h"

namespace grail {

inline constexpr char kEnsembleModelFormat[] = "grail-kg-ensemble/1";

struct OpenedArchive;  // model/core/torch_util.h (LibTorch inside)

// The network of a member archive of `format` (LoadAnyModel's list: model/families.h), or null.
using PathNetworkOf = std::function<const PathNetworkDefinition*(const std::string& format)>;

class EnsembleModel {
 public:
  // Errors: INVALID_ARGUMENT without a member, with a null one, for `rule` of the wrong width
  // (one weight per member), or for members that share no relation.
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

  // Replaces the rule (grail-fuse fits it after the members are assembled). Errors as Create().
  absl::Status SetRule(LinearFusion rule);

  size_t size() const { return members_.size(); }
  const PathModel& member(size_t m) const { return *members_[m]; }
  // Member m as a shared pointer that keeps the whole ensemble alive (the server serves each
  // member as a path model of its own).
  std::shared_ptr<const PathModel> SharedMember(std::shared_ptr<const EnsembleModel> self,
                                                size_t m) const;
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
  const std::string& device() const { return members_.front()->device(); }

  // The combined score from the members' scores of one fact, in member order.
  double Combine(absl::Span<const double> member_scores) const {
    return rule_.Logit(member_scores);
  }

 private:
  EnsembleModel(std::vector<std::unique_ptr<PathModel>> members, LinearFusion rule,
                std::vector<std::string> relations);

  std::vector<std::unique_ptr<PathModel>> members_;
  LinearFusion rule_;
  std::vector<std::string> relations_;
  std::vector<std::vector<int32_t>> member_relation_;  // [member][ensemble relation]
};

}  // namespace grail

#endif  // GRAIL_MODEL_ENSEMBLE_ENSEMBLE_MODEL_H_
