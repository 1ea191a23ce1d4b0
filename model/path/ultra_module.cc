#include "model/path/ultra_module.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "model/core/checkpoint_reader.h"
#include "model/core/model_archive.h"
#include "model/core/torch_util.h"
#include "model/path/path_module.h"
#include "model/path/relation_graph.h"
#include "model/path/relational_layer.h"

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
// both r and its inverse r + R, as the released weights were trained); the query vector is
// the relation graph's final state at the query relation itself. Entity messages carry
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
  forward_relation = torch.where(query_relation >= num_relations, query_relation - num_relations, query_relation)
)";
constexpr char kQueryVector[] = R"(
  query = relations.view(n * b, d).index_select(0, query_relation * b + column)
  v = node_dist.size(0)
  columns = node_dist.size(1)
  cells = cell_query.view(-1)
  swapped = torch.where(edge_relation >= num_relations, edge_relation - num_relations, edge_relation + num_relations)
)";

}  // namespace

std::string UltraModuleSource(const PathConfig& c) {
  const RelationalLayer relation_layer = RelationGraphLayer(c), entity_layer = EntityLayer(c);
  std::string source = LayerMethods(relation_layer, c.relation_layers);
  source += LayerMethods(entity_layer, c.num_layers);
  absl::StrAppend(
      &source, ScoringMethods(/*reach_feature=*/false), kForward,
      OperatorGraph("r", "relation_src", "relation_kind", "relation_dst", "n"),
      Boundary("rboundary", "n", "b", "forward_relation * b + column", "ones"),
      "  x0 = rboundary\n",
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
  // A vector per kind of relation-graph edge (model/path/relation_graph.h).
  RegisterLayerParameters(RelationGraphLayer(c), c.relation_layers, c.dim, /*relations=*/4, m);
  RegisterLayerParameters(EntityLayer(c), c.num_layers, c.dim, /*relations=*/0, m);
  RegisterScoringParameters(c.dim, /*reach_feature=*/false, m);
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> UltraRelationGraph(
    const PathBatch& batch, const torch::Device& device) {
  const RelationGraph g = batch.side_pairs != nullptr
                              ? BuildRelationGraph(*batch.side_pairs, batch.graph_relations)
                              : RelationGraph{};
  return {Int64Tensor(g.src, device), Int64Tensor(g.kind, device), Int64Tensor(g.dst, device)};
}

namespace {

// Where each of ours comes from: the checkpoint's name, and whether it is a linear layer's
// weight (stored [out, in], ours [in, out]).
struct Source {
  std::string name;
  bool transposed = false;
};

std::map<std::string, Source> UltraNames(const PathConfig& c) {
  std::map<std::string, Source> names;
  for (int l = 0; l < c.relation_layers; ++l) {
    const std::string from = absl::StrCat("relation_model.layers.", l, "."),
                      to = absl::StrCat("_", l);
    names["rel_relation" + to] = {from + "relation.weight"};
    names["rel_combine_w" + to] = {from + "linear.weight", true};
    names["rel_combine_b" + to] = {from + "linear.bias"};
    if (c.layer_norm) {
      names["rel_norm_w" + to] = {from + "layer_norm.weight"};
      names["rel_norm_b" + to] = {from + "layer_norm.bias"};
    }
  }
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string from = absl::StrCat("entity_model.layers.", l, "."),
                      to = absl::StrCat("_", l);
    names["project_w1" + to] = {from + "relation_projection.0.weight", true};
    names["project_b1" + to] = {from + "relation_projection.0.bias"};
    names["project_w2" + to] = {from + "relation_projection.2.weight", true};
    names["project_b2" + to] = {from + "relation_projection.2.bias"};
    names["combine_w" + to] = {from + "linear.weight", true};
    names["combine_b" + to] = {from + "linear.bias"};
    if (c.layer_norm) {
      names["norm_w" + to] = {from + "layer_norm.weight"};
      names["norm_b" + to] = {from + "layer_norm.bias"};
    }
  }
  names["mlp_w1"] = {"entity_model.mlp.0.weight", true};
  names["mlp_b1"] = {"entity_model.mlp.0.bias"};
  names["mlp_w2"] = {"entity_model.mlp.2.weight", true};
  names["mlp_b2"] = {"entity_model.mlp.2.bias"};
  return names;
}

// Layers of `prefix` ("relation_model.layers.") the state dict has: one past the largest index.
int CountLayers(const std::map<std::string, torch::Tensor>& state, const std::string& prefix) {
  int layers = 0;
  for (const auto& [name, tensor] : state) {
    if (name.rfind(prefix, 0) != 0) continue;
    layers = std::max(layers, std::atoi(name.c_str() + prefix.size()) + 1);
  }
  return layers;
}

}  // namespace

absl::Status ImportUltraCheckpoint(const std::string& checkpoint, const std::string& out) {
  absl::StatusOr<std::map<std::string, torch::Tensor>> tensors = ReadCheckpointTensors(checkpoint);
  if (!tensors.ok()) return tensors.status();
  // A released checkpoint holds {"model": state dict, "optimizer": ...}; a bare state dict
  // is taken as it is.
  std::map<std::string, torch::Tensor> state;
  for (auto& [name, tensor] : *tensors) {
    if (name.rfind("model/", 0) == 0) {
      state[name.substr(6)] = tensor;
    } else if (name.find('/') == std::string::npos) {
      state[name] = tensor;
    }
  }

  PathConfig c = UltraConfig();
  c.relation_layers = CountLayers(state, "relation_model.layers.");
  c.num_layers = CountLayers(state, "entity_model.layers.");
  c.layer_norm = state.count("entity_model.layers.0.layer_norm.weight") > 0;
  const auto first = state.find("entity_model.layers.0.linear.weight");
  if (c.relation_layers == 0 || c.num_layers == 0 || first == state.end() ||
      first->second.dim() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(checkpoint,
                     " is not an ULTRA checkpoint: no relation_model.layers.* or "
                     "entity_model.layers.*.linear.weight"));
  }
  c.dim = static_cast<int>(first->second.size(0));

  absl::StatusOr<std::unique_ptr<PathModel>> model = PathModel::Create(c, {}, /*seed=*/0);
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(checkpoint, ": an ULTRA model of its sizes: ", model.status().message()));
  }
  torch::jit::Module& m = (*model)->module().module;
  std::set<std::string> used;
  {
    torch::NoGradGuard no_grad;
    for (const auto& [ours, source] : UltraNames(c)) {
      const auto it = state.find(source.name);
      if (it == state.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(checkpoint, " has no tensor ", source.name, " (for ", ours, ")"));
      }
      torch::Tensor given = it->second.to(torch::kFloat);
      if (source.transposed && given.dim() == 2) given = given.t();
      torch::Tensor target = m.attr(ours).toTensor();
      if (given.sizes() != target.sizes()) {
        return absl::InvalidArgumentError(absl::StrCat(
            checkpoint, ": ", source.name, " has shape ", c10::str(it->second.sizes()), " where a ",
            c.relation_layers, "+", c.num_layers, "-layer ULTRA of width ", c.dim, " needs ",
            c10::str(source.transposed ? target.t().sizes() : target.sizes())));
      }
      target.copy_(given);
      used.insert(source.name);
    }
  }
  for (const auto& [name, tensor] : state) {
    if (used.count(name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          checkpoint, " holds ", name, ", which no part of an ULTRA model of ", c.relation_layers,
          "+", c.num_layers, " layers (sum aggregation, a 2-layer scoring MLP) reads"));
    }
  }
  if (absl::Status finite = CheckFiniteParameters(m, checkpoint); !finite.ok()) return finite;
  const std::string base = checkpoint.substr(checkpoint.find_last_of('/') + 1);
  (*model)->set_training_fingerprint(
      absl::StrCat("ULTRA checkpoint ", base,
                   " (DeepGraphLearning/ULTRA, MIT License), imported by grail-tools"));
  return (*model)->Save(out);
}

}  // namespace grail
