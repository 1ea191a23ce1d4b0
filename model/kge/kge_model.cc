#include "model/kge/kge_model.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "model/core/model_archive.h"
#include "model/core/torch_util.h"
#include "model/kge/kge_module.h"

namespace grail {
namespace {

// score(h, r, t): embeddings h [B, K1, W], r [B, 1, Wr], t [B, K2, W] (broadcast) to scores
// [B, K], one body per model, as the equations of kge_model.h. RotatE's modulus clamps its
// square at 1e-30 so that a zero distance has gradient 0, not NaN (its code's stacked norm
// does the same; the clamp moves a distance by at most 1e-15, and it is 30 times faster).
constexpr char kTransE[] = R"(
def score(self, h: Tensor, r: Tensor, t: Tensor) -> Tensor:
  return self.gamma - (h + r - t).abs().sum(2)
)";
constexpr char kDistMult[] = R"(
def score(self, h: Tensor, r: Tensor, t: Tensor) -> Tensor:
  return (h * r * t).sum(2)
)";
constexpr char kComplEx[] = R"(
def score(self, h: Tensor, r: Tensor, t: Tensor) -> Tensor:
  hs = h.chunk(2, 2)
  rs = r.chunk(2, 2)
  ts = t.chunk(2, 2)
  hr_re = hs[0] * rs[0] - hs[1] * rs[1]
  hr_im = hs[0] * rs[1] + hs[1] * rs[0]
  return (hr_re * ts[0] + hr_im * ts[1]).sum(2)
)";
constexpr char kRotatE[] = R"(
def score(self, h: Tensor, r: Tensor, t: Tensor) -> Tensor:
  phase = r / (self.embedding_range / 3.14159265358979323846)
  r_re = torch.cos(phase)
  r_im = torch.sin(phase)
  hs = h.chunk(2, 2)
  ts = t.chunk(2, 2)
  re = hs[0] * r_re - hs[1] * r_im - ts[0]
  im = hs[0] * r_im + hs[1] * r_re - ts[1]
  return self.gamma - torch.sqrt((re * re + im * im).clamp_min(1e-30)).sum(2)
)";
constexpr char kForward[] = R"(
def embed(self, ids: Tensor) -> Tensor:
  return self.entity_embedding.index_select(0, ids.reshape(-1)).view(ids.size(0), ids.size(1), -1)

def forward(self, heads: Tensor, relations: Tensor, tails: Tensor) -> Tensor:
  r = self.relation_embedding.index_select(0, relations).unsqueeze(1)
  return self.score(self.embed(heads), r, self.embed(tails))
)";
// rank(anchors [G], relations [G], candidates [K], inverse): [G, K]. The bilinear models
// score every candidate as one product with the candidates' embeddings; the distance models
// broadcast score().
constexpr char kRankBroadcast[] = R"(
def rank(self, anchors: Tensor, relations: Tensor, candidates: Tensor, inverse: bool) -> Tensor:
  a = anchors.unsqueeze(1)
  c = candidates.unsqueeze(0)
  if inverse:
    return self.forward(c, relations, a)
  return self.forward(a, relations, c)
)";
constexpr char kRankDistMult[] = R"(
def rank(self, anchors: Tensor, relations: Tensor, candidates: Tensor, inverse: bool) -> Tensor:
  q = self.entity_embedding.index_select(0, anchors) * self.relation_embedding.index_select(0, relations)
  return torch.matmul(q, self.entity_embedding.index_select(0, candidates).t())
)";
// Re(h r conj(t)): for tails, (h r) . conj(t); for heads, h . conj(conj(r) t), as real dot
// products of [re, im] halves.
constexpr char kRankComplEx[] = R"(
def rank(self, anchors: Tensor, relations: Tensor, candidates: Tensor, inverse: bool) -> Tensor:
  a = self.entity_embedding.index_select(0, anchors).chunk(2, 1)
  r = self.relation_embedding.index_select(0, relations).chunk(2, 1)
  if inverse:
    q = torch.cat([r[0] * a[0] + r[1] * a[1], r[0] * a[1] - r[1] * a[0]], 1)
  else:
    q = torch.cat([a[0] * r[0] - a[1] * r[1], a[0] * r[1] + a[1] * r[0]], 1)
  return torch.matmul(q, self.entity_embedding.index_select(0, candidates).t())
)";

