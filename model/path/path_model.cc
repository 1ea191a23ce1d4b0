#include "model/path/path_model.h"

#include <algorithm>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "model/core/torch_util.h"
#include "model/grail/grail_model.h"
#include "model/ops/rspmm.h"
#include "model/path/path_module.h"
#include "model/path/ultra_module.h"
#include "torch/csrc/jit/frontend/resolver.h"
#include "torch/csrc/jit/frontend/sugared_value.h"
#include "torch/version.h"  // TORCH_VERSION_MAJOR

namespace grail {
namespace {

// The network in TorchScript over the fused operator (model/ops/rspmm.h), one line per
// equation of path_model.h. `$L` blocks are expanded per layer, `$REACH` is l (1-based):
// the hops a path of this layer can have. States are [V, G * d]: V nodes of the batch's
// graph, G columns (1 for a disjoint batch, B for a shared one; model/path/path_batch.h).
constexpr char kFusedLayerHead[] = R"(
def layer_$L(self, h: Tensor, boundary: Tensor, query: Tensor, node_dist: Tensor, ptr: Tensor,
             edges: Tensor, order: Tensor, count: Tensor, coef: Tensor) -> Tensor:
  d = self.dim
  v = h.size(0)
  b = query.size(0)
  columns = h.size(1) // d
)";
// w_r(q) = W_r q + b_r for every query: [2R, B d] over shared columns, [B 2R, d] (one row per
// query and relation) over a disjoint batch.
constexpr char kFusedDependentRelation[] = R"(
  relation = (torch.matmul(query, self.relation_w_$L) + self.relation_b_$L).view(b, self.num_message_relations, d)
  if columns == b:
    w = relation.transpose(0, 1).reshape(self.num_message_relations, columns * d)
  else:
    w = relation.reshape(b * self.num_message_relations, d)
)";
constexpr char kFusedFreeRelation[] = R"(
  w = self.relation_$L.repeat(1, columns)
)";
constexpr char kFusedSumAggregation[] = R"(
  update = ops.grail.rspmm(h, w, boundary, ptr, edges, order, "sum")[0]
  out = torch.matmul(torch.cat([h.view(-1, d), update.view(-1, d)], 1), self.combine_w_$L) + self.combine_b_$L
)";
// The boundary takes part as every node's message to itself, as in the paper. The combine
// step W [h, features, features * s, features / s] is one product of [features, h] with the
// weights rearranged into three blocks of d columns (h only in the first), then a sum of the
// blocks scaled per node: coef holds (1, s, 1 / s) for each node.
constexpr char kFusedPnaAggregation[] = R"(
  aggregate = ops.grail.rspmm(h, w, boundary, ptr, edges, order, "sum,sum_sq,max,min")
  mean = aggregate[0] / count
  std = (aggregate[1] / count - mean * mean).clamp(min=1e-6).sqrt()
  features = torch.stack([mean.view(v, columns, d), aggregate[2].view(v, columns, d), aggregate[3].view(v, columns, d), std.view(v, columns, d), h.view(v, columns, d)], 2).view(-1, 5 * d)
  on_features = self.combine_w_$L[d:].view(3, 4 * d, d).permute(1, 0, 2).reshape(4 * d, 3 * d)
  on_state = torch.cat([self.combine_w_$L[:d], torch.zeros([d, 2 * d], dtype=h.dtype, device=h.device)], 1)
  weight = torch.cat([on_features, on_state], 0)
  out = (torch.matmul(features, weight).view(v, columns, 3, d) * coef).sum(2).view(-1, d) + self.combine_b_$L
)";
constexpr char kFusedLayerNorm[] = R"(
  out = torch.layer_norm(out, [d], self.norm_w_$L, self.norm_b_$L, 1e-5)
)";
constexpr char kFusedLayerTail[] = R"(
  out = $ACTIVATION
  return ($OUT).view(v, columns * d)
)";
constexpr char kFusedMaskedActivation[] =
    "torch.relu(out) * (node_dist <= $REACH).to(out.dtype).view(-1, 1)";

