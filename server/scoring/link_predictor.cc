#include "server/scoring/link_predictor.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "graph/vocabulary.h"
#include "model/families.h"
#include "model/grail/explanation.h"

namespace grail {
namespace {

// The graph's id of a relation no fact uses yet (the model may still know it).
constexpr RelationId kNoGraphRelation = 0xffffffffu;

absl::Status EntityNotFound(absl::string_view name) {
  return absl::NotFoundError(absl::StrCat("entity ", QuoteName(name), " is not in the graph"));
}

// The names of a snapshot's entities, for models that look entities up by name (early fusion).
std::function<absl::string_view(EntityId)> EntityNames(const GraphSnapshot& graph) {
  return [&graph](EntityId e) -> absl::string_view { return graph.EntityName(e); };
}

absl::StatusOr<EntityId> FindEntity(const GraphSnapshot& graph, const std::string& name) {
  std::optional<EntityId> id = graph.FindEntity(name);
  if (!id) return EntityNotFound(name);
  return *id;
}

// Scores a list of facts given by id: ScoreTriplet(s).
class FactScoringJob final : public ScoringJob {
 public:
  struct Fact {
    EntityId head = 0;
    RelationId graph_relation = kNoGraphRelation;
    EntityId tail = 0;
    int32_t model_relation = 0;
  };

  FactScoringJob(std::shared_ptr<const ServedModel> model,
                 std::shared_ptr<const GraphSnapshot> graph,
                 std::shared_ptr<const RelationMap> relations, std::vector<Fact> facts,
                 int explain_paths, LinkPredictor::ScoreCallback done)
      : model_(std::move(model)),
        graph_(std::move(graph)),
        relations_(std::move(relations)),
        facts_(std::move(facts)),
        results_(facts_.size()),
        explain_paths_(explain_paths),
        paths_(explain_paths > 0 ? facts_.size() : 0),
        done_(std::move(done)) {}

  // A fused archive: the KGE models' scores of every fact they all know, by name.
  absl::Status Prepare() override {
    const FusedModel* fused = model_->fused();
    if (fused == nullptr) return absl::OkStatus();
    std::vector<FactNames> names;
    names.reserve(facts_.size());
    for (const Fact& f : facts_) {
      names.push_back({graph_->EntityName(f.head), model_->relations()[f.model_relation],
                       graph_->EntityName(f.tail)});
    }
    absl::StatusOr<std::vector<std::vector<double>>> kge = fused->KgeScores(names);
    if (!kge.ok()) return kge.status();
    kge_ = *std::move(kge);
    return absl::OkStatus();
  }

  size_t size() const override { return facts_.size(); }
  absl::StatusOr<int32_t> Extract(size_t i, SubgraphExtractor& extractor,
                                  EnclosingSubgraph* out) override {
    const Fact& f = facts_[i];
    absl::Status status = extractor.Extract(*graph_, f.head, f.graph_relation, f.tail,
                                            /*hide_target_fact=*/false, out);
    if (!status.ok()) return status;
    AttachNodeFeatures(model_->model(), EntityNames(*graph_), out);
    if (explain_paths_ > 0) {
      absl::StatusOr<std::vector<ExplainedPath>> paths =
          ExplainSubgraph(model_->model(), *out, f.model_relation, *relations_, explain_paths_);
      if (!paths.ok()) return paths.status();
      for (const ExplainedPath& p : *paths) paths_[i].push_back(Name(p));
    }
    return f.model_relation;
  }
  const GrailModel* model() const override { return &model_->model(); }
  const RelationMap& relations() const override { return *relations_; }
  void Accept(size_t i, const FactScore& score) override {
    results_[i] = score;
    if (const FusedModel* fused = model_->fused()) {
      results_[i].score = fused->Combine(score.score, kge_[i]);
      if (!kge_[i].empty()) scored_by_[i] = ScoredBy::kFused;
    }
  }
  void Finish(absl::Status status) override {
    if (!status.ok()) return done_(std::move(status));
    done_(ScoredFacts{std::move(results_), std::move(scored_by_), graph_->sequence(),
                      model_->version(), std::move(paths_)});
  }
  size_t MemoryBytes() const override {
    size_t bytes = sizeof(*this) + facts_.capacity() * sizeof(Fact) +
                   results_.capacity() * (sizeof(FactScore) + sizeof(ScoredBy));
    for (const std::vector<double>& row : kge_) bytes += sizeof(row) + row.capacity() * 8;
    return bytes;
  }
  std::string Describe(size_t i) const override {
    const Fact& f = facts_[i];
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

  const std::shared_ptr<const ServedModel> model_;
  const std::shared_ptr<const GraphSnapshot> graph_;
  const std::shared_ptr<const RelationMap> relations_;
  const std::vector<Fact> facts_;
  std::vector<FactScore> results_;
  std::vector<ScoredBy> scored_by_ = std::vector<ScoredBy>(facts_.size(), ScoredBy::kGrail);
  // A fused archive's: per fact, one score per KGE model, or none (model/fusion/fused_model.h).
  std::vector<std::vector<double>> kge_;
  const int explain_paths_;
  std::vector<std::vector<NamedPath>> paths_;  // per fact; slot i written by Extract(i)
  LinkPredictor::ScoreCallback done_;
};

// Scores a list of facts given by id with a path model (ScoreTriplet(s)): the facts that
// share a head and a relation share one query, whose single pass scores all their tails.
class PathFactJob final : public ScoringJob {
 public:
  using Fact = FactScoringJob::Fact;

