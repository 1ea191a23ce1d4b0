#include "model/path/path_batch.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace grail {

int64_t PathBatch::NodeOf(int64_t q, EntityId entity) const {
  const auto begin = sorted_nodes_.begin() + node_begin[q];
  const auto end = sorted_nodes_.begin() + node_begin[q + 1];
  const auto it = std::lower_bound(begin, end, std::make_pair(entity, int64_t{-1}));
  return it != end && it->first == entity ? it->second : -1;
}

void PathBatch::Clear() {
  for (std::vector<int64_t>* v :
       {&node_entity, &node_query, &node_dist, &edge_src, &edge_dst, &edge_relation, &shared_entity,
        &node_shared, &source_index, &query_relation, &node_begin, &edge_begin, &query_pruned,
        &layer_nodes}) {
    v->clear();
  }
  columns = 1;
  graph_relations = 0;
  side_pairs = nullptr;
  sorted_nodes_.clear();
}

void PathBatch::Append(const PathBatch& other) {
  const int64_t nodes = num_nodes(), queries = num_queries(), edges = num_edges();
  if (node_begin.empty()) node_begin.push_back(0);
  if (edge_begin.empty()) edge_begin.push_back(0);
  for (size_t q = 1; q < other.edge_begin.size(); ++q) {
    edge_begin.push_back(other.edge_begin[q] + edges);
  }
  node_entity.insert(node_entity.end(), other.node_entity.begin(), other.node_entity.end());
  node_dist.insert(node_dist.end(), other.node_dist.begin(), other.node_dist.end());
  for (int64_t q : other.node_query) node_query.push_back(q + queries);
  for (int64_t v : other.edge_src) edge_src.push_back(v + nodes);
  for (int64_t v : other.edge_dst) edge_dst.push_back(v + nodes);
  edge_relation.insert(edge_relation.end(), other.edge_relation.begin(), other.edge_relation.end());
  for (int64_t v : other.source_index) source_index.push_back(v + nodes);
  query_relation.insert(query_relation.end(), other.query_relation.begin(),
                        other.query_relation.end());
  query_pruned.insert(query_pruned.end(), other.query_pruned.begin(), other.query_pruned.end());
  layer_nodes.resize(queries, 0);  // a batch made by hand may have none
  for (int64_t q = 0; q < other.num_queries(); ++q) layer_nodes.push_back(other.LayerNodes(q));
  for (size_t q = 1; q < other.node_begin.size(); ++q) {
    node_begin.push_back(other.node_begin[q] + nodes);
  }
  for (const auto& [entity, node] : other.sorted_nodes_) {
    sorted_nodes_.emplace_back(entity, node + nodes);
  }
  if (side_pairs == nullptr) {
    side_pairs = other.side_pairs;
    graph_relations = other.graph_relations;
  }
}

int64_t PathBatch::AppendOrShare(const PathBatch& one) {
  const int64_t nodes = one.num_nodes(), edges = one.num_edges();
  for (int64_t q = 0; q < num_queries(); ++q) {
    const int64_t node0 = node_begin[q], edge0 = edge_begin[q];
    if (query_relation[q] != one.query_relation[0] || LayerNodes(q) != one.LayerNodes(0) ||
        node_begin[q + 1] - node0 != nodes || edge_begin[q + 1] - edge0 != edges ||
        node_entity[node0] != one.node_entity[0]) {
      continue;
    }
    auto same = [&](const std::vector<int64_t>& mine, int64_t at,
                    const std::vector<int64_t>& theirs, int64_t shift) {
      for (size_t i = 0; i < theirs.size(); ++i) {
        if (mine[at + i] != theirs[i] + shift) return false;
      }
      return true;
    };
    if (same(node_entity, node0, one.node_entity, 0) && same(node_dist, node0, one.node_dist, 0) &&
        same(edge_src, edge0, one.edge_src, node0) && same(edge_dst, edge0, one.edge_dst, node0) &&
        same(edge_relation, edge0, one.edge_relation, 0)) {
      return q;
    }
  }
  Append(one);
  return num_queries() - 1;
}

