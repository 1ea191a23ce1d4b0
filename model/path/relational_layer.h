// The path networks' TorchScript, built from one layer and a few named pieces.
//
// Every network of the path family (NBFNet's, A*Net's with its learned priority, and both of
// ULTRA's: over the graph of relations and over the entities) is a stack of one generalised
// relational convolution, as NBFNet's `GeneralizedRelationalConv` is:
//   message    the relation vectors w_r each message is multiplied by (RelationalMessages)
//   aggregate  the messages summed per receiver, with the boundary as every node's message to
//              itself, or PNA's statistics of them (RelationalAggregation); over the fused
//              operator (model/ops/rspmm.h), or every message materialised (kPerEdge)
//   combine    W [h, a] + b, then layer norm, ReLU (masked by reach), and the short-cut
// A network is then the layers it stacks (LayerMethods, LayerCalls), the graph and boundary
// its forward builds (OperatorGraph, Boundary, QueryRows) and the scoring MLP
// (ScoringMethods, ScoringTail): the compositions are in path_network.cc and
// model/ultra/ultra_network.cc.
// Each piece is written here once. Text only: no LibTorch.
#ifndef GRAIL_MODEL_PATH_RELATIONAL_LAYER_H_
#define GRAIL_MODEL_PATH_RELATIONAL_LAYER_H_

#include <string>
#include <vector>

namespace grail {

// Where a layer's relation vectors w_r come from.
enum class RelationalMessages {
  kQueryDependent,  // w_r(q) = W_r q + b_r, per query (`query` input; NBFNet's)
  kFree,            // one learned vector per relation, the same for every query
  kProjected,       // w_r = P(x_r): a two-layer perceptron of relation states given per query
                    // (`relations` input, [R, B d]; ULTRA's entity layers). Fused only.
};

// How the messages become a node's update.
enum class RelationalAggregation {
  kSum,  // sum of the messages and the boundary
  kPna,  // PNA: mean, max, min and standard deviation, each scaled by 1, s and 1/s
         // (fused: `count` and `coef` inputs; per edge: `in_count`)
};

// One layer of a network; the method is `<name>_<l>(self, h, boundary, <inputs>...)`.
struct RelationalLayer {
  std::string name = "layer";
  // Parameters are <prefix>combine_w_<l>, <prefix>relation_<l>, ... (ULTRA's relation graph
  // network: "rel_").
  std::string prefix;
  // The method's Tensor arguments after h and boundary, in order. What the pieces read must
  // be among them: the operator's graph (ptr, edges, order) or, per edge, src, dst, rel and
  // edge_query; query, relations, node_dist, count, coef or in_count as above.
  std::vector<std::string> inputs;
  bool fused = true;  // false: every message materialised (PathMessagePassing::kPerEdge)
  RelationalMessages messages = RelationalMessages::kQueryDependent;
  RelationalAggregation aggregation = RelationalAggregation::kSum;
  bool layer_norm = true;
  // ReLU(...) * 1[d(source, v) <= l + 1] (a `node_dist` input); otherwise ReLU alone.
  bool reach_mask = false;
  bool short_cut = true;  // the new state adds to the old one instead of replacing it
};

// Layers 0 .. layers - 1 of `layer` as TorchScript methods: states [V, G d] in, [V, G d] out
// (G columns; model/path/path_batch.h), `self.dim` wide.
std::string LayerMethods(const RelationalLayer& layer, int layers);

// Lines of forward() running `layers` layers: "<state><l + 1> = self.<name>_<l>(<state><l>,
// <arguments>)" for l = 0 .. layers - 1; the caller names <state>0 before and reads
// <state><layers> after.
std::string LayerCalls(const RelationalLayer& layer, int layers, const std::string& state,
                       const std::string& arguments);

// The methods of the scoring MLP s = MLP([h_v, q]) (parameters mlp_w1, mlp_b1, mlp_w2, mlp_b2):
//   mlp(x)                     the whole MLP on its input rows
//   mlp_hidden(h, cells, query) its first layer split: each cell's state times the first d
//                              rows, plus its query's product (computed once per query)
//   mlp_out(hidden)            ReLU and the second layer
//   score(h, cells, query)     both, for the states `h` of `cells`
//   far(query)                 the score of an entity no path reaches: MLP([0, q]) (and a 0
//                              reach bit with `reach_feature`)
std::string ScoringMethods(bool reach_feature);

// The end of forward(): every cell's score from the states `<state><last>` (cells named
// `cells`, one query each), with the reach bit 1[node_dist <= last] added when
// `reach_feature`, and every query's far score; returns (node scores, far scores).
std::string ScoringTail(bool reach_feature, const std::string& state, int last);

// Lines unpacking the fused operator's graph of `n` nodes from edges (src, relation row,
// dst): <prefix>ptr, <prefix>edges, <prefix>order.
std::string OperatorGraph(const std::string& prefix, const std::string& src,
                          const std::string& relation, const std::string& dst,
                          const std::string& n);

// A line setting `name` to the states [rows, columns d]: zero but for the cells at `cells`
// (flat indices row * columns + column), which hold the rows of `values`.
std::string Boundary(const std::string& name, const std::string& rows, const std::string& columns,
                     const std::string& cells, const std::string& values);

// Lines setting `rel`, each edge's row of the layers' relation vectors: `relation` itself when
// the batch's columns are its queries (a shared batch), else the edge's query times `n` plus
// `relation` (a disjoint batch: each query's vectors in rows of its own). Reads `columns`,
// `b` and `cells`.
std::string QueryRows(const std::string& n, const std::string& relation);

}  // namespace grail

#endif  // GRAIL_MODEL_PATH_RELATIONAL_LAYER_H_
