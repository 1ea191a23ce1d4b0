// Why the model scores a fact as it does: the strongest paths from head to tail in the
// fact's enclosing subgraph, weighted by the model's edge attention. GraIL's motivation is
// rules (a path r1(h, z) ∧ r2(z, t) implying r_t(h, t), paper Section 3 and Theorem 1); its
// attention alpha says, per layer, how much each edge's message counts for this target.
//
// Weight of a path. A path P is a sequence of distinct subgraph nodes h = z0, z1, ..., zm =
// t (m <= k, the model's hops) joined by edges e_1..e_m of the subgraph other than the
// target edge; step i follows e_i forwards (z_{i-1} -r-> z_i) or backwards (an inverse step,
// z_i -r-> z_{i-1}). With alpha_l(e) the attention of edge e in layer l (1 for a model
// without attention), the path's weight in layer l is
//     w_l(P) = prod_i alpha_l(e_i)
// and its weight is the product over the layers, w(P) = prod_l w_l(P). Every alpha lies in
// (0, 1), so a path is never stronger than any of its edges in any layer, and a longer path
// only wins if its edges are attended to more. Paths are reported strongest first (ties:
// shorter, then in search order).
//
// Cost: one extraction and one forward's worth of attention, plus a depth-first search
// over simple paths of length <= k that stops after kMaxExpandedPaths partial paths (then
// the best paths found so far are returned) and prunes paths already weaker than the
// weakest one kept.
#ifndef GRAIL_MODEL_GRAIL_EXPLANATION_H_
#define GRAIL_MODEL_GRAIL_EXPLANATION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph_view.h"
#include "model/grail/enclosing_subgraph.h"
#include "model/grail/grail_model.h"
#include "model/grail/subgraph_batch.h"

namespace grail {

inline constexpr int64_t kMaxExpandedPaths = 200000;

struct PathStep {
  EntityId from = 0;  // graph ids of the step's two nodes, in path order
  EntityId to = 0;
  RelationId relation = 0;       // the graph's relation id of the edge
  bool inverse = false;          // true: the edge is to -relation-> from
  std::vector<float> attention;  // alpha of the edge per layer
};

struct ExplainedPath {
  std::vector<PathStep> steps;
  double weight = 0;                  // w(P)
  std::vector<double> layer_weights;  // w_l(P) per layer
};

// The `max_paths` strongest paths (see above) in `subgraph`, whose edges have the attention
// `attention[l][e]` (layer l, subgraph edge e; edges the model dropped have 0).
std::vector<ExplainedPath> StrongestPaths(const EnclosingSubgraph& subgraph,
                                          const std::vector<std::vector<float>>& attention,
                                          int max_length, int max_paths);

// Extracts the enclosing subgraph of (head, relation, tail) from `graph` with the model's
// config, runs the model's attention on it (target relation `model_relation`; `relations`
// maps graph relation ids to the model's, empty: identity) and returns its strongest paths.
// Errors as extraction and GrailModel::EdgeAttention.
absl::StatusOr<std::vector<ExplainedPath>> ExplainFact(const GrailModel& model,
                                                       const GraphView& graph, EntityId head,
                                                       RelationId relation, EntityId tail,
                                                       int32_t model_relation,
                                                       const RelationMap& relations, int max_paths);

// The same on an already extracted subgraph.
absl::StatusOr<std::vector<ExplainedPath>> ExplainSubgraph(const GrailModel& model,
                                                           const EnclosingSubgraph& subgraph,
                                                           int32_t model_relation,
                                                           const RelationMap& relations,
                                                           int max_paths);

}  // namespace grail

#endif  // GRAIL_MODEL_GRAIL_EXPLANATION_H_
