// Synthetic knowledge graphs with a power-law degree distribution, for measuring the service
// at scales no benchmark file reaches (10^6 entities and more, hubs with 10^5 edges).
//
// The model is Chung-Lu's: entity i (0-based) has weight (i + 1)^-exponent, and each fact's
// endpoints are drawn with probability proportional to weight, so degrees follow a power
// law with tail exponent 1 + 1/exponent (2.33 for the default 0.75) and the heaviest
// entity gets about 2 * facts / sum(weights) of them (~80k for 10^6 entities and 5 * 10^6
// facts). So that every entity exists, entity i's first fact joins it to an endpoint drawn
// the same way; the rest draw both ends. A fact's relation depends on its head (each head
// prefers a few relations, as in real graphs) and follows a Zipf law over `relations`.
// Entity names are the ids through a seeded permutation ("e123"), so a name says nothing
// about its degree; relations are "r0", "r1", ...
//
// Deterministic: the same options give the same facts, in the same order, on every
// platform (SeededRandom, no std distributions).
#ifndef GRAIL_DATASETS_SYNTHETIC_GRAPH_H_
#define GRAIL_DATASETS_SYNTHETIC_GRAPH_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/triple_file.h"

namespace grail {

struct SyntheticGraphOptions {
  uint32_t entities = 1000000;
  uint64_t facts = 5000000;
  uint32_t relations = 16;
  double exponent = 0.75;  // entity weight (i + 1)^-exponent, in (0, 1)
  uint64_t seed = 0;
};

// Distinct facts, no self-loops, exactly `facts` of them over exactly `entities` entities.
// Errors: INVALID_ARGUMENT for options that cannot be met (facts < entities, more facts
// than a graph that sparse can hold, exponent outside (0, 1), no relations).
absl::StatusOr<std::vector<NamedTriple>> GenerateSyntheticGraph(
    const SyntheticGraphOptions& options);
// The same facts in the same order, one at a time to `emit`, holding only their ids meanwhile
// (12 bytes a fact, not the names): for graphs whose names would not fit in memory. Stops at
// the first error `emit` returns, and returns it.
absl::Status GenerateSyntheticGraph(const SyntheticGraphOptions& options,
                                    const std::function<absl::Status(const NamedTriple&)>& emit);

}  // namespace grail

#endif  // GRAIL_DATASETS_SYNTHETIC_GRAPH_H_