size_t PathBatch::MemoryBytes() const {
  size_t bytes = sorted_nodes_.capacity() * sizeof(sorted_nodes_[0]);
  for (const std::vector<int64_t>* v :
       {&node_entity, &node_query, &node_dist, &edge_src, &edge_dst, &edge_relation, &shared_entity,
        &node_shared, &source_index, &query_relation, &node_begin, &edge_begin, &query_pruned,
        &layer_nodes}) {
    bytes += v->capacity() * sizeof(int64_t);
  }
  return bytes;
}

PathBatchBuilder::PathBatchBuilder(const GraphView& graph, const RelationMap& relations,
                                   int32_t num_relations, int radius, int64_t max_nodes)
    : bound_relations_(relations) {
  bound_.graph = &graph;
  bound_.relations = &bound_relations_;
  bound_.num_relations = num_relations;
  bound_.radius = radius;
  bound_.max_nodes = max_nodes;
}

absl::Status PathBatchBuilder::Add(const PathQuery& q, PathBatch* batch) {
  return Add(bound_, q, batch);
}

absl::Status PathBatchBuilder::Build(absl::Span<const PathQuery> queries, PathBatch* batch) {
  return Build(bound_, queries, batch);
}

namespace {

int32_t ModelRelation(const PathNeighbourhoodSpec& spec, RelationId r) {
  const int32_t m = (*spec.relations)(r);
  return m < spec.num_relations ? m : -1;
}

// Calls fn(w) for each neighbour w of u over a fact the query may pass messages on (a
// relation the model knows, not left out), in either direction, until fn returns false.
template <typename LeftOutFn, typename Fn>
void ForEachNeighbour(const PathNeighbourhoodSpec& spec, const LeftOutFn& left_out, EntityId u,
                      Fn fn) {
  for (const Neighbor& n : spec.graph->OutEdges(u)) {
    if (ModelRelation(spec, n.relation) < 0 || left_out(u, n.relation, n.entity)) continue;
    if (!fn(n.entity)) return;
  }
  for (const Neighbor& n : spec.graph->InEdges(u)) {
    if (ModelRelation(spec, n.relation) < 0 || left_out(n.entity, n.relation, u)) continue;
    if (!fn(n.entity)) return;
  }
}

// Calls fn(n) for each fact n of `list` (one entity's out- or in-edges, sorted by (entity,
// relation) without duplicates) whose other end is in `members` (the entities with local[e] >=
// 0, listed), in the list's order. A list longer than the members' binary searches would read
// (a hub's, beside the few thousand entities of a pruned pass) is searched for each member
// instead of read whole: what it costs is the members' and their facts', not the hub's degree.
// `filter` holds at least the members; `found` is scratch.
template <typename Member, typename Fn>
void ForEachFactAmong(absl::Span<const Neighbor> list, absl::Span<const Member> members,
                      const std::vector<int32_t>& local,
                      const PathBatchBuilder::EntityFilter& filter, std::vector<Neighbor>& found,
                      Fn fn) {
  size_t log2 = 1;
  while ((size_t{1} << log2) < list.size()) ++log2;
  if (list.size() <= members.size() * log2) {
    for (const Neighbor& n : list) {
      if (filter.MayContain(n.entity) && local[n.entity] >= 0) fn(n);
    }
    return;
  }
  found.clear();
  for (const Member m : members) {
    const EntityId v = static_cast<EntityId>(m);
    auto it = std::lower_bound(list.begin(), list.end(), Neighbor{v, 0});
    for (; it != list.end() && it->entity == v; ++it) found.push_back(*it);
  }
  std::sort(found.begin(), found.end());
  for (const Neighbor& n : found) fn(n);
}

// Appends the fact between nodes a and b of relation r as its two message edges: a to b
// along r, b to a along r's inverse.
void AppendFact(int64_t a, int64_t b, int32_t r, int32_t num_relations, PathBatch* batch) {
  batch->edge_src.push_back(a);
  batch->edge_dst.push_back(b);
  batch->edge_relation.push_back(r);
  batch->edge_src.push_back(b);
  batch->edge_dst.push_back(a);
  batch->edge_relation.push_back(r + num_relations);
}

}  // namespace

void PathBatchBuilder::LeftOut::Clear(std::vector<uint8_t>& marks) {
  for (EntityId s : sources_) marks[s] = 0;
  sources_.clear();
  pairs_.clear();
  facts_.clear();
}