constexpr char kFusedForwardHead[] = R"(
def mlp(self, x: Tensor) -> Tensor:
  hidden = torch.relu(torch.matmul(x, self.mlp_w1) + self.mlp_b1)
  return (torch.matmul(hidden, self.mlp_w2) + self.mlp_b2).squeeze(1)

def forward(self, edge_src: Tensor, edge_dst: Tensor, edge_relation: Tensor, node_dist: Tensor,
            cell_query: Tensor, source_cell: Tensor, query_relation: Tensor) -> Tuple[Tensor, Tensor]:
  query = self.query_embedding.index_select(0, query_relation)
  d = self.dim
  b = query.size(0)
  v = node_dist.size(0)
  columns = node_dist.size(1)
  boundary = torch.zeros([v * columns, d], dtype=query.dtype, device=query.device).index_copy(0, source_cell, query).view(v, columns * d)
)";
// Over a disjoint batch an edge's relation row is its query's: query * 2R + r.
constexpr char kFusedDependentEdges[] = R"(
  if columns == b:
    rel = edge_relation
  else:
    rel = cell_query.view(-1).index_select(0, edge_src) * self.num_message_relations + edge_relation
)";
constexpr char kFusedFreeEdges[] = R"(
  rel = edge_relation
)";
constexpr char kFusedGraph[] = R"(
  graph = ops.grail.relational_graph(edge_src, rel, edge_dst, v)
  ptr = graph[0]
  edges = graph[1]
  order = graph[2]
  count = (ptr[0, 1:] - ptr[0, :-1]).to(query.dtype).unsqueeze(1) + 1.0
  scale = (torch.log(count) / self.pna_delta).unsqueeze(2)
  coef = torch.cat([torch.ones_like(scale), scale, 1.0 / scale.clamp(min=0.01)], 2).unsqueeze(3)
  h0 = boundary
)";
constexpr char kFusedForwardLayer[] = R"(
  h$N = self.layer_$L(h$L, boundary, query, node_dist, ptr, edges, order, count, coef)
)";
// The scoring MLP's first layer split: the state's product per cell, the query's per query.
constexpr char kFusedForwardTail[] = R"(
  cells = cell_query.view(-1)
  hidden = torch.matmul(h$LAST.view(-1, d), self.mlp_w1[:d]) + torch.matmul(query, self.mlp_w1[d:2 * d]).index_select(0, cells) + self.mlp_b1
)";
constexpr char kFusedReachFeature[] = R"(
  hidden = hidden + (node_dist <= $LAST).to(query.dtype).view(-1, 1) * self.mlp_w1[2 * d]
)";
constexpr char kFusedScores[] = R"(
  node_score = (torch.matmul(torch.relu(hidden), self.mlp_w2) + self.mlp_b2).squeeze(1)
  far_score = self.mlp(torch.cat([torch.zeros_like(query), query$FAR_REACH], 1))
  return node_score, far_score
)";

