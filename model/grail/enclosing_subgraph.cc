#include "model/grail/enclosing_subgraph.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"

namespace grail {
namespace {

// The search that defines N_k(root): undirected BFS for config.hops hops, at most
// config.max_nodes_per_hop newly reached nodes kept per hop (the ones with the smallest
// hash of (root, node): a uniform-looking sample that depends only on the pair, so repeated
// queries see the same neighbourhood; nodes left out are unmarked and may still be reached
// at a later hop, as in the reference). `mark(e)` marks e and returns whether it was
// unmarked; `unmark(e)` forgets it. `hidden`, if set, is a fact the search does not see.
// Appends the reached entities to `reached`, root first; the other vectors are scratch.
// One definition for the extractor's per-call search and for TargetNeighbourhood, so both
// reach the same nodes in the same order.
template <typename Mark, typename Unmark>
void SearchNeighbourhood(const GraphView& graph, EntityId root, const ExtractionConfig& config,
                         const Triple* hidden, Mark&& mark, Unmark&& unmark,
                         std::vector<EntityId>* reached, std::vector<EntityId>& frontier,
                         std::vector<EntityId>& next,
                         std::vector<std::pair<uint64_t, EntityId>>& sample) {
  mark(root);
  reached->push_back(root);
  frontier.assign(1, root);
  const size_t cap = static_cast<size_t>(std::max(config.max_nodes_per_hop, 0));
  for (int hop = 1; hop <= config.hops && !frontier.empty(); ++hop) {
    next.clear();
    for (EntityId x : frontier) {
      for (const Neighbor& n : graph.OutEdges(x)) {
        if (hidden != nullptr && x == hidden->head && n.entity == hidden->tail &&
            n.relation == hidden->relation) {
          continue;
        }
        if (mark(n.entity)) next.push_back(n.entity);
      }
      for (const Neighbor& n : graph.InEdges(x)) {
        if (hidden != nullptr && n.entity == hidden->head && x == hidden->tail &&
            n.relation == hidden->relation) {
          continue;
        }
        if (mark(n.entity)) next.push_back(n.entity);
      }
    }
    if (cap > 0 && next.size() > cap) {
      sample.clear();
      for (EntityId e : next) {
        sample.emplace_back(MixBits((static_cast<uint64_t>(root) << 32) | e), e);
      }
      std::nth_element(sample.begin(), sample.begin() + cap, sample.end());
      next.clear();
      for (size_t i = 0; i < sample.size(); ++i) {
        if (i < cap) {
          next.push_back(sample[i].second);
        } else {
          unmark(sample[i].second);
        }
      }
    }
    reached->insert(reached->end(), next.begin(), next.end());
    frontier.swap(next);
  }
}

}  // namespace

TargetNeighbourhood TargetNeighbourhood::Expand(const GraphView& graph, EntityId root,
                                                const ExtractionConfig& config) {
  TargetNeighbourhood out;
  out.root_ = root;
  absl::flat_hash_set<EntityId> marked;
  std::vector<EntityId> frontier, next;
  std::vector<std::pair<uint64_t, EntityId>> sample;
  SearchNeighbourhood(
      graph, root, config, /*hidden=*/nullptr,
      [&marked](EntityId e) { return marked.insert(e).second; },
      [&marked](EntityId e) { marked.erase(e); }, &out.reached_, frontier, next, sample);
  out.reached_.shrink_to_fit();
  out.position_.reserve(out.reached_.size());
  for (size_t i = 0; i < out.reached_.size(); ++i) {
    out.position_.emplace(out.reached_[i], static_cast<uint32_t>(i));
  }
  return out;
}

size_t TargetNeighbourhood::MemoryBytes() const {
  return sizeof(*this) + reached_.capacity() * sizeof(EntityId) +
         position_.capacity() * (sizeof(std::pair<EntityId, uint32_t>) + 1);
}

std::optional<std::vector<EntityId>> EntitiesWithinHops(const GraphView& graph, EntityId root,
                                                        int hops, size_t max_entities) {
  absl::flat_hash_set<EntityId> seen = {root};
  std::vector<EntityId> frontier = {root}, next;
  for (int hop = 1; hop <= hops && !frontier.empty(); ++hop) {
    next.clear();
    for (EntityId x : frontier) {
      for (absl::Span<const Neighbor> edges : {graph.OutEdges(x), graph.InEdges(x)}) {
        for (const Neighbor& n : edges) {
          if (!seen.insert(n.entity).second) continue;
          if (seen.size() > max_entities) return std::nullopt;
          next.push_back(n.entity);
        }
      }
    }
    frontier.swap(next);
  }
  if (seen.size() > max_entities) return std::nullopt;
  std::vector<EntityId> out(seen.begin(), seen.end());
  std::sort(out.begin(), out.end());
  return out;
}

SubgraphExtractor::SubgraphExtractor(const ExtractionConfig& config) : config_(config) {}

void SubgraphExtractor::Reserve(uint32_t num_entities) {
  if (seen_u_.stamp.size() >= num_entities) return;
  // Grow geometrically: the live graph gains entities one chunk at a time.
  const size_t size = std::max<size_t>(num_entities, seen_u_.stamp.size() * 3 / 2);
  for (Scratch* s : {&seen_u_, &seen_v_}) {
    s->stamp.resize(size, 0);
  }
  local_stamp_.resize(size, 0);
  local_index_.resize(size, 0);
}

void SubgraphExtractor::ExpandNeighbourhood(const GraphView& graph, EntityId root, Scratch* seen,
                                            std::vector<EntityId>* reached) {
  const uint32_t gen = generation_;
  reached->clear();
  SearchNeighbourhood(
      graph, root, config_, hide_ ? &hidden_ : nullptr,
      [seen, gen](EntityId e) {
        if (seen->stamp[e] == gen) return false;
        seen->stamp[e] = gen;
        return true;
      },
      [seen](EntityId e) { seen->stamp[e] = 0; }, reached, frontier_, next_, sample_);
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
  return ExtractImpl(graph, head, relation, tail, hide_target_fact, /*fixed=*/nullptr, out);
}

absl::Status SubgraphExtractor::Extract(const GraphView& graph, EntityId head, RelationId relation,
                                        EntityId tail, const TargetNeighbourhood& fixed,
                                        EnclosingSubgraph* out) {
  if (fixed.root() != head && fixed.root() != tail) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the neighbourhood given is of entity ", fixed.root(), ", neither ", head, " nor ", tail));
  }
  return ExtractImpl(graph, head, relation, tail, /*hide_target_fact=*/false, &fixed, out);
}