void PathBatchBuilder::LeftOut::Add(const PathQuery& q, std::vector<uint8_t>& marks) {
  if (!marks[q.source]) {
    marks[q.source] = 1;
    sources_.push_back(q.source);
  }
  for (EntityId other : q.unlinked) pairs_.insert(std::minmax(q.source, other));
  if (q.hidden_fact) facts_.insert(*q.hidden_fact);
}

bool PathBatchBuilder::LeftOut::Lookup(EntityId a, RelationId r, EntityId b) const {
  return (!pairs_.empty() && pairs_.contains(std::minmax(a, b))) ||
         (!facts_.empty() && facts_.contains(Triple{a, r, b}));
}

absl::Status PathBatchBuilder::Prepare(const PathNeighbourhoodSpec& spec, const PathQuery& q) {
  const GraphView& graph = *spec.graph;
  if (q.source >= graph.num_entities()) {
    return absl::InvalidArgumentError(
        absl::StrCat("entity id ", q.source, " is outside the graph's ", graph.num_entities()));
  }
  if (q.relation < 0 || q.relation >= 2 * spec.num_relations) {
    return absl::InvalidArgumentError(absl::StrCat(
        "query relation ", q.relation, " is outside the model's 2 x ", spec.num_relations));
  }
  if (local_.size() < graph.num_entities()) local_.resize(graph.num_entities(), -1);
  if (source_marks_.size() < graph.num_entities()) source_marks_.resize(graph.num_entities(), 0);
  return absl::OkStatus();
}

bool PathBatchBuilder::SearchFromTargets(const PathNeighbourhoodSpec& spec, const PathQuery& q) {
  const uint32_t n = spec.graph->num_entities();
  const int64_t length = spec.path_length;
  const auto left_out = [this](EntityId a, RelationId r, EntityId b) {
    return left_out_.Contains(source_marks_, a, r, b);
  };
  if (target_dist_.size() < n) target_dist_.resize(n, -1);
  // d(v, T) for every v within `length` hops of a target.
  target_reached_.clear();
  for (EntityId t : q.targets) {
    if (t >= n || target_dist_[t] >= 0) continue;
    target_dist_[t] = 0;
    target_reached_.push_back(t);
  }
  bool within_limit = true;
  for (size_t i = 0; i < target_reached_.size() && within_limit; ++i) {
    const int32_t d = target_dist_[target_reached_[i]];
    if (d >= length) break;  // every later entity is as far
    ForEachNeighbour(spec, left_out, target_reached_[i], [&](EntityId w) {
      if (target_dist_[w] >= 0) return true;
      if (spec.max_nodes > 0 && static_cast<int64_t>(target_reached_.size()) >= spec.max_nodes) {
        within_limit = false;
        return false;
      }
      target_dist_[w] = d + 1;
      target_reached_.push_back(w);
      return true;
    });
  }
  // The whole graph past kWholeGraphShare.
  return within_limit &&
         !(spec.radius < 0 && static_cast<double>(target_reached_.size()) >= kWholeGraphShare * n);
}

bool PathBatchBuilder::TargetsKeepWholeQuery(const PathNeighbourhoodSpec& spec,
                                             const PathQuery& q) {
  if (q.targets.empty() || (spec.radius < 0 && spec.path_length <= 0)) return true;
  if (!Prepare(spec, q).ok()) return false;
  left_out_.Add(q, source_marks_);
  PathNeighbourhoodSpec search = spec;  // as SelectNodes searches, within the budget
  if (spec.prune.enabled()) {
    search.max_nodes =
        spec.max_nodes > 0 ? std::min(spec.max_nodes, spec.prune.nodes) : spec.prune.nodes;
  }
  const bool whole = !SearchFromTargets(search, q);
  for (EntityId e : target_reached_) target_dist_[e] = -1;
  left_out_.Clear(source_marks_);
  return whole;
}

