// An untrained ULTRA model small enough for tests: `layers` layers over the entities, two over
// the graph of relations, `dim` numbers wide; its scores are arbitrary but deterministic for
// the seed.
#ifndef GRAIL_TESTS_TESTING_SMALL_ULTRA_H_
#define GRAIL_TESTS_TESTING_SMALL_ULTRA_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/path/path_model.h"
#include "model/ultra/ultra_model.h"

namespace grail {

inline PathConfig SmallUltraConfig(int layers = 2, int dim = 8) {
  PathConfig config = UltraConfig();
  config.num_layers = layers;
  config.relation_layers = 2;
  config.dim = dim;
  return config;
}

// SmallUltraConfig's model of `seed`, written to `path`.
inline absl::Status SaveSmallUltra(const std::string& path, uint64_t seed, int layers = 2,
                                   int dim = 8) {
  absl::StatusOr<std::unique_ptr<PathModel>> model =
      CreateUltraModel(SmallUltraConfig(layers, dim), seed);
  if (!model.ok()) return model.status();
  return (*model)->Save(path);
}

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_SMALL_ULTRA_H_
