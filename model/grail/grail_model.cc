#include "model/grail/grail_model.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "model/core/model_archive.h"
#include "model/core/torch_util.h"
#include "model/grail/grail_module.h"

namespace grail {
namespace {

// The network in TorchScript, one line per equation of the paper. `$L` blocks are
// expanded per layer by ModuleSource(); attention lines only exist when attention is on.
//
// Layer (SPEC step 3), messages along edge direction s -> t:
//   a_t = sum_{r, s in N_r(t)} alpha * W_r h_s,    h_t' = ReLU(W_self h_t + a_t)
//   W_r = sum_b c_rb V_b                            (R-GCN basis decomposition)
//   alpha = sigmoid(A2 ReLU(A1 [h_s + h_t + e^a_r + e^a_rt] + b1) + b2)
// Two rewrites keep per-edge work to gathers and adds: V_b h is computed once per node and
// mixed per edge with c_r; A1's product distributes over the concatenation, so its node
// parts are computed once per node and its relation parts once per relation.
constexpr char kLayerSignature[] = R"(
def layer_$L(self, h: Tensor, src: Tensor, dst: Tensor, rel: Tensor, node_target: Tensor,
             training: bool) -> Tensor:
  n = h.size(0)
  bases = self.basis_$L.size(0)
  in_dim = self.basis_$L.size(1)
  out_dim = self.basis_$L.size(2)
)";
constexpr char kLayerHead[] = R"(
  per_basis = torch.matmul(h, self.basis_$L.permute(1, 0, 2).reshape(in_dim, bases * out_dim)).view(n, bases, out_dim)
  message = (per_basis.index_select(0, src) * self.coeff_$L.index_select(0, rel).unsqueeze(2)).sum(1)
)";
// When a layer's input is narrower than its output (layer 0 reads the 2(k+1)-wide labels),
// the same sum is cheaper the other way round: mix the inputs per edge and basis,
// aggregate them per node, then apply V_b once per node. Linear algebra makes the two
// equal; per edge it moves bases * in floats instead of bases * out.
constexpr char kNarrowLayerHead[] = R"(
  edge_weight = self.coeff_$L.index_select(0, rel)
)";
constexpr char kLayerAttention[] = R"(
  at_node = torch.matmul(h, self.att_dst_$L) + torch.matmul(self.attention_relation_embedding, self.att_target_$L).index_select(0, node_target)
  z = torch.matmul(h, self.att_src_$L).index_select(0, src) + at_node.index_select(0, dst) + torch.matmul(self.attention_relation_embedding, self.att_rel_$L).index_select(0, rel) + self.att_b1_$L
  alpha = torch.sigmoid(torch.matmul(torch.relu(z), self.att_w2_$L) + self.att_b2_$L)
)";
// alpha scales the edge's message, or in the narrow form its basis weights: the same product.
constexpr char kApplyAttention[] = "  message = message * alpha\n";
constexpr char kNarrowApplyAttention[] = "  edge_weight = edge_weight * alpha\n";
constexpr char kLayerTail[] = R"(
  if training and self.edge_dropout > 0.0:
    keep = torch.dropout(torch.ones([message.size(0), 1], dtype=message.dtype, device=message.device), self.edge_dropout, True)
    message = message * keep
  aggregated = torch.zeros([n, out_dim], dtype=h.dtype, device=h.device).index_add_(0, dst, message)
  return torch.relu($SELF + aggregated)
)";
constexpr char kNarrowLayerTail[] = R"(
  if training and self.edge_dropout > 0.0:
    keep = torch.dropout(torch.ones([edge_weight.size(0), 1], dtype=edge_weight.dtype, device=edge_weight.device), self.edge_dropout, True)
    edge_weight = edge_weight * keep
  mixed = (edge_weight.unsqueeze(2) * h.index_select(0, src).unsqueeze(1)).reshape(edge_weight.size(0), bases * in_dim)
  gathered = torch.zeros([n, bases * in_dim], dtype=h.dtype, device=h.device).index_add_(0, dst, mixed)
  aggregated = torch.matmul(gathered, self.basis_$L.reshape(bases * in_dim, out_dim))
  return torch.relu($SELF + aggregated)
)";
// The self-connection W_self h_t; with zero_without_in_edges only for nodes with an in-edge
// (structural: edge dropout does not remove edges, it scales their messages).
constexpr char kSelfTerm[] = "torch.matmul(h, self.self_$L)";
constexpr char kGatedSelfTerm[] =
    "torch.matmul(h, self.self_$L) * (torch.bincount(dst, minlength=n) > "
    "0).to(h.dtype).unsqueeze(1)";

