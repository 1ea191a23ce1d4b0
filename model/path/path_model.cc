#include "model/path/path_model.h"

#include <algorithm>
#include <mutex>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/core/model_archive.h"
#include "model/core/torch_util.h"
#include "model/ops/rspmm.h"
#include "model/path/path_module.h"
#include "torch/csrc/jit/frontend/resolver.h"
#include "torch/csrc/jit/frontend/sugared_value.h"
#include "torch/version.h"  // TORCH_VERSION_MAJOR

namespace grail {
namespace {

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

// What every path network shares, then what `network` needs of `c`.
absl::Status ValidateConfig(const PathConfig& c, size_t num_relations,
                            const PathNetworkDefinition& network) {
  if (c.num_layers < 1 || c.num_layers > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("layers must be in [1, 16], got ", c.num_layers));
  }
  if (c.dim < 1) return absl::InvalidArgumentError("dim must be positive");
  if (!(c.pna_delta > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("pna_delta must be > 0, got ", c.pna_delta));
  }
  if (absl::Status valid = network.Validate(c, num_relations); !valid.ok()) return valid;
  if (c.pna && c.message_passing == PathMessagePassing::kPerEdge) {
    SilenceScatterReduceBetaWarning();
  }
  return absl::OkStatus();
}

void RegisterAttributes(const PathConfig& c, const std::vector<std::string>& relations,
                        const PathNetworkDefinition& network, torch::jit::Module& m) {
  m.register_attribute("format", c10::StringType::get(), network.Format(c));
  network.RegisterAttributes(c, m);
  m.register_attribute("num_layers", c10::IntType::get(), static_cast<int64_t>(c.num_layers));
  m.register_attribute("dim", c10::IntType::get(), static_cast<int64_t>(c.dim));
  m.register_attribute("pna", c10::BoolType::get(), c.pna);
  m.register_attribute("dependent", c10::BoolType::get(), c.dependent);
  m.register_attribute("layer_norm", c10::BoolType::get(), c.layer_norm);
  m.register_attribute("short_cut", c10::BoolType::get(), c.short_cut);
  m.register_attribute("pna_delta", c10::FloatType::get(), c.pna_delta);
  m.register_attribute("reach_mask", c10::BoolType::get(), c.reach_mask);
  m.register_attribute("reach_feature", c10::BoolType::get(), c.reach_feature);
  m.register_attribute("priority", c10::BoolType::get(), c.priority);
  m.register_attribute("prune_node_ratio", c10::FloatType::get(), c.prune_node_ratio);
  m.register_attribute("prune_degree_ratio", c10::FloatType::get(), c.prune_degree_ratio);
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
                                               const PathNetworkDefinition& network,
                                               const torch::jit::Module* parameters,
                                               const torch::Device& device) {
  torch::jit::Module m("PathModel");
  RegisterAttributes(c, relations, network, m);
  network.RegisterParameters(c, static_cast<int64_t>(relations.size()), m);
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
  m.define(network.Source(c), std::make_shared<OperatorResolver>());
  m.to(device);
  return m;
}

}  // namespace

void RegisterLayerParameters(const RelationalLayer& layer, int layers, int64_t d, int64_t relations,
                             torch::jit::Module& m) {
  auto add = [&](const std::string& name, int l, torch::Tensor t) {
    m.register_parameter(absl::StrCat(layer.prefix, name, "_", l), t.set_requires_grad(true),
                         /*is_buffer=*/false);
  };
  const int64_t update = layer.aggregation == RelationalAggregation::kPna ? 12 * d : d;
  for (int l = 0; l < layers; ++l) {
    switch (layer.messages) {
      case RelationalMessages::kQueryDependent:
        add("relation_w", l, LinearInit({d, relations * d}, d));
        add("relation_b", l, LinearInit({relations * d}, d));
        break;
      case RelationalMessages::kFree:
        add("relation", l, torch::randn({relations, d}));
        break;
      case RelationalMessages::kProjected:
        add("project_w1", l, LinearInit({d, d}, d));
        add("project_b1", l, LinearInit({d}, d));
        add("project_w2", l, LinearInit({d, d}, d));
        add("project_b2", l, LinearInit({d}, d));
        break;
    }
    add("combine_w", l, LinearInit({d + update, d}, d + update));
    add("combine_b", l, LinearInit({d}, d + update));
    if (layer.layer_norm) {
      add("norm_w", l, torch::ones({d}));
      add("norm_b", l, torch::zeros({d}));
    }
  }
}