std::string FusedModuleSource(const PathConfig& c) {
  std::string source;
  for (int l = 0; l < c.num_layers; ++l) {
    absl::StrAppend(
        &source, kFusedLayerHead, c.dependent ? kFusedDependentRelation : kFusedFreeRelation,
        c.pna ? kFusedPnaAggregation : kFusedSumAggregation, c.layer_norm ? kFusedLayerNorm : "",
        absl::StrReplaceAll(kFusedLayerTail, {{"$ACTIVATION", c.reach_mask ? kFusedMaskedActivation
                                                                           : "torch.relu(out)"}}));
    source = absl::StrReplaceAll(source, {{"$L", absl::StrCat(l)},
                                          {"$REACH", absl::StrCat(l + 1)},
                                          {"$OUT", c.short_cut ? "out + h.view(-1, d)" : "out"}});
  }
  absl::StrAppend(&source, kFusedForwardHead, c.dependent ? kFusedDependentEdges : kFusedFreeEdges,
                  kFusedGraph);
  for (int l = 0; l < c.num_layers; ++l) {
    absl::StrAppend(&source, absl::StrReplaceAll(kFusedForwardLayer, {{"$N", absl::StrCat(l + 1)},
                                                                      {"$L", absl::StrCat(l)}}));
  }
  absl::StrAppend(&source, kFusedForwardTail, c.reach_feature ? kFusedReachFeature : "",
                  absl::StrReplaceAll(
                      kFusedScores,
                      {{"$FAR_REACH", c.reach_feature ? ", torch.zeros_like(query[:, :1])" : ""}}));
  // The tail's $LAST after the layers, the reach feature's too.
  source = absl::StrReplaceAll(source, {{"$LAST", absl::StrCat(c.num_layers)}});
  return source;
}

// The per-edge formulation (PathMessagePassing::kPerEdge): every message materialised, one
// disjoint neighbourhood per query, as archives of format /1 computed. Kept as the reference
// the fused one is tested and benchmarked against.
constexpr char kLayerHead[] = R"(
def layer_$L(self, h: Tensor, boundary: Tensor, query: Tensor, node_dist: Tensor, src: Tensor,
             dst: Tensor, rel: Tensor, edge_query: Tensor, in_count: Tensor) -> Tensor:
  d = h.size(1)
)";
// w_r(q) = W_r q + b_r for every query and message relation, gathered per edge.
constexpr char kDependentRelation[] = R"(
  relation = (torch.matmul(query, self.relation_w_$L) + self.relation_b_$L).view(-1, d)
  w = relation.index_select(0, edge_query * self.num_message_relations + rel)
)";
constexpr char kFreeRelation[] = R"(
  w = self.relation_$L.index_select(0, rel)
)";
constexpr char kSumAggregation[] = R"(
  message = h.index_select(0, src) * w
  update = torch.zeros_like(h).index_add_(0, dst, message) + boundary
)";
// The boundary takes part as every node's message to itself, as in the paper.
constexpr char kPnaAggregation[] = R"(
  message = h.index_select(0, src) * w
  count = in_count.unsqueeze(1)
  mean = (torch.zeros_like(h).index_add_(0, dst, message) + boundary) / count
  square = (torch.zeros_like(h).index_add_(0, dst, message * message) + boundary * boundary) / count
  index = dst.unsqueeze(1).expand(-1, d)
  largest = boundary.scatter_reduce(0, index, message, "amax", include_self=True)
  smallest = boundary.scatter_reduce(0, index, message, "amin", include_self=True)
  std = (square - mean * mean).clamp(min=1e-6).sqrt()
  features = torch.cat([mean, largest, smallest, std], 1)
  scale = torch.log(count) / self.pna_delta
  update = torch.cat([features, features * scale, features / scale.clamp(min=0.01)], 1)
)";
constexpr char kCombine[] = R"(
  out = torch.matmul(torch.cat([h, update], 1), self.combine_w_$L) + self.combine_b_$L
)";
constexpr char kLayerNorm[] = R"(
  out = torch.layer_norm(out, [d], self.norm_w_$L, self.norm_b_$L, 1e-5)
)";
constexpr char kLayerTail[] = R"(
  out = $ACTIVATION
  return $OUT
)";
constexpr char kMaskedActivation[] =
    "torch.relu(out) * (node_dist <= $REACH).to(out.dtype).unsqueeze(1)";
constexpr char kActivation[] = "torch.relu(out)";

constexpr char kForwardHead[] = R"(
def mlp(self, x: Tensor) -> Tensor:
  hidden = torch.relu(torch.matmul(x, self.mlp_w1) + self.mlp_b1)
  return (torch.matmul(hidden, self.mlp_w2) + self.mlp_b2).squeeze(1)

