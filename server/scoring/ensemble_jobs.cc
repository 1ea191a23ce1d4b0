// An ensemble's jobs (scoring_jobs.h): each member's own job (the path family's, GraIL's or a
// KGE member's) in turn on the call's snapshot, then the ensemble's rule over the members'
// scores.
#include <algorithm>
#include <limits>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/scoring/ranking.h"
#include "server/scoring/scoring_jobs.h"

namespace grail {
namespace {

class EnsembleServing final : public ServedFamily {
 public:
  EnsembleServing(std::shared_ptr<const EnsembleModel> model, const std::string& path,
                  const std::string& sha256, uint64_t generation)
      : model_(std::move(model)) {
    for (size_t m = 0; m < model_->size(); ++m) {
      std::unique_ptr<const ServedFamily> family =
          model_->path_member(m) != nullptr ? ServePath(model_->SharedPathMember(model_, m))
          : model_->grail_member(m) != nullptr
              ? ServeGrail(model_->SharedGrailMember(model_, m), nullptr)
              : ServeKgeMember(model_, m);
      members_.push_back(std::make_shared<const ServedModel>(
          std::move(family), absl::StrCat(path, "#member", m), sha256, generation));
    }
  }

  const EnsembleModel& model() const { return *model_; }
  size_t size() const { return members_.size(); }
  const std::shared_ptr<const ServedModel>& member(size_t m) const { return members_[m]; }

  // Member m's id of the ensemble's relation `ensemble_relation`, whose graph id is
  // `graph_relation` (ULTRA's ids are the graph's; ServedModel::RelationId made sure the graph
  // has facts of it).
  int32_t MemberRelation(size_t m, int32_t ensemble_relation, RelationId graph_relation) const {
    if (model_->member(m).open_vocabulary()) {
      return model_->open_vocabulary() ? ensemble_relation : static_cast<int32_t>(graph_relation);
    }
    return model_->MemberRelation(m, ensemble_relation);
  }

  const std::vector<std::string>& relations() const override { return model_->relations(); }
  bool open_vocabulary() const override { return model_->open_vocabulary(); }
  bool reads_relation_graph() const override { return model_->reads_relation_graph(); }
  ModelSummary Summary() const override {
    // The network's fields are those of the members that read the graph (not a KGE member's).
    size_t first = 0;
    while (first + 1 < members_.size() && model_->kge_member(first) != nullptr) ++first;
    ModelSummary summary = members_[first]->Summary();
    summary.format = kEnsembleModelFormat;
    for (size_t m = first + 1; m < members_.size(); ++m) {
      if (model_->kge_member(m) != nullptr) continue;
      const ModelSummary other = members_[m]->Summary();
      // 0: a member reads the whole graph.
      summary.hops = summary.hops == 0 || other.hops == 0 ? 0 : std::max(summary.hops, other.hops);
      summary.layers = std::max(summary.layers, other.layers);
    }
    summary.parameters = model_->num_parameters();
    summary.training_fingerprint = model_->training_fingerprint();
    return summary;
  }
  absl::Status CheckExplanations(int explain_paths) const override {
    if (explain_paths == 0 || model_->explaining_member() >= 0) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "explanations are the paths of GraIL's enclosing subgraphs; the served model is an "
        "ensemble without a GraIL member");
  }
  SubmittedJob FactJob(FactJobSetup setup, int explain_paths,
                       LinkPredictor::ScoreCallback done) const override;
  SubmittedJob RankingJob(RankingSetup setup, LinkPredictor::RankCallback done) const override;
  absl::StatusOr<int> WarmUp(const ServedModel& served, const WarmupInput& input,
                             const WarmupOptions& options) const override;
  size_t ServingWarmUpFacts(size_t asked) const override {
    for (const auto& m : members_) asked = m->family().ServingWarmUpFacts(asked);
    return asked;
  }

 private:
  const std::shared_ptr<const EnsembleModel> model_;
  std::vector<std::shared_ptr<const ServedModel>> members_;
};

// A fact-scoring call: member m's job, then m + 1's, then the rule.
class EnsembleFacts : public std::enable_shared_from_this<EnsembleFacts> {
 public:
  // With explain_paths > 0, the GraIL member that explains (EnsembleModel::explaining_member)
  // gives each fact's paths.
  EnsembleFacts(const EnsembleServing& family, FactJobSetup setup, int explain_paths,
                LinkPredictor::ScoreCallback done)
      : family_(family),
        setup_(std::move(setup)),
        explain_paths_(explain_paths),
        done_(std::move(done)),
        scores_(family.size()) {}