std::optional<size_t> PathBatchBuilder::SelectForTargets(const PathNeighbourhoodSpec& spec,
                                                         const PathQuery& q) {
  const int64_t length = spec.path_length;
  const auto left_out = [this](EntityId a, RelationId r, EntityId b) {
    return left_out_.Contains(source_marks_, a, r, b);
  };
  const bool within_limit = SearchFromTargets(spec, q);
  std::optional<size_t> others_begin;
  if (within_limit && spec.radius < 0) {
    // Without the reach mask S is every entity within `length` hops of a target: the source
    // first (as an isolated node when it lies beyond), then S in breadth-first order from it,
    // then the rest of S, which no path within S reaches.
    nodes_.push_back(q.source);
    dist_.push_back(0);
    local_[q.source] = 0;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      const int64_t next = dist_[i] + 1;
      ForEachNeighbour(spec, left_out, nodes_[i], [&](EntityId w) {
        if (local_[w] < 0 && target_dist_[w] >= 0) {
          local_[w] = static_cast<int32_t>(nodes_.size());
          nodes_.push_back(w);
          dist_.push_back(next);
        }
        return true;
      });
    }
    for (EntityId w : target_reached_) {
      if (local_[w] >= 0) continue;
      local_[w] = static_cast<int32_t>(nodes_.size());
      nodes_.push_back(w);
      dist_.push_back(kUnreached);
    }
    others_begin = nodes_.size();
  } else if (within_limit) {
    // S in breadth-first order from the source, which always comes first.
    nodes_.push_back(q.source);
    dist_.push_back(0);
    local_[q.source] = 0;
    for (size_t i = 0; i < nodes_.size() && dist_[i] < length; ++i) {
      const int64_t next = dist_[i] + 1;
      ForEachNeighbour(spec, left_out, nodes_[i], [&](EntityId w) {
        if (local_[w] < 0 && target_dist_[w] >= 0 && next + target_dist_[w] <= length) {
          local_[w] = static_cast<int32_t>(nodes_.size());
          nodes_.push_back(w);
          dist_.push_back(next);
        }
        return true;
      });
    }
    others_begin = nodes_.size();
    if (spec.every_in_edge) {  // S's other in-neighbours, for PNA's degree statistics
      for (size_t i = 0; i < *others_begin; ++i) {
        ForEachNeighbour(spec, left_out, nodes_[i], [&](EntityId w) {
          if (local_[w] < 0) {
            local_[w] = static_cast<int32_t>(nodes_.size());
            nodes_.push_back(w);
            dist_.push_back(kUnreached);
          }
          return true;
        });
      }
    }
  }
  for (EntityId e : target_reached_) target_dist_[e] = -1;
  return others_begin;
}

absl::Status PathBatchBuilder::SelectNodes(const PathNeighbourhoodSpec& spec, const PathQuery& q,
                                           size_t* others_begin) {
  pruned_ = false;
  targeted_ = false;
  if (!spec.prune.enabled()) return SelectExact(spec, q, others_begin);
  // The exact neighbourhood where it fits the budget; its search stops past it.
  PathNeighbourhoodSpec exact = spec;
  exact.max_nodes =
      spec.max_nodes > 0 ? std::min(spec.max_nodes, spec.prune.nodes) : spec.prune.nodes;
  absl::Status status = SelectExact(exact, q, others_begin);
  if (status.ok()) {
    if (spec.prune.edges <= 0 ||
        CountEdges(spec, *others_begin, spec.prune.edges) <= spec.prune.edges) {
      return status;
    }
  } else if (!absl::IsResourceExhausted(status)) {
    return status;
  }
  ResetLocal();
  nodes_.clear();
  dist_.clear();
  *others_begin = SIZE_MAX;
  SelectPruned(spec, q);
  return absl::OkStatus();
}

int64_t PathBatchBuilder::CountEdges(const PathNeighbourhoodSpec& spec, size_t others_begin,
                                     int64_t limit) const {
  // As AppendEdges: every fact among the nodes once, from its head, two message edges each.
  int64_t count = 0;
  for (size_t i = 0; i < nodes_.size() && count <= limit; ++i) {
    const EntityId u = nodes_[i];
    for (const Neighbor& n : spec.graph->OutEdges(u)) {
      if (local_[n.entity] < 0 || ModelRelation(spec, n.relation) < 0 ||
          left_out_.Contains(source_marks_, u, n.relation, n.entity)) {
        continue;
      }
      if (i >= others_begin && static_cast<size_t>(local_[n.entity]) >= others_begin) continue;
      count += 2;
    }
  }
  return count;
}

