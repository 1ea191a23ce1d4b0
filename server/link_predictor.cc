#include "server/link_predictor.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace grail {

LinkPredictor::LinkPredictor(const GrailModel& model, TripleStore& store, InferenceEngine& engine)
    : model_(model), store_(store), engine_(engine) {
  for (size_t m = 0; m < model_.relations().size(); ++m) {
    model_relations_.emplace(model_.relations()[m], static_cast<int32_t>(m));
  }
}

LinkPredictor::View LinkPredictor::CurrentView() const {
  View view;
  view.snapshot = store_.Snapshot();
  std::lock_guard<std::mutex> lock(relation_map_mu_);
  if (relation_map_ == nullptr || relation_map_->size() < view.snapshot->num_relations()) {
    relation_map_ = std::make_shared<const RelationMap>(
        MapRelationsByName(view.snapshot->relation_names(), model_.relations()));
  }
  view.relations = relation_map_;
  return view;
}

absl::StatusOr<int32_t> LinkPredictor::ModelRelation(const std::string& relation) const {
  auto it = model_relations_.find(relation);
  if (it == model_relations_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("relation \"", relation, "\" is not in the model's vocabulary (",
                     model_relations_.size(), " relations; GetStats lists them)"));
  }
  return it->second;
}

absl::StatusOr<EntityId> LinkPredictor::FindEntity(const GraphSnapshot& snapshot,
                                                   const std::string& name) const {
  std::optional<EntityId> id = snapshot.FindEntity(name);
  if (!id) return absl::NotFoundError(absl::StrCat("entity \"", name, "\" is not in the graph"));
  return *id;
}

absl::StatusOr<ScoredFacts> LinkPredictor::Score(absl::Span<const NamedTriple> facts,
                                                 const Cancellation& cancellation) const {
  const View view = CurrentView();
  std::vector<ScoringFact> scoring(facts.size());
  for (size_t i = 0; i < facts.size(); ++i) {
    const NamedTriple& f = facts[i];
    absl::StatusOr<int32_t> model_relation = ModelRelation(f.relation);
    if (!model_relation.ok()) return model_relation.status();
    absl::StatusOr<EntityId> head = FindEntity(*view.snapshot, f.head);
    if (!head.ok()) return head.status();
    absl::StatusOr<EntityId> tail = FindEntity(*view.snapshot, f.tail);
    if (!tail.ok()) return tail.status();
    if (*head == *tail) {
      return absl::InvalidArgumentError(absl::StrCat(
          "head and tail are the same entity (\"", f.head, "\"); GraIL scores pairs of entities"));
    }
    const std::optional<RelationId> graph_relation = view.snapshot->FindRelation(f.relation);
    scoring[i] =
        ScoringFact{*head, graph_relation.value_or(kNoGraphRelation), *tail, *model_relation};
  }
  absl::StatusOr<std::vector<FactScore>> scores =
      engine_.Score(ScoringGraph{view.snapshot, view.relations}, scoring, cancellation.cancelled,
                    cancellation.status);
  if (!scores.ok()) return scores.status();
  return ScoredFacts{*std::move(scores), view.snapshot->sequence()};
}

absl::StatusOr<Ranking> LinkPredictor::Rank(const RankQuery& query,
                                            const Cancellation& cancellation) const {
  const View view = CurrentView();
  const GraphSnapshot& graph = *view.snapshot;
  absl::StatusOr<int32_t> model_relation = ModelRelation(query.relation);
  if (!model_relation.ok()) return model_relation.status();
  absl::StatusOr<EntityId> fixed = FindEntity(graph, query.fixed);
  if (!fixed.ok()) return fixed.status();
  const RelationId graph_relation = graph.FindRelation(query.relation).value_or(kNoGraphRelation);

  std::vector<EntityId> candidates;
  if (query.candidates.empty()) {
    candidates.resize(graph.num_entities());
    std::iota(candidates.begin(), candidates.end(), EntityId{0});
  } else {
    absl::flat_hash_set<EntityId> seen;
    for (const std::string& name : query.candidates) {
      absl::StatusOr<EntityId> id = FindEntity(graph, name);
      if (!id.ok()) return id.status();
      if (seen.insert(*id).second) candidates.push_back(*id);
    }
  }

  Ranking ranking;
  ranking.graph_sequence = graph.sequence();
  std::vector<ScoringFact> scoring;
  scoring.reserve(candidates.size());
  for (EntityId c : candidates) {
    if (c == *fixed) continue;
    const EntityId head = query.rank_tails ? *fixed : c;
    const EntityId tail = query.rank_tails ? c : *fixed;
    if (query.filter_known_facts && graph_relation != kNoGraphRelation &&
        graph.HasFact(head, graph_relation, tail)) {
      ++ranking.candidates_filtered;
      continue;
    }
    scoring.push_back(ScoringFact{head, graph_relation, tail, *model_relation});
  }
  ranking.candidates_scored = static_cast<uint32_t>(scoring.size());

  absl::StatusOr<std::vector<FactScore>> scores =
      engine_.Score(ScoringGraph{view.snapshot, view.relations}, scoring, cancellation.cancelled,
                    cancellation.status);
  if (!scores.ok()) return scores.status();

  // Best first; equal scores in id order, so the answer is deterministic.
  std::vector<size_t> order(scoring.size());
  std::iota(order.begin(), order.end(), size_t{0});
  auto candidate = [&](size_t i) { return query.rank_tails ? scoring[i].tail : scoring[i].head; };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const float sa = (*scores)[a].score, sb = (*scores)[b].score;
    return sa != sb ? sa > sb : candidate(a) < candidate(b);
  });
  const size_t keep = query.top_k == 0 ? order.size() : std::min<size_t>(query.top_k, order.size());
  ranking.ranked.reserve(keep);
  for (size_t k = 0; k < keep; ++k) {
    const size_t i = order[k];
    const FactScore& s = (*scores)[i];
    uint32_t rank = static_cast<uint32_t>(k + 1);
    if (k > 0 && (*scores)[order[k - 1]].score == s.score) rank = ranking.ranked.back().rank;
    ranking.ranked.push_back(
        RankedEntity{graph.EntityName(candidate(i)), s.score, rank, s.known_fact});
  }
  return ranking;
}

}  // namespace grail
