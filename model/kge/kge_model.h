// Knowledge-graph embedding models — TransE, DistMult, ComplEx and RotatE — as the RotatE
// paper's code defines them (Sun et al., ICLR 2019), which is the implementation the GraIL
// paper (Section 5.2) uses for its transductive baselines and ensembles. Unlike the two
// structural families they learn one vector per entity, so they score only entities that
// were in their vocabulary when they were trained.
//
// With entity embeddings h, t and relation embedding r (complex vectors of `dim` entries for
// ComplEx and RotatE, stored as [real parts, imaginary parts]):
//   TransE    s = gamma - ||h + r - t||_1
//   DistMult  s = <h, r, t> = sum_i h_i r_i t_i
//   ComplEx   s = Re(sum_i h_i r_i conj(t_i))
//   RotatE    s = gamma - sum_i |h_i * e^(i theta_i) - t_i|,  theta = r / (range / pi)
// Embeddings start uniform in [-range, range], range = (gamma + 2) / dim, as in that code.
//
// Like the other families there is one definition: a TorchScript module generated from a
// KgeConfig, which the trainer, the evaluator and the server share through one archive.
//
// Thread safety: the scoring methods may be called from several threads at once; Save() and
// the trainer's access to module() must not run concurrently with anything else.
#ifndef GRAIL_MODEL_KGE_KGE_MODEL_H_
#define GRAIL_MODEL_KGE_KGE_MODEL_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "graph/graph_view.h"

namespace grail {

inline constexpr char kKgeModelFormat[] = "grail-kg-kge-model/1";

enum class KgeKind { kTransE, kDistMult, kComplEx, kRotatE };

// "transe", "distmult", "complex" or "rotate" (any case). Errors: INVALID_ARGUMENT naming
// the choices.
absl::StatusOr<KgeKind> ParseKgeKind(absl::string_view name);
const char* KgeKindName(KgeKind kind);  // the lower-case name ParseKgeKind reads

struct KgeConfig {
  KgeKind kind = KgeKind::kRotatE;
  int dim = 500;       // entries per embedding; complex entries for ComplEx and RotatE
  double gamma = 6.0;  // the margin of TransE and RotatE; sets the initial range for all

  // Real numbers per entity and per relation embedding.
  int entity_width() const {
    return kind == KgeKind::kComplEx || kind == KgeKind::kRotatE ? 2 * dim : dim;
  }
  int relation_width() const { return kind == KgeKind::kComplEx ? 2 * dim : dim; }
  double embedding_range() const { return (gamma + 2.0) / dim; }
};

// A ranking query: every entity as the tail of (anchor, relation, ?), or with `inverse` as
// the head of (?, relation, anchor). Ids are the model's.
struct KgeQuery {
  EntityId anchor = 0;
  RelationId relation = 0;
  bool inverse = false;
};

struct KgeModule;  // the TorchScript module; see model/kge/kge_module.h (LibTorch inside)

class KgeModel {
 public:
  // A freshly initialised model over `entities` and `relations` (names in id order),
  // parameters drawn from `seed`. Errors: INVALID_ARGUMENT for a bad config or an empty
  // vocabulary; FAILED_PRECONDITION for CUDA when absent.
  static absl::StatusOr<std::unique_ptr<KgeModel>> Create(const KgeConfig& config,
                                                          std::vector<std::string> entities,
                                                          std::vector<std::string> relations,
                                                          uint64_t seed,
                                                          absl::string_view device = "cpu");
  // Opens an archive written by Save(). Errors name the path and what is wrong.
  static absl::StatusOr<std::unique_ptr<KgeModel>> Load(const std::string& path,
                                                        absl::string_view device = "cpu");
  // The model of an archive module already opened from `path` (LoadAnyModel).
  static absl::StatusOr<std::unique_ptr<KgeModel>> FromModule(std::unique_ptr<KgeModule> module,
                                                              const std::string& path,
                                                              absl::string_view device);
  ~KgeModel();

  absl::Status Save(const std::string& path) const;

  const KgeConfig& config() const { return config_; }
  const std::vector<std::string>& entities() const { return entities_; }
  const std::vector<std::string>& relations() const { return relations_; }
  uint32_t num_entities() const { return static_cast<uint32_t>(entities_.size()); }
  int32_t num_relations() const { return static_cast<int32_t>(relations_.size()); }
  const std::string& training_fingerprint() const { return fingerprint_; }
  void set_training_fingerprint(std::string fingerprint) { fingerprint_ = std::move(fingerprint); }
  int64_t num_parameters() const;
  const std::string& device() const { return device_; }  // "cpu", "cuda:0"

  // The score of each fact (model ids). Errors: INVALID_ARGUMENT for an id out of range.
  absl::StatusOr<std::vector<float>> ScoreGrailFacts(absl::Span<const Triple> facts) const;
  // The score of every entity for each query, row-major: scores[q * num_entities() + e].
  // Memory is bounded: candidates are scored in chunks. Errors: as ScoreGrailFacts.
  absl::StatusOr<std::vector<float>> ScoreAll(absl::Span<const KgeQuery> queries) const;

  // The embedding of an entity (config().entity_width() numbers: real parts, then imaginary
  // parts for ComplEx and RotatE) and of a relation (relation_width(); RotatE's are phases
  // scaled by range / pi). Require an id in range.
  std::vector<float> EntityEmbedding(EntityId entity) const;
  std::vector<float> RelationEmbedding(RelationId relation) const;

  KgeModule& module() { return *module_; }

 private:
  KgeModel(KgeConfig config, std::vector<std::string> entities, std::vector<std::string> relations,
           std::unique_ptr<KgeModule> module);

  KgeConfig config_;
  std::vector<std::string> entities_;
  std::vector<std::string> relations_;
  std::string fingerprint_;
  std::string device_;
  std::unique_ptr<KgeModule> module_;
};

}  // namespace grail

#endif  // GRAIL_MODEL_KGE_KGE_MODEL_H_
