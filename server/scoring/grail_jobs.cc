// GraIL's jobs (scoring_jobs.h): facts on their own enclosing subgraphs, and rankings whose
// far candidates share the trivial subgraph's score. A fusion archive is served as its GraIL
// model, whose scores its classifiers combine with the KGE members' (model/fusion/).
#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/grail/explanation.h"
#include "model/grail/subgraph_batch.h"
#include "server/scoring/grail_work.h"
#include "server/scoring/ranking.h"
#include "server/scoring/scoring_jobs.h"

namespace grail {
namespace {

// The names of a snapshot's entities, for models that look entities up by name (early fusion).
std::function<absl::string_view(EntityId)> EntityNames(const GraphSnapshot& graph) {
  return [&graph](EntityId e) -> absl::string_view { return graph.EntityName(e); };
}

// GraIL as the server serves it (scoring_jobs.h), a fusion archive's GraIL model included.
class GrailServing final : public ServedFamily {
 public:
  GrailServing(std::shared_ptr<const GrailModel> model, std::shared_ptr<const FusionModel> fusion)
      : model_(std::move(model)), fusion_(std::move(fusion)), runner_(*model_) {}

  const GrailModel& model() const { return *model_; }
  const FusionModel* fusion() const { return fusion_.get(); }  // null: a GraIL archive
  const GrailRunner& runner() const { return runner_; }

  const std::vector<std::string>& relations() const override { return model_->relations(); }
  ModelSummary Summary() const override;
  absl::Status CheckExplanations(int explain_paths) const override { return absl::OkStatus(); }
  SubmittedJob FactJob(FactJobSetup setup, int explain_paths,
                       LinkPredictor::ScoreCallback done) const override;
  SubmittedJob RankingJob(RankingSetup setup, LinkPredictor::RankCallback done) const override;
  absl::StatusOr<int> WarmUp(const ServedModel& served, const WarmupInput& input,
                             const WarmupOptions& options) const override;

 private:
  const std::shared_ptr<const GrailModel> model_;
  const std::shared_ptr<const FusionModel> fusion_;
  const GrailRunner runner_;
};

// Scores a list of facts given by id: ScoreTriplet(s).
class GrailFactJob final : public GrailJob {
 public:
  GrailFactJob(const GrailServing& family, FactJobSetup setup, int explain_paths,
               LinkPredictor::ScoreCallback done)
      : GrailJob(family.runner()),
        fusion_(family.fusion()),
        model_(std::move(setup.model)),
        graph_(std::move(setup.graph)),
        relations_(std::move(setup.relations)),
        facts_(std::move(setup.facts)),
        results_(facts_.size()),
        explain_paths_(explain_paths),
        paths_(explain_paths > 0 ? facts_.size() : 0),
        done_(std::move(done)) {}

  // A fusion archive: the KGE models' scores of every fact they all know, by name.
  absl::Status Prepare() override {
    if (fusion_ == nullptr) return absl::OkStatus();
    std::vector<FactNames> names;
    names.reserve(facts_.size());
    for (const FactToScore& f : facts_) {
      names.push_back({graph_->EntityName(f.head), model_->relations()[f.model_relation],
                       graph_->EntityName(f.tail)});
    }
    absl::StatusOr<std::vector<std::vector<double>>> kge = fusion_->KgeScores(names);
    if (!kge.ok()) return kge.status();
    kge_ = *std::move(kge);
    return absl::OkStatus();
  }

