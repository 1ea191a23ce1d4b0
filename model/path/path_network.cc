#include "model/path/path_network.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "model/path/relational_layer.h"

namespace grail {
namespace {

// NBFNet's layer: relation vectors from the query or free, sum or PNA, masked by reach.
RelationalLayer NbfnetLayer(const PathConfig& c, bool fused) {
  RelationalLayer layer;
  layer.fused = fused;
  layer.inputs = fused ? std::vector<std::string>{"query", "node_dist", "ptr", "edges",
                                                  "order", "count",     "coef"}
                       : std::vector<std::string>{"query", "node_dist",  "src",     "dst",
                                                  "rel",   "edge_query", "in_count"};
  layer.messages = c.dependent ? RelationalMessages::kQueryDependent : RelationalMessages::kFree;
  layer.aggregation = c.pna ? RelationalAggregation::kPna : RelationalAggregation::kSum;
  layer.layer_norm = c.layer_norm;
  layer.reach_mask = c.reach_mask;
  layer.short_cut = c.short_cut;
  return layer;
}

// Over the fused operator, either batch layout: states [V, G d] (V forward nodes, G columns:
// 1 for a disjoint batch, B for a shared one; model/path/path_batch.h), one cell per node and
// column, `cell_query` its query, `node_dist` its source's distance.
constexpr char kFusedForward[] = R"(
def forward(self, edge_src: Tensor, edge_dst: Tensor, edge_relation: Tensor, node_dist: Tensor,
            cell_query: Tensor, source_cell: Tensor, query_relation: Tensor) -> Tuple[Tensor, Tensor]:
)";
// Each query's vector: its relation's embedding.
constexpr char kQueryVectors[] = R"(
  query = self.query_embedding.index_select(0, query_relation)
  d = self.dim
)";
constexpr char kFusedCells[] = R"(
  b = query.size(0)
  v = node_dist.size(0)
  columns = node_dist.size(1)
  cells = cell_query.view(-1)
)";
// PNA's per-node degree terms, for the fused layers: the in-degree plus the boundary's
// message, and (1, s, 1 / s) with s = log(count) / delta.
constexpr char kDegreeScale[] = R"(
  count = (ptr[0, 1:] - ptr[0, :-1]).to(query.dtype).unsqueeze(1) + 1.0
  scale = (torch.log(count) / self.pna_delta).unsqueeze(2)
  coef = torch.cat([torch.ones_like(scale), scale, 1.0 / scale.clamp(min=0.01)], 2).unsqueeze(3)
)";

// forward() up to the layers over the fused operator: the boundary, each edge's row of the
// relation vectors, the operator's graph.
std::string FusedForwardStart(const PathConfig& c) {
  return absl::StrCat(kFusedForward, kQueryVectors, kFusedCells,
                      Boundary("boundary", "v", "columns", "source_cell", "query"),
                      c.dependent ? QueryRows("self.num_message_relations", "edge_relation")
                                  : "  rel = edge_relation\n",
                      OperatorGraph("", "edge_src", "rel", "edge_dst", "v"));
}

std::string FusedSource(const PathConfig& c) {
  const RelationalLayer layer = NbfnetLayer(c, /*fused=*/true);
  std::string source = LayerMethods(layer, c.num_layers);
  absl::StrAppend(&source, ScoringMethods(c.reach_feature), FusedForwardStart(c), kDegreeScale,
                  "  h0 = boundary\n",
                  LayerCalls(layer, c.num_layers, "h",
                             "boundary, query, node_dist, ptr, edges, order, count, coef"),
                  ScoringTail(c.reach_feature, "h", c.num_layers));
  return source;
}

// The per-edge formulation: one disjoint neighbourhood per query, every message
// materialised, as archives of format /1 computed. Kept as the reference the fused one is
// tested and benchmarked against.
constexpr char kPerEdgeForward[] = R"(
def forward(self, node_query: Tensor, node_dist: Tensor, edge_src: Tensor, edge_dst: Tensor,
            edge_relation: Tensor, source_index: Tensor, query_relation: Tensor) -> Tuple[Tensor, Tensor]:
)";
constexpr char kPerEdgeCells[] = R"(
  n = node_query.size(0)
  cells = node_query
  edge_query = node_query.index_select(0, edge_src)
  in_count = torch.bincount(edge_dst, minlength=n).to(query.dtype) + 1.0
)";