void PathBatchBuilder::SelectPruned(const PathNeighbourhoodSpec& spec, const PathQuery& q) {
  const GraphView& graph = *spec.graph;
  const auto left_out = [this](EntityId a, RelationId r, EntityId b) {
    return left_out_.Contains(source_marks_, a, r, b);
  };
  pruned_ = true;
  targeted_ = !q.targets.empty();
  const int64_t node_budget = std::max<int64_t>(1, spec.prune.nodes);
  const int64_t edge_budget =
      spec.prune.edges > 0 ? spec.prune.edges : std::numeric_limits<int64_t>::max();
  const int64_t read_budget = spec.prune.edges > 0 ? 2 * spec.prune.edges : 16 * node_budget;
  const int hops = spec.radius >= 0 ? spec.radius : std::max(1, spec.path_length);
  std::vector<EntityId> targets = q.targets;
  std::sort(targets.begin(), targets.end());
  const auto is_target = [&](EntityId e) {
    return std::binary_search(targets.begin(), targets.end(), e);
  };

  // Grow hop by hop: the chosen nodes of the last hop push their priority, split evenly over
  // their neighbours, onto the candidates; the best candidates so far take the hop's share.
  nodes_.assign(1, q.source);
  node_priority_.assign(1, 1.0);
  local_[q.source] = 0;
  candidates_.clear();
  int64_t read = 0;
  size_t frontier = 0;
  std::vector<std::pair<double, EntityId>> ranked;
  const auto better = [](const std::pair<double, EntityId>& a,
                         const std::pair<double, EntityId>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  for (int hop = 1; hop <= hops && static_cast<int64_t>(nodes_.size()) < node_budget; ++hop) {
    const size_t frontier_end = nodes_.size();
    for (size_t i = frontier; i < frontier_end && read < read_budget; ++i) {
      const double share = node_priority_[i] / std::max<uint32_t>(1, graph.Degree(nodes_[i]));
      ForEachNeighbour(spec, left_out, nodes_[i], [&](EntityId w) {
        if (++read > read_budget) return false;
        if (local_[w] < 0) candidates_[w] += share;
        return true;
      });
    }
    frontier = frontier_end;
    if (candidates_.empty()) break;
    const int64_t hops_left = hops - hop + 1;
    const int64_t quota =
        (node_budget - static_cast<int64_t>(nodes_.size()) + hops_left - 1) / hops_left;
    ranked.clear();
    for (const auto& [w, priority] : candidates_) {
      ranked.emplace_back(is_target(w) ? std::numeric_limits<double>::infinity() : priority, w);
    }
    if (static_cast<int64_t>(ranked.size()) > quota) {
      std::nth_element(ranked.begin(), ranked.begin() + quota, ranked.end(), better);
      ranked.resize(quota);
    }
    std::sort(ranked.begin(), ranked.end(), better);
    for (const auto& [priority, w] : ranked) {
      local_[w] = static_cast<int32_t>(nodes_.size());
      nodes_.push_back(w);
      const auto it = candidates_.find(w);
      node_priority_.push_back(it->second);
      candidates_.erase(it);
    }
    if (read >= read_budget) break;
  }
  candidates_.clear();

  // The longest prefix of the chosen nodes (in the order chosen) whose facts among them fit
  // the edge budget; each fact counted once, at its later endpoint, as two message edges.
  int64_t edges = 0;
  size_t keep = nodes_.size();
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const EntityId u = nodes_[i];
    filter_.Add(u);
    const absl::Span<const EntityId> earlier(nodes_.data(), i + 1);
    int64_t mine = 0;
    ForEachFactAmong(graph.OutEdges(u), earlier, local_, filter_, found_, [&](const Neighbor& n) {
      const int32_t l = local_[n.entity];
      if (static_cast<size_t>(l) <= i && ModelRelation(spec, n.relation) >= 0 &&
          !left_out(u, n.relation, n.entity)) {
        mine += 2;
      }
    });
    ForEachFactAmong(graph.InEdges(u), earlier, local_, filter_, found_, [&](const Neighbor& n) {
      const int32_t l = local_[n.entity];
      if (static_cast<size_t>(l) < i && ModelRelation(spec, n.relation) >= 0 &&
          !left_out(n.entity, n.relation, u)) {
        mine += 2;
      }
    });
    if (i > 0 && edges + mine > edge_budget) {
      keep = i;
      break;
    }
    edges += mine;
  }
  for (size_t i = keep; i < nodes_.size(); ++i) {
    local_[nodes_[i]] = -1;
    filter_.Remove(nodes_[i]);
  }
  nodes_.resize(keep);
  for (EntityId e : nodes_) filter_.Add(e);  // what Remove cleared beside

  // Distances within the chosen graph, and the nodes in breadth-first order from the source
  // (each chosen node neighbours one chosen before it, so every one is reached).
  std::vector<EntityId> order = {q.source};
  std::vector<int64_t> dist(nodes_.size(), kUnreached);
  dist[0] = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const EntityId u = order[i];
    const int64_t next = dist[local_[u]] + 1;
    const auto reach = [&](EntityId w) {
      const int32_t l = local_[w];
      if (dist[l] == kUnreached) {
        dist[l] = next;
        order.push_back(w);
      }
    };
    const absl::Span<const EntityId> chosen(nodes_);
    ForEachFactAmong(graph.OutEdges(u), chosen, local_, filter_, found_, [&](const Neighbor& n) {
      if (ModelRelation(spec, n.relation) >= 0 && !left_out(u, n.relation, n.entity)) {
        reach(n.entity);
      }
    });
    ForEachFactAmong(graph.InEdges(u), chosen, local_, filter_, found_, [&](const Neighbor& n) {
      if (ModelRelation(spec, n.relation) >= 0 && !left_out(n.entity, n.relation, u)) {
        reach(n.entity);
      }
    });
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (dist[i] == kUnreached) local_[nodes_[i]] = -1;  // none: kept for ResetLocal's sake
  }
  for (EntityId e : nodes_) filter_.Remove(e);
  dist_.clear();
  for (EntityId e : order) dist_.push_back(dist[local_[e]]);
  nodes_ = std::move(order);
  for (size_t i = 0; i < nodes_.size(); ++i) local_[nodes_[i]] = static_cast<int32_t>(i);
}

