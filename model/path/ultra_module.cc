#include "model/path/ultra_module.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "model/core/checkpoint_reader.h"
#include "model/core/torch_util.h"
#include "model/path/path_module.h"
#include "model/path/relation_graph.h"

namespace grail {
namespace {

// A layer over the graph of relations: states [2R, B d], every query a column; one vector
// per kind of relation-graph edge, the same for every query.
constexpr char kRelationLayer[] = R"(
def relation_layer_$L(self, x: Tensor, boundary: Tensor, ptr: Tensor, edges: Tensor, order: Tensor) -> Tensor:
  d = self.dim
  n = x.size(0)
  columns = x.size(1) // d
  w = self.rel_relation_$L.repeat(1, columns)
  update = ops.grail.rspmm(x, w, boundary, ptr, edges, order, "sum")[0]
  out = torch.matmul(torch.cat([x.view(-1, d), update.view(-1, d)], 1), self.rel_combine_w_$L) + self.rel_combine_b_$L
$NORM(rel_norm_w_$L, rel_norm_b_$L)  out = torch.relu(out)
  return ($OUT).view(n, columns * d)
)";

// A layer over the entities: states [V, G d] as the path model's (model/path/path_batch.h); the
// relation vectors are this layer's projection of the relation states, per query.
constexpr char kEntityLayer[] = R"(
def layer_$L(self, h: Tensor, boundary: Tensor, relations: Tensor, ptr: Tensor, edges: Tensor, order: Tensor) -> Tensor:
  d = self.dim
  v = h.size(0)
  columns = h.size(1) // d
  n = relations.size(0)
  b = relations.size(1) // d
  projected = torch.matmul(torch.relu(torch.matmul(relations.view(-1, d), self.project_w1_$L) + self.project_b1_$L), self.project_w2_$L) + self.project_b2_$L
  if columns == b:
    w = projected.view(n, b * d)
  else:
    w = projected.view(n, b, d).transpose(0, 1).reshape(b * n, d)
  update = ops.grail.rspmm(h, w, boundary, ptr, edges, order, "sum")[0]
  out = torch.matmul(torch.cat([h.view(-1, d), update.view(-1, d)], 1), self.combine_w_$L) + self.combine_b_$L
$NORM(norm_w_$L, norm_b_$L)  out = torch.relu(out)
  return ($OUT).view(v, columns * d)
)";

constexpr char kLayerNorm[] = "  out = torch.layer_norm(out, [d], self.$W, self.$B, 1e-5)\n";

// The relation graph's boundary is all ones at the query's relation read forwards (r for
// both r and its inverse r + R, as the released weights were trained); the query vector is
// the relation graph's final state at the query relation itself. Entity messages carry
// relation r + R along a fact h -r-> t from h to t (and r from t to h): the direction the
// released weights were trained in, so the batch's relations are swapped.
constexpr char kForwardHead[] = R"(
def mlp(self, x: Tensor) -> Tensor:
  hidden = torch.relu(torch.matmul(x, self.mlp_w1) + self.mlp_b1)
  return (torch.matmul(hidden, self.mlp_w2) + self.mlp_b2).squeeze(1)

def forward(self, edge_src: Tensor, edge_dst: Tensor, edge_relation: Tensor, node_dist: Tensor,
            cell_query: Tensor, source_cell: Tensor, query_relation: Tensor,
            relation_src: Tensor, relation_kind: Tensor, relation_dst: Tensor, num_relations: int) -> Tuple[Tensor, Tensor]:
  d = self.dim
  b = query_relation.size(0)
  n = 2 * num_relations
  ones = torch.ones([b, d], dtype=self.mlp_b1.dtype, device=self.mlp_b1.device)
  column = torch.arange(b, dtype=query_relation.dtype, device=query_relation.device)
  forward_relation = torch.where(query_relation >= num_relations, query_relation - num_relations, query_relation)
  rgraph = ops.grail.relational_graph(relation_src, relation_kind, relation_dst, n)
  rptr = rgraph[0]
  redges = rgraph[1]
  rorder = rgraph[2]
  rboundary = torch.zeros([n * b, d], dtype=ones.dtype, device=ones.device).index_copy(0, forward_relation * b + column, ones).view(n, b * d)
  x0 = rboundary
)";
constexpr char kForwardRelationLayer[] = R"(
  x$N = self.relation_layer_$L(x$L, rboundary, rptr, redges, rorder)
)";
constexpr char kForwardEntities[] = R"(
  relations = x$RLAST
  query = relations.view(n * b, d).index_select(0, query_relation * b + column)
  v = node_dist.size(0)
  columns = node_dist.size(1)
  boundary = torch.zeros([v * columns, d], dtype=query.dtype, device=query.device).index_copy(0, source_cell, query).view(v, columns * d)
  swapped = torch.where(edge_relation >= num_relations, edge_relation - num_relations, edge_relation + num_relations)
  if columns == b:
    rel = swapped
  else:
    rel = cell_query.view(-1).index_select(0, edge_src) * n + swapped
  graph = ops.grail.relational_graph(edge_src, rel, edge_dst, v)
  ptr = graph[0]
  edges = graph[1]
  order = graph[2]
  h0 = boundary
)";
constexpr char kForwardEntityLayer[] = R"(
  h$N = self.layer_$L(h$L, boundary, relations, ptr, edges, order)
)";
constexpr char kForwardTail[] = R"(
  cells = cell_query.view(-1)
  hidden = torch.matmul(h$LAST.view(-1, d), self.mlp_w1[:d]) + torch.matmul(query, self.mlp_w1[d:2 * d]).index_select(0, cells) + self.mlp_b1
  node_score = (torch.matmul(torch.relu(hidden), self.mlp_w2) + self.mlp_b2).squeeze(1)
  far_score = self.mlp(torch.cat([torch.zeros_like(query), query], 1))
  return node_score, far_score
)";