  size_t size() const override { return facts_.size(); }
  absl::StatusOr<int32_t> ExtractSubgraph(size_t i, SubgraphExtractor& extractor,
                                          EnclosingSubgraph* out) override {
    const FactToScore& f = facts_[i];
    absl::Status status = extractor.Extract(*graph_, f.head, f.graph_relation, f.tail,
                                            /*hide_target_fact=*/false, out);
    if (!status.ok()) return status;
    AttachNodeFeatures(model(), EntityNames(*graph_), out);
    if (explain_paths_ > 0) {
      absl::StatusOr<std::vector<ExplainedPath>> paths =
          ExplainSubgraph(model(), *out, f.model_relation, *relations_, explain_paths_);
      if (!paths.ok()) return paths.status();
      for (const ExplainedPath& p : *paths) paths_[i].push_back(Name(p));
    }
    return f.model_relation;
  }
  const RelationMap& relations() const override { return *relations_; }
  void Accept(size_t i, const FactScore& score) override {
    results_[i] = score;
    if (const FusionModel* fusion = fusion_) {
      results_[i].score = fusion->Combine(score.score, kge_[i]);
      if (!kge_[i].empty()) scored_by_[i] = ScoredBy::kFusion;
    }
  }
  void Finish(absl::Status status) override {
    if (!status.ok()) return done_(std::move(status));
    done_(ScoredFacts{std::move(results_), std::move(scored_by_), graph_->sequence(),
                      model_->version(), std::move(paths_)});
  }
  size_t MemoryBytes() const override {
    size_t bytes = sizeof(*this) + facts_.capacity() * sizeof(FactToScore) +
                   results_.capacity() * (sizeof(FactScore) + sizeof(ScoredBy));
    for (const std::vector<double>& row : kge_) bytes += sizeof(row) + row.capacity() * 8;
    return bytes;
  }
  std::string Describe(size_t i) const override {
    const FactToScore& f = facts_[i];
    return absl::StrCat("(\"", graph_->EntityName(f.head), "\", ",
                        f.graph_relation == kNoGraphRelation
                            ? "relation"
                            : absl::StrCat("\"", graph_->RelationName(f.graph_relation), "\""),
                        ", \"", graph_->EntityName(f.tail), "\")");
  }

 private:
  // `path` with the graph's names, and its rule body: h and t for the fact's ends, z1, z2,
  // ... for the entities between them in path order.
  NamedPath Name(const ExplainedPath& path) const {
    NamedPath named;
    named.weight = path.weight;
    named.layer_weights = path.layer_weights;
    const size_t m = path.steps.size();
    auto variable = [m](size_t position) {
      return position == 0   ? std::string("h")
             : position == m ? std::string("t")
                             : absl::StrCat("z", position);
    };
    for (size_t i = 0; i < m; ++i) {
      const PathStep& step = path.steps[i];
      NamedPathStep out;
      out.from = graph_->EntityName(step.from);
      out.to = graph_->EntityName(step.to);
      out.relation = graph_->RelationName(step.relation);
      out.inverse = step.inverse;
      out.attention = step.attention;
      absl::StrAppend(&named.rule, i > 0 ? " ∧ " : "", out.relation, step.inverse ? "^-1" : "", "(",
                      variable(i), ",", variable(i + 1), ")");
      named.steps.push_back(std::move(out));
    }
    return named;
  }

  const FusionModel* const fusion_;  // a fusion archive, or null
  const std::shared_ptr<const ServedModel> model_;
  const std::shared_ptr<const GraphSnapshot> graph_;
  const std::shared_ptr<const RelationMap> relations_;
  const std::vector<FactToScore> facts_;
  std::vector<FactScore> results_;
  std::vector<ScoredBy> scored_by_ = std::vector<ScoredBy>(facts_.size(), ScoredBy::kGrail);
  // A fusion archive's: per fact, one score per KGE model, or none (model/fusion/fusion_model.h).
  std::vector<std::vector<double>> kge_;
  const int explain_paths_;
  std::vector<std::vector<NamedPath>> paths_;  // per fact; slot i written by ExtractSubgraph(i)
  LinkPredictor::ScoreCallback done_;
};

// Ranks candidates for (fixed, r, ?) or (?, r, fixed) with GraIL. Ranking every entity, those
// within k + 1 hops of the fixed entity, and those with self-loops, are "near": each is scored
// on its own subgraph. Every other ("far") candidate has the same trivial enclosing subgraph,
// so the far ones share the score of one of them, the representative (the last item).
class GrailRankingJob final : public GrailJob {
 public:
  GrailRankingJob(const GrailServing& family, RankingSetup setup, LinkPredictor::RankCallback done)
      : GrailJob(family.runner()),
        extraction_(family.model().config().extraction()),
        fusion_(family.fusion()),
        r_(std::move(setup)),
        done_(std::move(done)) {}

