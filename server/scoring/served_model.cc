#include "server/scoring/served_model.h"

#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"
#include "graph/static_graph.h"
#include "graph/vocabulary.h"
#include "model/core/archive_probe.h"
#include "model/families.h"
#include "server/scoring/scoring_jobs.h"

namespace grail {
namespace {

// Hex SHA-256 of the model file at `path` (read as ReadModelFile reads it: a regular file,
// bounded, held once).
absl::StatusOr<std::string> FileSha256(const std::string& path) {
  absl::StatusOr<ModelBytes> bytes = ReadModelFile(path);
  if (!bytes.ok()) return bytes.status();
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes->view().data(), bytes->view().size(), digest, &size, EVP_sha256(), nullptr);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), static_cast<size_t>(size)));
}

double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

absl::Status StoppedWarmUp() {
  return absl::CancelledError("the warm-up stopped: the reload is no longer wanted");
}

std::vector<Triple> SampleStoredFacts(const ServedModel& model, const GraphSnapshot& graph,
                                      size_t count, uint64_t seed) {
  std::vector<Triple> facts;
  if (graph.num_facts() == 0) return facts;
  const std::shared_ptr<const RelationMap> relations = model.RelationsOf(graph);
  SeededRandom random(MixBits(seed));
  for (size_t attempt = 0; attempt < 20 * count && facts.size() < count; ++attempt) {
    const EntityId head = static_cast<EntityId>(random.Uniform(graph.num_entities()));
    const absl::Span<const Neighbor> out = graph.OutEdges(head);  // none if removed
    if (out.empty()) continue;
    const Neighbor& edge = out[random.Uniform(out.size())];
    if (edge.entity == head || (*relations)(edge.relation) < 0) continue;
    facts.push_back(Triple{head, edge.relation, edge.entity});
  }
  return facts;
}

ServedModel::ServedModel(std::shared_ptr<const GrailModel> model, std::string path,
                         std::string sha256, uint64_t generation)
    : ServedModel(ServeGrail(std::move(model), nullptr), std::move(path), std::move(sha256),
                  generation) {}

ServedModel::ServedModel(std::shared_ptr<const PathModel> model, std::string path,
                         std::string sha256, uint64_t generation)
    : ServedModel(ServePath(std::move(model)), std::move(path), std::move(sha256), generation) {}

ServedModel::ServedModel(std::shared_ptr<const FusionModel> model, std::string path,
                         std::string sha256, uint64_t generation)
    // The GraIL model is the archive's own, kept alive by the archive.
    : ServedModel(ServeGrail(std::shared_ptr<const GrailModel>(model, &model->grail()), model),
                  std::move(path), std::move(sha256), generation) {}

ServedModel::ServedModel(std::shared_ptr<const EnsembleModel> model, std::string path,
                         std::string sha256, uint64_t generation)
    : ServedModel(ServeEnsemble(std::move(model), path, sha256, generation), path, sha256,
                  generation) {}

ServedModel::ServedModel(std::unique_ptr<const ServedFamily> family, std::string path,
                         std::string sha256, uint64_t generation)
    : family_(std::move(family)),
      path_(std::move(path)),
      sha256_(std::move(sha256)),
      version_(absl::StrCat(path_, "@", sha256_.substr(0, 16))),
      generation_(generation),
      loaded_at_unix_seconds_(UnixSeconds()) {
  const std::vector<std::string>& names = family_->relations();
  for (size_t m = 0; m < names.size(); ++m) {
    relation_ids_.emplace(names[m], static_cast<int32_t>(m));
  }
}

ServedModel::~ServedModel() = default;

const std::vector<std::string>& ServedModel::relations() const { return family_->relations(); }

ModelSummary ServedModel::Summary() const { return family_->Summary(); }

bool ServedModel::open_vocabulary() const { return family_->open_vocabulary(); }

absl::StatusOr<int32_t> ServedModel::RelationId(absl::string_view name,
                                                const GraphSnapshot& graph) const {
  // A model that reads the graph of relations (ULTRA, an ensemble with an ULTRA member) scores
  // only a relation with facts: one whose facts were all removed is in the same state as one
  // never stored, the graph of relations holds no side of it, so there is nothing to score it by.
  auto with_facts = [&](absl::string_view scorer) -> absl::StatusOr<grail::RelationId> {
    const std::optional<grail::RelationId> id = graph.FindRelation(name);
    if (!id.has_value() || graph.RelationFacts(*id) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("relation ", QuoteName(name),
                                                     " has no fact in the graph (", scorer,
                                                     " once a fact of it is stored)"));
    }
    return *id;
  };
  if (open_vocabulary()) {
    absl::StatusOr<grail::RelationId> id = with_facts("the served ULTRA model scores any relation");
    if (!id.ok()) return id.status();
    return static_cast<int32_t>(*id);
  }
  auto it = relation_ids_.find(name);
  if (it == relation_ids_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("relation ", QuoteName(name), " is not in the model's vocabulary (",
                     relation_ids_.size(), " relations; GetStats lists them)"));
  }
  if (reads_relation_graph()) {
    absl::Status has_facts =
        with_facts("the served ensemble's ULTRA member scores a relation").status();
    if (!has_facts.ok()) return has_facts;
  }
  return it->second;
}