// Readout (SPEC step 4) with JK connections: per layer, mean of node states, u's and v's
// states; then e_rt; one linear layer to the score.
constexpr char kForwardHead[] = R"(
def one_hot_distance(self, dist: Tensor) -> Tensor:
  levels = torch.arange(self.hops + 1, device=dist.device)
  return (dist.unsqueeze(1) == levels.unsqueeze(0)).float()

def forward(self, dist_u: Tensor, dist_v: Tensor, node_graph: Tensor, edge_src: Tensor,
            edge_dst: Tensor, edge_relation: Tensor, head_index: Tensor, tail_index: Tensor,
            target_relation: Tensor, $FEATURE_ARGtraining: bool) -> Tensor:
  if self.node_labels:
    h0 = torch.cat([self.one_hot_distance(dist_u), self.one_hot_distance(dist_v)], 1)
  else:
    ones = torch.ones_like(dist_u)
    h0 = torch.cat([self.one_hot_distance(ones), self.one_hot_distance(ones)], 1)
$FEATURES  node_target = target_relation.index_select(0, node_graph)
)";
// Early fusion: each node's fixed features (its row of node_features; the last row is zeros)
// and a flag bit that is 1 for an entity without features, after its labels.
constexpr char kFeatureArg[] = "node_feature: Tensor, ";
constexpr char kFeatures[] = R"(  h0 = self.with_node_features(h0, node_feature)
)";
constexpr char kFeatureMethod[] = R"(
def with_node_features(self, labels: Tensor, node_feature: Tensor) -> Tensor:
  missing = (node_feature == self.node_features.size(0) - 1).to(labels.dtype).unsqueeze(1)
  return torch.cat([labels, self.node_features.index_select(0, node_feature), missing], 1)
)";
constexpr char kForwardLayer[] = R"(
  h$N = self.layer_$L(h$L, edge_src, edge_dst, edge_relation, node_target, training)
)";
constexpr char kForwardTail[] = R"(
  states = torch.cat([$STATES], 1)
  num_graphs = head_index.size(0)
  sizes = torch.zeros([num_graphs], dtype=states.dtype, device=states.device).index_add_(0, node_graph, torch.ones([node_graph.size(0)], dtype=states.dtype, device=states.device))
  pooled = torch.zeros([num_graphs, states.size(1)], dtype=states.dtype, device=states.device).index_add_(0, node_graph, states) / sizes.unsqueeze(1)
  readout = torch.cat([pooled, states.index_select(0, head_index), states.index_select(0, tail_index), self.relation_embedding.index_select(0, target_relation)], 1)
  return torch.matmul(readout, self.score_weight).squeeze(1) + self.score_bias
)";

std::string ModuleSource(const GrailConfig& config) {
  std::string source;
  for (int l = 0; l < config.num_layers; ++l) {
    const std::string layer = absl::StrCat(l);
    const bool narrow =
        config.narrow_input_layers && (l == 0 ? config.input_dim() : config.dim) < config.dim;
    absl::StrAppend(&source, absl::StrReplaceAll(kLayerSignature, {{"$L", layer}}),
                    absl::StrReplaceAll(narrow ? kNarrowLayerHead : kLayerHead, {{"$L", layer}}));
    if (config.attention) {
      absl::StrAppend(&source, absl::StrReplaceAll(kLayerAttention, {{"$L", layer}}),
                      narrow ? kNarrowApplyAttention : kApplyAttention);
    }
    absl::StrAppend(&source,
                    absl::StrReplaceAll(
                        absl::StrReplaceAll(
                            narrow ? kNarrowLayerTail : kLayerTail,
                            {{"$SELF", config.zero_without_in_edges ? kGatedSelfTerm : kSelfTerm}}),
                        {{"$L", layer}}));
  }
  const bool features = config.node_feature_dim > 0;
  if (features) absl::StrAppend(&source, kFeatureMethod);
  absl::StrAppend(&source,
                  absl::StrReplaceAll(kForwardHead, {{"$FEATURE_ARG", features ? kFeatureArg : ""},
                                                     {"$FEATURES", features ? kFeatures : ""}}));
  std::string states;
  for (int l = 0; l < config.num_layers; ++l) {
    absl::StrAppend(&source, absl::StrReplaceAll(kForwardLayer, {{"$N", absl::StrCat(l + 1)},
                                                                 {"$L", absl::StrCat(l)}}));
    absl::StrAppend(&states, l > 0 ? ", " : "", "h", l + 1);
  }
  absl::StrAppend(&source, absl::StrReplaceAll(kForwardTail, {{"$STATES", states}}));
  return source;
}