  absl::Status Prepare() override {
    const GraphSnapshot& graph = r_.graph();
    const RankingSetup& s = r_.setup();
    if (r_.explicit_candidates()) {
      // An explicit list: every candidate is scored on its own subgraph.
      absl::Status status = r_.ResolveExplicitCandidates();
      if (!status.ok()) return status;
    } else if (extraction_.enclosing) {
      absl::Status status = SplitNearAndFar();
      if (!status.ok()) return status;
    } else {
      // The "no enclosing" ablation keeps both neighbourhoods whole: no candidate shares.
      if (graph.num_live_entities() - 1 > s.limits.max_rank_subgraphs) {
        return r_.Refuse("max_rank_subgraphs",
                         absl::StrCat("ranking every entity with a model without enclosing "
                                      "subgraphs scores ",
                                      graph.num_live_entities() - 1,
                                      " candidates on their own subgraphs; "
                                      "the limit is ",
                                      s.limits.max_rank_subgraphs,
                                      " (--max-rank-subgraphs); pass options.candidates to rank "
                                      "a list of entities instead"));
      }
      for (EntityId e = 0; e < graph.num_entities(); ++e) {
        if (e != s.fixed && !graph.IsRemoved(e)) r_.near().push_back(e);
      }
    }
    r_.FilterKnownFacts();
    if (absl::Status s = r_.CheckResultCount(r_.near().size() + r_.far_count()); !s.ok()) {
      return s;
    }
    if (fusion_ != nullptr) {
      absl::Status status = PrepareFusion();
      if (!status.ok()) return status;
    }
    fixed_neighbourhood_.emplace(TargetNeighbourhood::Expand(graph, s.fixed, extraction_));
    return absl::OkStatus();
  }

  size_t size() const override { return r_.near().size() + (r_.far_count() > 0 ? 1 : 0); }

  absl::StatusOr<int32_t> ExtractSubgraph(size_t i, SubgraphExtractor& extractor,
                                          EnclosingSubgraph* out) override {
    const RankingSetup& s = r_.setup();
    const EntityId c = CandidateAt(i);
    absl::Status status = extractor.Extract(r_.graph(), r_.Head(c), s.graph_relation, r_.Tail(c),
                                            *fixed_neighbourhood_, out);
    if (!status.ok()) return status;
    AttachNodeFeatures(model(), EntityNames(r_.graph()), out);
    return s.model_relation;
  }

  const RelationMap& relations() const override { return *r_.setup().relations; }

  void Accept(size_t i, const FactScore& score) override {
    const std::vector<EntityId>& near = r_.near();
    if (i >= near.size()) {
      r_.set_shared_score(score.score);  // GraIL's; Finish() passes it through the classifier
    } else if (fusion_ == nullptr) {
      r_.Add({score.score, near[i], score.known_fact});
    } else {
      r_.Add({fusion_->Combine(score.score, near_kge_[i]), near[i], score.known_fact,
              near_kge_[i].empty() ? ScoredBy::kGrail : ScoredBy::kFusion});
    }
  }

  void Finish(absl::Status status) override {
    const CandidateScoresCallback& member = r_.setup().member_scores;
    if (member) {  // an ensemble's member (a GraIL archive: the ensemble has no fusion member)
      if (!status.ok()) return member(std::move(status));
      return member(r_.MemberScores());
    }
    if (!status.ok()) return done_(std::move(status));
    float far_score = r_.shared_score();
    if (fusion_ != nullptr) {
      far_score = fusion_->Combine(r_.shared_score(), {});
      for (const FarFused& f : far_best_) {
        r_.Add({fusion_->Combine(r_.shared_score(), f.kge), f.id, false, ScoredBy::kFusion});
      }
    }
    done_(r_.Result(far_score, ScoredBy::kGrail));
  }

  size_t MemoryBytes() const override {
    size_t bytes = sizeof(*this) + r_.MemoryBytes() + far_best_.capacity() * sizeof(FarFused);
    for (const std::vector<double>& row : near_kge_) bytes += sizeof(row) + row.capacity() * 8;
    for (const FarFused& f : far_best_) bytes += f.kge.capacity() * 8;
    if (fixed_neighbourhood_) bytes += fixed_neighbourhood_->MemoryBytes();
    return bytes;
  }

  std::string Describe(size_t i) const override { return r_.DescribeFact(CandidateAt(i)); }

 private:
  // A far candidate that a fusion archive's KGE models all know: its scores, and the KGE part of
  // the fused classifier's sum that orders it among them.
  struct FarFused {
    EntityId id = 0;
    double kge_part = 0;
    std::vector<double> kge;  // one per KGE model
  };

  EntityId CandidateAt(size_t i) const {
    return i < r_.near().size() ? r_.near()[i] : representative_;
  }