absl::Status SubgraphExtractor::ExtractImpl(const GraphView& graph, EntityId head,
                                            RelationId relation, EntityId tail,
                                            bool hide_target_fact, const TargetNeighbourhood* fixed,
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

  // Step 1: k-hop neighbourhoods of both targets (one of them possibly given).
  const TargetNeighbourhood* fixed_u = fixed != nullptr && fixed->root() == head ? fixed : nullptr;
  const TargetNeighbourhood* fixed_v = fixed != nullptr && fixed_u == nullptr ? fixed : nullptr;
  if (fixed_u == nullptr) ExpandNeighbourhood(graph, head, &seen_u_, &reached_u_);
  if (fixed_v == nullptr) ExpandNeighbourhood(graph, tail, &seen_v_, &reached_v_);
  const absl::Span<const EntityId> reached_u =
      fixed_u != nullptr ? fixed_u->reached() : absl::MakeConstSpan(reached_u_);
  const absl::Span<const EntityId> reached_v =
      fixed_v != nullptr ? fixed_v->reached() : absl::MakeConstSpan(reached_v_);

  // Step 2: candidate nodes, u and v first, then the others in the order of u's search.
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
    // N_k(u) ∩ N_k(v) in u's order. When u's neighbourhood was given and v's is much
    // smaller (ranking the tails of a hub whose neighbourhood is most of the graph), walk
    // v's side and sort what it finds into u's order instead of walking all of u's.
    if (fixed_u != nullptr && reached_v.size() * 8 < reached_u.size()) {
      ordered_.clear();
      for (EntityId e : reached_v) {
        const int64_t position = fixed_u->Position(e);
        if (position >= 0) ordered_.emplace_back(static_cast<uint32_t>(position), e);
      }
      std::sort(ordered_.begin(), ordered_.end());
      for (const auto& [position, e] : ordered_) add_candidate(e);
    } else {
      for (EntityId e : reached_u) {
        const bool in_v = fixed_v != nullptr ? fixed_v->Position(e) >= 0 : seen_v_.stamp[e] == gen;
        if (in_v) add_candidate(e);
      }
    }
  } else {
    for (EntityId e : reached_u) add_candidate(e);
    for (EntityId e : reached_v) add_candidate(e);
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
  out->node_feature.clear();
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