absl::Status ValidateConfig(const GrailConfig& c, size_t num_relations) {
  if (c.hops < 1 || c.hops > 10) {
    return absl::InvalidArgumentError(absl::StrCat("hops must be in [1, 10], got ", c.hops));
  }
  if (c.num_layers < 1 || c.num_layers > 10) {
    return absl::InvalidArgumentError(
        absl::StrCat("layers must be in [1, 10], got ", c.num_layers));
  }
  if (c.dim < 1 || c.num_bases < 1 || c.relation_dim < 1) {
    return absl::InvalidArgumentError("dims and bases must be positive");
  }
  if (!(c.edge_dropout >= 0 && c.edge_dropout < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("edge dropout must be in [0, 1), got ", c.edge_dropout));
  }
  if (num_relations == 0) return absl::InvalidArgumentError("the relation vocabulary is empty");
  return absl::OkStatus();
}

// Xavier-uniform with ReLU gain, as the reference initialises R-GCN weights.
torch::Tensor XavierRelu(std::vector<int64_t> shape, int64_t fan_in, int64_t fan_out) {
  const double bound = std::sqrt(2.0) * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return torch::empty(shape).uniform_(-bound, bound);
}

void RegisterParameters(const GrailConfig& c, int64_t num_relations, torch::jit::Module& m) {
  auto add = [&m](const std::string& name, torch::Tensor t) {
    m.register_parameter(name, t.set_requires_grad(true), /*is_buffer=*/false);
  };
  add("relation_embedding", torch::randn({num_relations, c.relation_dim}));
  if (c.attention)
    add("attention_relation_embedding", torch::randn({num_relations, c.relation_dim}));
  for (int l = 0; l < c.num_layers; ++l) {
    const int64_t in = l == 0 ? c.input_dim() : c.dim;
    const int64_t out = c.dim;
    const std::string s = absl::StrCat("_", l);
    add("basis" + s, XavierRelu({c.num_bases, in, out}, in * out, c.num_bases * out));
    add("coeff" + s, XavierRelu({num_relations, c.num_bases}, c.num_bases, num_relations));
    add("self" + s, XavierRelu({in, out}, in, out));
    if (c.attention) {
      // A1 maps [h_s, h_t, e^a_r, e^a_rt] (2 in + 2 relation_dim) to `in` units, as in the
      // reference; it is stored as its four column blocks.
      const int64_t fan_in = 2 * in + 2 * c.relation_dim;
      add("att_src" + s, LinearInit({in, in}, fan_in));
      add("att_dst" + s, LinearInit({in, in}, fan_in));
      add("att_rel" + s, LinearInit({c.relation_dim, in}, fan_in));
      add("att_target" + s, LinearInit({c.relation_dim, in}, fan_in));
      add("att_b1" + s, LinearInit({in}, fan_in));
      add("att_w2" + s, LinearInit({in, 1}, in));
      add("att_b2" + s, LinearInit({1}, in));
    }
  }
  const int64_t readout = 3 * c.num_layers * c.dim + c.relation_dim;
  add("score_weight", LinearInit({readout, 1}, readout));
  add("score_bias", LinearInit({1}, readout));
}

void RegisterAttributes(const GrailConfig& c, const std::vector<std::string>& relations,
                        const std::string& fingerprint, torch::jit::Module& m) {
  m.register_attribute("format", c10::StringType::get(), std::string(kGrailModelFormat));
  m.register_attribute("hops", c10::IntType::get(), static_cast<int64_t>(c.hops));
  m.register_attribute("max_nodes_per_hop", c10::IntType::get(),
                       static_cast<int64_t>(c.max_nodes_per_hop));
  m.register_attribute("enclosing", c10::BoolType::get(), c.enclosing);
  m.register_attribute("node_labels", c10::BoolType::get(), c.node_labels);
  m.register_attribute("attention", c10::BoolType::get(), c.attention);
  m.register_attribute("num_layers", c10::IntType::get(), static_cast<int64_t>(c.num_layers));
  m.register_attribute("dim", c10::IntType::get(), static_cast<int64_t>(c.dim));
  m.register_attribute("num_bases", c10::IntType::get(), static_cast<int64_t>(c.num_bases));
  m.register_attribute("relation_dim", c10::IntType::get(), static_cast<int64_t>(c.relation_dim));
  m.register_attribute("label_dim", c10::IntType::get(), static_cast<int64_t>(c.label_dim()));
  m.register_attribute("edge_dropout", c10::FloatType::get(), c.edge_dropout);
  m.register_attribute("zero_without_in_edges", c10::BoolType::get(), c.zero_without_in_edges);
  m.register_attribute("node_feature_dim", c10::IntType::get(),
                       static_cast<int64_t>(c.node_feature_dim));
  c10::List<std::string> names;
  for (const std::string& r : relations) names.push_back(r);
  m.register_attribute("relations", c10::ListType::ofStrings(), names);
  m.register_attribute("training_fingerprint", c10::StringType::get(), fingerprint);
}

}  // namespace