void RegisterScoringParameters(int64_t d, bool reach_feature, torch::jit::Module& m) {
  auto add = [&m](const std::string& name, torch::Tensor t) {
    m.register_parameter(name, t.set_requires_grad(true), /*is_buffer=*/false);
  };
  const int64_t in = 2 * d + (reach_feature ? 1 : 0);
  add("mlp_w1", LinearInit({in, 2 * d}, in));
  add("mlp_b1", LinearInit({2 * d}, 2 * d));
  add("mlp_w2", LinearInit({2 * d, 1}, 2 * d));
  add("mlp_b2", LinearInit({1}, 2 * d));
}

bool PrunesByPriority(const PathModule& path, const PathBatch& batch) {
  if (!path.priority) return false;
  for (int64_t q = 0; q < batch.num_queries(); ++q) {
    const int64_t k = batch.LayerNodes(q);
    if (k > 0 && batch.node_begin[q + 1] - batch.node_begin[q] > k) return true;
  }
  return false;
}

std::pair<torch::Tensor, torch::Tensor> PrioritizedForward(PathModule& path, const PathBatch& batch,
                                                           PrioritizedStats* stats) {
  TORCH_CHECK(!batch.shared(), "the learned priority's pruning runs over a disjoint batch");
  TORCH_CHECK(path.priority, "the model has no learned priority");
  const torch::Device& device = path.device;
  torch::jit::Module& m = path.module;
  const int64_t nodes = batch.num_nodes(), num_queries = batch.num_queries();
  const int64_t message_relations = m.attr("num_message_relations").toInt();
  const bool dependent = m.attr("dependent").toBool();
  const bool short_cut = m.attr("short_cut").toBool();
  const int num_layers = static_cast<int>(m.attr("num_layers").toInt());
  const int64_t d = m.attr("dim").toInt();

  const torch::Tensor query =
      m.run_method("queries", Int64Tensor(batch.query_relation, device)).toTensor();
  const torch::Tensor cells = Int64Tensor(batch.node_query, device);
  const torch::Tensor sources = Int64Tensor(batch.source_index, device);
  torch::Tensor h = torch::zeros({nodes, d}, query.options()).index_copy(0, sources, query);
  torch::Tensor s = m.run_method("score", h, cells, query).toTensor();

  // Each node's out-edges (the batch's edges are per query, so a node's are its query's).
  std::vector<int64_t> out_begin(nodes + 1, 0), out_edges(batch.num_edges());
  for (int64_t e = 0; e < batch.num_edges(); ++e) ++out_begin[batch.edge_src[e] + 1];
  for (int64_t v = 0; v < nodes; ++v) out_begin[v + 1] += out_begin[v];
  {
    std::vector<int64_t> next(out_begin.begin(), out_begin.end() - 1);
    for (int64_t e = 0; e < batch.num_edges(); ++e) out_edges[next[batch.edge_src[e]]++] = e;
  }
  std::vector<uint8_t> reached(nodes, 0);
  std::vector<std::vector<int64_t>> reached_of(num_queries);
  for (int64_t q = 0; q < num_queries; ++q) {
    reached[batch.source_index[q]] = 1;
    reached_of[q].push_back(batch.source_index[q]);
  }
  std::vector<int32_t> local(nodes, -1);
  std::vector<int64_t> chosen, candidate;
  if (stats != nullptr) {
    *stats = PrioritizedStats{};
    stats->most_chosen.assign(num_queries, 0);
    stats->most_edges.assign(num_queries, 0);
    stats->messages.assign(num_queries, 0);
  }
  for (int l = 0; l < num_layers; ++l) {
    const torch::Tensor s_host = s.detach().to(torch::kCPU, torch::kFloat).contiguous();
    const float* priority = s_host.data_ptr<float>();
    // Higher priority first; the lower index at a tie, so a pass is deterministic.
    auto before = [priority](int64_t a, int64_t b) {
      return priority[a] != priority[b] ? priority[a] > priority[b] : a < b;
    };
    std::vector<int64_t> sub_nodes, sub_src, sub_dst, sub_rel, entered;
    auto local_of = [&](int64_t v) {
      if (local[v] < 0) {
        local[v] = static_cast<int32_t>(sub_nodes.size());
        sub_nodes.push_back(v);
      }
      return static_cast<int64_t>(local[v]);
    };
    for (int64_t q = 0; q < num_queries; ++q) {
      const int64_t query_nodes = batch.node_begin[q + 1] - batch.node_begin[q];
      const int64_t query_edges = batch.edge_begin[q + 1] - batch.edge_begin[q];
      const int64_t k = batch.LayerNodes(q);
      const bool prune = k > 0 && query_nodes > k;
      chosen = reached_of[q];
      if (prune && static_cast<int64_t>(chosen.size()) > k) {
        std::nth_element(chosen.begin(), chosen.begin() + k, chosen.end(), before);
        chosen.resize(k);
      }
      candidate.clear();
      for (int64_t u : chosen) {
        candidate.insert(candidate.end(), out_edges.begin() + out_begin[u],
                         out_edges.begin() + out_begin[u + 1]);
      }
      if (prune) {
        const int64_t most =
            std::max<int64_t>(1, static_cast<int64_t>(path.degree_ratio * static_cast<double>(k) *
                                                      static_cast<double>(query_edges) /
                                                      static_cast<double>(query_nodes)));
        if (static_cast<int64_t>(candidate.size()) > most) {
          std::nth_element(candidate.begin(), candidate.begin() + most, candidate.end(),
                           [&](int64_t a, int64_t b) {
                             const int64_t x = batch.edge_dst[a], y = batch.edge_dst[b];
                             return priority[x] != priority[y] ? priority[x] > priority[y] : a < b;
                           });
          candidate.resize(most);
        }
      }
      if (stats != nullptr) {
        stats->most_chosen[q] = std::max<int64_t>(stats->most_chosen[q], chosen.size());
        stats->most_edges[q] = std::max<int64_t>(stats->most_edges[q], candidate.size());
        stats->messages[q] += static_cast<int64_t>(candidate.size());
      }
      for (int64_t e : candidate) {
        sub_src.push_back(local_of(batch.edge_src[e]));
        sub_dst.push_back(local_of(batch.edge_dst[e]));
        sub_rel.push_back(dependent && num_queries > 1
                              ? q * message_relations + batch.edge_relation[e]
                              : batch.edge_relation[e]);
      }
    }
    if (!sub_src.empty()) {
      std::vector<int64_t> boundary_rows, boundary_queries;
      for (int64_t q = 0; q < num_queries; ++q) {
        if (local[batch.source_index[q]] >= 0) {
          boundary_rows.push_back(local[batch.source_index[q]]);
          boundary_queries.push_back(q);
        }
      }
      std::vector<int64_t> entered_local;
      for (int64_t v : sub_dst) {
        if (local[sub_nodes[v]] >= 0) {  // first time this layer: mark by flipping
          entered_local.push_back(v);
          local[sub_nodes[v]] = -2 - local[sub_nodes[v]];
        }
      }
      for (int64_t v : entered_local) local[sub_nodes[v]] = -2 - local[sub_nodes[v]];
      const int64_t n_sub = static_cast<int64_t>(sub_nodes.size());
      const torch::Tensor sub = Int64Tensor(sub_nodes, device);
      const auto [ptr, edges, order] =
          ops::RelationalGraph(Int64Tensor(sub_src, device), Int64Tensor(sub_rel, device),
                               Int64Tensor(sub_dst, device), n_sub);
      const torch::Tensor x =
          h.index_select(0, sub) * torch::sigmoid(s.index_select(0, sub)).unsqueeze(1);
      const torch::Tensor boundary =
          torch::zeros({n_sub, d}, query.options())
              .index_copy(0, Int64Tensor(boundary_rows, device),
                          query.index_select(0, Int64Tensor(boundary_queries, device)));
      const torch::Tensor out =
          m.run_method(absl::StrCat("layer_", l), x, boundary, query, ptr, edges, order).toTensor();
      std::vector<int64_t> entered_global;
      for (int64_t v : entered_local) entered_global.push_back(sub_nodes[v]);
      const torch::Tensor into = Int64Tensor(entered_global, device);
      const torch::Tensor update = out.index_select(0, Int64Tensor(entered_local, device));
      h = short_cut ? h.index_add(0, into, update) : h.index_copy(0, into, update);
      s = s.index_copy(
          0, into,
          m.run_method("score", h.index_select(0, into), cells.index_select(0, into), query)
              .toTensor());
      for (int64_t v : entered_global) {
        if (!reached[v]) {
          reached[v] = 1;
          reached_of[batch.node_query[v]].push_back(v);
        }
      }
    }
    for (int64_t v : sub_nodes) local[v] = -1;
  }
  if (stats != nullptr) {
    for (int64_t q = 0; q < num_queries; ++q) {
      stats->reached.push_back(static_cast<int64_t>(reached_of[q].size()));
    }
    stats->node_reached = std::move(reached);
  }
  return {s, m.run_method("far", query).toTensor()};
}