absl::Status PathBatchBuilder::SelectExact(const PathNeighbourhoodSpec& spec, const PathQuery& q,
                                           size_t* others_begin) {
  const GraphView& graph = *spec.graph;
  const auto left_out = [this](EntityId a, RelationId r, EntityId b) {
    return left_out_.Contains(source_marks_, a, r, b);
  };
  nodes_.clear();
  dist_.clear();
  const auto too_many = [&] {
    return absl::ResourceExhaustedError(
        absl::StrCat("the neighbourhood of entity ", q.source, " within ", spec.radius,
                     " hops exceeds the limit of ", spec.max_nodes, " entities"));
  };
  absl::Status status;
  // Nodes from `others_begin` on are not in S of a query with targets (none otherwise).
  *others_begin = SIZE_MAX;
  std::optional<size_t> targeted;
  if (!q.targets.empty() && (spec.radius >= 0 || spec.path_length > 0)) {
    targeted = SelectForTargets(spec, q);
  }
  if (targeted) {
    targeted_ = true;
    *others_begin = *targeted;
    if (spec.max_nodes > 0 && static_cast<int64_t>(nodes_.size()) > spec.max_nodes) {
      status = too_many();
    }
    return status;
  }
  // Breadth-first search from the source over facts in both directions.
  nodes_.push_back(q.source);
  dist_.push_back(0);
  local_[q.source] = 0;
  for (size_t i = 0; i < nodes_.size() && status.ok(); ++i) {
    if (spec.radius >= 0 && dist_[i] >= spec.radius) break;  // every later node is as far
    const int64_t next = dist_[i] + 1;
    ForEachNeighbour(spec, left_out, nodes_[i], [&](EntityId w) {
      if (local_[w] >= 0) return true;
      if (spec.max_nodes > 0 && static_cast<int64_t>(nodes_.size()) >= spec.max_nodes) {
        status = too_many();
        return false;
      }
      local_[w] = static_cast<int32_t>(nodes_.size());
      nodes_.push_back(w);
      dist_.push_back(next);
      return true;
    });
  }
  // The whole graph: the unreached entities too.
  for (EntityId e = 0; spec.radius < 0 && status.ok() && e < graph.num_entities(); ++e) {
    if (local_[e] >= 0) continue;
    if (spec.max_nodes > 0 && static_cast<int64_t>(nodes_.size()) >= spec.max_nodes) {
      status = absl::ResourceExhaustedError(absl::StrCat("the graph has more than ", spec.max_nodes,
                                                         " entities, the limit of one query"));
      break;
    }
    local_[e] = static_cast<int32_t>(nodes_.size());
    nodes_.push_back(e);
    dist_.push_back(kUnreached);
  }
  return status;
}