def forward(self, node_query: Tensor, node_dist: Tensor, edge_src: Tensor, edge_dst: Tensor,
            edge_relation: Tensor, source_index: Tensor, query_relation: Tensor) -> Tuple[Tensor, Tensor]:
  query = self.query_embedding.index_select(0, query_relation)
  n = node_query.size(0)
  boundary = torch.zeros([n, query.size(1)], dtype=query.dtype, device=query.device).index_copy(0, source_index, query)
  edge_query = node_query.index_select(0, edge_src)
  in_count = torch.bincount(edge_dst, minlength=n).to(query.dtype) + 1.0
  h0 = boundary
)";
constexpr char kForwardLayer[] = R"(
  h$N = self.layer_$L(h$L, boundary, query, node_dist, edge_src, edge_dst, edge_relation, edge_query, in_count)
)";
constexpr char kForwardTail[] = R"(
  node_score = self.mlp(torch.cat([h$LAST, query.index_select(0, node_query)], 1))
  far_score = self.mlp(torch.cat([torch.zeros_like(query), query], 1))
  return node_score, far_score
)";
// With the reach feature: 1[d(h, v) <= L] beside the state; 0 for every entity beyond.
constexpr char kForwardTailWithReach[] = R"(
  reached = (node_dist <= $LAST).to(query.dtype).unsqueeze(1)
  node_score = self.mlp(torch.cat([h$LAST, query.index_select(0, node_query), reached], 1))
  unreached = torch.zeros([query.size(0), 1], dtype=query.dtype, device=query.device)
  far_score = self.mlp(torch.cat([torch.zeros_like(query), query, unreached], 1))
  return node_score, far_score
)";

std::string PerEdgeModuleSource(const PathConfig& c) {
  std::string source;
  for (int l = 0; l < c.num_layers; ++l) {
    absl::StrAppend(
        &source, kLayerHead, c.dependent ? kDependentRelation : kFreeRelation,
        c.pna ? kPnaAggregation : kSumAggregation, kCombine, c.layer_norm ? kLayerNorm : "",
        absl::StrReplaceAll(kLayerTail,
                            {{"$ACTIVATION", c.reach_mask ? kMaskedActivation : kActivation}}));
    source = absl::StrReplaceAll(source, {{"$L", absl::StrCat(l)},
                                          {"$REACH", absl::StrCat(l + 1)},
                                          {"$OUT", c.short_cut ? "out + h" : "out"}});
  }
  absl::StrAppend(&source, kForwardHead);
  for (int l = 0; l < c.num_layers; ++l) {
    absl::StrAppend(&source, absl::StrReplaceAll(kForwardLayer, {{"$N", absl::StrCat(l + 1)},
                                                                 {"$L", absl::StrCat(l)}}));
  }
  absl::StrAppend(&source,
                  absl::StrReplaceAll(c.reach_feature ? kForwardTailWithReach : kForwardTail,
                                      {{"$LAST", absl::StrCat(c.num_layers)}}));
  return source;
}

// LibTorch 1.13 warns once per process that scatter_reduce (PNA's max and min in the per-edge
// formulation) is in beta, on stderr and outside our log format. Spend that warning on a
// dummy call with a silent handler. (LibTorch 2 no longer warns.)
void SilenceScatterReduceBetaWarning() {
#if TORCH_VERSION_MAJOR < 2
  static std::once_flag once;
  std::call_once(once, [] {
    struct Silent : c10::WarningHandler {
      void process(const c10::SourceLocation&, const std::string&, bool) override {}
    } silent;
    c10::Warning::WarningHandlerGuard guard(&silent);
    torch::zeros({1}).scatter_reduce(0, torch::zeros({1}, torch::kInt64), torch::ones({1}), "amax");
  });
#endif
}