std::pair<torch::Tensor, torch::Tensor> PathForward(PathModule& path, const PathBatch& batch) {
  if (PrunesByPriority(path, batch)) return PrioritizedForward(path, batch, nullptr);
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
  path.network->AppendInputs(batch, device, inputs);
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
                                                             absl::string_view device_name,
                                                             const PathNetworkDefinition* network) {
  if (network == nullptr) network = &PathNetworks();
  if (absl::Status valid = ValidateConfig(config, relations.size(), *network); !valid.ok()) {
    return valid;
  }
  absl::StatusOr<torch::Device> device = ParseDevice(device_name);
  if (!device.ok()) return device.status();
  try {
    torch::manual_seed(seed);
    absl::StatusOr<torch::jit::Module> m =
        BuildModule(config, relations, *network, nullptr, *device);
    if (!m.ok()) return m.status();
    auto module = std::make_unique<PathModule>(
        PathModule{*std::move(m), *device, config.message_passing == PathMessagePassing::kFused,
                   network, config.priority, config.prune_degree_ratio});
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

absl::StatusOr<std::unique_ptr<PathModel>> PathModel::FromModule(
    std::unique_ptr<PathModule> module, const std::string& path, absl::string_view device_name,
    const PathNetworkDefinition* network) {
  if (network == nullptr) network = &PathNetworks();
  torch::jit::Module& m = module->module;
  const std::string format = ArchiveFormat(m);
  if (!network->Reads(format)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a ", network->Format(PathConfig{}), " archive (",
                     format.empty() ? "no 'format'" : absl::StrCat("its format is ", format),
                     "; LoadAnyModel loads an archive of any family)"));
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
    c.priority = m.hasattr("priority") && m.attr("priority").toBool();
    if (c.priority) {
      c.prune_node_ratio = m.attr("prune_node_ratio").toDouble();
      c.prune_degree_ratio = m.attr("prune_degree_ratio").toDouble();
    }
    network->ReadAttributes(m, c);
    std::vector<std::string> relations = ArchiveRelations(m);
    absl::Status valid = ValidateConfig(c, relations.size(), *network);
    if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", valid.message()));
    // A NaN or Inf weight makes every score NaN and every ranking arbitrary: refuse it here
    // rather than serve it.
    if (absl::Status finite = CheckFiniteParameters(m, path); !finite.ok()) return finite;
    std::string fingerprint = m.attr("training_fingerprint").toStringRef();
    if (format == kPathModelFormatPerEdge) {
      // Written before the fused operator: the same network, rebuilt over the operator with
      // the archive's parameters (it scores as it did, within float rounding).
      absl::StatusOr<torch::jit::Module> rebuilt =
          BuildModule(c, relations, *network, &m, module->device);
      if (!rebuilt.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": ", rebuilt.status().message()));
      }
      module->module = *std::move(rebuilt);
    }
    module->fused = true;
    module->network = network;
    module->priority = c.priority;
    module->degree_ratio = c.prune_degree_ratio;
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
  if (absl::StartsWith(device_, "cuda")) spec.shared_advantage = kPathGpuSharedAdvantage;
  if (config_.relation_graph) {
    spec.relations = kIdentity;
    spec.num_relations = static_cast<int32_t>(graph->num_relations());
    spec.relation_graph = true;
  }
  return spec;
}