  PathFactJob(std::shared_ptr<const ServedModel> model, std::shared_ptr<const GraphSnapshot> graph,
              std::shared_ptr<const RelationMap> relations, std::vector<Fact> facts,
              LinkPredictor::ScoreCallback done)
      : model_(std::move(model)),
        graph_(std::move(graph)),
        relations_(std::move(relations)),
        facts_(std::move(facts)),
        results_(facts_.size()),
        done_(std::move(done)) {
    absl::flat_hash_map<std::pair<EntityId, int32_t>, size_t> query_of;
    for (size_t i = 0; i < facts_.size(); ++i) {
      const auto key = std::make_pair(facts_[i].head, facts_[i].model_relation);
      auto [it, added] = query_of.emplace(key, queries_.size());
      if (added) queries_.push_back({key.first, key.second, {}});
      queries_[it->second].facts.push_back(i);
    }
  }

  size_t size() const override { return queries_.size(); }
  absl::StatusOr<int32_t> Extract(size_t, SubgraphExtractor&, EnclosingSubgraph*) override {
    return absl::UnimplementedError("a path model scores queries, not subgraphs");
  }
  const GrailModel* model() const override { return nullptr; }
  const PathModel* path_model() const override { return &model_->path_model(); }
  const RelationMap& relations() const override { return *relations_; }
  absl::Status ExtractQuery(size_t i, PathBatchBuilder& builder, int64_t max_nodes,
                            PathBatch* out) override {
    const PathModel& model = model_->path_model();
    // Only the facts' tails are read: the neighbourhood is what their scores depend on.
    std::vector<EntityId> tails;
    for (size_t f : queries_[i].facts) tails.push_back(facts_[f].tail);
    return builder.Add(model.Neighbourhood(graph_.get(), relations_.get(), max_nodes),
                       {queries_[i].head, queries_[i].relation, {}, std::nullopt, std::move(tails)},
                       out);
  }
  void AcceptQuery(size_t i, const PathBatch& batch, int64_t q, const PathScores& scores) override {
    const int32_t nodes = static_cast<int32_t>(batch.node_begin[q + 1] - batch.node_begin[q]);
    const int32_t edges = static_cast<int32_t>(batch.edge_begin[q + 1] - batch.edge_begin[q]);
    for (size_t f : queries_[i].facts) {
      const Fact& fact = facts_[f];
      const bool known = fact.graph_relation != kNoGraphRelation &&
                         graph_->HasFact(fact.head, fact.graph_relation, fact.tail);
      results_[f] = FactScore{scores.Of(batch, q, fact.tail), nodes, edges, known};
    }
  }
  void Accept(size_t, const FactScore&) override {}
  void Finish(absl::Status status) override {
    if (!status.ok()) return done_(std::move(status));
    std::vector<ScoredBy> scored_by(results_.size(), ScoredBy::kPath);
    done_(ScoredFacts{
        std::move(results_), std::move(scored_by), graph_->sequence(), model_->version(), {}});
  }
  size_t MemoryBytes() const override {
    return sizeof(*this) + facts_.capacity() * sizeof(Fact) +
           results_.capacity() * sizeof(FactScore) +
           queries_.capacity() * (sizeof(Query) + sizeof(size_t));
  }
  std::string Describe(size_t i) const override {
    const Query& q = queries_[i];
    // An ULTRA model's relation ids are the graph's.
    const std::string& relation = model_->open_vocabulary() ? graph_->RelationName(q.relation)
                                                            : model_->relations()[q.relation];
    return absl::StrCat("(\"", graph_->EntityName(q.head), "\", \"", relation, "\", ?)");
  }

 private:
  struct Query {
    EntityId head = 0;
    int32_t relation = 0;       // the model's
    std::vector<size_t> facts;  // indices into facts_
  };