bool ServedModel::reads_relation_graph() const { return family_->reads_relation_graph(); }

std::shared_ptr<const RelationMap> ServedModel::RelationsOf(const GraphSnapshot& graph) const {
  if (open_vocabulary()) {
    static const auto* const kIdentity =
        new std::shared_ptr<const RelationMap>(std::make_shared<const RelationMap>());
    return *kIdentity;
  }
  std::lock_guard<std::mutex> lock(relation_map_mu_);
  if (relation_map_ == nullptr || relation_map_->size() < graph.num_relations()) {
    relation_map_ = std::make_shared<const RelationMap>(
        MapRelationsByName(graph.relation_names(), relations()));
  }
  return relation_map_;
}

absl::StatusOr<std::shared_ptr<const ServedModel>> LoadServedModel(const std::string& path,
                                                                   absl::string_view device,
                                                                   uint64_t generation) {
  absl::StatusOr<AnyModel> model = LoadAnyModel(path, device);
  if (!model.ok()) return model.status();
  absl::StatusOr<std::string> sha256 = FileSha256(path);
  if (!sha256.ok()) return sha256.status();
  if (model->kge) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is a KGE model (", kKgeModelFormat,
                     "): it has no embedding for an entity added at runtime, so grail-server "
                     "serves GraIL and path models"));
  }
  if (model->fusion) {
    return std::make_shared<const ServedModel>(
        std::shared_ptr<const FusionModel>(std::move(model->fusion)), path, *std::move(sha256),
        generation);
  }
  if (model->ensemble) {
    return std::make_shared<const ServedModel>(
        std::shared_ptr<const EnsembleModel>(std::move(model->ensemble)), path, *std::move(sha256),
        generation);
  }
  if (model->path) {
    return std::make_shared<const ServedModel>(
        std::shared_ptr<const PathModel>(std::move(model->path)), path, *std::move(sha256),
        generation);
  }
  return std::make_shared<const ServedModel>(
      std::shared_ptr<const GrailModel>(std::move(model->grail)), path, *std::move(sha256),
      generation);
}

std::vector<std::string> UnknownRelations(const ServedModel& model, const GraphSnapshot& graph) {
  std::vector<std::string> unknown;
  for (const std::string& relation : graph.LiveRelationNames()) {
    if (!model.RelationId(relation, graph).ok()) unknown.push_back(relation);
  }
  return unknown;
}

absl::Status CheckRelationGraphFits(const ServedModel& model, const GraphSnapshot& graph,
                                    uint64_t max_relation_side_pairs) {
  const uint64_t pairs = graph.SidePairs()->size();
  if (!model.reads_relation_graph() || max_relation_side_pairs == 0 ||
      pairs <= max_relation_side_pairs) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      model.path(), " scores any relation from the graph of relations, and the stored graph's ",
      pairs, " pairs of relation sides are over --max-relation-pairs ", max_relation_side_pairs,
      ": raise the bound if this machine holds that graph (8 edges a pair, read by every "
      "forward), or serve a learned model and remove relations"));
}

absl::StatusOr<int> WarmUp(const ServedModel& served, const GraphSnapshot& graph,
                           const WarmupOptions& options) {
  if (options.batches <= 0) return 0;
  const size_t per_batch = static_cast<size_t>(std::max(1, options.batch_size));

  // Stored facts when there are any; otherwise a ring of 32 entities over the model's
  // relations (its ids are the model's, so the relation map is the identity).
  std::shared_ptr<const RelationMap> relations = served.RelationsOf(graph);
  std::vector<WarmupFact> facts;
  for (const Triple& t :
       SampleStoredFacts(served, graph, per_batch * options.batches, options.seed)) {
    facts.push_back({t, (*relations)(t.relation)});
  }
  const GraphView* source = &graph;
  StaticGraph synthetic;
  const RelationMap identity;
  if (facts.empty()) {
    constexpr uint32_t kRing = 32;
    const uint32_t num_relations =
        std::max<uint32_t>(1, static_cast<uint32_t>(served.relations().size()));
    std::vector<Triple> edges;
    for (uint32_t e = 0; e < kRing; ++e) {
      edges.push_back({e, e % num_relations, (e + 1) % kRing});
      edges.push_back({e, (e + 1) % num_relations, (e + 3) % kRing});
    }
    synthetic = StaticGraph(kRing, edges);
    source = &synthetic;
    relations = std::shared_ptr<const RelationMap>(std::shared_ptr<void>(), &identity);
    for (uint32_t i = 0; i < per_batch * options.batches; ++i) {
      const uint32_t head = i % kRing;
      facts.push_back({Triple{head, i % num_relations, (head + 2) % kRing},
                       static_cast<int32_t>(i % num_relations)});
    }
  }

  WarmupInput input;
  input.graph = source;
  input.relations = relations.get();
  input.facts = std::move(facts);
  input.entity_name = [&graph, source](EntityId e) -> absl::string_view {
    return source == &graph ? absl::string_view(graph.EntityName(e)) : absl::string_view();
  };
  return served.family().WarmUp(served, input, options);
}

}  // namespace grail