std::string PathModel::format() const { return module_->network->Format(config_); }

absl::Status PathModel::Save(const std::string& path) const {
  return SaveModelArchive(module_->module, fingerprint_, path);
}

int64_t PathModel::num_parameters() const { return CountParameters(module_->module); }

absl::Status PathModel::CheckFinite() const {
  return CheckFiniteParameters(module_->module, "the model");
}

absl::StatusOr<PathScores> PathModel::Score(const PathBatch& batch) const {
  if (batch.num_queries() == 0) return absl::InvalidArgumentError("empty batch");
  try {
    torch::NoGradGuard no_grad;
    PrioritizedStats stats;
    auto [node, far] = PrunesByPriority(*module_, batch)
                           ? PrioritizedForward(*module_, batch, &stats)
                           : PathForward(*module_, batch);
    node = node.to(torch::kCPU).contiguous();
    far = far.to(torch::kCPU).contiguous();
    PathScores scores;
    scores.node.assign(node.data_ptr<float>(), node.data_ptr<float>() + node.numel());
    scores.far.assign(far.data_ptr<float>(), far.data_ptr<float>() + far.numel());
    scores.reached = std::move(stats.reached);
    scores.messages = std::move(stats.messages);
    scores.node_reached = std::move(stats.node_reached);
    // A pruned query's unvisited entities rank with the least plausible entity it visited
    // when the far score is above it (path_model.h).
    // A model with a learned priority was trained with its unvisited entities at the far score.
    for (int64_t q = 0; !config_.priority && q < batch.num_queries() &&
                        q < static_cast<int64_t>(batch.query_pruned.size());
         ++q) {
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