  const std::shared_ptr<const ServedModel> model_;
  const std::shared_ptr<const GraphSnapshot> graph_;
  const std::shared_ptr<const RelationMap> relations_;
  const std::vector<Fact> facts_;
  std::vector<FactScore> results_;
  std::vector<Query> queries_;
  LinkPredictor::ScoreCallback done_;
};

// A ranked candidate; best first is: higher score, then lower id. NaN ranks last.
struct Candidate {
  float score = 0;
  EntityId id = 0;
  bool known_fact = false;
  ScoredBy scored_by = ScoredBy::kGrail;
};
bool Better(const Candidate& a, const Candidate& b) {
  const bool a_nan = std::isnan(a.score), b_nan = std::isnan(b.score);
  if (a_nan != b_nan) return b_nan;
  if (!a_nan && a.score != b.score) return a.score > b.score;
  return a.id < b.id;
}

// The best `k` candidates seen (all of them for k = 0), in O(k) memory.
class TopCandidates {
 public:
  explicit TopCandidates(uint32_t k) : k_(k) {}
  void Add(const Candidate& c) {
    if (k_ == 0) {
      all_.push_back(c);
      return;
    }
    if (heap_.size() < k_) {
      heap_.push(c);
    } else if (Better(c, heap_.top())) {
      heap_.pop();
      heap_.push(c);
    }
  }
  // Best first.
  std::vector<Candidate> TakeSorted() {
    std::vector<Candidate> out = std::move(all_);
    while (!heap_.empty()) {
      out.push_back(heap_.top());
      heap_.pop();
    }
    std::sort(out.begin(), out.end(), Better);
    return out;
  }
  size_t MemoryBytes() const { return (std::max<size_t>(k_, all_.capacity())) * sizeof(Candidate); }

 private:
  struct Worse {  // the heap's top is the worst candidate kept
    bool operator()(const Candidate& a, const Candidate& b) const { return Better(a, b); }
  };
  const uint32_t k_;
  std::priority_queue<Candidate, std::vector<Candidate>, Worse> heap_;
  std::vector<Candidate> all_;
};

// Ranks candidates for (fixed, r, ?) or (?, r, fixed): RankTails / RankHeads.
class RankingJob final : public ScoringJob {
 public:
  struct Setup {
    std::shared_ptr<const ServedModel> model;
    std::shared_ptr<const GraphSnapshot> graph;
    std::shared_ptr<const RelationMap> relations;
    ExtractionConfig extraction;
    RankLimits limits;
    EngineObserver* observer = nullptr;
    bool rank_tails = true;
    EntityId fixed = 0;
    std::string relation_name;
    RelationId graph_relation = kNoGraphRelation;
    int32_t model_relation = 0;
    std::vector<std::string> candidates;  // empty: every entity
    uint32_t top_k = 0;
    bool filter_known_facts = false;
    // A path model: one query, (fixed, r, ?) or its inverse (fixed, r^-1, ?), whose pass
    // scores every candidate; entities beyond its neighbourhood share its far score.
    bool path = false;
    // A fused archive (its GraIL model is model->model()), or null.
    const FusedModel* fused = nullptr;
  };

  RankingJob(Setup setup, LinkPredictor::RankCallback done)
      : s_(std::move(setup)), top_(KeptAtMost(s_)), done_(std::move(done)) {}

  absl::Status Prepare() override {
    const GraphSnapshot& graph = *s_.graph;
    explicit_candidates_ = !s_.candidates.empty();
    if (s_.path && !explicit_candidates_) {
      // The pass decides which candidates are near (AcceptQuery); the count is known now.
      if (s_.top_k == 0 && graph.num_live_entities() - 1 > s_.limits.max_rank_results) {
        return Refuse(
            "max_rank_results",
            absl::StrCat("ranking every entity would return ", graph.num_live_entities() - 1,
                         " candidates; the limit is ", s_.limits.max_rank_results,
                         " (--max-rank-results); set options.top_k"));
      }
      return absl::OkStatus();
    }
    if (!s_.candidates.empty()) {
      // An explicit list: every candidate is scored on its own subgraph.
      absl::flat_hash_set<EntityId> seen;
      for (const std::string& name : s_.candidates) {
        absl::StatusOr<EntityId> id = FindEntity(graph, name);
        if (!id.ok()) return id.status();
        if (*id != s_.fixed && seen.insert(*id).second) near_.push_back(*id);
      }
      s_.candidates = std::vector<std::string>();  // not needed any more
      if (near_.size() > s_.limits.max_rank_subgraphs) {
        return Refuse("max_rank_subgraphs",
                      absl::StrCat("ranking ", near_.size(), " candidates; the limit is ",
                                   s_.limits.max_rank_subgraphs,
                                   " (--max-rank-subgraphs); split the list over several calls"));
      }
    } else if (s_.extraction.enclosing) {
      absl::Status status = SplitNearAndFar();
      if (!status.ok()) return status;
    } else {
      // The "no enclosing" ablation keeps both neighbourhoods whole: no candidate shares.
      if (graph.num_live_entities() - 1 > s_.limits.max_rank_subgraphs) {
        return Refuse("max_rank_subgraphs",
                      absl::StrCat("ranking every entity with a model without enclosing "
                                   "subgraphs scores ",
                                   graph.num_live_entities() - 1,
                                   " candidates on their own subgraphs; "
                                   "the limit is ",
                                   s_.limits.max_rank_subgraphs,
                                   " (--max-rank-subgraphs); pass options.candidates to rank a "
                                   "list of entities instead"));
      }
      for (EntityId e = 0; e < graph.num_entities(); ++e) {
        if (e != s_.fixed && !graph.IsRemoved(e)) near_.push_back(e);
      }
    }
    if (s_.filter_known_facts && s_.graph_relation != kNoGraphRelation) {
      size_t write = 0;
      for (EntityId c : near_) {
        if (graph.HasFact(Head(c), s_.graph_relation, Tail(c))) {
          ++filtered_;
        } else {
          near_[write++] = c;
        }
      }
      near_.resize(write);
    }
    if (s_.top_k == 0 && near_.size() + far_count_ > s_.limits.max_rank_results) {
      return Refuse("max_rank_results",
                    absl::StrCat("ranking every entity would return ", near_.size() + far_count_,
                                 " candidates; the limit is ", s_.limits.max_rank_results,
                                 " (--max-rank-results); set options.top_k"));
    }
    if (s_.fused != nullptr) {
      absl::Status status = PrepareFusion();
      if (!status.ok()) return status;
    }
    if (!s_.path) {
      fixed_neighbourhood_.emplace(TargetNeighbourhood::Expand(graph, s_.fixed, s_.extraction));
    }
    return absl::OkStatus();
  }

