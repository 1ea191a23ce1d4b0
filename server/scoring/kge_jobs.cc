// A KGE model served as an ensemble's member (scoring_jobs.h, ServeKgeMember). It needs no
// forward of the engine's: a job looks its facts up by name and scores them in Prepare(), on an
// extraction thread, and has no items. A fact with an entity or a relation the model was not
// trained on has the member's unknown score (EnsembleModel::unknown_score), which is also its
// far score in a ranking: the entities it knows are its neighbourhood, one pass over its
// vocabulary whatever the graph's size.
#include <algorithm>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/scoring/ranking.h"
#include "server/scoring/scoring_jobs.h"

namespace grail {
namespace {

// The runner of jobs that answer every item themselves: never handed a batch.
class NoForwardRunner final : public BatchRunner {
 public:
  const WorkNames& names() const override { return names_; }
  BatchOutcome Run(absl::Span<const BatchEntry>, ThreadScratch&) const override {
    BatchOutcome outcome;
    outcome.status = absl::InternalError("a KGE member's job has no items to run");
    outcome.ran = false;
    return outcome;
  }

 private:
  const WorkNames names_{"fact", "the KGE model's vocabulary", ""};
};

class KgeMemberServing final : public ServedFamily {
 public:
  KgeMemberServing(std::shared_ptr<const EnsembleModel> ensemble, size_t m)
      : ensemble_(std::move(ensemble)), m_(m), kge_(*ensemble_->kge_member(m)) {}

  const KgeModel& kge() const { return kge_; }
  const NoForwardRunner& runner() const { return runner_; }
  float unknown() const { return static_cast<float>(ensemble_->unknown_score(m_)); }
  // The model's id of a snapshot entity, by name; nullopt if it was not trained on it.
  std::optional<uint32_t> Entity(const GraphSnapshot& graph, EntityId e) const {
    return ensemble_->KgeEntity(m_, graph.EntityName(e));
  }

  const std::vector<std::string>& relations() const override { return kge_.relations(); }
  ModelSummary Summary() const override {
    ModelSummary summary;
    summary.format = kKgeModelFormat;
    summary.dim = kge_.config().dim;
    summary.parameters = kge_.num_parameters();
    summary.training_fingerprint = kge_.training_fingerprint();
    summary.device = kge_.device();
    return summary;
  }
  absl::Status CheckExplanations(int explain_paths) const override {
    if (explain_paths == 0) return absl::OkStatus();
    return absl::InvalidArgumentError("a KGE model has no paths to explain a score with");
  }
  SubmittedJob FactJob(FactJobSetup setup, int explain_paths,
                       LinkPredictor::ScoreCallback done) const override;
  SubmittedJob RankingJob(RankingSetup setup, LinkPredictor::RankCallback done) const override;
  absl::StatusOr<int> WarmUp(const ServedModel&, const WarmupInput&,
                             const WarmupOptions&) const override {
    return 0;  // no forward of the engine's to warm
  }

 private:
  const std::shared_ptr<const EnsembleModel> ensemble_;
  const size_t m_;
  const KgeModel& kge_;  // the ensemble's member m_
  NoForwardRunner runner_;
};

// A KGE member's job: all its work is in Prepare(), it has no items.
class KgeJob : public ScoringJob {
 public:
  explicit KgeJob(const KgeMemberServing& family) : family_(family) {}
  size_t size() const final { return 0; }
  absl::StatusOr<std::unique_ptr<WorkItem>> Extract(size_t, ThreadScratch&, int64_t) final {
    return absl::InternalError("a KGE member's job has no items");
  }
  const BatchRunner& runner() const final { return family_.runner(); }

 protected:
  const KgeMemberServing& family_;  // alive while the setup's model is
};

// Scores a list of facts: those whose head, relation and tail the model knows with it, the
// others with the unknown score.
class KgeFactJob final : public KgeJob {
 public:
  KgeFactJob(const KgeMemberServing& family, FactJobSetup setup, LinkPredictor::ScoreCallback done)
      : KgeJob(family), setup_(std::move(setup)), done_(std::move(done)) {}

