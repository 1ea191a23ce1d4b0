#include "model/ultra/ultra_network.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/core/torch_util.h"
#include "model/path/relational_layer.h"
#include "model/ultra/relation_graph.h"
#include "model/ultra/ultra_model.h"

namespace grail {
namespace {

// The relation graph's network: states [2R, B d], every query a column; one vector per kind
// of relation-graph edge, the same for every query.
RelationalLayer RelationGraphLayer(const PathConfig& c) {
  RelationalLayer layer;
  layer.name = "relation_layer";
  layer.prefix = "rel_";
  layer.inputs = {"ptr", "edges", "order"};
  layer.messages = RelationalMessages::kFree;
  layer.layer_norm = c.layer_norm;
  layer.short_cut = c.short_cut;
  return layer;
}

// The entity network: states [V, G d] as the path model's (model/path/path_batch.h); the
// relation vectors are each layer's projection of the relation states, per query.
RelationalLayer EntityLayer(const PathConfig& c) {
  RelationalLayer layer = RelationGraphLayer(c);
  layer.name = "layer";
  layer.prefix = "";
  layer.inputs = {"relations", "ptr", "edges", "order"};
  layer.messages = RelationalMessages::kProjected;
  return layer;
}

// The relation graph's boundary is all ones at the query's relation read forwards (r for
// both r and its inverse r + R, as the released weights were trained), or with
// inverse_head_queries at the query relation itself; the query vector is the relation graph's
// final state at the query relation itself. Entity messages carry
// relation r + R along a fact h -r-> t from h to t (and r from t to h): the direction the
// released weights were trained in, so the batch's relations are swapped.
constexpr char kForward[] = R"(
def forward(self, edge_src: Tensor, edge_dst: Tensor, edge_relation: Tensor, node_dist: Tensor,
            cell_query: Tensor, source_cell: Tensor, query_relation: Tensor,
            relation_src: Tensor, relation_kind: Tensor, relation_dst: Tensor, num_relations: int) -> Tuple[Tensor, Tensor]:
  d = self.dim
  b = query_relation.size(0)
  n = 2 * num_relations
  ones = torch.ones([b, d], dtype=self.mlp_b1.dtype, device=self.mlp_b1.device)
  column = torch.arange(b, dtype=query_relation.dtype, device=query_relation.device)
  start = torch.where(query_relation >= num_relations, query_relation - num_relations, query_relation)
  if self.inverse_head_queries:
    start = query_relation
)";
constexpr char kQueryVector[] = R"(
  query = relations.view(n * b, d).index_select(0, query_relation * b + column)
  v = node_dist.size(0)
  columns = node_dist.size(1)
  cells = cell_query.view(-1)
  swapped = torch.where(edge_relation >= num_relations, edge_relation - num_relations, edge_relation + num_relations)
)";

std::string UltraSource(const PathConfig& c) {
  const RelationalLayer relation_layer = RelationGraphLayer(c), entity_layer = EntityLayer(c);
  std::string source = LayerMethods(relation_layer, c.relation_layers);
  source += LayerMethods(entity_layer, c.num_layers);
  absl::StrAppend(
      &source, ScoringMethods(/*reach_feature=*/false), kForward,
      OperatorGraph("r", "relation_src", "relation_kind", "relation_dst", "n"),
      Boundary("rboundary", "n", "b", "start * b + column", "ones"), "  x0 = rboundary\n",
      LayerCalls(relation_layer, c.relation_layers, "x", "rboundary, rptr, redges, rorder"),
      "  relations = x", c.relation_layers, "\n");
  absl::StrAppend(
      &source, kQueryVector, Boundary("boundary", "v", "columns", "source_cell", "query"),
      QueryRows("n", "swapped"), OperatorGraph("", "edge_src", "rel", "edge_dst", "v"),
      "  h0 = boundary\n",
      LayerCalls(entity_layer, c.num_layers, "h", "boundary, relations, ptr, edges, order"),
      ScoringTail(/*reach_feature=*/false, "h", c.num_layers));
  return source;
}

void RegisterUltraParameters(const PathConfig& c, torch::jit::Module& m) {
  // A vector per kind of relation-graph edge (relation_graph.h).
  RegisterLayerParameters(RelationGraphLayer(c), c.relation_layers, c.dim, /*relations=*/4, m);
  RegisterLayerParameters(EntityLayer(c), c.num_layers, c.dim, /*relations=*/0, m);
  RegisterScoringParameters(c.dim, /*reach_feature=*/false, m);
}

class UltraNetworkDefinition final : public PathNetworkDefinition {
 public:
  std::string Format(const PathConfig&) const override { return kUltraModelFormat; }
  bool Reads(absl::string_view format) const override { return format == kUltraModelFormat; }
  absl::Status Validate(const PathConfig& c, size_t num_relations) const override {
    if (!c.relation_graph) {
      return absl::InvalidArgumentError(
          "ULTRA's network computes its relation vectors from the graph of relations "
          "(PathConfig::relation_graph)");
    }
    if (c.relation_layers < 1 || c.relation_layers > 16) {
      return absl::InvalidArgumentError(
          absl::StrCat("relation layers must be in [1, 16], got ", c.relation_layers));
    }
    if (c.pna || c.reach_mask || c.reach_feature ||
        c.message_passing != PathMessagePassing::kFused) {
      return absl::InvalidArgumentError(
          "a relation-graph (ULTRA) model sums its messages over the fused operator, with no "
          "reach mask or feature");
    }
    if (num_relations != 0) {
      return absl::InvalidArgumentError(
          "a relation-graph (ULTRA) model has no relation vocabulary");
    }
    return absl::OkStatus();
  }
  void RegisterAttributes(const PathConfig& c, torch::jit::Module& m) const override {
    m.register_attribute("relation_layers", c10::IntType::get(),
                         static_cast<int64_t>(c.relation_layers));
    m.register_attribute("inverse_head_queries", c10::BoolType::get(), c.inverse_head_queries);
  }
  // Archives written before inverse_head_queries start at the relation read forwards.
  void ReadAttributes(const torch::jit::Module& m, PathConfig& c) const override {
    c.relation_graph = true;
    c.relation_layers = static_cast<int>(m.attr("relation_layers").toInt());
    c.inverse_head_queries =
        m.hasattr("inverse_head_queries") && m.attr("inverse_head_queries").toBool();
  }
  std::string Source(const PathConfig& c) const override { return UltraSource(c); }
  void RegisterParameters(const PathConfig& c, int64_t, torch::jit::Module& m) const override {
    RegisterUltraParameters(c, m);
  }
  // The relation graph of the batch's graph: its edges (src, kind, dst) and R.
  void AppendInputs(const PathBatch& batch, const torch::Device& device,
                    std::vector<torch::jit::IValue>& inputs) const override {
    const RelationGraph g = batch.side_pairs != nullptr
                                ? BuildRelationGraph(*batch.side_pairs, batch.graph_relations)
                                : RelationGraph{};
    inputs.insert(inputs.end(), {Int64Tensor(g.src, device), Int64Tensor(g.kind, device),
                                 Int64Tensor(g.dst, device), batch.graph_relations});
  }
};

}  // namespace

const PathNetworkDefinition& UltraNetwork() {
  static const UltraNetworkDefinition* const kNetwork = new UltraNetworkDefinition();
  return *kNetwork;
}

absl::StatusOr<std::unique_ptr<PathModel>> CreateUltraModel(const PathConfig& config, uint64_t seed,
                                                            absl::string_view device) {
  return PathModel::Create(config, {}, seed, device, &UltraNetwork());
}

}  // namespace grail