std::string ModuleSource(KgeKind kind) {
  switch (kind) {
    case KgeKind::kTransE:
      return absl::StrCat(kTransE, kForward, kRankBroadcast);
    case KgeKind::kDistMult:
      return absl::StrCat(kDistMult, kForward, kRankDistMult);
    case KgeKind::kComplEx:
      return absl::StrCat(kComplEx, kForward, kRankComplEx);
    case KgeKind::kRotatE:
      return absl::StrCat(kRotatE, kForward, kRankBroadcast);
  }
  return "";
}

absl::Status ValidateConfig(const KgeConfig& c, size_t entities, size_t relations) {
  if (c.dim < 1)
    return absl::InvalidArgumentError(absl::StrCat("dim must be positive, got ", c.dim));
  if (!(c.gamma > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("gamma must be > 0, got ", c.gamma));
  }
  if (entities == 0) return absl::InvalidArgumentError("the entity vocabulary is empty");
  if (relations == 0) return absl::InvalidArgumentError("the relation vocabulary is empty");
  return absl::OkStatus();
}

c10::List<std::string> NameList(const std::vector<std::string>& names) {
  c10::List<std::string> list;
  list.reserve(names.size());
  for (const std::string& n : names) list.push_back(n);
  return list;
}

std::vector<std::string> ArchiveNames(const torch::jit::Module& m, const char* attribute) {
  std::vector<std::string> names;
  for (const c10::IValue& name : m.attr(attribute).toListRef()) names.push_back(name.toStringRef());
  return names;
}

// Candidates per forward chunk: keeps a broadcast [queries, candidates, width] below 2^24
// floats (64 MiB).
int64_t CandidateChunk(int64_t queries, int64_t width) {
  return std::max<int64_t>(1, (int64_t{1} << 24) / std::max<int64_t>(1, queries * width));
}

}  // namespace

absl::StatusOr<KgeKind> ParseKgeKind(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (KgeKind kind : {KgeKind::kTransE, KgeKind::kDistMult, KgeKind::kComplEx, KgeKind::kRotatE}) {
    if (lower == KgeKindName(kind)) return kind;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown KGE model '", name, "': expected transe, distmult, complex or rotate"));
}

const char* KgeKindName(KgeKind kind) {
  switch (kind) {
    case KgeKind::kTransE:
      return "transe";
    case KgeKind::kDistMult:
      return "distmult";
    case KgeKind::kComplEx:
      return "complex";
    case KgeKind::kRotatE:
      return "rotate";
  }
  return "";
}

torch::Tensor KgeForward(KgeModule& kge, const torch::Tensor& heads, const torch::Tensor& relations,
                         const torch::Tensor& tails) {
  return kge.module.forward({heads, relations, tails}).toTensor();
}

KgeModel::KgeModel(KgeConfig config, std::vector<std::string> entities,
                   std::vector<std::string> relations, std::unique_ptr<KgeModule> module)
    : config_(config),
      entities_(std::move(entities)),
      relations_(std::move(relations)),
      device_(module->device.str()),
      module_(std::move(module)) {}

KgeModel::~KgeModel() = default;

absl::StatusOr<std::unique_ptr<KgeModel>> KgeModel::Create(const KgeConfig& config,
                                                           std::vector<std::string> entities,
                                                           std::vector<std::string> relations,
                                                           uint64_t seed,
                                                           absl::string_view device_name) {
  if (absl::Status s = ValidateConfig(config, entities.size(), relations.size()); !s.ok()) return s;
  absl::StatusOr<torch::Device> device = ParseDevice(device_name);
  if (!device.ok()) return device.status();
  try {
    torch::manual_seed(seed);
    torch::jit::Module m("KgeModel");
    const double range = config.embedding_range();
    const auto n_entities = static_cast<int64_t>(entities.size());
    const auto n_relations = static_cast<int64_t>(relations.size());
    m.register_parameter(
        "entity_embedding",
        torch::empty({n_entities, config.entity_width()}).uniform_(-range, range).requires_grad_(),
        false);
    m.register_parameter("relation_embedding",
                         torch::empty({n_relations, config.relation_width()})
                             .uniform_(-range, range)
                             .requires_grad_(),
                         false);
    m.register_attribute("format", c10::StringType::get(), std::string(kKgeModelFormat));
    m.register_attribute("model", c10::StringType::get(), std::string(KgeKindName(config.kind)));
    m.register_attribute("dim", c10::IntType::get(), static_cast<int64_t>(config.dim));
    m.register_attribute("gamma", c10::FloatType::get(), config.gamma);
    m.register_attribute("embedding_range", c10::FloatType::get(), range);
    m.register_attribute("entities", c10::ListType::ofStrings(), NameList(entities));
    m.register_attribute("relations", c10::ListType::ofStrings(), NameList(relations));
    m.register_attribute("training_fingerprint", c10::StringType::get(), std::string());
    m.define(ModuleSource(config.kind));
    m.to(*device);
    return std::unique_ptr<KgeModel>(
        new KgeModel(config, std::move(entities), std::move(relations),
                     std::make_unique<KgeModule>(KgeModule{std::move(m), *device})));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("building the KGE model failed: ", e.what()));
  }
}