  absl::Status Prepare() override {
    const GraphSnapshot& graph = *setup_.graph;
    const KgeModel& kge = family_.kge();
    results_.resize(setup_.facts.size());
    std::vector<Triple> known;
    std::vector<size_t> known_fact;
    for (size_t i = 0; i < setup_.facts.size(); ++i) {
      const FactToScore& f = setup_.facts[i];
      FactScore& score = results_[i];
      score.score = family_.unknown();
      score.known_fact =
          f.graph_relation != kNoGraphRelation && graph.HasFact(f.head, f.graph_relation, f.tail);
      score.graph_sequence = graph.sequence();
      const std::optional<uint32_t> head = family_.Entity(graph, f.head);
      const std::optional<uint32_t> tail = family_.Entity(graph, f.tail);
      if (!head || !tail || f.model_relation < 0 || f.model_relation >= kge.num_relations()) {
        continue;
      }
      known.push_back({*head, static_cast<RelationId>(f.model_relation), *tail});
      known_fact.push_back(i);
    }
    if (known.empty()) return absl::OkStatus();
    absl::StatusOr<std::vector<float>> scores = kge.ScoreGrailFacts(known);
    if (!scores.ok()) return scores.status();
    for (size_t j = 0; j < known.size(); ++j) results_[known_fact[j]].score = (*scores)[j];
    return absl::OkStatus();
  }
  void Finish(absl::Status status) override {
    if (!status.ok()) return done_(std::move(status));
    std::vector<ScoredBy> scored_by(results_.size(), ScoredBy::kEnsemble);
    done_(ScoredFacts{std::move(results_),
                      std::move(scored_by),
                      setup_.graph->sequence(),
                      setup_.model->version(),
                      {}});
  }
  size_t MemoryBytes() const override {
    return sizeof(*this) + setup_.facts.capacity() * sizeof(FactToScore) +
           results_.capacity() * sizeof(FactScore);
  }
  std::string Describe(size_t i) const override { return absl::StrCat("fact ", i); }

 private:
  const FactJobSetup setup_;
  const LinkPredictor::ScoreCallback done_;
  std::vector<FactScore> results_;
};

// An ensemble's member's ranking (RankingSetup::member_scores): one pass of the model over its
// vocabulary for the query, each entity of it the snapshot holds alive near, every other far.
class KgeRankingJob final : public KgeJob {
 public:
  KgeRankingJob(const KgeMemberServing& family, RankingSetup setup,
                LinkPredictor::RankCallback done)
      : KgeJob(family), setup_(std::move(setup)), done_(std::move(done)) {}

  absl::Status Prepare() override {
    if (!setup_.member_scores) {
      return absl::InternalError("a KGE model ranks only as an ensemble's member");
    }
    out_.far = family_.unknown();
    const GraphSnapshot& graph = *setup_.graph;
    const KgeModel& kge = family_.kge();
    const std::optional<uint32_t> fixed = family_.Entity(graph, setup_.fixed);
    const int32_t relation = setup_.model_relation;
    if (!fixed || relation < 0 || relation >= kge.num_relations()) return absl::OkStatus();
    absl::StatusOr<std::vector<float>> scores =
        kge.ScoreAll({KgeQuery{*fixed, static_cast<RelationId>(relation), !setup_.rank_tails}});
    if (!scores.ok()) return scores.status();
    std::vector<std::pair<EntityId, float>> near;
    for (uint32_t k = 0; k < kge.num_entities(); ++k) {
      const std::optional<EntityId> id = graph.FindEntity(kge.entities()[k]);  // live ones
      if (id && *id != setup_.fixed) near.emplace_back(*id, (*scores)[k]);
    }
    std::sort(near.begin(), near.end());
    for (const auto& [id, score] : near) {
      out_.near.push_back(id);
      out_.score.push_back(score);
    }
    out_.pruned.assign(out_.near.size(), 0);
    out_.not_far = out_.near;
    return absl::OkStatus();
  }
  void Finish(absl::Status status) override {
    if (!setup_.member_scores) return done_(std::move(status));  // refused in Prepare()
    if (!status.ok()) return setup_.member_scores(std::move(status));
    setup_.member_scores(std::move(out_));
  }
  size_t MemoryBytes() const override {
    return sizeof(*this) + out_.near.capacity() * (2 * sizeof(EntityId) + sizeof(float) + 1);
  }
  std::string Describe(size_t) const override { return "the ranking's query"; }

 private:
  const RankingSetup setup_;
  // The caller's, used only to refuse a ranking asked of the member alone (no member_scores).
  const LinkPredictor::RankCallback done_;
  CandidateScores out_;
};

SubmittedJob KgeMemberServing::FactJob(FactJobSetup setup, int /*explain_paths*/,
                                       LinkPredictor::ScoreCallback done) const {
  const size_t facts = setup.facts.size();
  return {std::make_shared<KgeFactJob>(*this, std::move(setup), std::move(done)), facts};
}

SubmittedJob KgeMemberServing::RankingJob(RankingSetup setup,
                                          LinkPredictor::RankCallback done) const {
  return {std::make_shared<KgeRankingJob>(*this, std::move(setup), std::move(done)), 1};
}

}  // namespace

std::unique_ptr<const ServedFamily> ServeKgeMember(std::shared_ptr<const EnsembleModel> ensemble,
                                                   size_t m) {
  return std::make_unique<KgeMemberServing>(std::move(ensemble), m);
}

}  // namespace grail
