// Untrained GraIL and path models written to a file, for tests that start grail-server on
// them: their scores are arbitrary but deterministic for the seed.
#ifndef GRAIL_TESTS_TESTING_SAVED_MODEL_H_
#define GRAIL_TESTS_TESTING_SAVED_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/grail/grail_model.h"
#include "model/path/path_model.h"

namespace grail {

inline absl::Status SaveUntrainedModel(const std::string& path,
                                       const std::vector<std::string>& relations, uint64_t seed,
                                       const GrailConfig& config) {
  absl::StatusOr<std::unique_ptr<GrailModel>> model = GrailModel::Create(config, relations, seed);
  if (!model.ok()) return model.status();
  return (*model)->Save(path);
}

// An untrained path model (NBFNet's network, `layers` layers of `dim`) for `relations`.
inline absl::Status SaveUntrainedPathModel(const std::string& path,
                                           const std::vector<std::string>& relations, uint64_t seed,
                                           int layers, int dim = 8) {
  PathConfig config;
  config.num_layers = layers;
  config.dim = dim;
  absl::StatusOr<std::unique_ptr<PathModel>> model = PathModel::Create(config, relations, seed);
  if (!model.ok()) return model.status();
  return (*model)->Save(path);
}

// The server tests' usual shape: 2-hop subgraphs, default everything else.
inline GrailConfig TwoHopConfig() {
  GrailConfig config;
  config.hops = 2;
  return config;
}

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_SAVED_MODEL_H_