  size_t size() const override {
    if (s_.path) return 1;
    return near_.size() + (far_count_ > 0 ? 1 : 0);
  }

  const PathModel* path_model() const override {
    return s_.path ? &s_.model->path_model() : nullptr;
  }

  absl::Status ExtractQuery(size_t, PathBatchBuilder& builder, int64_t max_nodes,
                            PathBatch* out) override {
    const PathModel& model = s_.model->path_model();
    const PathNeighbourhoodSpec spec =
        model.Neighbourhood(s_.graph.get(), s_.relations.get(), max_nodes);
    const int32_t relation = s_.model_relation + (s_.rank_tails ? 0 : spec.num_relations);
    return builder.Add(spec, {s_.fixed, relation, {}, std::nullopt}, out);
  }

  void AcceptQuery(size_t, const PathBatch& batch, int64_t q, const PathScores& scores) override {
    const GraphSnapshot& graph = *s_.graph;
    auto known = [&](EntityId c) {
      return s_.graph_relation != kNoGraphRelation &&
             graph.HasFact(Head(c), s_.graph_relation, Tail(c));
    };
    if (explicit_candidates_) {
      for (EntityId c : near_) top_.Add({scores.Of(batch, q, c), c, known(c), ScoredBy::kPath});
      return;
    }
    // Every entity of the neighbourhood is near and scored on its own; every other live
    // entity is far (no path of the model's length reaches it: not a known answer either).
    for (int64_t node = batch.node_begin[q]; node < batch.node_begin[q + 1]; ++node) {
      const EntityId c = static_cast<EntityId>(batch.node_entity[node]);
      if (c == s_.fixed || graph.IsRemoved(c)) continue;  // a whole-graph pass lists them
      not_far_.push_back(c);
      const bool is_known = known(c);
      if (s_.filter_known_facts && is_known) {
        ++filtered_;
        continue;
      }
      near_.push_back(c);
      top_.Add({scores.node[node], c, is_known, ScoredBy::kPath});
    }
    std::sort(not_far_.begin(), not_far_.end());
    far_count_ = graph.num_live_entities() - 1 - not_far_.size();
    shared_score_ = scores.far[q];
  }

  absl::StatusOr<int32_t> Extract(size_t i, SubgraphExtractor& extractor,
                                  EnclosingSubgraph* out) override {
    const EntityId c = CandidateAt(i);
    absl::Status status = extractor.Extract(*s_.graph, Head(c), s_.graph_relation, Tail(c),
                                            *fixed_neighbourhood_, out);
    if (!status.ok()) return status;
    AttachNodeFeatures(s_.model->model(), EntityNames(*s_.graph), out);
    return s_.model_relation;
  }

  const GrailModel* model() const override { return s_.path ? nullptr : &s_.model->model(); }
  const RelationMap& relations() const override { return *s_.relations; }

  void Accept(size_t i, const FactScore& score) override {
    if (i >= near_.size()) {
      shared_score_ = score.score;  // GraIL's; Result() passes it through the classifier
    } else if (s_.fused == nullptr) {
      top_.Add({score.score, near_[i], score.known_fact});
    } else {
      top_.Add({s_.fused->Combine(score.score, near_kge_[i]), near_[i], score.known_fact,
                near_kge_[i].empty() ? ScoredBy::kGrail : ScoredBy::kFused});
    }
  }

  void Finish(absl::Status status) override {
    if (!status.ok()) return done_(std::move(status));
    done_(Result());
  }