absl::StatusOr<std::unique_ptr<KgeModel>> KgeModel::Load(const std::string& path,
                                                         absl::string_view device_name) {
  return LoadArchiveAs<KgeModel, KgeModule>(path, device_name);
}

absl::StatusOr<std::unique_ptr<KgeModel>> KgeModel::FromModule(std::unique_ptr<KgeModule> module,
                                                               const std::string& path,
                                                               absl::string_view /*device*/) {
  torch::jit::Module& m = module->module;
  if (ArchiveFormat(m) != kKgeModelFormat) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a ", kKgeModelFormat, " archive (no or another 'format')"));
  }
  try {
    KgeConfig c;
    absl::StatusOr<KgeKind> kind = ParseKgeKind(m.attr("model").toStringRef());
    if (!kind.ok())
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", kind.status().message()));
    c.kind = *kind;
    c.dim = static_cast<int>(m.attr("dim").toInt());
    c.gamma = m.attr("gamma").toDouble();
    std::vector<std::string> entities = ArchiveNames(m, "entities");
    std::vector<std::string> relations = ArchiveNames(m, "relations");
    if (absl::Status s = ValidateConfig(c, entities.size(), relations.size()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
    }
    const torch::Tensor entity = m.attr("entity_embedding").toTensor();
    const torch::Tensor relation = m.attr("relation_embedding").toTensor();
    if (entity.dim() != 2 || entity.size(0) != static_cast<int64_t>(entities.size()) ||
        entity.size(1) != c.entity_width() || relation.dim() != 2 ||
        relation.size(0) != static_cast<int64_t>(relations.size()) ||
        relation.size(1) != c.relation_width()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": the embeddings' shapes do not match the vocabularies and the config"));
    }
    if (absl::Status finite = CheckFiniteParameters(m, path); !finite.ok()) return finite;
    m.eval();
    std::string fingerprint = m.attr("training_fingerprint").toStringRef();
    auto model = std::unique_ptr<KgeModel>(
        new KgeModel(c, std::move(entities), std::move(relations), std::move(module)));
    model->fingerprint_ = std::move(fingerprint);
    return model;
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load model ", path, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cannot load model ", path, ": ", e.what()));
  }
}

absl::Status KgeModel::Save(const std::string& path) const {
  return SaveModelArchive(module_->module, fingerprint_, path);
}

namespace {

std::vector<float> Row(const torch::jit::Module& m, const char* table, int64_t row) {
  torch::NoGradGuard no_grad;
  const torch::Tensor r = m.attr(table).toTensor()[row].to(torch::kCPU).contiguous();
  return std::vector<float>(r.data_ptr<float>(), r.data_ptr<float>() + r.numel());
}

}  // namespace

std::vector<float> KgeModel::EntityEmbedding(EntityId entity) const {
  return Row(module_->module, "entity_embedding", entity);
}

std::vector<float> KgeModel::RelationEmbedding(RelationId relation) const {
  return Row(module_->module, "relation_embedding", relation);
}

