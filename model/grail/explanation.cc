#include "model/grail/explanation.h"

#include <algorithm>
#include <utility>

namespace grail {
namespace {

// One edge seen from one of its ends.
struct Arc {
  int32_t to = 0;    // local node
  int32_t edge = 0;  // subgraph edge index
  bool inverse = false;
};

class PathSearch {
 public:
  PathSearch(const EnclosingSubgraph& subgraph, const std::vector<std::vector<float>>& attention,
             int max_length, int max_paths)
      : subgraph_(subgraph),
        attention_(attention),
        max_length_(max_length),
        max_paths_(static_cast<size_t>(std::max(0, max_paths))),
        arcs_(subgraph.num_nodes()),
        on_path_(subgraph.num_nodes(), false) {
    for (int32_t e = 0; e < subgraph.num_edges(); ++e) {
      if (e == subgraph.target_edge) continue;
      arcs_[subgraph.edge_src[e]].push_back({subgraph.edge_dst[e], e, false});
      arcs_[subgraph.edge_dst[e]].push_back({subgraph.edge_src[e], e, true});
    }
  }

  std::vector<ExplainedPath> Run() {
    if (max_paths_ == 0 || subgraph_.num_nodes() < 2) return {};
    on_path_[0] = true;
    Visit(0, 1.0);
    std::sort(best_.begin(), best_.end(), Stronger);
    std::vector<ExplainedPath> out;
    for (const Found& f : best_) out.push_back(Describe(f.arcs));
    return out;
  }

 private:
  struct Found {
    std::vector<Arc> arcs;
    double weight = 0;
    int64_t order = 0;
  };
  static bool Stronger(const Found& a, const Found& b) {
    if (a.weight != b.weight) return a.weight > b.weight;
    if (a.arcs.size() != b.arcs.size()) return a.arcs.size() < b.arcs.size();
    return a.order < b.order;
  }

  double EdgeWeight(int32_t edge) const {
    double w = 1;
    for (const std::vector<float>& layer : attention_) w *= layer[edge];
    return w;
  }

  // Depth-first from local node `node` with the path so far in path_ and its weight.
  void Visit(int32_t node, double weight) {
    if (++expanded_ > kMaxExpandedPaths) return;
    if (node == 1) {
      Keep(weight);
      return;
    }
    if (static_cast<int>(path_.size()) == max_length_) return;
    for (const Arc& arc : arcs_[node]) {
      if (on_path_[arc.to]) continue;
      const double next = weight * EdgeWeight(arc.edge);
      // Weights only shrink along a path: one already weaker than the weakest kept loses.
      if (best_.size() == max_paths_ && !(next > Weakest())) continue;
      path_.push_back(arc);
      on_path_[arc.to] = true;
      Visit(arc.to, next);
      on_path_[arc.to] = false;
      path_.pop_back();
    }
  }

  double Weakest() const {
    double w = best_.front().weight;
    for (const Found& f : best_) w = std::min(w, f.weight);
    return w;
  }

  void Keep(double weight) {
    Found found{path_, weight, order_++};
    if (best_.size() < max_paths_) {
      best_.push_back(std::move(found));
      return;
    }
    // The last in strength order.
    const auto weakest = std::max_element(best_.begin(), best_.end(), Stronger);
    if (Stronger(found, *weakest)) *weakest = std::move(found);
  }

  ExplainedPath Describe(const std::vector<Arc>& arcs) const {
    ExplainedPath path;
    path.layer_weights.assign(attention_.size(), 1.0);
    path.weight = 1;
    int32_t at = 0;
    for (const Arc& arc : arcs) {
      PathStep step;
      step.from = subgraph_.nodes[at];
      step.to = subgraph_.nodes[arc.to];
      step.relation = subgraph_.edge_relation[arc.edge];
      step.inverse = arc.inverse;
      for (size_t l = 0; l < attention_.size(); ++l) {
        step.attention.push_back(attention_[l][arc.edge]);
        path.layer_weights[l] *= attention_[l][arc.edge];
      }
      path.weight *= EdgeWeight(arc.edge);
      path.steps.push_back(std::move(step));
      at = arc.to;
    }
    return path;
  }

  const EnclosingSubgraph& subgraph_;
  const std::vector<std::vector<float>>& attention_;
  const int max_length_;
  const size_t max_paths_;
  std::vector<std::vector<Arc>> arcs_;
  std::vector<bool> on_path_;
  std::vector<Arc> path_;
  std::vector<Found> best_;
  int64_t expanded_ = 0;
  int64_t order_ = 0;
};

}  // namespace

std::vector<ExplainedPath> StrongestPaths(const EnclosingSubgraph& subgraph,
                                          const std::vector<std::vector<float>>& attention,
                                          int max_length, int max_paths) {
  return PathSearch(subgraph, attention, max_length, max_paths).Run();
}

absl::StatusOr<std::vector<ExplainedPath>> ExplainSubgraph(const GrailModel& model,
                                                           const EnclosingSubgraph& subgraph,
                                                           int32_t model_relation,
                                                           const RelationMap& relations,
                                                           int max_paths) {
  SubgraphBatch batch;
  batch.Add(subgraph, model_relation, relations);
  absl::StatusOr<std::vector<std::vector<float>>> batch_attention = model.EdgeAttention(batch);
  if (!batch_attention.ok()) return batch_attention.status();
  // Back from batch edges to subgraph edges: Add() keeps them in order and drops those whose
  // relation the model does not know (they get no attention, so no path uses them).
  std::vector<std::vector<float>> attention(batch_attention->size(),
                                            std::vector<float>(subgraph.num_edges(), 0.0f));
  int64_t b = 0;
  for (int32_t e = 0; e < subgraph.num_edges(); ++e) {
    if (e != subgraph.target_edge && relations(subgraph.edge_relation[e]) < 0) continue;
    for (size_t l = 0; l < attention.size(); ++l) attention[l][e] = (*batch_attention)[l][b];
    ++b;
  }
  return StrongestPaths(subgraph, attention, model.config().hops, max_paths);
}

absl::StatusOr<std::vector<ExplainedPath>> ExplainFact(
    const GrailModel& model, const GraphView& graph, EntityId head, RelationId relation,
    EntityId tail, int32_t model_relation, const RelationMap& relations, int max_paths) {
  SubgraphExtractor extractor(model.config().extraction());
  EnclosingSubgraph subgraph;
  absl::Status extracted =
      extractor.Extract(graph, head, relation, tail, /*hide_target_fact=*/false, &subgraph);
  if (!extracted.ok()) return extracted;
  return ExplainSubgraph(model, subgraph, model_relation, relations, max_paths);
}

}  // namespace grail
