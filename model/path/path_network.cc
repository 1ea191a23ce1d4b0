// NBFNet's and A*Net's networks (model/path/path_model.h's equations), composed of the one
// relational layer (relational_layer.h): PathNetworks() of path_module.h. ULTRA's is in
// model/ultra/.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "model/path/path_module.h"
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

// NBFNet's over the fused operator, over either batch layout; with PathConfig::priority,
// A*Net's, whose pruned pass is driven from C++ (PrioritizedForward in path_module.h) through
// its layer_<l>, queries, score and far methods; with PathMessagePassing::kPerEdge, NBFNet's
// with every message materialised, over disjoint batches. One relation vector (or one
// projection) per message relation: the model's vocabulary.
class NbfnetNetworks final : public PathNetworkDefinition {
 public:
  std::string Format(const PathConfig& c) const override {
    return c.message_passing == PathMessagePassing::kFused ? kPathModelFormat
                                                           : kPathModelFormatPerEdge;
  }
  bool Reads(absl::string_view format) const override {
    return format == kPathModelFormat || format == kPathModelFormatPerEdge;
  }
  absl::Status Validate(const PathConfig& c, size_t num_relations) const override {
    if (c.relation_graph) {
      return absl::InvalidArgumentError(
          "relation vectors from a graph of relations are ULTRA's network: create it with "
          "model/ultra/ultra_model.h");
    }
    if (c.inverse_head_queries) {
      return absl::InvalidArgumentError(
          "where head queries start the graph of relations is ULTRA's choice alone");
    }
    if (num_relations == 0) return absl::InvalidArgumentError("the relation vocabulary is empty");
    if (!c.priority) return absl::OkStatus();
    if (c.pna || !c.reach_mask || c.reach_feature ||
        c.message_passing != PathMessagePassing::kFused) {
      return absl::InvalidArgumentError(
          "a model with a learned priority sums its messages over the fused operator, with the "
          "reach mask and no reach feature (it propagates only from the entities it reaches)");
    }
    if (!(c.prune_node_ratio > 0 && c.prune_node_ratio <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the prune node ratio must be in (0, 1], got ", c.prune_node_ratio));
    }
    if (!(c.prune_degree_ratio > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the prune degree ratio must be > 0, got ", c.prune_degree_ratio));
    }
    return absl::OkStatus();
  }
  std::string Source(const PathConfig& c) const override {
    if (c.priority) return PrioritySource(c);
    return c.message_passing == PathMessagePassing::kFused ? FusedSource(c) : PerEdgeSource(c);
  }
  void RegisterParameters(const PathConfig& c, int64_t num_relations,
                          torch::jit::Module& m) const override {
    const int64_t message_relations = 2 * num_relations;
    m.register_parameter("query_embedding",
                         torch::randn({message_relations, c.dim}).set_requires_grad(true),
                         /*is_buffer=*/false);
    RegisterLayerParameters(NbfnetLayer(c, c.message_passing == PathMessagePassing::kFused),
                            c.num_layers, c.dim, message_relations, m);
    RegisterScoringParameters(c.dim, c.reach_feature, m);
  }
};

}  // namespace

const PathNetworkDefinition& PathNetworks() {
  static const NbfnetNetworks* const kNetworks = new NbfnetNetworks();
  return *kNetworks;
}

}  // namespace grail