int64_t KgeModel::num_parameters() const { return CountParameters(module_->module); }

absl::StatusOr<std::vector<float>> KgeModel::ScoreGrailFacts(absl::Span<const Triple> facts) const {
  std::vector<int64_t> heads, relations, tails;
  for (const Triple& f : facts) {
    if (f.head >= num_entities() || f.tail >= num_entities() ||
        static_cast<int32_t>(f.relation) >= num_relations()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "fact (", f.head, ", ", f.relation, ", ", f.tail, ") is outside the model's vocabulary"));
    }
    heads.push_back(f.head);
    relations.push_back(f.relation);
    tails.push_back(f.tail);
  }
  std::vector<float> scores;
  if (facts.empty()) return scores;
  scores.reserve(facts.size());
  // In chunks: each gathers [facts, width] embedding tensors, so a ranking's many candidates
  // would otherwise hold gigabytes at once.
  const int64_t n = static_cast<int64_t>(facts.size());
  const int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 22) / config_.entity_width());
  try {
    torch::NoGradGuard no_grad;
    const torch::Device& device = module_->device;
    const torch::Tensor h = Int64Tensor(heads, device).unsqueeze(1);
    const torch::Tensor r = Int64Tensor(relations, device);
    const torch::Tensor t = Int64Tensor(tails, device).unsqueeze(1);
    for (int64_t c = 0; c < n; c += chunk) {
      const int64_t e = std::min(n, c + chunk);
      const torch::Tensor out =
          KgeForward(*module_, h.slice(0, c, e), r.slice(0, c, e), t.slice(0, c, e))
              .to(torch::kCPU)
              .contiguous();
      scores.insert(scores.end(), out.data_ptr<float>(), out.data_ptr<float>() + out.numel());
    }
    return scores;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("KGE forward failed: ", e.what()));
  }
}

absl::StatusOr<std::vector<float>> KgeModel::ScoreAll(absl::Span<const KgeQuery> queries) const {
  const int64_t n = num_entities();
  for (const KgeQuery& q : queries) {
    if (q.anchor >= num_entities() || static_cast<int32_t>(q.relation) >= num_relations()) {
      return absl::InvalidArgumentError(absl::StrCat("query (", q.anchor, ", ", q.relation,
                                                     ") is outside the model's vocabulary"));
    }
  }
  std::vector<float> scores(queries.size() * static_cast<size_t>(n));
  try {
    torch::NoGradGuard no_grad;
    const torch::Device& device = module_->device;
    const torch::Tensor all = torch::arange(n, torch::TensorOptions(torch::kInt64).device(device));
    constexpr size_t kGroup = 64;
    for (bool inverse : {false, true}) {
      std::vector<size_t> index;
      for (size_t i = 0; i < queries.size(); ++i) {
        if (queries[i].inverse == inverse) index.push_back(i);
      }
      for (size_t begin = 0; begin < index.size(); begin += kGroup) {
        const size_t end = std::min(index.size(), begin + kGroup);
        std::vector<int64_t> anchors, relations;
        for (size_t k = begin; k < end; ++k) {
          anchors.push_back(queries[index[k]].anchor);
          relations.push_back(queries[index[k]].relation);
        }
        const torch::Tensor a = Int64Tensor(anchors, device);
        const torch::Tensor r = Int64Tensor(relations, device);
        const int64_t chunk =
            CandidateChunk(static_cast<int64_t>(anchors.size()), config_.entity_width());
        for (int64_t c = 0; c < n; c += chunk) {
          const torch::Tensor out =
              module_->module
                  .run_method("rank", a, r, all.slice(0, c, std::min(n, c + chunk)), inverse)
                  .toTensor()
                  .to(torch::kCPU)
                  .contiguous();
          const int64_t width = out.size(1);
          const float* data = out.data_ptr<float>();
          for (size_t k = begin; k < end; ++k) {
            std::copy(data + (k - begin) * width, data + (k - begin + 1) * width,
                      scores.begin() + static_cast<int64_t>(index[k]) * n + c);
          }
        }
      }
    }
    return scores;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("KGE forward failed: ", e.what()));
  }
}

}  // namespace grail