  absl::Status SplitNearAndFar() {
    const GraphSnapshot& graph = r_.graph();
    const RankingSetup& s = r_.setup();
    const int reach = TrivialSubgraphDistance(extraction_) - 1;
    std::optional<std::vector<EntityId>> within =
        EntitiesWithinHops(graph, s.fixed, reach, size_t{s.limits.max_rank_subgraphs} + 1);
    if (!within.has_value()) {
      return r_.Refuse(
          "max_rank_subgraphs",
          absl::StrCat("ranking every entity would score more than ", s.limits.max_rank_subgraphs,
                       " candidates on their own enclosing subgraphs (the entities "
                       "within ",
                       reach, " hops of \"", graph.EntityName(s.fixed), "\"); the limit is ",
                       s.limits.max_rank_subgraphs,
                       " (--max-rank-subgraphs); pass options.candidates to rank a "
                       "list of entities instead"));
    }
    std::vector<EntityId>& not_far = r_.not_far();
    const absl::Span<const EntityId> loops = graph.SelfLoopEntities();
    not_far.reserve(within->size() + loops.size());
    std::set_union(within->begin(), within->end(), loops.begin(), loops.end(),
                   std::back_inserter(not_far));
    not_far.erase(std::remove(not_far.begin(), not_far.end(), s.fixed), not_far.end());
    if (not_far.size() > s.limits.max_rank_subgraphs) {
      return r_.Refuse("max_rank_subgraphs",
                       absl::StrCat("ranking every entity would score ", not_far.size(),
                                    " candidates on their own enclosing subgraphs (near \"",
                                    graph.EntityName(s.fixed),
                                    "\" or with self-loops); the limit "
                                    "is ",
                                    s.limits.max_rank_subgraphs,
                                    " (--max-rank-subgraphs); pass options.candidates to rank a "
                                    "list of entities instead"));
    }
    absl::Status featured = AddFarCandidatesWithNodeFeatures();
    if (!featured.ok()) return featured;
    r_.near() = not_far;
    // Removed entities have no facts, so none is near; they are not candidates at all.
    r_.set_far_count(graph.num_live_entities() - 1 - not_far.size());
    if (r_.far_count() > 0) representative_ = r_.FirstFar();
    return absl::OkStatus();
  }

  // Early fusion: a far candidate's trivial subgraph holds its own node features, so only the
  // far candidates without features (the model's zero row) share one score. Those with
  // features join not_far, each scored on its own trivial subgraph: one pass over the model's
  // feature vocabulary, and at most max_rank_subgraphs in all.
  absl::Status AddFarCandidatesWithNodeFeatures() {
    if (model().config().node_feature_dim == 0) return absl::OkStatus();
    const GraphSnapshot& graph = r_.graph();
    const RankingSetup& s = r_.setup();
    std::vector<EntityId>& not_far = r_.not_far();
    std::vector<EntityId> featured;
    for (const std::string& name : model().node_feature_entities()) {
      const std::optional<EntityId> id = graph.FindEntity(name);  // live entities only
      if (!id || *id == s.fixed || std::binary_search(not_far.begin(), not_far.end(), *id)) {
        continue;
      }
      featured.push_back(*id);
      if (not_far.size() + featured.size() > s.limits.max_rank_subgraphs) {
        return r_.Refuse(
            "max_rank_subgraphs",
            absl::StrCat("ranking every entity would score more than ", s.limits.max_rank_subgraphs,
                         " candidates on their own subgraphs: the model reads node "
                         "features (early fusion), so every candidate with features "
                         "is scored apart; the limit is ",
                         s.limits.max_rank_subgraphs,
                         " (--max-rank-subgraphs); pass options.candidates to rank "
                         "a list of entities instead"));
      }
    }
    std::sort(featured.begin(), featured.end());
    std::vector<EntityId> merged;
    merged.reserve(not_far.size() + featured.size());
    std::merge(not_far.begin(), not_far.end(), featured.begin(), featured.end(),
               std::back_inserter(merged));
    not_far = std::move(merged);
    return absl::OkStatus();
  }

