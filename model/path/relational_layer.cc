#include "model/path/relational_layer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

namespace grail {
namespace {

// In the pieces below, $P is the layer's parameter prefix and $L its index.

// Message: the relation vectors, per query, arranged for the batch's layout: [R, G d] when
// the columns are the queries (a shared batch), [B R, d] otherwise (one row per query and
// relation, the edges' rows chosen by QueryRows).
constexpr char kPerQueryMessages[] = R"(
  if columns == b:
    w = relation.transpose(0, 1).reshape(n, columns * d)
  else:
    w = relation.reshape(b * n, d)
)";
constexpr char kQueryDependentMessages[] = R"(
  b = query.size(0)
  n = self.num_message_relations
  relation = (torch.matmul(query, self.$Prelation_w_$L) + self.$Prelation_b_$L).view(b, n, d)
)";
constexpr char kProjectedMessages[] = R"(
  n = relations.size(0)
  b = relations.size(1) // d
  projected = torch.matmul(torch.relu(torch.matmul(relations.view(-1, d), self.$Pproject_w1_$L) + self.$Pproject_b1_$L), self.$Pproject_w2_$L) + self.$Pproject_b2_$L
  relation = projected.view(n, b, d).transpose(0, 1)
)";
constexpr char kFreeMessages[] = R"(
  w = self.$Prelation_$L.repeat(1, columns)
)";
// Per edge: each edge's relation vector gathered.
constexpr char kPerEdgeQueryDependentMessages[] = R"(
  relation = (torch.matmul(query, self.$Prelation_w_$L) + self.$Prelation_b_$L).view(-1, d)
  w = relation.index_select(0, edge_query * self.num_message_relations + rel)
)";
constexpr char kPerEdgeFreeMessages[] = R"(
  w = self.$Prelation_$L.index_select(0, rel)
)";

// Aggregate: `update`, [V G, k d], for the combine step.
constexpr char kSumAggregation[] = R"(
  update = ops.grail.rspmm(h, w, boundary, ptr, edges, order, "sum")[0].view(-1, d)
)";
constexpr char kPerEdgeSumAggregation[] = R"(
  message = h.index_select(0, src) * w
  update = torch.zeros_like(h).index_add_(0, dst, message) + boundary
)";
// The boundary takes part as every node's message to itself, as in the paper.
constexpr char kPerEdgePnaAggregation[] = R"(
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
// Combine: W [h, update] + b.
constexpr char kCombine[] = R"(
  out = torch.matmul(torch.cat([h.view(-1, d), update], 1), self.$Pcombine_w_$L) + self.$Pcombine_b_$L
)";
// PNA's aggregate and combine in one, over the fused operator. The combine step
// W [h, features, features * s, features / s] is one product of [features, h] with the
// weights rearranged into three blocks of d columns (h only in the first), then a sum of the
// blocks scaled per node: coef holds (1, s, 1 / s) for each node. grail::pna_combine
// (model/ops/pna_combine.h) runs the product, the scaling and the sum over blocks of rows,
// the [features, h] rows never materialised.
constexpr char kPnaAggregationAndCombine[] = R"(
  aggregate = ops.grail.rspmm(h, w, boundary, ptr, edges, order, "sum,sum_sq,max,min")
  moments = ops.grail.pna_moments(aggregate[0], aggregate[1], count)
  on_features = self.$Pcombine_w_$L[d:].view(3, 4 * d, d).permute(1, 0, 2).reshape(4 * d, 3 * d)
  on_state = torch.cat([self.$Pcombine_w_$L[:d], torch.zeros([d, 2 * d], dtype=h.dtype, device=h.device)], 1)
  weight = torch.cat([on_features, on_state], 0)
  out = ops.grail.pna_combine([moments[0].view(-1, d), aggregate[2].view(-1, d), aggregate[3].view(-1, d), moments[1].view(-1, d), h.view(-1, d)], weight, coef.view(v, 3), self.$Pcombine_b_$L)
)";
constexpr char kLayerNorm[] = R"(
  out = torch.layer_norm(out, [d], self.$Pnorm_w_$L, self.$Pnorm_b_$L, 1e-5)
)";

const char* Messages(const RelationalLayer& layer) {
  switch (layer.messages) {
    case RelationalMessages::kQueryDependent:
      return layer.fused ? kQueryDependentMessages : kPerEdgeQueryDependentMessages;
    case RelationalMessages::kProjected:
      return kProjectedMessages;
    case RelationalMessages::kFree:
      break;
  }
  return layer.fused ? kFreeMessages : kPerEdgeFreeMessages;
}

std::string AggregateAndCombine(const RelationalLayer& layer) {
  const bool pna = layer.aggregation == RelationalAggregation::kPna;
  if (layer.fused) return pna ? kPnaAggregationAndCombine : absl::StrCat(kSumAggregation, kCombine);
  return absl::StrCat(pna ? kPerEdgePnaAggregation : kPerEdgeSumAggregation, kCombine);
}

