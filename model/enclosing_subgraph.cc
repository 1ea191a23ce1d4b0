#include "model/enclosing_subgraph.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "model/seeded_random.h"

namespace grail {

SubgraphExtractor::SubgraphExtractor(const ExtractionConfig& config) : config_(config) {}

void SubgraphExtractor::Reserve(uint32_t num_entities) {
  if (seen_u_.stamp.size() >= num_entities) return;
  // Grow geometrically: the live graph gains entities one chunk at a time.
  const size_t size = std::max<size_t>(num_entities, seen_u_.stamp.size() * 3 / 2);
  for (Scratch* s : {&seen_u_, &seen_v_}) {
    s->stamp.resize(size, 0);
    s->value.resize(size, 0);
  }
  local_stamp_.resize(size, 0);
  local_index_.resize(size, 0);
}

void SubgraphExtractor::ExpandNeighbourhood(const GraphView& graph, EntityId root, Scratch* seen,
                                            std::vector<EntityId>* reached) {
  const uint32_t gen = generation_;
  seen->stamp[root] = gen;
  seen->value[root] = 0;
  reached->clear();
  reached->push_back(root);
  frontier_.assign(1, root);
  const size_t cap = static_cast<size_t>(std::max(config_.max_nodes_per_hop, 0));

  for (int hop = 1; hop <= config_.hops && !frontier_.empty(); ++hop) {
    next_.clear();
    auto visit = [&](EntityId e) {
      if (seen->stamp[e] == gen) return;
      seen->stamp[e] = gen;
      seen->value[e] = static_cast<uint8_t>(hop);
      next_.push_back(e);
    };
    for (EntityId x : frontier_) {
      for (const Neighbor& n : graph.OutEdges(x)) {
        if (hide_ && x == hidden_.head && n.entity == hidden_.tail &&
            n.relation == hidden_.relation) {
          continue;
        }
        visit(n.entity);
      }
      for (const Neighbor& n : graph.InEdges(x)) {
        if (hide_ && n.entity == hidden_.head && x == hidden_.tail &&
            n.relation == hidden_.relation) {
          continue;
        }
        visit(n.entity);
      }
    }
    if (cap > 0 && next_.size() > cap) {
      // Keep the `cap` nodes with the smallest hash: a uniform-looking sample that depends
      // only on (root, node), so repeated queries see the same neighbourhood. Nodes left
      // out are unmarked and may still be reached at a later hop, as in the reference.
      sample_.clear();
      for (EntityId e : next_) {
        sample_.emplace_back(MixBits((static_cast<uint64_t>(root) << 32) | e), e);
      }
      std::nth_element(sample_.begin(), sample_.begin() + cap, sample_.end());
      next_.clear();
      for (size_t i = 0; i < sample_.size(); ++i) {
        if (i < cap) {
          next_.push_back(sample_[i].second);
        } else {
          seen->stamp[sample_[i].second] = 0;
        }
      }
    }
    reached->insert(reached->end(), next_.begin(), next_.end());
    frontier_.swap(next_);
  }
}

void SubgraphExtractor::LabelDistances(int32_t source, int32_t blocked,
                                       std::vector<uint8_t>* dist) {
  dist->assign(candidates_.size(), kFarDistance);
  (*dist)[source] = 0;
  queue_.assign(1, source);
  for (size_t head = 0; head < queue_.size(); ++head) {
    const int32_t x = queue_[head];
    const uint8_t next_distance = (*dist)[x] + 1;
    if (next_distance > config_.hops) break;  // BFS order: every later node is as far
    for (int32_t k = adjacency_offsets_[x]; k < adjacency_offsets_[x + 1]; ++k) {
      const int32_t y = adjacency_[k];
      if (y == blocked || (*dist)[y] != kFarDistance) continue;
      (*dist)[y] = next_distance;
      queue_.push_back(y);
    }
  }
}

absl::Status SubgraphExtractor::Extract(const GraphView& graph, EntityId head, RelationId relation,
                                        EntityId tail, bool hide_target_fact,
                                        EnclosingSubgraph* out) {
  const uint32_t n = graph.num_entities();
  if (head >= n || tail >= n) {
    return absl::InvalidArgumentError(absl::StrCat("entity id ", std::max(head, tail),
                                                   " is outside the graph (", n, " entities)"));
  }
  if (head == tail) {
    return absl::InvalidArgumentError(
        absl::StrCat("head and tail are the same entity (", head, "); GraIL scores pairs"));
  }
  if (config_.hops < 1 || config_.hops >= kFarDistance) {
    return absl::InvalidArgumentError(absl::StrCat("hops must be in [1, 254], got ", config_.hops));
  }
  Reserve(n);
  if (++generation_ == 0) {  // stamps wrapped: forget everything once
    for (Scratch* s : {&seen_u_, &seen_v_}) std::fill(s->stamp.begin(), s->stamp.end(), 0);
    std::fill(local_stamp_.begin(), local_stamp_.end(), 0);
    generation_ = 1;
  }
  const uint32_t gen = generation_;
  hide_ = hide_target_fact;
  hidden_ = Triple{head, relation, tail};

  // Step 1: k-hop neighbourhoods of both targets.
  ExpandNeighbourhood(graph, head, &seen_u_, &reached_u_);
  ExpandNeighbourhood(graph, tail, &seen_v_, &reached_v_);

  // Step 2: candidate nodes, u and v first.
  candidates_.clear();
  auto add_candidate = [&](EntityId e) {
    if (local_stamp_[e] == gen) return;
    local_stamp_[e] = gen;
    local_index_[e] = static_cast<int32_t>(candidates_.size());
    candidates_.push_back(e);
  };
  add_candidate(head);
  add_candidate(tail);
  if (config_.enclosing) {
    for (EntityId e : reached_u_) {
      if (seen_v_.stamp[e] == gen) add_candidate(e);
    }
  } else {
    for (EntityId e : reached_u_) add_candidate(e);
    for (EntityId e : reached_v_) add_candidate(e);
  }
  const int32_t num_candidates = static_cast<int32_t>(candidates_.size());

  // Every fact among the candidates (directed), and the same edges as an undirected CSR
  // for the distance computations.
  out->edge_src.clear();
  out->edge_dst.clear();
  out->edge_relation.clear();
  adjacency_offsets_.assign(num_candidates + 1, 0);
  for (int32_t i = 0; i < num_candidates; ++i) {
    const EntityId g = candidates_[i];
    for (const Neighbor& nb : graph.OutEdges(g)) {
      if (local_stamp_[nb.entity] != gen) continue;
      if (hide_ && g == head && nb.entity == tail && nb.relation == relation) continue;
      const int32_t j = local_index_[nb.entity];
      out->edge_src.push_back(i);
      out->edge_dst.push_back(j);
      out->edge_relation.push_back(nb.relation);
      ++adjacency_offsets_[i + 1];
      ++adjacency_offsets_[j + 1];
    }
  }
  for (int32_t i = 0; i < num_candidates; ++i) {
    adjacency_offsets_[i + 1] += adjacency_offsets_[i];
  }
  adjacency_.resize(adjacency_offsets_[num_candidates]);
  adjacency_cursor_.assign(adjacency_offsets_.begin(), adjacency_offsets_.end() - 1);
  for (size_t k = 0; k < out->edge_src.size(); ++k) {
    adjacency_[adjacency_cursor_[out->edge_src[k]]++] = out->edge_dst[k];
    adjacency_[adjacency_cursor_[out->edge_dst[k]]++] = out->edge_src[k];
  }

  // Step 3: double-radius labels, each target blocked while measuring the other.
  LabelDistances(/*source=*/0, /*blocked=*/1, &dist_u_);
  LabelDistances(/*source=*/1, /*blocked=*/0, &dist_v_);
  dist_u_[0] = 0;
  dist_v_[0] = 1;
  dist_u_[1] = 1;
  dist_v_[1] = 0;

  out->nodes.clear();
  out->dist_u.clear();
  out->dist_v.clear();
  kept_index_.assign(num_candidates, -1);
  const int hops = config_.hops;
  for (int32_t i = 0; i < num_candidates; ++i) {
    const bool keep = i < 2 || !config_.enclosing || (dist_u_[i] <= hops && dist_v_[i] <= hops);
    if (!keep) continue;
    kept_index_[i] = static_cast<int32_t>(out->nodes.size());
    out->nodes.push_back(candidates_[i]);
    out->dist_u.push_back(dist_u_[i]);
    out->dist_v.push_back(dist_v_[i]);
  }

  // Induced edges among the kept nodes, compacted in place.
  out->target_edge = -1;
  size_t write = 0;
  for (size_t k = 0; k < out->edge_src.size(); ++k) {
    const int32_t s = kept_index_[out->edge_src[k]];
    const int32_t d = kept_index_[out->edge_dst[k]];
    if (s < 0 || d < 0) continue;
    if (s == 0 && d == 1 && out->edge_relation[k] == relation) {
      out->target_edge = static_cast<int32_t>(write);
    }
    out->edge_src[write] = s;
    out->edge_dst[write] = d;
    out->edge_relation[write] = out->edge_relation[k];
    ++write;
  }
  out->edge_src.resize(write);
  out->edge_dst.resize(write);
  out->edge_relation.resize(write);

  // Step 4: the target edge.
  out->target_in_graph = out->target_edge >= 0;
  if (!out->target_in_graph) {
    out->target_edge = static_cast<int32_t>(write);
    out->edge_src.push_back(0);
    out->edge_dst.push_back(1);
    out->edge_relation.push_back(relation);
  }
  return absl::OkStatus();
}

}  // namespace grail