std::vector<torch::jit::IValue> BatchInputs(const GrailModule& grail, const SubgraphBatch& batch,
                                            bool training) {
  auto tensor = [&grail](const std::vector<int64_t>& v) { return Int64Tensor(v, grail.device); };
  std::vector<torch::jit::IValue> inputs = {
      tensor(batch.dist_u),     tensor(batch.dist_v),     tensor(batch.node_graph),
      tensor(batch.edge_src),   tensor(batch.edge_dst),   tensor(batch.edge_relation),
      tensor(batch.head_index), tensor(batch.tail_index), tensor(batch.target_relation)};
  if (grail.node_features) inputs.push_back(tensor(batch.node_feature));
  inputs.push_back(torch::jit::IValue(training));
  return inputs;
}

torch::Tensor Forward(GrailModule& grail, const SubgraphBatch& batch, bool training) {
  return grail.module.forward(BatchInputs(grail, batch, training)).toTensor();
}

void AttachNodeFeatures(absl::Span<const int32_t> rows, EnclosingSubgraph* subgraph) {
  subgraph->node_feature.resize(subgraph->nodes.size());
  for (size_t i = 0; i < subgraph->nodes.size(); ++i) {
    subgraph->node_feature[i] = rows[subgraph->nodes[i]];
  }
}

GrailModel::GrailModel(GrailConfig config, std::vector<std::string> relations, std::string device,
                       std::unique_ptr<GrailModule> module)
    : config_(std::move(config)),
      relations_(std::move(relations)),
      device_(std::move(device)),
      module_(std::move(module)) {}

GrailModel::~GrailModel() = default;

