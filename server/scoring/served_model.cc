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
#include "model/core/archive_loading.h"
#include "model/families.h"
#include "model/grail/enclosing_subgraph.h"
#include "model/path/path_batch.h"

namespace grail {
namespace {

absl::Status StoppedWarmUp() {
  return absl::CancelledError("the warm-up stopped: the reload is no longer wanted");
}

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

// A fact to warm up with, given by the graph's ids, and the model id of its relation.
struct WarmupFact {
  Triple fact;
  int32_t model_relation = 0;
};

}  // namespace

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
    : ServedModel(model, nullptr, nullptr, &model->relations(), std::move(path), std::move(sha256),
                  generation) {}

ServedModel::ServedModel(std::shared_ptr<const PathModel> model, std::string path,
                         std::string sha256, uint64_t generation)
    : ServedModel(nullptr, model, nullptr, &model->relations(), std::move(path), std::move(sha256),
                  generation) {}

ServedModel::ServedModel(std::shared_ptr<const FusedModel> model, std::string path,
                         std::string sha256, uint64_t generation)
    // The GraIL model is the archive's own, kept alive by the archive.
    : ServedModel(std::shared_ptr<const GrailModel>(model, &model->grail()), nullptr, model,
                  &model->grail().relations(), std::move(path), std::move(sha256), generation) {}

ServedModel::ServedModel(std::shared_ptr<const GrailModel> grail,
                         std::shared_ptr<const PathModel> path_model,
                         std::shared_ptr<const FusedModel> fused,
                         const std::vector<std::string>* relations, std::string path,
                         std::string sha256, uint64_t generation)
    : model_(std::move(grail)),
      path_model_(std::move(path_model)),
      fused_(std::move(fused)),
      relations_(relations),
      grail_runner_(model_ ? std::make_unique<GrailRunner>(*model_) : nullptr),
      path_runner_(path_model_ ? std::make_unique<PathRunner>(*path_model_) : nullptr),
      path_(std::move(path)),
      sha256_(std::move(sha256)),
      version_(absl::StrCat(path_, "@", sha256_.substr(0, 16))),
      generation_(generation),
      loaded_at_unix_seconds_(UnixSeconds()) {
  for (size_t m = 0; m < relations_->size(); ++m) {
    relation_ids_.emplace((*relations_)[m], static_cast<int32_t>(m));
  }
}

ModelSummary ServedModel::Summary() const {
  ModelSummary summary;
  if (path_model_) {
    summary.format = path_model_->open_vocabulary() ? kUltraModelFormat : kPathModelFormat;
    summary.hops = std::max(0, path_model_->config().radius());  // 0: the whole graph
    summary.layers = path_model_->config().num_layers;
    summary.dim = path_model_->config().dim;
    summary.parameters = path_model_->num_parameters();
    summary.training_fingerprint = path_model_->training_fingerprint();
    summary.device = path_model_->device();
  } else {
    summary.format = fused_ ? kFusedModelFormat : kModelFormat;
    summary.hops = model_->config().hops;
    summary.layers = model_->config().num_layers;
    summary.dim = model_->config().dim;
    summary.parameters = model_->num_parameters();
    summary.training_fingerprint = model_->training_fingerprint();
    summary.device = model_->device();
  }
  if (fused_) {
    for (size_t m = 0; m < fused_->kge().size(); ++m) {
      const KgeModel& member = *fused_->kge()[m];
      summary.kge_members.push_back({KgeKindName(member.config().kind), member.config().dim,
                                     member.num_entities(), member.num_relations(),
                                     fused_->fused_classifier().weights[1 + m]});
    }
  }
  return summary;
}

absl::StatusOr<int32_t> ServedModel::RelationId(absl::string_view name,
                                                const GraphSnapshot& graph) const {
  if (open_vocabulary()) {
    // A relation whose facts were all removed is in the same state as one never stored: the
    // graph of relations holds no side of it, so there is nothing to score it by.
    const std::optional<grail::RelationId> id = graph.FindRelation(name);
    if (!id.has_value() || graph.RelationFacts(*id) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("relation ", QuoteName(name),
                       " has no fact in the graph (the served ULTRA model scores "
                       "any relation once a fact of it is stored)"));
    }
    return static_cast<int32_t>(*id);
  }
  auto it = relation_ids_.find(name);
  if (it == relation_ids_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("relation ", QuoteName(name), " is not in the model's vocabulary (",
                     relation_ids_.size(), " relations; GetStats lists them)"));
  }
  return it->second;
}

