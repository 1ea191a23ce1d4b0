#include "model/path_batch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace grail {

int64_t PathBatch::NodeOf(int64_t q, EntityId entity) const {
  const auto begin = sorted_nodes_.begin() + node_begin[q];
  const auto end = sorted_nodes_.begin() + node_begin[q + 1];
  const auto it = std::lower_bound(begin, end, std::make_pair(entity, int64_t{-1}));
  return it != end && it->first == entity ? it->second : -1;
}

void PathBatch::Clear() {
  for (std::vector<int64_t>* v : {&node_entity, &node_query, &node_dist, &edge_src, &edge_dst,
                                  &edge_relation, &source_index, &query_relation, &node_begin}) {
    v->clear();
  }
  sorted_nodes_.clear();
}

PathBatchBuilder::PathBatchBuilder(const GraphView& graph, const RelationMap& relations,
                                   int32_t num_relations, int radius, int64_t max_nodes)
    : graph_(graph),
      relations_(relations),
      num_relations_(num_relations),
      radius_(radius),
      max_nodes_(max_nodes),
      local_(graph.num_entities(), -1) {}

int32_t PathBatchBuilder::ModelRelation(RelationId r) const {
  if (relations_.empty()) return static_cast<int32_t>(r) < num_relations_ ? r : -1;
  return r < relations_.size() ? relations_[r] : -1;
}

bool PathBatchBuilder::Hidden(const PathQuery& q, EntityId a, RelationId r, EntityId b) const {
  if (a != q.source && b != q.source) return false;
  if (q.hidden_fact && q.hidden_fact->head == a && q.hidden_fact->relation == r &&
      q.hidden_fact->tail == b) {
    return true;
  }
  const EntityId other = a == q.source ? b : a;
  return std::find(q.unlinked.begin(), q.unlinked.end(), other) != q.unlinked.end();
}

absl::Status PathBatchBuilder::Add(const PathQuery& q, PathBatch* batch) {
  if (q.source >= graph_.num_entities()) {
    return absl::InvalidArgumentError(
        absl::StrCat("entity id ", q.source, " is outside the graph's ", graph_.num_entities()));
  }
  if (q.relation < 0 || q.relation >= 2 * num_relations_) {
    return absl::InvalidArgumentError(absl::StrCat("query relation ", q.relation,
                                                   " is outside the model's 2 x ", num_relations_));
  }
  // Breadth-first search from the source over facts in both directions.
  nodes_.clear();
  std::vector<int64_t> dist;
  nodes_.push_back(q.source);
  dist.push_back(0);
  local_[q.source] = 0;
  absl::Status status;
  for (size_t i = 0; i < nodes_.size() && status.ok(); ++i) {
    const EntityId u = nodes_[i];
    if (dist[i] >= radius_) break;  // breadth-first: every later node is as far
    auto visit = [&](absl::Span<const Neighbor> edges, bool out) {
      for (const Neighbor& n : edges) {
        if (local_[n.entity] >= 0 || ModelRelation(n.relation) < 0) continue;
        if (out ? Hidden(q, u, n.relation, n.entity) : Hidden(q, n.entity, n.relation, u)) continue;
        if (max_nodes_ > 0 && static_cast<int64_t>(nodes_.size()) >= max_nodes_) {
          status = absl::ResourceExhaustedError(
              absl::StrCat("the neighbourhood of entity ", q.source, " within ", radius_,
                           " hops exceeds the limit of ", max_nodes_, " entities"));
          return;
        }
        local_[n.entity] = static_cast<int32_t>(nodes_.size());
        nodes_.push_back(n.entity);
        dist.push_back(dist[i] + 1);
      }
    };
    visit(graph_.OutEdges(u), true);
    if (status.ok()) visit(graph_.InEdges(u), false);
  }
  if (status.ok()) {
    const int64_t offset = batch->num_nodes();
    const int64_t query = batch->num_queries();
    if (batch->node_begin.empty()) batch->node_begin.push_back(0);
    for (size_t i = 0; i < nodes_.size(); ++i) {
      batch->node_entity.push_back(nodes_[i]);
      batch->node_query.push_back(query);
      batch->node_dist.push_back(dist[i]);
      batch->sorted_nodes_.emplace_back(nodes_[i], offset + static_cast<int64_t>(i));
    }
    std::sort(batch->sorted_nodes_.begin() + offset, batch->sorted_nodes_.end());
    batch->node_begin.push_back(batch->num_nodes());
    batch->source_index.push_back(offset);
    batch->query_relation.push_back(q.relation);
    // Every fact among the nodes, once from its head's out-edges, in both directions.
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const EntityId u = nodes_[i];
      for (const Neighbor& n : graph_.OutEdges(u)) {
        const int32_t r = ModelRelation(n.relation);
        if (local_[n.entity] < 0 || r < 0 || Hidden(q, u, n.relation, n.entity)) continue;
        const int64_t a = offset + static_cast<int64_t>(i);
        const int64_t b = offset + local_[n.entity];
        batch->edge_src.push_back(a);
        batch->edge_dst.push_back(b);
        batch->edge_relation.push_back(r);
        batch->edge_src.push_back(b);
        batch->edge_dst.push_back(a);
        batch->edge_relation.push_back(r + num_relations_);
      }
    }
  }
  for (EntityId e : nodes_) local_[e] = -1;
  return status;
}

}  // namespace grail
