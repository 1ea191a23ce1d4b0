// ImportUltraCheckpoint (ultra_model.h): a released ULTRA checkpoint into our archive format.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "model/core/checkpoint_reader.h"
#include "model/core/model_archive.h"
#include "model/ultra/ultra_model.h"
#include "model/ultra/ultra_network.h"

namespace grail {
namespace {

// Where each of ours comes from: the checkpoint's name, and whether it is a linear layer's
// weight (stored [out, in], ours [in, out]).
struct Source {
  std::string name;
  bool transposed = false;
};

std::map<std::string, Source> UltraNames(const PathConfig& c) {
  std::map<std::string, Source> names;
  // A relational layer's combine and layer norm: ours <prefix>combine_w_<l>, ..., its
  // <from>linear.weight, ...
  auto combine = [&](const std::string& prefix, const std::string& from, const std::string& to) {
    names[prefix + "combine_w" + to] = {from + "linear.weight", true};
    names[prefix + "combine_b" + to] = {from + "linear.bias"};
    if (c.layer_norm) {
      names[prefix + "norm_w" + to] = {from + "layer_norm.weight"};
      names[prefix + "norm_b" + to] = {from + "layer_norm.bias"};
    }
  };
  for (int l = 0; l < c.relation_layers; ++l) {
    const std::string from = absl::StrCat("relation_model.layers.", l, "."),
                      to = absl::StrCat("_", l);
    names["rel_relation" + to] = {from + "relation.weight"};
    combine("rel_", from, to);
  }
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string from = absl::StrCat("entity_model.layers.", l, "."),
                      to = absl::StrCat("_", l);
    names["project_w1" + to] = {from + "relation_projection.0.weight", true};
    names["project_b1" + to] = {from + "relation_projection.0.bias"};
    names["project_w2" + to] = {from + "relation_projection.2.weight", true};
    names["project_b2" + to] = {from + "relation_projection.2.bias"};
    combine("", from, to);
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

absl::Status ImportUltraCheckpoint(const std::string& checkpoint, const std::string& out,
                                   bool inverse_head_queries) {
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
  c.inverse_head_queries = inverse_head_queries;
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

  absl::StatusOr<std::unique_ptr<PathModel>> model = CreateUltraModel(c, /*seed=*/0);
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