std::shared_ptr<const RelationMap> ServedModel::RelationsOf(const GraphSnapshot& graph) const {
  if (open_vocabulary()) {
    static const auto* const kIdentity =
        new std::shared_ptr<const RelationMap>(std::make_shared<const RelationMap>());
    return *kIdentity;
  }
  std::lock_guard<std::mutex> lock(relation_map_mu_);
  if (relation_map_ == nullptr || relation_map_->size() < graph.num_relations()) {
    relation_map_ = std::make_shared<const RelationMap>(
        MapRelationsByName(graph.relation_names(), *relations_));
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
  if (model->fused) {
    return std::make_shared<const ServedModel>(
        std::shared_ptr<const FusedModel>(std::move(model->fused)), path, *std::move(sha256),
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
  if (!model.open_vocabulary() || max_relation_side_pairs == 0 ||
      pairs <= max_relation_side_pairs) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      model.path(), " scores any relation from the graph of relations, and the stored graph's ",
      pairs, " pairs of relation sides are over --max-relation-pairs ", max_relation_side_pairs,
      ": raise the bound if this machine holds that graph (8 edges a pair, read by every "
      "forward), or serve a learned model and remove relations"));
}

namespace {

// WarmUp() for a path model: each forward runs the queries (head, relation, ?) of facts, up
// to the batch limits (a neighbourhood that alone exceeds them runs alone).
absl::StatusOr<int> WarmUpPath(const ServedModel& served, const GraphView& graph,
                               const RelationMap& relations, const std::vector<WarmupFact>& facts,
                               const WarmupOptions& options) {
  const PathModel& model = served.path_model();
  const PathNeighbourhoodSpec spec = model.Neighbourhood(&graph, &relations, 0);
  PathBatchBuilder builder;
  PathBatch batch, one;
  size_t next = 0;
  int forwards = 0;
  for (int b = 0; b < options.batches; ++b) {
    if (options.stop && options.stop()) return StoppedWarmUp();
    batch.Clear();
    const int64_t size = b % 2 == 1 ? 1 : std::max(1, options.batch_size);
    for (size_t tried = 0; tried < 4 * facts.size() && batch.num_queries() < size; ++tried) {
      const WarmupFact& f = facts[next++ % facts.size()];
      one.Clear();
      absl::Status built = builder.Add(spec, {f.fact.head, f.model_relation, {}, {}}, &one);
      if (!built.ok()) return built;
      if (batch.num_queries() > 0 &&
          (batch.num_nodes() + one.num_nodes() > options.max_batch_nodes ||
           batch.num_edges() + one.num_edges() > options.max_batch_edges)) {
        break;
      }
      batch.Append(one);
    }
    if (batch.num_queries() == 0) continue;
    absl::StatusOr<PathScores> scores = model.Score(batch);
    if (!scores.ok()) {
      return absl::Status(scores.status().code(), absl::StrCat("warming up model ", served.path(),
                                                               ": ", scores.status().message()));
    }
    ++forwards;
  }
  return forwards;
}

// A fused archive's KGE models: each scores one fact and ranks every entity for one query,
// the two shapes serving asks of them. Returns the number of calls run.
absl::StatusOr<int> WarmUpKge(const ServedModel& served) {
  int calls = 0;
  for (const std::unique_ptr<KgeModel>& member : served.fused()->kge()) {
    const Triple fact{0, 0, member->num_entities() > 1 ? 1u : 0u};
    absl::Status status = member->ScoreGrailFacts({fact}).status();
    if (status.ok()) status = member->ScoreAll({KgeQuery{0, 0, false}}).status();
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("warming up the KGE models of ",
                                                      served.path(), ": ", status.message()));
    }
    calls += 2;
  }
  return calls;
}

}  // namespace

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

  if (served.family() == ModelFamily::kPath) {
    return WarmUpPath(served, *source, *relations, facts, options);
  }
  const GrailModel& model = served.grail();
  SubgraphExtractor extractor(model.config().extraction());
  EnclosingSubgraph subgraph;
  SubgraphBatch batch;
  size_t next = 0;
  int forwards = 0;
  for (int b = 0; b < options.batches; ++b) {
    if (options.stop && options.stop()) return StoppedWarmUp();
    batch.Clear();
    int64_t nodes = 0, edges = 0;
    // Facts are reused when there are few; a subgraph that alone exceeds a forward's
    // limits (a hub's) is skipped, as the engine would run it alone.
    // Odd forwards hold one subgraph, the shape of a single ScoreTriplet.
    const int64_t size = b % 2 == 1 ? 1 : static_cast<int64_t>(per_batch);
    for (size_t tried = 0; tried < 4 * facts.size() && batch.num_graphs() < size; ++tried) {
      const WarmupFact& f = facts[next++ % facts.size()];
      absl::Status extracted = extractor.Extract(*source, f.fact.head, f.fact.relation, f.fact.tail,
                                                 /*hide_target_fact=*/false, &subgraph);
      if (!extracted.ok()) return extracted;
      // Early fusion: stored entities by name; the synthetic ring's have no features.
      AttachNodeFeatures(
          model,
          [&](EntityId e) -> absl::string_view {
            return source == &graph ? absl::string_view(graph.EntityName(e)) : absl::string_view();
          },
          &subgraph);
      if (nodes + subgraph.num_nodes() > options.max_batch_nodes ||
          edges + subgraph.num_edges() > options.max_batch_edges) {
        if (batch.num_graphs() > 0) break;
        continue;
      }
      nodes += subgraph.num_nodes();
      edges += subgraph.num_edges();
      batch.Add(subgraph, f.model_relation, *relations);
    }
    if (batch.num_graphs() == 0) continue;
    absl::StatusOr<std::vector<float>> scores = model.Score(batch);
    if (!scores.ok()) {
      return absl::Status(scores.status().code(), absl::StrCat("warming up model ", served.path(),
                                                               ": ", scores.status().message()));
    }
    ++forwards;
  }
  if (served.fused() != nullptr) {
    absl::StatusOr<int> calls = WarmUpKge(served);
    if (!calls.ok()) return calls.status();
    forwards += *calls;
  }
  return forwards;
}

}  // namespace grail