absl::Status ValidateConfig(const PathConfig& c, size_t num_relations) {
  if (c.num_layers < 1 || c.num_layers > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("layers must be in [1, 16], got ", c.num_layers));
  }
  if (c.dim < 1) return absl::InvalidArgumentError("dim must be positive");
  if (!(c.pna_delta > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("pna_delta must be > 0, got ", c.pna_delta));
  }
  if (c.relation_graph) {
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
  if (num_relations == 0) return absl::InvalidArgumentError("the relation vocabulary is empty");
  if (c.pna && c.message_passing == PathMessagePassing::kPerEdge) {
    SilenceScatterReduceBetaWarning();
  }
  return absl::OkStatus();
}

void RegisterParameters(const PathConfig& c, int64_t num_relations, torch::jit::Module& m) {
  auto add = [&m](const std::string& name, torch::Tensor t) {
    m.register_parameter(name, t.set_requires_grad(true), /*is_buffer=*/false);
  };
  const int64_t d = c.dim;
  const int64_t message_relations = 2 * num_relations;
  add("query_embedding", torch::randn({message_relations, d}));
  const int64_t update = c.pna ? 12 * d : d;
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string s = absl::StrCat("_", l);
    if (c.dependent) {
      add("relation_w" + s, LinearInit({d, message_relations * d}, d));
      add("relation_b" + s, LinearInit({message_relations * d}, d));
    } else {
      add("relation" + s, torch::randn({message_relations, d}));
    }
    add("combine_w" + s, LinearInit({d + update, d}, d + update));
    add("combine_b" + s, LinearInit({d}, d + update));
    if (c.layer_norm) {
      add("norm_w" + s, torch::ones({d}));
      add("norm_b" + s, torch::zeros({d}));
    }
  }
  const int64_t mlp_in = 2 * d + (c.reach_feature ? 1 : 0);
  add("mlp_w1", LinearInit({mlp_in, 2 * d}, mlp_in));
  add("mlp_b1", LinearInit({2 * d}, 2 * d));
  add("mlp_w2", LinearInit({2 * d, 1}, 2 * d));
  add("mlp_b2", LinearInit({1}, 2 * d));
}

void RegisterAttributes(const PathConfig& c, const std::vector<std::string>& relations,
                        torch::jit::Module& m) {
  m.register_attribute(
      "format", c10::StringType::get(),
      std::string(c.relation_graph                                  ? kUltraModelFormat
                  : c.message_passing == PathMessagePassing::kFused ? kPathModelFormat
                                                                    : kPathModelFormatPerEdge));
  m.register_attribute("relation_layers", c10::IntType::get(),
                       static_cast<int64_t>(c.relation_graph ? c.relation_layers : 0));
  m.register_attribute("num_layers", c10::IntType::get(), static_cast<int64_t>(c.num_layers));
  m.register_attribute("dim", c10::IntType::get(), static_cast<int64_t>(c.dim));
  m.register_attribute("pna", c10::BoolType::get(), c.pna);
  m.register_attribute("dependent", c10::BoolType::get(), c.dependent);
  m.register_attribute("layer_norm", c10::BoolType::get(), c.layer_norm);
  m.register_attribute("short_cut", c10::BoolType::get(), c.short_cut);
  m.register_attribute("pna_delta", c10::FloatType::get(), c.pna_delta);
  m.register_attribute("reach_mask", c10::BoolType::get(), c.reach_mask);
  m.register_attribute("reach_feature", c10::BoolType::get(), c.reach_feature);
  m.register_attribute("num_message_relations", c10::IntType::get(),
                       static_cast<int64_t>(2 * relations.size()));
  c10::List<std::string> names;
  for (const std::string& r : relations) names.push_back(r);
  m.register_attribute("relations", c10::ListType::ofStrings(), names);
  m.register_attribute("training_fingerprint", c10::StringType::get(), std::string());
}