  // A fusion archive's part of a ranking (Prepare, after the near and far candidates are
  // known): the KGE scores of the near candidates, and, ranking every entity, of the far
  // candidates that every KGE model knows. Those far ones all get the shared GraIL score, so
  // they rank by their KGE part alone: only the best top_k of them by it are kept (their
  // final scores come in Finish(), once the shared score is known), and they leave the
  // group that shares one score. One KGE pass per member ranks every entity it knows; the
  // cost is that of its vocabulary, not of the graph.
  absl::Status PrepareFusion() {
    const FusionModel& fusion = *fusion_;
    const GraphSnapshot& graph = r_.graph();
    const RankingSetup& s = r_.setup();
    const absl::string_view fixed = graph.EntityName(s.fixed);
    std::vector<FactNames> names;
    names.reserve(r_.near().size());
    for (EntityId c : r_.near()) {
      const absl::string_view other = graph.EntityName(c);
      names.push_back(s.rank_tails ? FactNames{fixed, s.relation_name, other}
                                   : FactNames{other, s.relation_name, fixed});
    }
    absl::StatusOr<std::vector<std::vector<double>>> near = fusion.KgeScores(names);
    if (!near.ok()) return near.status();
    near_kge_ = *std::move(near);
    if (r_.explicit_candidates() || r_.far_count() == 0) return absl::OkStatus();

    const size_t members = fusion.kge().size();
    std::vector<std::vector<float>> all(members);  // [member][its entity id]
    for (size_t m = 0; m < members; ++m) {
      const std::optional<uint32_t> anchor = fusion.MemberEntity(m, fixed);
      const std::optional<uint32_t> relation = fusion.MemberRelation(m, s.relation_name);
      if (!anchor || !relation) return absl::OkStatus();  // no far fact is known to all
      absl::StatusOr<std::vector<float>> scores =
          fusion.kge()[m]->ScoreAll({KgeQuery{*anchor, *relation, !s.rank_tails}});
      if (!scores.ok()) return scores.status();
      all[m] = *std::move(scores);
    }
    const std::vector<double>& weights = fusion.fused_classifier().weights;
    const KgeModel& first = *fusion.kge()[0];
    const std::vector<EntityId>& not_far = r_.not_far();
    std::vector<EntityId>& far_apart = r_.far_apart();
    // Best first: higher KGE part, then lower id. As a heap's order, it keeps the worst on top.
    auto better = [](const FarFused& a, const FarFused& b) {
      return a.kge_part != b.kge_part ? a.kge_part > b.kge_part : a.id < b.id;
    };
    for (uint32_t e = 0; e < first.num_entities(); ++e) {
      const std::string& name = first.entities()[e];
      const std::optional<EntityId> id = graph.FindEntity(name);  // live entities only
      if (!id || *id == s.fixed || std::binary_search(not_far.begin(), not_far.end(), *id)) {
        continue;
      }
      FarFused candidate{*id, 0, std::vector<double>(members)};
      bool known = true;
      for (size_t m = 0; m < members && known; ++m) {
        const std::optional<uint32_t> own = m == 0 ? e : fusion.MemberEntity(m, name);
        if (!own) {
          known = false;
        } else {
          candidate.kge[m] = all[m][*own];
          candidate.kge_part += weights[1 + m] * candidate.kge[m];
        }
      }
      if (!known) continue;
      far_apart.push_back(*id);
      if (s.top_k == 0 || far_best_.size() < s.top_k) {
        far_best_.push_back(std::move(candidate));
        if (s.top_k != 0) std::push_heap(far_best_.begin(), far_best_.end(), better);
      } else if (better(candidate, far_best_.front())) {
        std::pop_heap(far_best_.begin(), far_best_.end(), better);
        far_best_.back() = std::move(candidate);
        std::push_heap(far_best_.begin(), far_best_.end(), better);
      }
    }
    std::sort(far_apart.begin(), far_apart.end());
    return absl::OkStatus();
  }