std::string PerEdgeSource(const PathConfig& c) {
  const RelationalLayer layer = NbfnetLayer(c, /*fused=*/false);
  std::string source = LayerMethods(layer, c.num_layers);
  absl::StrAppend(&source, ScoringMethods(c.reach_feature), kPerEdgeForward, kQueryVectors,
                  kPerEdgeCells, Boundary("boundary", "n", "1", "source_index", "query"),
                  "  h0 = boundary\n",
                  LayerCalls(layer, c.num_layers, "h",
                             "boundary, query, node_dist, edge_src, edge_dst, edge_relation, "
                             "edge_query, in_count"),
                  ScoringTail(c.reach_feature, "h", c.num_layers));
  return source;
}

// A*Net's network (path_model.h). Its layers return ReLU(LayerNorm(W [x, a] + b)) for every
// node, x the gated states; forward() is the unpruned network, every edge out of a reached
// entity chosen, over either batch layout. The pruned one is driven from C++
// (PrioritizedForward), calling queries(), score(), layer_<l> and far() on the chosen
// subgraph of each layer; which cells an edge from a reached cell enters is the operator over
// the reached indicator (one value per cell) with every relation's weight 1.
constexpr char kQueries[] = R"(
def queries(self, query_relation: Tensor) -> Tensor:
  return self.query_embedding.index_select(0, query_relation)
)";
constexpr char kPriorityStart[] = R"(
  ones = torch.ones([self.num_message_relations * b, columns], dtype=query.dtype, device=query.device)
  nothing = torch.zeros([v, columns], dtype=query.dtype, device=query.device)
  reached = (node_dist == 0).to(query.dtype).view(-1)
  h = boundary.view(-1, d)
  s = self.score(h, cells, query)
)";
constexpr char kPriorityLayer[] = R"(
  x = (h * (torch.sigmoid(s) * reached).unsqueeze(1)).view(v, columns * d)
  out = self.layer_$L(x, boundary, query, ptr, edges, order).view(-1, d)
  entered = (ops.grail.rspmm(reached.view(v, columns), ones, nothing, ptr, edges, order, "sum")[0].view(-1) > 0).to(query.dtype).unsqueeze(1)
  h = $UPDATE
  reached = torch.maximum(reached, entered.view(-1))
  s = self.score(h, cells, query)
)";

std::string PrioritySource(const PathConfig& c) {
  RelationalLayer layer = NbfnetLayer(c, /*fused=*/true);
  layer.inputs = {"query", "ptr", "edges", "order"};
  layer.aggregation = RelationalAggregation::kSum;
  layer.reach_mask = false;  // only reached entities are updated
  layer.short_cut = false;   // the driver adds or replaces
  std::string source = LayerMethods(layer, c.num_layers);
  absl::StrAppend(&source, kQueries, ScoringMethods(/*reach_feature=*/false), FusedForwardStart(c),
                  kPriorityStart);
  for (int l = 0; l < c.num_layers; ++l) {
    absl::StrAppend(
        &source,
        absl::StrReplaceAll(kPriorityLayer, {{"$L", absl::StrCat(l)},
                                             {"$UPDATE", c.short_cut ? "h + out * entered"
                                                                     : "out * entered + h * (1.0 - "
                                                                       "entered)"}}));
  }
  absl::StrAppend(&source, "  return s, self.far(query)\n");
  return source;
}

}  // namespace

RelationalLayer PathNetworkLayer(const PathConfig& c) {
  return NbfnetLayer(c, c.message_passing == PathMessagePassing::kFused);
}

std::string PathNetworkSource(const PathConfig& c) {
  if (c.priority) return PrioritySource(c);
  return c.message_passing == PathMessagePassing::kFused ? FusedSource(c) : PerEdgeSource(c);
}

}  // namespace grail