// Resolves `ops.NAMESPACE.OP` in module source to the registered operator, as TorchScript's
// own serialised code names custom operators (the default C++ resolver knows `torch` only).
struct OperatorResolver : torch::jit::Resolver {
  struct Ops : torch::jit::SugaredValue {
    std::string kind() const override { return "ops"; }
    std::shared_ptr<torch::jit::SugaredValue> attr(const torch::jit::SourceRange&,
                                                   torch::jit::GraphFunction&,
                                                   const std::string& field) override {
      return std::make_shared<torch::jit::BuiltinModule>(field);
    }
  };
  std::shared_ptr<torch::jit::SugaredValue> resolveValue(const std::string& name,
                                                         torch::jit::GraphFunction&,
                                                         const torch::jit::SourceRange&) override {
    if (name == "torch") return std::make_shared<torch::jit::BuiltinModule>("aten");
    if (name == "ops") return std::make_shared<Ops>();
    return nullptr;
  }
  c10::TypePtr resolveType(const std::string&, const torch::jit::SourceRange&) override {
    return nullptr;
  }
};

// A module of `c` with `parameters` (those of RegisterParameters, by name and shape), on
// `device`. Errors name the parameter that is missing or of another shape.
absl::StatusOr<torch::jit::Module> BuildModule(const PathConfig& c,
                                               const std::vector<std::string>& relations,
                                               const torch::jit::Module* parameters,
                                               const torch::Device& device) {
  torch::jit::Module m("PathModel");
  RegisterAttributes(c, relations, m);
  if (c.relation_graph) {
    RegisterUltraParameters(c, m);
  } else {
    RegisterParameters(c, static_cast<int64_t>(relations.size()), m);
  }
  if (parameters != nullptr) {
    torch::NoGradGuard no_grad;
    for (const auto& p : m.named_parameters(/*recurse=*/false)) {
      if (!parameters->hasattr(p.name) || !parameters->attr(p.name).isTensor()) {
        return absl::InvalidArgumentError(absl::StrCat("it has no parameter ", p.name));
      }
      const torch::Tensor given = parameters->attr(p.name).toTensor();
      if (given.sizes() != p.value.sizes()) {
        return absl::InvalidArgumentError(
            absl::StrCat("its parameter ", p.name, " has shape ", c10::str(given.sizes()),
                         " where the config needs ", c10::str(p.value.sizes())));
      }
      p.value.copy_(given);
    }
  }
  ops::LinkRelationalOps();
  m.define(c.relation_graph                                  ? UltraModuleSource(c)
           : c.message_passing == PathMessagePassing::kFused ? FusedModuleSource(c)
                                                             : PerEdgeModuleSource(c),
           std::make_shared<OperatorResolver>());
  m.to(device);
  return m;
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> PathForward(PathModule& path, const PathBatch& batch) {
  const torch::Device& device = path.device;
  if (!path.fused) {
    const auto out =
        path.module
            .forward({Int64Tensor(batch.node_query, device), Int64Tensor(batch.node_dist, device),
                      Int64Tensor(batch.edge_src, device), Int64Tensor(batch.edge_dst, device),
                      Int64Tensor(batch.edge_relation, device),
                      Int64Tensor(batch.source_index, device),
                      Int64Tensor(batch.query_relation, device)})
            .toTuple();
    return {out->elements()[0].toTensor(), out->elements()[1].toTensor()};
  }
  // Per cell (forward node, column): the query node's distance or kUnreached, and the query.
  const int64_t nodes = batch.num_forward_nodes(), columns = batch.columns;
  std::vector<int64_t> dist, cell_query, source_cell, node_cell;
  if (!batch.shared()) {
    dist = batch.node_dist;
    cell_query = batch.node_query;
    source_cell = batch.source_index;
  } else {
    dist.assign(nodes * columns, kUnreached);
    cell_query.resize(nodes * columns);
    for (int64_t i = 0; i < nodes * columns; ++i) cell_query[i] = i % columns;
    node_cell.resize(batch.num_nodes());
    for (int64_t i = 0; i < batch.num_nodes(); ++i) {
      node_cell[i] = batch.node_shared[i] * columns + batch.node_query[i];
      dist[node_cell[i]] = batch.node_dist[i];
    }
    for (int64_t q = 0; q < batch.num_queries(); ++q) {
      source_cell.push_back(node_cell[batch.source_index[q]]);
    }
  }
  std::vector<torch::jit::IValue> inputs = {Int64Tensor(batch.edge_src, device),
                                            Int64Tensor(batch.edge_dst, device),
                                            Int64Tensor(batch.edge_relation, device),
                                            Int64Tensor(dist, device).view({nodes, columns}),
                                            Int64Tensor(cell_query, device).view({nodes, columns}),
                                            Int64Tensor(source_cell, device),
                                            Int64Tensor(batch.query_relation, device)};
  if (path.relation_graph) {
    auto [src, kind, dst] = UltraRelationGraph(batch, device);
    inputs.insert(inputs.end(), {src, kind, dst, batch.graph_relations});
  }
  const auto out = path.module.forward(std::move(inputs)).toTuple();
  torch::Tensor node = out->elements()[0].toTensor();
  // Scores per query node, in the batch's order.
  if (batch.shared()) node = node.index_select(0, Int64Tensor(node_cell, device));
  return {node, out->elements()[1].toTensor()};
}

PathModel::PathModel(PathConfig config, std::vector<std::string> relations, std::string device,
                     std::unique_ptr<PathModule> module)
    : config_(std::move(config)),
      relations_(std::move(relations)),
      device_(std::move(device)),
      module_(std::move(module)) {}

PathModel::~PathModel() = default;

absl::StatusOr<std::unique_ptr<PathModel>> PathModel::Create(const PathConfig& config,
                                                             std::vector<std::string> relations,
                                                             uint64_t seed,
                                                             absl::string_view device_name) {
  if (absl::Status valid = ValidateConfig(config, relations.size()); !valid.ok()) return valid;
  absl::StatusOr<torch::Device> device = ParseDevice(device_name);
  if (!device.ok()) return device.status();
  try {
    torch::manual_seed(seed);
    absl::StatusOr<torch::jit::Module> m = BuildModule(config, relations, nullptr, *device);
    if (!m.ok()) return m.status();
    auto module = std::make_unique<PathModule>(
        PathModule{*std::move(m), *device, config.message_passing == PathMessagePassing::kFused,
                   config.relation_graph});
    return std::unique_ptr<PathModel>(
        new PathModel(config, std::move(relations), std::string(device_name), std::move(module)));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("building the path model failed: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<PathModel>> PathModel::Load(const std::string& path,
                                                           absl::string_view device_name) {
  return LoadArchiveAs<PathModel, PathModule>(path, device_name);
}

absl::StatusOr<std::unique_ptr<PathModel>> PathModel::FromModule(std::unique_ptr<PathModule> module,
                                                                 const std::string& path,
                                                                 absl::string_view device_name) {
  torch::jit::Module& m = module->module;
  const std::string format = ArchiveFormat(m);
  if (format != kPathModelFormat && format != kPathModelFormatPerEdge &&
      format != kUltraModelFormat) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a ", kPathModelFormat, " or ",
                                                   kUltraModelFormat,
                                                   " archive (no or another 'format')"));
  }
  try {
    PathConfig c;
    c.num_layers = static_cast<int>(m.attr("num_layers").toInt());
    c.dim = static_cast<int>(m.attr("dim").toInt());
    c.pna = m.attr("pna").toBool();
    c.dependent = m.attr("dependent").toBool();
    c.layer_norm = m.attr("layer_norm").toBool();
    c.short_cut = m.attr("short_cut").toBool();
    c.pna_delta = m.attr("pna_delta").toDouble();
    c.reach_mask = !m.hasattr("reach_mask") || m.attr("reach_mask").toBool();
    c.reach_feature = m.hasattr("reach_feature") && m.attr("reach_feature").toBool();
    c.relation_graph = format == kUltraModelFormat;
    if (c.relation_graph) c.relation_layers = static_cast<int>(m.attr("relation_layers").toInt());
    std::vector<std::string> relations = ArchiveRelations(m);
    absl::Status valid = ValidateConfig(c, relations.size());
    if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", valid.message()));
    // A NaN or Inf weight makes every score NaN and every ranking arbitrary: refuse it here
    // rather than serve it.
    if (absl::Status finite = CheckFiniteParameters(m, path); !finite.ok()) return finite;
    std::string fingerprint = m.attr("training_fingerprint").toStringRef();
    if (format == kPathModelFormatPerEdge) {
      // Written before the fused operator: the same network, rebuilt over the operator with
      // the archive's parameters (it scores as it did, within float rounding).
      absl::StatusOr<torch::jit::Module> rebuilt = BuildModule(c, relations, &m, module->device);
      if (!rebuilt.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", rebuilt.status().message()));
      }
      module->module = *std::move(rebuilt);
    }
    module->fused = true;
    module->relation_graph = c.relation_graph;
    module->module.eval();
    auto model = std::unique_ptr<PathModel>(
        new PathModel(c, std::move(relations), std::string(device_name), std::move(module)));
    model->fingerprint_ = std::move(fingerprint);
    return model;
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load model ", path, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cannot load model ", path, ": ", e.what()));
  }
}