  SubmittedJob Member(size_t m) {
    const std::shared_ptr<const ServedModel>& member = family_.member(m);
    FactJobSetup s;
    s.model = member;
    s.graph = setup_.graph;
    s.relations = member->RelationsOf(*setup_.graph);
    s.facts = setup_.facts;
    for (FactToScore& f : s.facts) {
      f.model_relation = family_.MemberRelation(m, f.model_relation, f.graph_relation);
    }
    s.budget = setup_.budget;
    s.cap = setup_.cap;
    s.passes = setup_.passes;
    s.staleness = setup_.staleness;
    s.submit = setup_.submit;
    auto self = shared_from_this();
    const bool explains =
        explain_paths_ > 0 && static_cast<int>(m) == family_.model().explaining_member();
    auto scored_by_member = [self, m, explains](absl::StatusOr<ScoredFacts> scored) {
      if (!scored.ok()) return self->done_(scored.status());
      self->scores_[m] = std::move(scored->scores);
      if (explains) self->paths_ = std::move(scored->paths);
      if (m + 1 < self->scores_.size()) return self->setup_.submit(self->Member(m + 1));
      self->Finish();
    };
    return member->family().FactJob(std::move(s), explains ? explain_paths_ : 0,
                                    std::move(scored_by_member));
  }

 private:
  void Finish() {
    const size_t n = setup_.facts.size();
    ScoredFacts out;
    out.scores.resize(n);
    out.scored_by.assign(n, ScoredBy::kEnsemble);
    out.graph_sequence = setup_.graph->sequence();
    out.model_version = setup_.model->version();
    std::vector<double> x(scores_.size());
    for (size_t i = 0; i < n; ++i) {
      FactScore& s = out.scores[i];
      s.graph_sequence = std::numeric_limits<uint64_t>::max();
      for (size_t m = 0; m < scores_.size(); ++m) {
        const FactScore& own = scores_[m][i];
        x[m] = own.score;
        s.subgraph_nodes += own.subgraph_nodes;
        s.subgraph_edges += own.subgraph_edges;
        s.known_fact = own.known_fact;
        s.pruned = s.pruned || own.pruned;
        s.graph_sequence = std::min(s.graph_sequence, own.graph_sequence);
      }
      s.score = static_cast<float>(family_.model().Combine(x));
    }
    out.paths = std::move(paths_);
    done_(std::move(out));
  }

  const EnsembleServing& family_;  // alive while setup_.model is
  const FactJobSetup setup_;
  const int explain_paths_;
  const LinkPredictor::ScoreCallback done_;
  std::vector<std::vector<FactScore>> scores_;  // [member][fact]
  std::vector<std::vector<NamedPath>> paths_;   // the explaining member's
};

// A ranking: member m's ranking of every candidate, then m + 1's, then the rule per candidate.
class EnsembleRanking : public std::enable_shared_from_this<EnsembleRanking> {
 public:
  EnsembleRanking(const EnsembleServing& family, RankingSetup setup,
                  LinkPredictor::RankCallback done)
      : family_(family), setup_(std::move(setup)), done_(std::move(done)), scores_(family.size()) {}

  SubmittedJob Member(size_t m) {
    const std::shared_ptr<const ServedModel>& member = family_.member(m);
    RankingSetup s = setup_;
    s.model = member;
    s.relations = member->RelationsOf(*setup_.graph);
    s.model_relation = family_.MemberRelation(m, setup_.model_relation, setup_.graph_relation);
    s.top_k = 0;
    s.filter_known_facts = false;
    s.answer.reset();  // ranked by the ensemble's own scores (Combine)
    // The ensemble bounds what it returns (Combine); a member returns its neighbourhood.
    s.limits.max_rank_results = std::numeric_limits<uint32_t>::max();
    auto self = shared_from_this();
    s.member_scores = [self, m](absl::StatusOr<CandidateScores> scored) {
      if (!scored.ok()) return self->done_(scored.status());
      self->scores_[m] = *std::move(scored);
      if (m + 1 < self->scores_.size()) return self->setup_.submit(self->Member(m + 1));
      self->Combine();
    };
    return member->family().RankingJob(std::move(s), nullptr);
  }

 private:
  // Candidate e's score: the rule over each member's own score of it, or its far score.
  Candidate Score(EntityId e, const RankingState& r) {
    std::vector<double>& x = member_scores_;  // one per member, reused for every candidate
    x.resize(scores_.size());
    bool pruned = false;
    for (size_t m = 0; m < scores_.size(); ++m) {
      const CandidateScores& s = scores_[m];
      auto it = std::lower_bound(s.near.begin(), s.near.end(), e);
      if (it != s.near.end() && *it == e) {
        const size_t i = static_cast<size_t>(it - s.near.begin());
        x[m] = s.score[i];
        pruned = pruned || s.pruned[i] != 0;
      } else {
        x[m] = s.far;
      }
    }
    return Candidate{static_cast<float>(family_.model().Combine(x)), e, r.Known(e),
                     ScoredBy::kEnsemble, pruned};
  }