  size_t MemoryBytes() const override {
    size_t bytes = sizeof(*this) + near_.capacity() * sizeof(EntityId) +
                   not_far_.capacity() * sizeof(EntityId) + top_.MemoryBytes() +
                   far_fused_.capacity() * sizeof(EntityId) +
                   far_best_.capacity() * sizeof(FarFused);
    for (const std::vector<double>& row : near_kge_) bytes += sizeof(row) + row.capacity() * 8;
    for (const FarFused& f : far_best_) bytes += f.kge.capacity() * 8;
    for (const std::string& c : s_.candidates) bytes += sizeof(std::string) + c.capacity();
    if (fixed_neighbourhood_) bytes += fixed_neighbourhood_->MemoryBytes();
    return bytes;
  }

  std::string Describe(size_t i) const override {
    if (s_.path) return Describe();  // one query: no candidate of its own
    const std::string fixed = absl::StrCat("\"", s_.graph->EntityName(s_.fixed), "\"");
    const std::string other = absl::StrCat("\"", s_.graph->EntityName(CandidateAt(i)), "\"");
    return absl::StrCat("(", s_.rank_tails ? fixed : other, ", \"", s_.relation_name, "\", ",
                        s_.rank_tails ? other : fixed, ")");
  }

 private:
  // How many candidates the ranking keeps: top_k, but never more than there are candidates
  // (a top_k of 10^8 over a few entities holds, and reserves at admission, a few entries).
  static uint32_t KeptAtMost(const Setup& s) {
    if (s.top_k == 0) return 0;  // all of them
    const uint64_t candidates =
        s.candidates.empty() ? s.graph->num_live_entities() : s.candidates.size();
    return static_cast<uint32_t>(std::max<uint64_t>(1, std::min<uint64_t>(s.top_k, candidates)));
  }
  // The query itself, for errors that are not about one candidate.
  std::string Describe() const {
    const std::string fixed = absl::StrCat("\"", s_.graph->EntityName(s_.fixed), "\"");
    return s_.rank_tails ? absl::StrCat("(", fixed, ", \"", s_.relation_name, "\", ?)")
                         : absl::StrCat("(?, \"", s_.relation_name, "\", ", fixed, ")");
  }
  EntityId Head(EntityId candidate) const { return s_.rank_tails ? s_.fixed : candidate; }
  EntityId Tail(EntityId candidate) const { return s_.rank_tails ? candidate : s_.fixed; }
  EntityId CandidateAt(size_t i) const { return i < near_.size() ? near_[i] : representative_; }

  absl::Status Refuse(absl::string_view limit, std::string message) const {
    if (s_.observer != nullptr) s_.observer->OnCallRejected(limit);
    return absl::ResourceExhaustedError(std::move(message));
  }

  // Every entity but the fixed one is a candidate. Those within k + 1 hops of the fixed
  // entity, and those with self-loops, are "near": each is scored on its own subgraph.
  // Every other ("far") candidate has the same trivial enclosing subgraph, so the far ones
  // share the score of one of them, the representative.
  absl::Status SplitNearAndFar() {
    const GraphSnapshot& graph = *s_.graph;
    const int reach = TrivialSubgraphDistance(s_.extraction) - 1;
    std::optional<std::vector<EntityId>> within =
        EntitiesWithinHops(graph, s_.fixed, reach, size_t{s_.limits.max_rank_subgraphs} + 1);
    if (!within.has_value()) {
      return Refuse(
          "max_rank_subgraphs",
          absl::StrCat("ranking every entity would score more than ", s_.limits.max_rank_subgraphs,
                       " candidates on their own enclosing subgraphs (the entities "
                       "within ",
                       reach, " hops of \"", graph.EntityName(s_.fixed), "\"); the limit is ",
                       s_.limits.max_rank_subgraphs,
                       " (--max-rank-subgraphs); pass options.candidates to rank a "
                       "list of entities instead"));
    }
    const absl::Span<const EntityId> loops = graph.SelfLoopEntities();
    not_far_.reserve(within->size() + loops.size());
    std::set_union(within->begin(), within->end(), loops.begin(), loops.end(),
                   std::back_inserter(not_far_));
    not_far_.erase(std::remove(not_far_.begin(), not_far_.end(), s_.fixed), not_far_.end());
    if (not_far_.size() > s_.limits.max_rank_subgraphs) {
      return Refuse("max_rank_subgraphs",
                    absl::StrCat("ranking every entity would score ", not_far_.size(),
                                 " candidates on their own enclosing subgraphs (near \"",
                                 graph.EntityName(s_.fixed),
                                 "\" or with self-loops); the limit "
                                 "is ",
                                 s_.limits.max_rank_subgraphs,
                                 " (--max-rank-subgraphs); pass options.candidates to rank a "
                                 "list of entities instead"));
    }
    absl::Status featured = AddFarCandidatesWithNodeFeatures();
    if (!featured.ok()) return featured;
    near_ = not_far_;
    // Removed entities have no facts, so none is near; they are not candidates at all.
    far_count_ = graph.num_live_entities() - 1 - not_far_.size();
    if (far_count_ > 0) representative_ = FarCursor(this).Next();
    return absl::OkStatus();
  }

