#include "model/ensemble/ensemble_model.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/vocabulary.h"
#include "model/core/model_archive.h"
#include "model/grail/grail_module.h"
#include "model/kge/kge_module.h"
#include "model/path/path_module.h"

namespace grail {
namespace {

// `unknown` filled with zeros when empty.
absl::Status CheckRule(size_t members, const LinearFusion& rule, std::vector<double>& unknown) {
  if (members == 0) return absl::InvalidArgumentError("an ensemble needs a member");
  if (rule.weights.size() != members) {
    return absl::InvalidArgumentError(absl::StrCat("the ensemble's rule has ", rule.weights.size(),
                                                   " weights for ", members, " members"));
  }
  if (unknown.empty()) unknown.assign(members, 0.0);
  if (unknown.size() != members) {
    return absl::InvalidArgumentError(absl::StrCat("the ensemble has ", unknown.size(),
                                                   " unknown scores for ", members, " members"));
  }
  return absl::OkStatus();
}

// The relations every member with a vocabulary knows, in the first such member's order;
// empty when every member scores any relation.
absl::StatusOr<std::vector<std::string>> SharedRelations(
    const std::vector<EnsembleMember>& members) {
  const EnsembleMember* first = nullptr;
  for (const EnsembleMember& m : members) {
    if (!m.open_vocabulary()) {
      first = &m;
      break;
    }
  }
  if (first == nullptr) return std::vector<std::string>();
  std::vector<std::string> shared;
  for (const std::string& name : first->relations()) {
    bool everywhere = true;
    for (const EnsembleMember& m : members) {
      if (m.open_vocabulary()) continue;
      const std::vector<std::string>& own = m.relations();
      if (std::find(own.begin(), own.end(), name) == own.end()) everywhere = false;
    }
    if (everywhere) shared.push_back(name);
  }
  if (shared.empty()) {
    return absl::InvalidArgumentError("the ensemble's members share no relation");
  }
  return shared;
}

c10::List<double> DoubleList(const std::vector<double>& values) {
  c10::List<double> list;
  for (double v : values) list.push_back(v);
  return list;
}

const std::string& MemberDevice(const EnsembleMember& m) {
  return m.path ? m.path->device() : m.grail ? m.grail->device() : m.kge->device();
}

// A GraIL or KGE member's model from its submodule, into `out`.
template <typename Module, typename Model>
absl::Status LoadMember(torch::jit::Module member, const torch::Device& device,
                        const std::string& where, absl::string_view device_name,
                        std::unique_ptr<Model>& out) {
  absl::StatusOr<std::unique_ptr<Model>> model = Model::FromModule(
      std::make_unique<Module>(Module{std::move(member), device}), where, device_name);
  if (!model.ok()) return model.status();
  out = *std::move(model);
  return absl::OkStatus();
}

}  // namespace

EnsembleModel::EnsembleModel(std::vector<EnsembleMember> members, LinearFusion rule,
                             std::vector<double> unknown, std::vector<std::string> relations)
    : members_(std::move(members)),
      rule_(std::move(rule)),
      unknown_(std::move(unknown)),
      relations_(std::move(relations)) {
  for (const EnsembleMember& m : members_) {
    kge_entities_.push_back(m.kge ? Vocabulary(m.kge->entities()) : Vocabulary());
    std::vector<int32_t> ids(relations_.size(), -1);
    if (!m.open_vocabulary()) {
      const Vocabulary own(m.relations());
      for (size_t r = 0; r < relations_.size(); ++r) {
        ids[r] = static_cast<int32_t>(*own.Find(relations_[r]));
      }
    }
    member_relation_.push_back(std::move(ids));
  }
}

EnsembleModel::~EnsembleModel() = default;

absl::StatusOr<std::unique_ptr<EnsembleModel>> EnsembleModel::Create(
    std::vector<EnsembleMember> members, LinearFusion rule, std::vector<double> unknown) {
  for (const EnsembleMember& m : members) {
    const int set = (m.path != nullptr) + (m.grail != nullptr) + (m.kge != nullptr);
    if (set != 1) {
      return absl::InvalidArgumentError(set == 0 ? "an ensemble's member is missing"
                                                 : "an ensemble's member holds several models");
    }
    if (m.grail != nullptr && m.grail->config().node_feature_dim > 0) {
      return absl::InvalidArgumentError(
          "a GraIL model with node features (early fusion) cannot be an ensemble's member");
    }
    if (MemberDevice(m) != MemberDevice(members.front())) {
      return absl::InvalidArgumentError(absl::StrCat("an ensemble's members are on ",
                                                     MemberDevice(members.front()), " and ",
                                                     MemberDevice(m), "; load them on one"));
    }
  }
  if (absl::Status s = CheckRule(members.size(), rule, unknown); !s.ok()) return s;
  absl::StatusOr<std::vector<std::string>> relations = SharedRelations(members);
  if (!relations.ok()) return relations.status();
  return std::unique_ptr<EnsembleModel>(new EnsembleModel(
      std::move(members), std::move(rule), std::move(unknown), *std::move(relations)));
}

absl::StatusOr<std::unique_ptr<EnsembleModel>> EnsembleModel::Create(
    std::vector<std::unique_ptr<PathModel>> members, LinearFusion rule) {
  std::vector<EnsembleMember> any(members.size());
  for (size_t m = 0; m < members.size(); ++m) any[m].path = std::move(members[m]);
  return Create(std::move(any), std::move(rule));
}

absl::Status EnsembleModel::SetRule(LinearFusion rule, std::vector<double> unknown) {
  if (absl::Status s = CheckRule(members_.size(), rule, unknown); !s.ok()) return s;
  rule_ = std::move(rule);
  unknown_ = std::move(unknown);
  return absl::OkStatus();
}

size_t EnsembleModel::fit_columns() const {
  size_t columns = members_.size();
  for (const EnsembleMember& m : members_) columns += m.kge != nullptr;
  return columns;
}

absl::Status EnsembleModel::SetFittedRule(const LinearFusion& fitted) {
  if (fitted.weights.size() != fit_columns()) {
    return absl::InvalidArgumentError(absl::StrCat("the fitted rule has ", fitted.weights.size(),
                                                   " weights for ", fit_columns(), " columns"));
  }
  const size_t members = members_.size();
  LinearFusion rule{std::vector<double>(fitted.weights.begin(), fitted.weights.begin() + members),
                    fitted.bias};
  std::vector<double> unknown(members, 0.0);
  size_t column = members;
  for (size_t m = 0; m < members; ++m) {
    if (members_[m].kge == nullptr) continue;
    const double offset = fitted.weights[column++];
    // A member of weight 0 adds nothing, known or not.
    if (rule.weights[m] != 0) unknown[m] = offset / rule.weights[m];
  }
  return SetRule(std::move(rule), std::move(unknown));
}

std::shared_ptr<const PathModel> EnsembleModel::SharedPathMember(
    std::shared_ptr<const EnsembleModel> self, size_t m) const {
  const PathModel* member = members_[m].path.get();
  if (member == nullptr) return nullptr;
  return std::shared_ptr<const PathModel>(std::move(self), member);
}

std::shared_ptr<const GrailModel> EnsembleModel::SharedGrailMember(
    std::shared_ptr<const EnsembleModel> self, size_t m) const {
  const GrailModel* member = members_[m].grail.get();
  if (member == nullptr) return nullptr;
  return std::shared_ptr<const GrailModel>(std::move(self), member);
}

int EnsembleModel::explaining_member() const {
  for (size_t m = 0; m < members_.size(); ++m) {
    if (members_[m].grail != nullptr) return static_cast<int>(m);
  }
  return -1;
}

const std::string& EnsembleModel::device() const { return MemberDevice(members_.front()); }

bool EnsembleModel::reads_relation_graph() const {
  for (const EnsembleMember& m : members_) {
    if (m.open_vocabulary()) return true;
  }
  return false;
}

RelationMap EnsembleModel::MemberRelations(size_t m,
                                           absl::Span<const std::string> graph_relations) const {
  const EnsembleMember& member = members_[m];
  if (member.open_vocabulary()) return RelationMap();
  return MapRelationsByName(graph_relations, member.relations());
}

int64_t EnsembleModel::num_parameters() const {
  int64_t total = 0;
  for (const EnsembleMember& m : members_) {
    total += m.path    ? m.path->num_parameters()
             : m.grail ? m.grail->num_parameters()
                       : m.kge->num_parameters();
  }
  return total;
}

std::string EnsembleModel::training_fingerprint() const {
  std::vector<std::string> parts;
  for (const EnsembleMember& m : members_) {
    parts.push_back(m.path    ? m.path->training_fingerprint()
                    : m.grail ? m.grail->training_fingerprint()
                              : m.kge->training_fingerprint());
  }
  return absl::StrJoin(parts, "+");
}

absl::Status EnsembleModel::Save(const std::string& path) const {
  try {
    torch::jit::Module m("EnsembleModel");
    m.register_attribute("format", c10::StringType::get(), std::string(kEnsembleModelFormat));
    for (size_t i = 0; i < members_.size(); ++i) {
      const EnsembleMember& member = members_[i];
      m.register_module(absl::StrCat("member_", i), member.path    ? member.path->module().module
                                                    : member.grail ? member.grail->module().module
                                                                   : member.kge->module().module);
    }
    m.register_attribute("num_members", c10::IntType::get(), static_cast<int64_t>(members_.size()));
    m.register_attribute("weights", c10::ListType::ofFloats(), DoubleList(rule_.weights));
    m.register_attribute("bias", c10::FloatType::get(), rule_.bias);
    m.register_attribute("unknown_scores", c10::ListType::ofFloats(), DoubleList(unknown_));
    return SaveModule(m, path);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot save model to ", path, ": ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<EnsembleModel>> EnsembleModel::FromArchive(
    OpenedArchive& opened, const std::string& path, absl::string_view device_name,
    const PathNetworkOf& network_of) {
  torch::jit::Module& module = opened.module;
  if (ArchiveFormat(module) != kEnsembleModelFormat) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a ", kEnsembleModelFormat,
                                                   " archive (no or another 'format')"));
  }
  try {
    std::vector<EnsembleMember> members;
    const int64_t count = module.attr("num_members").toInt();
    for (int64_t i = 0; i < count; ++i) {
      torch::jit::Module member(module.attr(absl::StrCat("member_", i)).toObject());
      const std::string where = absl::StrCat(path, " (its member ", i, ")");
      const std::string format = ArchiveFormat(member);
      EnsembleMember& loaded = members.emplace_back();
      if (format == kGrailModelFormat || format == kKgeModelFormat) {
        absl::Status read = format == kGrailModelFormat
                                ? LoadMember<GrailModule>(std::move(member), opened.device, where,
                                                          device_name, loaded.grail)
                                : LoadMember<KgeModule>(std::move(member), opened.device, where,
                                                        device_name, loaded.kge);
        if (!read.ok()) return read;
        continue;
      }
      const PathNetworkDefinition* network = network_of(format);
      if (network == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, " is not a path-family, GraIL or KGE model (its format is ",
                         format.empty() ? "missing" : format, ")"));
      }
      absl::StatusOr<std::unique_ptr<PathModel>> path_model = PathModel::FromModule(
          std::make_unique<PathModule>(PathModule{std::move(member), opened.device}), where,
          device_name, network);
      if (!path_model.ok()) return path_model.status();
      loaded.path = *std::move(path_model);
    }
    LinearFusion rule;
    for (const c10::IValue& w : module.attr("weights").toListRef()) {
      rule.weights.push_back(w.toDouble());
    }
    rule.bias = module.attr("bias").toDouble();
    std::vector<double> unknown;  // an archive from before KGE members has none: all 0
    if (module.hasattr("unknown_scores")) {
      for (const c10::IValue& u : module.attr("unknown_scores").toListRef()) {
        unknown.push_back(u.toDouble());
      }
    }
    absl::StatusOr<std::unique_ptr<EnsembleModel>> model =
        Create(std::move(members), std::move(rule), std::move(unknown));
    if (!model.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", model.status().message()));
    }
    return model;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cannot load model ", path, ": ", e.what()));
  }
}

}  // namespace grail