void PathBatchBuilder::ResetLocal() {
  for (EntityId e : nodes_) local_[e] = -1;
}

void PathBatchBuilder::AppendNodes(const PathNeighbourhoodSpec& spec, const PathQuery& q,
                                   PathBatch* batch) {
  const int64_t offset = batch->num_nodes();
  const int64_t query = batch->num_queries();
  if (batch->node_begin.empty()) batch->node_begin.push_back(0);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    batch->node_entity.push_back(nodes_[i]);
    batch->node_query.push_back(query);
    batch->node_dist.push_back(dist_[i]);
    batch->sorted_nodes_.emplace_back(nodes_[i], offset + static_cast<int64_t>(i));
  }
  std::sort(batch->sorted_nodes_.begin() + offset, batch->sorted_nodes_.end());
  batch->node_begin.push_back(batch->num_nodes());
  batch->source_index.push_back(offset);
  batch->query_relation.push_back(q.relation);
  // Approximate where pruned to the budget, or where the learned priority will choose.
  const int64_t layer_nodes = spec.prune.layer_nodes;
  batch->query_pruned.push_back(
      pruned_ || (layer_nodes > 0 && static_cast<int64_t>(nodes_.size()) > layer_nodes) ? 1 : 0);
  batch->layer_nodes.push_back(layer_nodes);
}

void PathBatchBuilder::AppendEdges(const PathNeighbourhoodSpec& spec, int64_t query,
                                   size_t others_begin, PathBatch* batch) {
  const GraphView& graph = *spec.graph;
  const int64_t offset = batch->node_begin[query];
  if (batch->edge_begin.empty()) batch->edge_begin.push_back(0);
  // Every fact among the nodes, once from its head's out-edges, in both directions (but none
  // between two nodes outside S: no message of theirs matters).
  for (EntityId e : nodes_) filter_.Add(e);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const EntityId u = nodes_[i];
    ForEachFactAmong(
        graph.OutEdges(u), absl::Span<const EntityId>(nodes_), local_, filter_, found_,
        [&](const Neighbor& n) {
          const int32_t r = ModelRelation(spec, n.relation);
          if (r < 0 || left_out_.Contains(source_marks_, u, n.relation, n.entity)) return;
          if (i >= others_begin && static_cast<size_t>(local_[n.entity]) >= others_begin) return;
          const int64_t a = offset + static_cast<int64_t>(i);
          const int64_t b = offset + local_[n.entity];
          AppendFact(a, b, r, spec.num_relations, batch);
        });
  }
  for (EntityId e : nodes_) filter_.Remove(e);
  batch->edge_begin.push_back(batch->num_edges());
}

absl::Status PathBatchBuilder::Add(const PathNeighbourhoodSpec& spec, const PathQuery& q,
                                   PathBatch* batch) {
  if (absl::Status s = Prepare(spec, q); !s.ok()) return s;
  left_out_.Add(q, source_marks_);
  size_t others_begin = SIZE_MAX;
  absl::Status status = SelectNodes(spec, q, &others_begin);
  if (status.ok()) {
    AppendNodes(spec, q, batch);
    AppendEdges(spec, batch->num_queries() - 1, others_begin, batch);
    SetRelationGraph(spec, batch);
  }
  ResetLocal();
  left_out_.Clear(source_marks_);
  return status;
}