  // Early fusion: a far candidate's trivial subgraph holds its own node features, so only the
  // far candidates without features (the model's zero row) share one score. Those with
  // features join not_far_, each scored on its own trivial subgraph: one pass over the model's
  // feature vocabulary, and at most max_rank_subgraphs in all.
  absl::Status AddFarCandidatesWithNodeFeatures() {
    const GrailModel& model = s_.model->model();
    if (model.config().node_feature_dim == 0) return absl::OkStatus();
    const GraphSnapshot& graph = *s_.graph;
    std::vector<EntityId> featured;
    for (const std::string& name : model.node_feature_entities()) {
      const std::optional<EntityId> id = graph.FindEntity(name);  // live entities only
      if (!id || *id == s_.fixed || std::binary_search(not_far_.begin(), not_far_.end(), *id)) {
        continue;
      }
      featured.push_back(*id);
      if (not_far_.size() + featured.size() > s_.limits.max_rank_subgraphs) {
        return Refuse("max_rank_subgraphs",
                      absl::StrCat("ranking every entity would score more than ",
                                   s_.limits.max_rank_subgraphs,
                                   " candidates on their own subgraphs: the model reads node "
                                   "features (early fusion), so every candidate with features "
                                   "is scored apart; the limit is ",
                                   s_.limits.max_rank_subgraphs,
                                   " (--max-rank-subgraphs); pass options.candidates to rank a "
                                   "list of entities instead"));
      }
    }
    std::sort(featured.begin(), featured.end());
    std::vector<EntityId> merged;
    merged.reserve(not_far_.size() + featured.size());
    std::merge(not_far_.begin(), not_far_.end(), featured.begin(), featured.end(),
               std::back_inserter(merged));
    not_far_ = std::move(merged);
    return absl::OkStatus();
  }

  // Walks the far candidates that share one score, in id order: every entity not in
  // not_far_, not removed, not the fixed one and not scored apart by a fused archive
  // (far_fused_). O(top_k + not_far_ + removed + far_fused_) for the first top_k.
  class FarCursor {
   public:
    explicit FarCursor(const RankingJob* job)
        : job_(job), removed_(job->s_.graph->RemovedEntities()) {}
    EntityId Next() {
      for (;; ++id_) {
        if (id_ == job_->s_.fixed || Skip(job_->not_far_, id_, skip_) ||
            Skip(removed_, id_, skip_removed_) || Skip(job_->far_fused_, id_, skip_fused_)) {
          continue;
        }
        return id_++;
      }
    }

   private:
    // Whether the sorted `ids` hold `id`, advancing `*at` past the ids below it (ids are asked
    // in increasing order).
    static bool Skip(absl::Span<const EntityId> ids, EntityId id, size_t& at) {
      while (at < ids.size() && ids[at] < id) ++at;
      return at < ids.size() && ids[at] == id;
    }

    const RankingJob* job_;
    const absl::Span<const EntityId> removed_;
    EntityId id_ = 0;
    size_t skip_ = 0;
    size_t skip_removed_ = 0;
    size_t skip_fused_ = 0;
  };