PathNeighbourhoodSpec PathModel::Neighbourhood(const GraphView* graph, const RelationMap* relations,
                                               int64_t max_nodes) const {
  static const RelationMap* const kIdentity = new RelationMap();
  PathNeighbourhoodSpec spec{graph,
                             relations,
                             num_relations(),
                             config_.radius(),
                             max_nodes,
                             config_.num_layers,
                             config_.pna,
                             config_.message_passing == PathMessagePassing::kFused
                                 ? PathLayout::kCheaper
                                 : PathLayout::kDisjoint,
                             /*relation_graph=*/false,
                             /*prune=*/PathBudget{}};  // the caller sets a budget
  if (config_.relation_graph) {
    spec.relations = kIdentity;
    spec.num_relations = static_cast<int32_t>(graph->num_relations());
    spec.relation_graph = true;
  }
  return spec;
}

absl::Status PathModel::Save(const std::string& path) const {
  return SaveModelArchive(module_->module, fingerprint_, path);
}

int64_t PathModel::num_parameters() const { return CountParameters(module_->module); }

absl::StatusOr<PathScores> PathModel::Score(const PathBatch& batch) const {
  if (batch.num_queries() == 0) return absl::InvalidArgumentError("empty batch");
  try {
    torch::NoGradGuard no_grad;
    auto [node, far] = PathForward(*module_, batch);
    node = node.to(torch::kCPU).contiguous();
    far = far.to(torch::kCPU).contiguous();
    PathScores scores;
    scores.node.assign(node.data_ptr<float>(), node.data_ptr<float>() + node.numel());
    scores.far.assign(far.data_ptr<float>(), far.data_ptr<float>() + far.numel());
    // A pruned query's unvisited entities rank with the least plausible entity it visited
    // when the far score is above it (path_model.h).
    for (int64_t q = 0;
         q < batch.num_queries() && q < static_cast<int64_t>(batch.query_pruned.size()); ++q) {
      if (batch.query_pruned[q] == 0) continue;
      for (int64_t i = batch.node_begin[q]; i < batch.node_begin[q + 1]; ++i) {
        scores.far[q] = std::min(scores.far[q], scores.node[i]);
      }
    }
    return scores;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("forward failed: ", e.what_without_backtrace()));
  } catch (const std::exception& e) {  // the TorchScript interpreter's errors
    return absl::InternalError(absl::StrCat("forward failed: ", e.what()));
  }
}

}  // namespace grail