  const ExtractionConfig extraction_;
  const FusionModel* const fusion_;  // a fusion archive, or null
  RankingState r_;
  // A fusion archive's: the near candidates' KGE scores (by position in near; empty rows for
  // those some KGE model does not know), and the best top_k far candidates scored apart (all
  // of them for top_k 0).
  std::vector<std::vector<double>> near_kge_;
  std::vector<FarFused> far_best_;
  EntityId representative_ = 0;  // the far candidate whose score all far ones share
  std::optional<TargetNeighbourhood> fixed_neighbourhood_;
  LinkPredictor::RankCallback done_;
};

ModelSummary GrailServing::Summary() const {
  ModelSummary summary;
  summary.format = fusion_ ? kFusionModelFormat : kGrailModelFormat;
  summary.hops = model_->config().hops;
  summary.layers = model_->config().num_layers;
  summary.dim = model_->config().dim;
  summary.parameters = model_->num_parameters();
  summary.training_fingerprint = model_->training_fingerprint();
  summary.device = model_->device();
  if (fusion_) {
    for (size_t m = 0; m < fusion_->kge().size(); ++m) {
      const KgeModel& member = *fusion_->kge()[m];
      summary.kge_members.push_back({KgeKindName(member.config().kind), member.config().dim,
                                     member.num_entities(), member.num_relations(),
                                     fusion_->fused_classifier().weights[1 + m]});
    }
  }
  return summary;
}

SubmittedJob GrailServing::FactJob(FactJobSetup setup, int explain_paths,
                                   LinkPredictor::ScoreCallback done) const {
  const size_t size = setup.facts.size();
  return {std::make_shared<GrailFactJob>(*this, std::move(setup), explain_paths, std::move(done)),
          size};
}

SubmittedJob GrailServing::RankingJob(RankingSetup setup, LinkPredictor::RankCallback done) const {
  // An explicit list's size is known now (an upper bound: duplicates and the fixed entity
  // drop out); a ranking over every entity learns its size in Prepare().
  const size_t known_size = setup.candidates.size();
  return {std::make_shared<GrailRankingJob>(*this, std::move(setup), std::move(done)), known_size};
}

// Forwards over enclosing subgraphs of the facts, then, for a fusion archive, each KGE model
// with a fact and a ranking of every entity (the two shapes serving asks of them).
absl::StatusOr<int> GrailServing::WarmUp(const ServedModel& served, const WarmupInput& input,
                                         const WarmupOptions& options) const {
  const GrailModel& model = *model_;
  const std::vector<WarmupFact>& facts = input.facts;
  const size_t per_batch = static_cast<size_t>(std::max(1, options.batch_size));
  SubgraphExtractor extractor(model.config().extraction());
  EnclosingSubgraph subgraph;
  SubgraphBatch batch;
  size_t next = 0;
  int forwards = 0;
  for (int b = 0; b < options.batches; ++b) {
    if (options.stop && options.stop()) return StoppedWarmUp();
    batch.Clear();
    int64_t nodes = 0, edges = 0;
    // Facts are reused when there are few; a subgraph that alone exceeds a forward's
    // limits (a hub's) is skipped, as the engine would run it alone.
    // Odd forwards hold one subgraph, the shape of a single ScoreTriplet.
    const int64_t size = b % 2 == 1 ? 1 : static_cast<int64_t>(per_batch);
    for (size_t tried = 0; tried < 4 * facts.size() && batch.num_graphs() < size; ++tried) {
      const WarmupFact& f = facts[next++ % facts.size()];
      absl::Status extracted =
          extractor.Extract(*input.graph, f.fact.head, f.fact.relation, f.fact.tail,
                            /*hide_target_fact=*/false, &subgraph);
      if (!extracted.ok()) return extracted;
      // Early fusion: stored entities by name; the synthetic ring's have no features.
      AttachNodeFeatures(model, input.entity_name, &subgraph);
      if (nodes + subgraph.num_nodes() > options.max_batch_nodes ||
          edges + subgraph.num_edges() > options.max_batch_edges) {
        if (batch.num_graphs() > 0) break;
        continue;
      }
      nodes += subgraph.num_nodes();
      edges += subgraph.num_edges();
      batch.Add(subgraph, f.model_relation, *input.relations);
    }
    if (batch.num_graphs() == 0) continue;
    absl::StatusOr<std::vector<float>> scores = model.Score(batch);
    if (!scores.ok()) {
      return absl::Status(scores.status().code(), absl::StrCat("warming up model ", served.path(),
                                                               ": ", scores.status().message()));
    }
    ++forwards;
  }
  if (fusion_ == nullptr) return forwards;
  for (const std::unique_ptr<KgeModel>& member : fusion_->kge()) {
    const Triple fact{0, 0, member->num_entities() > 1 ? 1u : 0u};
    absl::Status status = member->ScoreGrailFacts({fact}).status();
    if (status.ok()) status = member->ScoreAll({KgeQuery{0, 0, false}}).status();
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("warming up the KGE models of ",
                                                      served.path(), ": ", status.message()));
    }
    forwards += 2;
  }
  return forwards;
}

}  // namespace

std::unique_ptr<const ServedFamily> ServeGrail(std::shared_ptr<const GrailModel> model,
                                               std::shared_ptr<const FusionModel> fusion) {
  return std::make_unique<GrailServing>(std::move(model), std::move(fusion));
}

}  // namespace grail