  // A fused archive's part of a ranking (Prepare, after the near and far candidates are
  // known): the KGE scores of the near candidates, and, ranking every entity, of the far
  // candidates that every KGE model knows. Those far ones all get the shared GraIL score, so
  // they rank by their KGE part alone: only the best top_k of them by it are kept (their
  // final scores come in Result(), once the shared score is known), and they leave the
  // group that shares one score. One KGE pass per member ranks every entity it knows; the
  // cost is that of its vocabulary, not of the graph.
  absl::Status PrepareFusion() {
    const FusedModel& fused = *s_.fused;
    const GraphSnapshot& graph = *s_.graph;
    const absl::string_view fixed = graph.EntityName(s_.fixed);
    std::vector<FactNames> names;
    names.reserve(near_.size());
    for (EntityId c : near_) {
      const absl::string_view other = graph.EntityName(c);
      names.push_back(s_.rank_tails ? FactNames{fixed, s_.relation_name, other}
                                    : FactNames{other, s_.relation_name, fixed});
    }
    absl::StatusOr<std::vector<std::vector<double>>> near = fused.KgeScores(names);
    if (!near.ok()) return near.status();
    near_kge_ = *std::move(near);
    if (explicit_candidates_ || far_count_ == 0) return absl::OkStatus();

    const size_t members = fused.kge().size();
    std::vector<std::vector<float>> all(members);  // [member][its entity id]
    for (size_t m = 0; m < members; ++m) {
      const std::optional<uint32_t> anchor = fused.MemberEntity(m, fixed);
      const std::optional<uint32_t> relation = fused.MemberRelation(m, s_.relation_name);
      if (!anchor || !relation) return absl::OkStatus();  // no far fact is known to all
      absl::StatusOr<std::vector<float>> scores =
          fused.kge()[m]->ScoreAll({KgeQuery{*anchor, *relation, !s_.rank_tails}});
      if (!scores.ok()) return scores.status();
      all[m] = *std::move(scores);
    }
    const std::vector<double>& weights = fused.fused_classifier().weights;
    const KgeModel& first = *fused.kge()[0];
    // Best first: higher KGE part, then lower id. As a heap's order, it keeps the worst on top.
    auto better = [](const FarFused& a, const FarFused& b) {
      return a.kge_part != b.kge_part ? a.kge_part > b.kge_part : a.id < b.id;
    };
    for (uint32_t e = 0; e < first.num_entities(); ++e) {
      const std::string& name = first.entities()[e];
      const std::optional<EntityId> id = graph.FindEntity(name);  // live entities only
      if (!id || *id == s_.fixed || std::binary_search(not_far_.begin(), not_far_.end(), *id)) {
        continue;
      }
      FarFused candidate{*id, 0, std::vector<double>(members)};
      bool known = true;
      for (size_t m = 0; m < members && known; ++m) {
        const std::optional<uint32_t> own = m == 0 ? e : fused.MemberEntity(m, name);
        if (!own) {
          known = false;
        } else {
          candidate.kge[m] = all[m][*own];
          candidate.kge_part += weights[1 + m] * candidate.kge[m];
        }
      }
      if (!known) continue;
      far_fused_.push_back(*id);
      if (s_.top_k == 0 || far_best_.size() < s_.top_k) {
        far_best_.push_back(std::move(candidate));
        if (s_.top_k != 0) std::push_heap(far_best_.begin(), far_best_.end(), better);
      } else if (better(candidate, far_best_.front())) {
        std::pop_heap(far_best_.begin(), far_best_.end(), better);
        far_best_.back() = std::move(candidate);
        std::push_heap(far_best_.begin(), far_best_.end(), better);
      }
    }
    std::sort(far_fused_.begin(), far_fused_.end());
    return absl::OkStatus();
  }

  Ranking Result() {
    const GraphSnapshot& graph = *s_.graph;
    Ranking ranking;
    ranking.graph_sequence = graph.sequence();
    ranking.model_version = s_.model->version();
    ranking.candidates_scored = static_cast<uint32_t>(near_.size() + far_count_);
    ranking.candidates_filtered = filtered_;
    const uint64_t far_shared = far_count_ - far_fused_.size();
    ranking.candidates_shared_score = static_cast<uint32_t>(far_shared);
    ScoredBy far_scored_by = s_.path ? ScoredBy::kPath : ScoredBy::kGrail;
    float far_score = shared_score_;
    if (s_.fused != nullptr) {
      far_score = s_.fused->Combine(shared_score_, {});
      for (const FarFused& f : far_best_) {
        top_.Add({s_.fused->Combine(shared_score_, f.kge), f.id, false, ScoredBy::kFused});
      }
    }
    const std::vector<Candidate> best = top_.TakeSorted();
    const size_t total = best.size() + far_shared;
    const size_t keep = s_.top_k == 0 ? total : std::min<size_t>(s_.top_k, total);
    ranking.ranked.reserve(keep);
    // Merge the near candidates (sorted) with the far ones (one score, id order).
    FarCursor far(this);
    uint64_t far_left = far_shared;
    Candidate next_far{far_score, 0, false, far_scored_by};
    bool has_far = false;  // next_far holds the next far candidate not yet ranked
    size_t b = 0;
    while (ranking.ranked.size() < keep) {
      if (!has_far && far_left > 0) {
        next_far.id = far.Next();
        has_far = true;
        --far_left;
      }
      Candidate c;
      if (b < best.size() && (!has_far || Better(best[b], next_far))) {
        c = best[b++];
      } else {
        c = next_far;
        has_far = false;
      }
      uint32_t rank = static_cast<uint32_t>(ranking.ranked.size() + 1);
      if (!ranking.ranked.empty() && ranking.ranked.back().score == c.score) {
        rank = ranking.ranked.back().rank;
      }
      ranking.ranked.push_back(
          RankedEntity{graph.EntityName(c.id), c.score, rank, c.known_fact, c.scored_by});
    }
    return ranking;
  }

  Setup s_;
  // A far candidate that a fused archive's KGE models all know: its scores, and the KGE part of
  // the fused classifier's sum that orders it among them.
  struct FarFused {
    EntityId id = 0;
    double kge_part = 0;
    std::vector<double> kge;  // one per KGE model
  };