  void Combine() {
    RankingState r(setup_);
    std::vector<double> far(scores_.size());
    bool pruned_pass = false;
    for (size_t m = 0; m < scores_.size(); ++m) {
      far[m] = scores_[m].far;
      pruned_pass = pruned_pass || scores_[m].pruned_pass;
    }
    const float shared = static_cast<float>(family_.model().Combine(far));
    if (!setup_.candidates.empty()) {
      if (absl::Status s = r.ResolveExplicitCandidates(); !s.ok()) return done_(s);
      r.FilterKnownFacts();
      if (absl::Status s = r.CheckResultCount(r.near().size()); !s.ok()) return done_(s);
      for (EntityId c : r.near()) {
        const Candidate scored = Score(c, r);
        if (scored.pruned) r.count_pruned();
        r.Add(scored);
      }
      return done_(r.Result(shared, ScoredBy::kEnsemble));
    }
    if (absl::Status s = r.CheckResultCount(r.graph().num_live_entities() - 1); !s.ok()) {
      return done_(s);
    }
    // Every entity some member scored on its own is near; every other shares the far score.
    std::vector<EntityId>& not_far = r.not_far();
    for (const CandidateScores& s : scores_) {
      not_far.insert(not_far.end(), s.near.begin(), s.near.end());
    }
    std::sort(not_far.begin(), not_far.end());
    not_far.erase(std::unique(not_far.begin(), not_far.end()), not_far.end());
    for (EntityId c : not_far) {
      const Candidate scored = Score(c, r);
      if (setup_.filter_known_facts && scored.known_fact) {
        r.count_filtered();
        continue;
      }
      r.near().push_back(c);
      if (scored.pruned) r.count_pruned();
      r.Add(scored);
    }
    r.set_far_count(r.graph().num_live_entities() - 1 - not_far.size());
    r.set_shared_score(shared);
    if (pruned_pass) r.set_pruned();
    done_(r.Result(shared, ScoredBy::kEnsemble));
  }

  const EnsembleServing& family_;  // alive while setup_.model is
  const RankingSetup setup_;
  const LinkPredictor::RankCallback done_;
  std::vector<CandidateScores> scores_;  // per member
  std::vector<double> member_scores_;    // Score()'s
};

SubmittedJob EnsembleServing::FactJob(FactJobSetup setup, int explain_paths,
                                      LinkPredictor::ScoreCallback done) const {
  auto call =
      std::make_shared<EnsembleFacts>(*this, std::move(setup), explain_paths, std::move(done));
  return call->Member(0);
}

SubmittedJob EnsembleServing::RankingJob(RankingSetup setup,
                                         LinkPredictor::RankCallback done) const {
  auto call = std::make_shared<EnsembleRanking>(*this, std::move(setup), std::move(done));
  return call->Member(0);
}

// Each member's warm-up over the same facts, in its own relation ids.
absl::StatusOr<int> EnsembleServing::WarmUp(const ServedModel&, const WarmupInput& input,
                                            const WarmupOptions& options) const {
  int forwards = 0;
  for (size_t m = 0; m < members_.size(); ++m) {
    const bool any_relation = model_->member(m).open_vocabulary();
    std::vector<int32_t> ids;
    if (!any_relation) {
      for (uint32_t r = 0; r < input.graph->num_relations(); ++r) {
        const int32_t own = (*input.relations)(r);
        ids.push_back(own < 0 ? -1 : model_->MemberRelation(m, own));
      }
    }
    const RelationMap relations = any_relation ? RelationMap() : RelationMap(std::move(ids));
    WarmupInput own = input;
    own.relations = &relations;
    own.facts.clear();
    for (const WarmupFact& f : input.facts) {
      if (!any_relation) {
        own.facts.push_back({f.fact, model_->MemberRelation(m, f.model_relation)});
      } else if (f.fact.relation < input.graph->num_relations()) {
        // ULTRA's ids are the graph's: a relation of the ensemble's vocabulary that the graph
        // (the small synthetic one of an empty store) lacks is none of its.
        own.facts.push_back({f.fact, static_cast<int32_t>(f.fact.relation)});
      }
    }
    if (own.facts.empty()) continue;
    absl::StatusOr<int> ran = members_[m]->family().WarmUp(*members_[m], own, options);
    if (!ran.ok()) return ran;
    forwards += *ran;
  }
  return forwards;
}

}  // namespace

std::unique_ptr<const ServedFamily> ServeEnsemble(std::shared_ptr<const EnsembleModel> model,
                                                  const std::string& path,
                                                  const std::string& sha256, uint64_t generation) {
  return std::make_unique<EnsembleServing>(std::move(model), path, sha256, generation);
}

}  // namespace grail