absl::Status PathBatchBuilder::Build(const PathNeighbourhoodSpec& spec,
                                     absl::Span<const PathQuery> queries, PathBatch* batch,
                                     absl::Span<const PathQuery> step) {
  batch->Clear();
  for (absl::Span<const PathQuery> group : {queries, step}) {
    for (const PathQuery& q : group) {
      if (absl::Status s = Prepare(spec, q); !s.ok()) return s;
    }
  }
  for (absl::Span<const PathQuery> group : {queries, step}) {
    for (const PathQuery& q : group) left_out_.Add(q, source_marks_);
  }
  const GraphView& graph = *spec.graph;
  std::vector<size_t> others(queries.size());
  double disjoint_cost = 0;
  absl::Status status;
  for (size_t i = 0; i < queries.size() && status.ok(); ++i) {
    status = SelectNodes(spec, queries[i], &others[i]);
    if (status.ok()) {
      AppendNodes(spec, queries[i], batch);
      for (EntityId e : nodes_) disjoint_cost += 1 + kPathEdgeCost * graph.Degree(e);
    }
    ResetLocal();
  }
  if (!status.ok()) {
    left_out_.Clear(source_marks_);
    batch->Clear();
    return status;
  }
  // The union of the neighbourhoods, in order of first appearance.
  const int64_t num_queries = batch->num_queries();
  double shared_cost = 0;
  for (int64_t e : batch->node_entity) {
    if (local_[e] >= 0) continue;
    local_[e] = static_cast<int32_t>(batch->shared_entity.size());
    batch->shared_entity.push_back(e);
    shared_cost += 1 + kPathEdgeCost * graph.Degree(static_cast<EntityId>(e));
  }
  // The learned priority's pruning chooses per query: over a disjoint batch.
  const bool shared =
      num_queries > 1 && spec.prune.layer_nodes == 0 &&
      (spec.layout == PathLayout::kShared ||
       (spec.layout == PathLayout::kCheaper &&
        static_cast<double>(num_queries) * shared_cost <= spec.shared_advantage * disjoint_cost));
  if (shared) {
    Share(spec, batch);
  }
  for (int64_t e : batch->shared_entity) local_[e] = -1;
  if (!shared) {
    batch->shared_entity.clear();
    for (int64_t q = 0; q < num_queries; ++q) {
      nodes_.assign(batch->node_entity.begin() + batch->node_begin[q],
                    batch->node_entity.begin() + batch->node_begin[q + 1]);
      for (size_t i = 0; i < nodes_.size(); ++i) local_[nodes_[i]] = static_cast<int32_t>(i);
      AppendEdges(spec, q, others[q], batch);
      ResetLocal();
    }
  }
  left_out_.Clear(source_marks_);
  SetRelationGraph(spec, batch);
  return absl::OkStatus();
}

void PathBatchBuilder::SetRelationGraph(const PathNeighbourhoodSpec& spec, PathBatch* batch) {
  if (!spec.relation_graph) return;
  batch->graph_relations = spec.num_relations;
  batch->side_pairs = spec.graph->SidePairs();
}

void PathBatchBuilder::Share(const PathNeighbourhoodSpec& spec, PathBatch* batch) {
  const GraphView& graph = *spec.graph;
  batch->columns = batch->num_queries();
  batch->node_shared.resize(batch->node_entity.size());
  for (size_t i = 0; i < batch->node_entity.size(); ++i) {
    batch->node_shared[i] = local_[batch->node_entity[i]];
  }
  // Every fact among the union's entities, once from its head's out-edges, both directions.
  for (int64_t e : batch->shared_entity) filter_.Add(static_cast<EntityId>(e));
  for (size_t i = 0; i < batch->shared_entity.size(); ++i) {
    const EntityId u = static_cast<EntityId>(batch->shared_entity[i]);
    ForEachFactAmong(graph.OutEdges(u), absl::Span<const int64_t>(batch->shared_entity), local_,
                     filter_, found_, [&](const Neighbor& n) {
                       const int32_t r = ModelRelation(spec, n.relation);
                       if (r < 0 || left_out_.Contains(source_marks_, u, n.relation, n.entity))
                         return;
                       const int64_t a = static_cast<int64_t>(i), b = local_[n.entity];
                       AppendFact(a, b, r, spec.num_relations, batch);
                     });
  }
  for (int64_t e : batch->shared_entity) filter_.Remove(static_cast<EntityId>(e));
}

}  // namespace grail