  std::vector<EntityId> near_;     // candidates scored on their own subgraphs
  std::vector<EntityId> not_far_;  // sorted: candidates that do not share the trivial score
  uint64_t far_count_ = 0;         // far candidates, far_fused_ included
  // A fused archive's: the near candidates' KGE scores (by position in near_; empty rows for
  // those some KGE model does not know), the far candidates scored apart (sorted), and the
  // best top_k of those (all of them for top_k 0).
  std::vector<std::vector<double>> near_kge_;
  std::vector<EntityId> far_fused_;
  std::vector<FarFused> far_best_;
  EntityId representative_ = 0;  // the far candidate whose score all far ones share
  uint32_t filtered_ = 0;
  std::optional<TargetNeighbourhood> fixed_neighbourhood_;
  TopCandidates top_;
  float shared_score_ = 0;  // the far candidates' GraIL (or path) score
  bool explicit_candidates_ = false;
  LinkPredictor::RankCallback done_;
};

}  // namespace

LinkPredictor::LinkPredictor(std::shared_ptr<const ServedModel> model, TripleStore& store,
                             InferenceEngine& engine, const RankLimits& limits)
    : store_(store), engine_(engine), limits_(limits), model_(std::move(model)) {}

std::shared_ptr<const ServedModel> LinkPredictor::served_model() const {
  std::lock_guard<std::mutex> lock(model_mu_);
  return model_;
}

void LinkPredictor::SetModel(std::shared_ptr<const ServedModel> model) {
  std::lock_guard<std::mutex> lock(model_mu_);
  model_.swap(model);
  // The old model is released outside the lock (below), or by its last call.
}

LinkPredictor::View LinkPredictor::CurrentView() const {
  View view;
  view.model = served_model();
  view.snapshot = store_.Snapshot();
  view.relations = view.model->RelationsOf(*view.snapshot);
  return view;
}

void LinkPredictor::Score(std::vector<NamedTriple> facts, std::shared_ptr<CallControl> control,
                          ScoreCallback done, int explain_paths) const {
  const View view = CurrentView();
  std::vector<FactScoringJob::Fact> scoring(facts.size());
  for (size_t i = 0; i < facts.size(); ++i) {
    const NamedTriple& f = facts[i];
    absl::StatusOr<int32_t> model_relation = view.model->RelationId(f.relation, *view.snapshot);
    if (!model_relation.ok()) return done(model_relation.status());
    absl::StatusOr<EntityId> head = FindEntity(*view.snapshot, f.head);
    if (!head.ok()) return done(head.status());
    absl::StatusOr<EntityId> tail = FindEntity(*view.snapshot, f.tail);
    if (!tail.ok()) return done(tail.status());
    if (*head == *tail) {
      return done(absl::InvalidArgumentError(absl::StrCat(
          "head and tail are the same entity (\"", f.head, "\"); GraIL scores pairs of entities")));
    }
    const std::optional<RelationId> graph_relation = view.snapshot->FindRelation(f.relation);
    scoring[i] = FactScoringJob::Fact{*head, graph_relation.value_or(kNoGraphRelation), *tail,
                                      *model_relation};
  }
  if (view.model->family() == ModelFamily::kPath) {
    if (explain_paths > 0) {
      return done(absl::InvalidArgumentError(
          "explanations are the paths of GraIL's enclosing subgraphs; the served model is a "
          "path-family model, which has none"));
    }
    auto job = std::make_shared<PathFactJob>(view.model, view.snapshot, view.relations,
                                             std::move(scoring), std::move(done));
    const size_t queries = job->size();
    return engine_.Submit(std::move(job), std::move(control), queries);
  }
  const size_t size = scoring.size();
  engine_.Submit(
      std::make_shared<FactScoringJob>(view.model, view.snapshot, view.relations,
                                       std::move(scoring), explain_paths, std::move(done)),
      std::move(control), size);
}

void LinkPredictor::Rank(RankQuery query, std::shared_ptr<CallControl> control,
                         RankCallback done) const {
  const View view = CurrentView();
  absl::StatusOr<int32_t> model_relation = view.model->RelationId(query.relation, *view.snapshot);
  if (!model_relation.ok()) return done(model_relation.status());
  absl::StatusOr<EntityId> fixed = FindEntity(*view.snapshot, query.fixed);
  if (!fixed.ok()) return done(fixed.status());

  RankingJob::Setup setup;
  setup.model = view.model;
  setup.graph = view.snapshot;
  setup.relations = view.relations;
  setup.path = view.model->family() == ModelFamily::kPath;
  setup.fused = view.model->fused();
  if (!setup.path) setup.extraction = view.model->model().config().extraction();
  setup.limits = limits_;
  setup.observer = &engine_.observer();
  setup.rank_tails = query.rank_tails;
  setup.fixed = *fixed;
  setup.relation_name = query.relation;
  setup.graph_relation = view.snapshot->FindRelation(query.relation).value_or(kNoGraphRelation);
  setup.model_relation = *model_relation;
  setup.candidates = std::move(query.candidates);
  setup.top_k = query.top_k;
  setup.filter_known_facts = query.filter_known_facts;
  // An explicit list's size is known now (an upper bound: duplicates and the fixed entity
  // drop out); a ranking over every entity learns its size in Prepare().
  const size_t known_size = setup.path ? 1 : setup.candidates.size();
  engine_.Submit(std::make_shared<RankingJob>(std::move(setup), std::move(done)),
                 std::move(control), known_size);
}

}  // namespace grail