absl::StatusOr<std::unique_ptr<GrailModel>> GrailModel::Create(const GrailConfig& config,
                                                               std::vector<std::string> relations,
                                                               uint64_t seed,
                                                               absl::string_view device_name,
                                                               const NodeFeatures* features) {
  absl::Status valid = ValidateConfig(config, relations.size());
  if (!valid.ok()) return valid;
  if (config.node_feature_dim > 0) {
    if (features == nullptr || features->dim != config.node_feature_dim ||
        features->values.size() != features->entities.size() * features->dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("node_feature_dim is ", config.node_feature_dim,
                       ": the model needs node features of that width, one row per entity"));
    }
  }
  absl::StatusOr<torch::Device> device = ParseDevice(device_name);
  if (!device.ok()) return device.status();
  try {
    torch::manual_seed(seed);
    torch::jit::Module m("GrailModel");
    RegisterAttributes(config, relations, "", m);
    if (config.node_feature_dim > 0) {
      // One row per entity, then the zero row of entities without features.
      const auto rows = static_cast<int64_t>(features->entities.size());
      torch::Tensor table = torch::zeros({rows + 1, config.node_feature_dim});
      if (rows > 0) {
        table.slice(0, 0, rows)
            .copy_(torch::from_blob(const_cast<float*>(features->values.data()),
                                    {rows, config.node_feature_dim}, torch::kFloat32));
      }
      m.register_buffer("node_features", table);
      c10::List<std::string> names;
      for (const std::string& e : features->entities) names.push_back(e);
      m.register_attribute("node_feature_entities", c10::ListType::ofStrings(), names);
    }
    RegisterParameters(config, static_cast<int64_t>(relations.size()), m);
    m.define(ModuleSource(config));
    m.to(*device);
    auto module = std::make_unique<GrailModule>(
        GrailModule{std::move(m), *device, config.node_feature_dim > 0});
    auto model = std::unique_ptr<GrailModel>(
        new GrailModel(config, std::move(relations), std::string(device_name), std::move(module)));
    if (config.node_feature_dim > 0) model->feature_entities_ = Vocabulary(features->entities);
    return model;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("building the model failed: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<GrailModel>> GrailModel::Load(const std::string& path,
                                                             absl::string_view device_name) {
  return LoadArchiveAs<GrailModel, GrailModule>(path, device_name);
}

absl::StatusOr<std::unique_ptr<GrailModel>> GrailModel::FromModule(
    std::unique_ptr<GrailModule> module, const std::string& path, absl::string_view device_name) {
  torch::jit::Module& m = module->module;
  if (ArchiveFormat(m) != kGrailModelFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a ", kGrailModelFormat, " archive (no or another 'format')"));
  }
  try {
    GrailConfig c;
    c.hops = static_cast<int>(m.attr("hops").toInt());
    c.max_nodes_per_hop = static_cast<int>(m.attr("max_nodes_per_hop").toInt());
    c.enclosing = m.attr("enclosing").toBool();
    c.node_labels = m.attr("node_labels").toBool();
    c.attention = m.attr("attention").toBool();
    c.num_layers = static_cast<int>(m.attr("num_layers").toInt());
    c.dim = static_cast<int>(m.attr("dim").toInt());
    c.num_bases = static_cast<int>(m.attr("num_bases").toInt());
    c.relation_dim = static_cast<int>(m.attr("relation_dim").toInt());
    c.edge_dropout = m.attr("edge_dropout").toDouble();
    // Archives from before the option existed use the paper's formula.
    c.zero_without_in_edges =
        m.hasattr("zero_without_in_edges") && m.attr("zero_without_in_edges").toBool();
    // Likewise, archives from before early fusion have no node features.
    c.node_feature_dim =
        m.hasattr("node_feature_dim") ? static_cast<int>(m.attr("node_feature_dim").toInt()) : 0;
    Vocabulary feature_entities;
    if (c.node_feature_dim > 0) {
      std::vector<std::string> names;
      for (const c10::IValue& name : m.attr("node_feature_entities").toListRef()) {
        names.push_back(name.toStringRef());
      }
      const torch::Tensor table = m.attr("node_features").toTensor();
      if (table.dim() != 2 || table.size(0) != static_cast<int64_t>(names.size()) + 1 ||
          table.size(1) != c.node_feature_dim) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": its node features do not match their entities and width"));
      }
      feature_entities = Vocabulary(names);
      module->node_features = true;
    }
    std::vector<std::string> relations = ArchiveRelations(m);
    absl::Status valid = ValidateConfig(c, relations.size());
    if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", valid.message()));
    // A NaN or Inf weight makes every score NaN and every ranking arbitrary: refuse it here
    // rather than serve it.
    if (absl::Status finite = CheckFiniteParameters(m, path); !finite.ok()) return finite;
    m.eval();
    std::string fingerprint = m.attr("training_fingerprint").toStringRef();
    auto model = std::unique_ptr<GrailModel>(
        new GrailModel(c, std::move(relations), std::string(device_name), std::move(module)));
    model->fingerprint_ = std::move(fingerprint);
    model->feature_entities_ = std::move(feature_entities);
    return model;
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load model ", path, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cannot load model ", path, ": ", e.what()));
  }
}

absl::Status GrailModel::Save(const std::string& path) const {
  return SaveModelArchive(module_->module, fingerprint_, path);
}

int64_t GrailModel::num_parameters() const { return CountParameters(module_->module); }

void AttachNodeFeatures(const GrailModel& model,
                        const std::function<absl::string_view(EntityId)>& name,
                        EnclosingSubgraph* subgraph) {
  if (model.config().node_feature_dim == 0) return;
  subgraph->node_feature.resize(subgraph->nodes.size());
  for (size_t i = 0; i < subgraph->nodes.size(); ++i) {
    subgraph->node_feature[i] = model.NodeFeatureRow(name(subgraph->nodes[i]));
  }
}

int32_t GrailModel::NodeFeatureRow(absl::string_view entity) const {
  const std::optional<uint32_t> row = feature_entities_.Find(entity);
  return static_cast<int32_t>(row ? *row : feature_entities_.size());
}

std::vector<int32_t> GrailModel::NodeFeatureRows(absl::Span<const std::string> entities) const {
  std::vector<int32_t> rows;
  rows.reserve(entities.size());
  for (const std::string& e : entities) rows.push_back(NodeFeatureRow(e));
  return rows;
}

