// A deliberately plain implementation of enclosing-subgraph extraction, written straight
// from the definition (std::set / std::map, BFS from scratch, no caps, no reuse). It is the
// oracle of the property tests and the baseline of the extraction benchmark; it is not
// used by the product.
#ifndef GRAIL_TESTS_TESTING_REFERENCE_EXTRACTION_H_
#define GRAIL_TESTS_TESTING_REFERENCE_EXTRACTION_H_

#include <map>
#include <queue>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "graph/graph_view.h"
#include "model/grail/enclosing_subgraph.h"

namespace grail {

struct ReferenceSubgraph {
  std::map<EntityId, std::pair<int, int>> labels;  // entity -> (du, dv); kFarDistance if > k
  std::multiset<std::tuple<EntityId, RelationId, EntityId>> edges;  // target included
};

namespace reference_internal {

inline std::set<EntityId> UndirectedNeighbours(const GraphView& graph, EntityId e) {
  std::set<EntityId> out;
  for (const Neighbor& n : graph.OutEdges(e)) out.insert(n.entity);
  for (const Neighbor& n : graph.InEdges(e)) out.insert(n.entity);
  return out;
}

// Distances from `root` up to k, through `allowed` nodes only (all if null), avoiding
// `blocked`.
inline std::map<EntityId, int> Bfs(const GraphView& graph, EntityId root, int k,
                                   const std::set<EntityId>* allowed, EntityId blocked) {
  std::map<EntityId, int> dist{{root, 0}};
  std::queue<EntityId> queue;
  queue.push(root);
  while (!queue.empty()) {
    const EntityId x = queue.front();
    queue.pop();
    if (dist[x] == k) continue;
    for (EntityId y : UndirectedNeighbours(graph, x)) {
      if (y == blocked || (allowed && !allowed->count(y)) || dist.count(y)) continue;
      dist[y] = dist[x] + 1;
      queue.push(y);
    }
  }
  return dist;
}

}  // namespace reference_internal

// The subgraph of (u, r, v) with k hops; `enclosing` false gives the k-hop union ablation.
inline ReferenceSubgraph ReferenceExtract(const GraphView& graph, EntityId u, RelationId r,
                                          EntityId v, int k, bool enclosing) {
  using reference_internal::Bfs;
  const EntityId kNone = graph.num_entities();
  const std::map<EntityId, int> nu = Bfs(graph, u, k, nullptr, kNone);
  const std::map<EntityId, int> nv = Bfs(graph, v, k, nullptr, kNone);
  std::set<EntityId> candidates{u, v};
  for (const auto& entry : nu) {
    if (!enclosing || nv.count(entry.first)) candidates.insert(entry.first);
  }
  if (!enclosing) {
    for (const auto& entry : nv) candidates.insert(entry.first);
  }
  const std::map<EntityId, int> du = Bfs(graph, u, k, &candidates, v);
  const std::map<EntityId, int> dv = Bfs(graph, v, k, &candidates, u);
  ReferenceSubgraph result;
  for (EntityId e : candidates) {
    int a = du.count(e) ? du.at(e) : kFarDistance;
    int b = dv.count(e) ? dv.at(e) : kFarDistance;
    if (e == u) std::tie(a, b) = std::pair(0, 1);
    if (e == v) std::tie(a, b) = std::pair(1, 0);
    if (enclosing && (a > k || b > k)) continue;
    result.labels[e] = {a, b};
  }
  bool target_present = false;
  for (const auto& entry : result.labels) {
    const EntityId h = entry.first;
    for (const Neighbor& n : graph.OutEdges(h)) {
      if (!result.labels.count(n.entity)) continue;
      result.edges.insert({h, n.relation, n.entity});
      target_present |= h == u && n.relation == r && n.entity == v;
    }
  }
  if (!target_present) result.edges.insert({u, r, v});
  return result;
}

// Undirected hop distances from `root` to every entity of the graph (-1: unreachable).
inline std::vector<int> ReferenceDistances(const GraphView& graph, EntityId root) {
  std::vector<int> dist(graph.num_entities(), -1);
  for (const auto& [e, d] :
       reference_internal::Bfs(graph, root, graph.num_entities(), nullptr, graph.num_entities())) {
    dist[e] = d;
  }
  return dist;
}

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_REFERENCE_EXTRACTION_H_