// Layer l of `layer`.
std::string LayerMethod(const RelationalLayer& layer, int l) {
  std::string arguments;
  for (const std::string& input : layer.inputs)
    absl::StrAppend(&arguments, ", ", input, ": Tensor");
  const std::string activation =
      layer.reach_mask
          ? absl::StrCat("torch.relu(out) * (node_dist <= ", l + 1, ").to(out.dtype).view(-1, 1)")
          : "torch.relu(out)";
  const std::string source = absl::StrCat(
      "\ndef ", layer.name, "_$L(self, h: Tensor, boundary: Tensor", arguments, ") -> Tensor:\n",
      "  d = self.dim\n  v = h.size(0)\n  columns = h.size(1) // d", Messages(layer),
      layer.messages == RelationalMessages::kFree || !layer.fused ? "" : kPerQueryMessages,
      AggregateAndCombine(layer), layer.layer_norm ? kLayerNorm : "", "  out = ", activation,
      "\n  return (", layer.short_cut ? "out + h.view(-1, d)" : "out", ").view(v, columns * d)\n");
  return absl::StrReplaceAll(source, {{"$P", layer.prefix}, {"$L", absl::StrCat(l)}});
}

}  // namespace

std::string LayerMethods(const RelationalLayer& layer, int layers) {
  std::string methods;
  for (int l = 0; l < layers; ++l) methods += LayerMethod(layer, l);
  return methods;
}

std::string LayerCalls(const RelationalLayer& layer, int layers, const std::string& state,
                       const std::string& arguments) {
  std::string lines;
  for (int l = 0; l < layers; ++l) {
    absl::StrAppend(&lines, "  ", state, l + 1, " = self.", layer.name, "_", l, "(", state, l, ", ",
                    arguments, ")\n");
  }
  return lines;
}

std::string ScoringMethods(bool reach_feature) {
  return absl::StrReplaceAll(
      R"(
def mlp(self, x: Tensor) -> Tensor:
  return self.mlp_out(torch.matmul(x, self.mlp_w1) + self.mlp_b1)

def mlp_hidden(self, h: Tensor, cells: Tensor, query: Tensor) -> Tensor:
  d = self.dim
  return torch.matmul(h, self.mlp_w1[:d]) + torch.matmul(query, self.mlp_w1[d:2 * d]).index_select(0, cells) + self.mlp_b1

def mlp_out(self, hidden: Tensor) -> Tensor:
  return (torch.matmul(torch.relu(hidden), self.mlp_w2) + self.mlp_b2).squeeze(1)

def score(self, h: Tensor, cells: Tensor, query: Tensor) -> Tensor:
  return self.mlp_out(self.mlp_hidden(h, cells, query))

def far(self, query: Tensor) -> Tensor:
  return self.mlp(torch.cat([torch.zeros_like(query), query$UNREACHED], 1))
)",
      {{"$UNREACHED", reach_feature ? ", torch.zeros_like(query[:, :1])" : ""}});
}

std::string ScoringTail(bool reach_feature, const std::string& state, int last) {
  std::string lines =
      absl::StrCat("  hidden = self.mlp_hidden(", state, last, ".view(-1, d), cells, query)\n");
  if (reach_feature) {
    absl::StrAppend(&lines, "  hidden = hidden + (node_dist <= ", last,
                    ").to(query.dtype).view(-1, 1) * self.mlp_w1[2 * d]\n");
  }
  absl::StrAppend(&lines, "  return self.mlp_out(hidden), self.far(query)\n");
  return lines;
}

std::string OperatorGraph(const std::string& prefix, const std::string& src,
                          const std::string& relation, const std::string& dst,
                          const std::string& n) {
  return absl::StrCat("  ", prefix, "graph = ops.grail.relational_graph(", src, ", ", relation,
                      ", ", dst, ", ", n, ")\n  ", prefix, "ptr = ", prefix, "graph[0]\n  ", prefix,
                      "edges = ", prefix, "graph[1]\n  ", prefix, "order = ", prefix, "graph[2]\n");
}

std::string Boundary(const std::string& name, const std::string& rows, const std::string& columns,
                     const std::string& cells, const std::string& values) {
  return absl::StrCat("  ", name, " = torch.zeros([", rows, " * ", columns, ", d], dtype=", values,
                      ".dtype, device=", values, ".device).index_copy(0, ", cells, ", ", values,
                      ").view(", rows, ", ", columns, " * d)\n");
}

std::string QueryRows(const std::string& n, const std::string& relation) {
  return absl::StrCat("  if columns == b:\n    rel = ", relation,
                      "\n  else:\n    rel = cells.index_select(0, edge_src) * ", n, " + ", relation,
                      "\n");
}

}  // namespace grail
