#include "model/fusion/fusion_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/vocabulary.h"
#include "model/core/model_archive.h"
#include "model/grail/grail_module.h"
#include "model/kge/kge_module.h"

namespace grail {
namespace {

absl::Status CheckWidths(size_t members, const LinearFusion& fused,
                         const LinearFusion& grail_only) {
  if (members == 0) return absl::InvalidArgumentError("a fused model needs a KGE model");
  if (fused.weights.size() != 1 + members) {
    return absl::InvalidArgumentError(absl::StrCat("the fused classifier has ",
                                                   fused.weights.size(), " weights for ",
                                                   1 + members, " members"));
  }
  if (grail_only.weights.size() != 1) {
    return absl::InvalidArgumentError("the GraIL-only classifier needs exactly one weight");
  }
  return absl::OkStatus();
}

c10::List<double> DoubleList(const std::vector<double>& values) {
  c10::List<double> list;
  for (double v : values) list.push_back(v);
  return list;
}

}  // namespace

FusionModel::FusionModel(std::unique_ptr<GrailModel> grail,
                         std::vector<std::unique_ptr<KgeModel>> kge, LinearFusion fused,
                         LinearFusion grail_only)
    : grail_(std::move(grail)),
      kge_(std::move(kge)),
      fused_(std::move(fused)),
      grail_only_(std::move(grail_only)) {
  for (const std::unique_ptr<KgeModel>& member : kge_) {
    member_entities_.emplace_back(member->entities());
    member_relations_.emplace_back(member->relations());
  }
}

FusionModel::~FusionModel() = default;

absl::StatusOr<std::unique_ptr<FusionModel>> FusionModel::Create(
    std::unique_ptr<GrailModel> grail, std::vector<std::unique_ptr<KgeModel>> kge,
    LinearFusion fused, LinearFusion grail_only) {
  if (grail == nullptr) return absl::InvalidArgumentError("a fused model needs a GraIL model");
  if (absl::Status s = CheckWidths(kge.size(), fused, grail_only); !s.ok()) return s;
  return std::unique_ptr<FusionModel>(
      new FusionModel(std::move(grail), std::move(kge), std::move(fused), std::move(grail_only)));
}

absl::Status FusionModel::Save(const std::string& path) const {
  try {
    torch::jit::Module m("FusionModel");
    m.register_attribute("format", c10::StringType::get(), std::string(kFusionModelFormat));
    m.register_module("grail", grail_->module().module);
    for (size_t i = 0; i < kge_.size(); ++i) {
      m.register_module(absl::StrCat("kge_", i), kge_[i]->module().module);
    }
    m.register_attribute("num_kge", c10::IntType::get(), static_cast<int64_t>(kge_.size()));
    m.register_attribute("fused_weights", c10::ListType::ofFloats(), DoubleList(fused_.weights));
    m.register_attribute("fused_bias", c10::FloatType::get(), fused_.bias);
    m.register_attribute("grail_weights", c10::ListType::ofFloats(),
                         DoubleList(grail_only_.weights));
    m.register_attribute("grail_bias", c10::FloatType::get(), grail_only_.bias);
    return SaveModule(m, path);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot save model to ", path, ": ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<FusionModel>> FusionModel::Load(const std::string& path,
                                                               absl::string_view device_name) {
  absl::StatusOr<OpenedArchive> opened = OpenArchive(path, device_name);
  if (!opened.ok()) return opened.status();
  return FromArchive(*opened, path, device_name);
}

absl::StatusOr<std::unique_ptr<FusionModel>> FusionModel::FromArchive(
    OpenedArchive& opened, const std::string& path, absl::string_view device_name) {
  torch::jit::Module& module = opened.module;
  const torch::Device device = opened.device;
  if (ArchiveFormat(module) != kFusionModelFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a ", kFusionModelFormat, " archive (no or another 'format')"));
  }
  try {
    absl::StatusOr<std::unique_ptr<GrailModel>> grail =
        GrailModel::FromModule(std::make_unique<GrailModule>(GrailModule{
                                   torch::jit::Module(module.attr("grail").toObject()), device}),
                               path + " (its GraIL member)", device_name);
    if (!grail.ok()) return grail.status();
    std::vector<std::unique_ptr<KgeModel>> kge;
    const int64_t members = module.attr("num_kge").toInt();
    for (int64_t i = 0; i < members; ++i) {
      absl::StatusOr<std::unique_ptr<KgeModel>> member = KgeModel::FromModule(
          std::make_unique<KgeModule>(KgeModule{
              torch::jit::Module(module.attr(absl::StrCat("kge_", i)).toObject()), device}),
          absl::StrCat(path, " (its KGE member ", i, ")"), device_name);
      if (!member.ok()) return member.status();
      kge.push_back(*std::move(member));
    }
    LinearFusion fused, grail_only;
    for (const c10::IValue& w : module.attr("fused_weights").toListRef()) {
      fused.weights.push_back(w.toDouble());
    }
    fused.bias = module.attr("fused_bias").toDouble();
    for (const c10::IValue& w : module.attr("grail_weights").toListRef()) {
      grail_only.weights.push_back(w.toDouble());
    }
    grail_only.bias = module.attr("grail_bias").toDouble();
    if (absl::Status s = CheckWidths(kge.size(), fused, grail_only); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
    }
    return std::unique_ptr<FusionModel>(new FusionModel(*std::move(grail), std::move(kge),
                                                        std::move(fused), std::move(grail_only)));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cannot load model ", path, ": ", e.what()));
  }
}

absl::Status FusionModel::SetClassifiers(LinearFusion fused, LinearFusion grail_only) {
  if (absl::Status s = CheckWidths(kge_.size(), fused, grail_only); !s.ok()) return s;
  fused_ = std::move(fused);
  grail_only_ = std::move(grail_only);
  return absl::OkStatus();
}

FusionVocabulary FusionModel::MapVocabulary(absl::Span<const std::string> graph_entities,
                                            absl::Span<const std::string> graph_relations) const {
  FusionVocabulary vocabulary;
  for (size_t m = 0; m < kge_.size(); ++m) {
    const Vocabulary& entities = member_entities_[m];
    const Vocabulary& relations = member_relations_[m];
    std::vector<int64_t>& e = vocabulary.entity.emplace_back();
    for (const std::string& name : graph_entities) {
      const std::optional<uint32_t> id = entities.Find(name);
      e.push_back(id ? static_cast<int64_t>(*id) : -1);
    }
    std::vector<int64_t>& r = vocabulary.relation.emplace_back();
    for (const std::string& name : graph_relations) {
      const std::optional<uint32_t> id = relations.Find(name);
      r.push_back(id ? static_cast<int64_t>(*id) : -1);
    }
  }
  return vocabulary;
}

std::optional<std::vector<Triple>> FusionModel::MemberFacts(absl::string_view head,
                                                            absl::string_view relation,
                                                            absl::string_view tail) const {
  std::vector<Triple> facts;
  facts.reserve(kge_.size());
  for (size_t m = 0; m < kge_.size(); ++m) {
    const std::optional<uint32_t> h = member_entities_[m].Find(head);
    const std::optional<uint32_t> r = member_relations_[m].Find(relation);
    const std::optional<uint32_t> t = member_entities_[m].Find(tail);
    if (!h || !r || !t) return std::nullopt;
    facts.push_back({*h, *r, *t});
  }
  return facts;
}

absl::StatusOr<std::vector<std::vector<double>>> FusionModel::KgeScores(
    absl::Span<const FactNames> facts) const {
  std::vector<std::vector<double>> rows(facts.size());
  std::vector<std::vector<Triple>> member_facts(kge_.size());
  std::vector<size_t> known;  // the facts every member knows
  for (size_t i = 0; i < facts.size(); ++i) {
    std::optional<std::vector<Triple>> ids =
        MemberFacts(facts[i].head, facts[i].relation, facts[i].tail);
    if (!ids) continue;
    for (size_t m = 0; m < kge_.size(); ++m) member_facts[m].push_back((*ids)[m]);
    known.push_back(i);
    rows[i].reserve(kge_.size());
  }
  for (size_t m = 0; m < kge_.size(); ++m) {
    absl::StatusOr<std::vector<float>> scores = kge_[m]->ScoreGrailFacts(member_facts[m]);
    if (!scores.ok()) return scores.status();
    for (size_t k = 0; k < known.size(); ++k) rows[known[k]].push_back((*scores)[k]);
  }
  return rows;
}

float FusionModel::Combine(double grail, absl::Span<const double> kge) const {
  if (kge.empty()) return static_cast<float>(grail_only_.Logit({grail}));
  std::vector<double> row(1 + kge.size());
  row[0] = grail;
  std::copy(kge.begin(), kge.end(), row.begin() + 1);
  return static_cast<float>(fused_.Logit(row));
}

absl::StatusOr<std::vector<std::vector<double>>> FusionModel::MemberScores(
    const GraphView& graph, const RelationMap& relations, const FusionVocabulary& vocabulary,
    absl::Span<const Triple> facts, const GrailScoringOptions& scoring) const {
  absl::StatusOr<std::vector<float>> grail =
      ScoreGrailFacts(*grail_, graph, relations, facts, scoring);
  if (!grail.ok()) return grail.status();
  std::vector<std::vector<double>> columns(facts.size(), std::vector<double>(1 + kge_.size(), 0.0));
  for (size_t i = 0; i < facts.size(); ++i) columns[i][0] = (*grail)[i];
  for (size_t m = 0; m < kge_.size(); ++m) {
    auto lookup = [](const std::vector<int64_t>& map, uint32_t id) {
      return id < map.size() ? map[id] : -1;
    };
    std::vector<Triple> known;
    std::vector<size_t> where;
    for (size_t i = 0; i < facts.size(); ++i) {
      const int64_t h = lookup(vocabulary.entity[m], facts[i].head);
      const int64_t r = lookup(vocabulary.relation[m], facts[i].relation);
      const int64_t t = lookup(vocabulary.entity[m], facts[i].tail);
      if (h < 0 || r < 0 || t < 0) {
        columns[i][1 + m] = std::numeric_limits<double>::quiet_NaN();
        continue;
      }
      known.push_back(
          {static_cast<EntityId>(h), static_cast<RelationId>(r), static_cast<EntityId>(t)});
      where.push_back(i);
    }
    absl::StatusOr<std::vector<float>> scores = kge_[m]->ScoreGrailFacts(known);
    if (!scores.ok()) return scores.status();
    for (size_t k = 0; k < where.size(); ++k) columns[where[k]][1 + m] = (*scores)[k];
  }
  return columns;
}

absl::StatusOr<FusedScores> FusionModel::Score(const GraphView& graph, const RelationMap& relations,
                                               const FusionVocabulary& vocabulary,
                                               absl::Span<const Triple> facts,
                                               const GrailScoringOptions& scoring) const {
  absl::StatusOr<std::vector<std::vector<double>>> columns =
      MemberScores(graph, relations, vocabulary, facts, scoring);
  if (!columns.ok()) return columns.status();
  FusedScores out;
  for (const std::vector<double>& row : *columns) {
    bool all_known = true;
    for (double v : row) all_known = all_known && !std::isnan(v);
    out.fused.push_back(all_known ? 1 : 0);
    const absl::Span<const double> kge = absl::MakeConstSpan(row).subspan(1);
    out.score.push_back(Combine(row[0], all_known ? kge : absl::Span<const double>()));
  }
  return out;
}

}  // namespace grail