std::string Layer(const char* text, const PathConfig& c, int l, const char* norm_w,
                  const char* norm_b, const char* state) {
  std::string norm;
  if (c.layer_norm) norm = absl::StrReplaceAll(kLayerNorm, {{"$W", norm_w}, {"$B", norm_b}});
  std::string source = text;
  // "$NORM(w, b)" marks where the layer norm goes.
  const size_t at = source.find("$NORM(");
  source.replace(at, source.find(')', at) + 1 - at, norm);
  return absl::StrReplaceAll(
      source, {{"$L", absl::StrCat(l)},
               {"$OUT", c.short_cut ? absl::StrCat("out + ", state, ".view(-1, d)") : "out"}});
}

}  // namespace

std::string UltraModuleSource(const PathConfig& c) {
  std::string source;
  for (int l = 0; l < c.relation_layers; ++l) {
    const std::string s = absl::StrCat(l);
    source +=
        Layer(kRelationLayer, c, l, ("rel_norm_w_" + s).c_str(), ("rel_norm_b_" + s).c_str(), "x");
  }
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string s = absl::StrCat(l);
    source += Layer(kEntityLayer, c, l, ("norm_w_" + s).c_str(), ("norm_b_" + s).c_str(), "h");
  }
  source += kForwardHead;
  for (int l = 0; l < c.relation_layers; ++l) {
    source += absl::StrReplaceAll(kForwardRelationLayer,
                                  {{"$N", absl::StrCat(l + 1)}, {"$L", absl::StrCat(l)}});
  }
  source += absl::StrReplaceAll(kForwardEntities, {{"$RLAST", absl::StrCat(c.relation_layers)}});
  for (int l = 0; l < c.num_layers; ++l) {
    source += absl::StrReplaceAll(kForwardEntityLayer,
                                  {{"$N", absl::StrCat(l + 1)}, {"$L", absl::StrCat(l)}});
  }
  source += absl::StrReplaceAll(kForwardTail, {{"$LAST", absl::StrCat(c.num_layers)}});
  return source;
}

void RegisterUltraParameters(const PathConfig& c, torch::jit::Module& m) {
  auto add = [&m](const std::string& name, torch::Tensor t) {
    m.register_parameter(name, t.set_requires_grad(true), /*is_buffer=*/false);
  };
  const int64_t d = c.dim;
  for (int l = 0; l < c.relation_layers; ++l) {
    const std::string s = absl::StrCat("_", l);
    add("rel_relation" + s, torch::randn({4, d}));
    add("rel_combine_w" + s, LinearInit({2 * d, d}, 2 * d));
    add("rel_combine_b" + s, LinearInit({d}, 2 * d));
    if (c.layer_norm) {
      add("rel_norm_w" + s, torch::ones({d}));
      add("rel_norm_b" + s, torch::zeros({d}));
    }
  }
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string s = absl::StrCat("_", l);
    add("project_w1" + s, LinearInit({d, d}, d));
    add("project_b1" + s, LinearInit({d}, d));
    add("project_w2" + s, LinearInit({d, d}, d));
    add("project_b2" + s, LinearInit({d}, d));
    add("combine_w" + s, LinearInit({2 * d, d}, 2 * d));
    add("combine_b" + s, LinearInit({d}, 2 * d));
    if (c.layer_norm) {
      add("norm_w" + s, torch::ones({d}));
      add("norm_b" + s, torch::zeros({d}));
    }
  }
  add("mlp_w1", LinearInit({2 * d, 2 * d}, 2 * d));
  add("mlp_b1", LinearInit({2 * d}, 2 * d));
  add("mlp_w2", LinearInit({2 * d, 1}, 2 * d));
  add("mlp_b2", LinearInit({1}, 2 * d));
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