absl::StatusOr<std::vector<float>> GrailModel::Score(const SubgraphBatch& batch) const {
  if (batch.num_graphs() == 0) return absl::InvalidArgumentError("empty batch");
  const int64_t relations = static_cast<int64_t>(relations_.size());
  for (int64_t r : batch.target_relation) {
    if (r < 0 || r >= relations) {
      return absl::InvalidArgumentError(absl::StrCat(
          "target relation id ", r, " is outside the model's ", relations, " relations"));
    }
  }
  if (absl::Status s = CheckNodeFeatures(batch); !s.ok()) return s;
  try {
    torch::NoGradGuard no_grad;
    torch::Tensor scores =
        Forward(*module_, batch, /*training=*/false).to(torch::kCPU).contiguous();
    const float* data = scores.data_ptr<float>();
    return std::vector<float>(data, data + scores.numel());
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("forward failed: ", e.what_without_backtrace()));
  }
}

absl::Status GrailModel::CheckNodeFeatures(const SubgraphBatch& batch) const {
  if (config_.node_feature_dim == 0) return absl::OkStatus();
  if (batch.node_feature.size() != batch.dist_u.size()) {
    return absl::InvalidArgumentError(
        "the model reads node features (early fusion), and the batch has no feature row per "
        "node");
  }
  for (int64_t row : batch.node_feature) {
    if (row < 0 || row > static_cast<int64_t>(feature_entities_.size())) {
      return absl::InvalidArgumentError(absl::StrCat("node feature row ", row, " is out of range"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<float>>> GrailModel::EdgeAttention(
    const SubgraphBatch& batch) const {
  if (batch.num_graphs() == 0) return absl::InvalidArgumentError("empty batch");
  if (absl::Status s = CheckNodeFeatures(batch); !s.ok()) return s;
  const size_t edges = static_cast<size_t>(batch.num_edges());
  std::vector<std::vector<float>> attention(config_.num_layers, std::vector<float>(edges, 1.0f));
  if (!config_.attention || edges == 0) return attention;
  try {
    torch::NoGradGuard no_grad;
    torch::jit::Module& m = module_->module;
    const std::vector<torch::jit::IValue> in = BatchInputs(*module_, batch, false);
    const torch::Tensor dist_u = in[0].toTensor(), dist_v = in[1].toTensor();
    const torch::Tensor node_graph = in[2].toTensor(), src = in[3].toTensor();
    const torch::Tensor dst = in[4].toTensor(), rel = in[5].toTensor();
    const torch::Tensor target = in[8].toTensor();
    // The forward's first lines (kForwardHead), then per layer the attention equations
    // (kLayerAttention) on the layer's input states, then the layer itself.
    torch::Tensor h;
    if (config_.node_labels) {
      h = torch::cat({m.run_method("one_hot_distance", dist_u).toTensor(),
                      m.run_method("one_hot_distance", dist_v).toTensor()},
                     1);
    } else {
      const torch::Tensor ones = torch::ones_like(dist_u);
      const torch::Tensor one_hot = m.run_method("one_hot_distance", ones).toTensor();
      h = torch::cat({one_hot, one_hot}, 1);
    }
    if (config_.node_feature_dim > 0) {
      h = m.run_method("with_node_features", h, in[9].toTensor()).toTensor();
    }
    const torch::Tensor node_target = target.index_select(0, node_graph);
    const torch::Tensor relation_embedding = m.attr("attention_relation_embedding").toTensor();
    for (int l = 0; l < config_.num_layers; ++l) {
      auto param = [&](const char* name) { return m.attr(absl::StrCat(name, l)).toTensor(); };
      const torch::Tensor at_node =
          torch::matmul(h, param("att_dst_")) +
          torch::matmul(relation_embedding, param("att_target_")).index_select(0, node_target);
      const torch::Tensor z =
          torch::matmul(h, param("att_src_")).index_select(0, src) + at_node.index_select(0, dst) +
          torch::matmul(relation_embedding, param("att_rel_")).index_select(0, rel) +
          param("att_b1_");
      const torch::Tensor alpha =
          torch::sigmoid(torch::matmul(torch::relu(z), param("att_w2_")) + param("att_b2_"))
              .reshape({-1})
              .to(torch::kCPU)
              .contiguous();
      const float* data = alpha.data_ptr<float>();
      attention[l].assign(data, data + alpha.numel());
      h = m.run_method(absl::StrCat("layer_", l), h, src, dst, rel, node_target, false).toTensor();
    }
    return attention;
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("attention failed: ", e.what_without_backtrace()));
  }
}

}  // namespace grail
