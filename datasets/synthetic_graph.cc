#include "datasets/synthetic_graph.h"

#include <cmath>
#include <functional>
#include <numeric>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"

namespace grail {
namespace {

// Draws entity indices with probability proportional to (i + 1)^-exponent, by inverting the
// continuous approximation of the cumulative weight, x^(1 - exponent) over [0, n].
class PowerLawSampler {
 public:
  PowerLawSampler(uint32_t n, double exponent) : n_(n), inverse_power_(1.0 / (1.0 - exponent)) {}
  uint32_t Draw(SeededRandom& random) const {
    const double x = static_cast<double>(n_) * std::pow(random.UniformDouble(), inverse_power_);
    return std::min(n_ - 1, static_cast<uint32_t>(x));
  }

 private:
  const uint32_t n_;
  const double inverse_power_;
};

}  // namespace

absl::Status GenerateSyntheticGraph(const SyntheticGraphOptions& options,
                                    const std::function<absl::Status(const NamedTriple&)>& emit) {
  const uint64_t n = options.entities;
  if (n < 2) return absl::InvalidArgumentError("a synthetic graph needs at least 2 entities");
  if (options.relations == 0) return absl::InvalidArgumentError("relations must be at least 1");
  if (!(options.exponent > 0 && options.exponent < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("exponent must be in (0, 1), got ", options.exponent));
  }
  if (options.facts < n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "facts (", options.facts, ") must be at least entities (", n, "): every entity has one"));
  }
  // Redraws for duplicates stay cheap only while the graph is far from complete.
  if (options.facts > n * (n - 1) * options.relations / 4) {
    return absl::InvalidArgumentError(absl::StrCat(options.facts, " facts are too many for ", n,
                                                   " entities and ", options.relations,
                                                   " relations"));
  }

  SeededRandom random(options.seed);
  std::vector<uint32_t> name_of(n);
  std::iota(name_of.begin(), name_of.end(), 0u);
  random.Shuffle(name_of);
  std::vector<std::string> relation_names(options.relations);
  for (uint32_t r = 0; r < options.relations; ++r) relation_names[r] = absl::StrCat("r", r);

  const PowerLawSampler endpoint(static_cast<uint32_t>(n), options.exponent);
  const PowerLawSampler relation_rank(options.relations, 0.5);
  auto relation_of = [&](uint32_t head) {
    // The head's favourite relations first: a Zipf rank shifted by a hash of the head.
    return static_cast<uint32_t>((MixBits(head ^ options.seed) + relation_rank.Draw(random)) %
                                 options.relations);
  };

  absl::flat_hash_set<Triple> seen;
  seen.reserve(options.facts);
  absl::Status emitted;
  NamedTriple named;
  auto add = [&](uint32_t head, uint32_t tail) {
    if (head == tail) return false;
    const Triple fact{head, relation_of(head), tail};
    if (!seen.insert(fact).second) return false;
    named.head = absl::StrCat("e", name_of[head]);
    named.relation = relation_names[fact.relation];
    named.tail = absl::StrCat("e", name_of[tail]);
    emitted = emit(named);  // the loops stop at its first error
    return true;
  };
  for (uint32_t i = 0; i < n && emitted.ok(); ++i) {
    // Entity i's first fact, in a random direction.
    for (;;) {
      const uint32_t other = endpoint.Draw(random);
      const bool outgoing = random.Uniform(2) == 0;
      if (outgoing ? add(i, other) : add(other, i)) break;
    }
  }
  while (seen.size() < options.facts && emitted.ok()) {
    add(endpoint.Draw(random), endpoint.Draw(random));
  }
  return emitted;
}

absl::StatusOr<std::vector<NamedTriple>> GenerateSyntheticGraph(
    const SyntheticGraphOptions& options) {
  std::vector<NamedTriple> out;
  absl::Status generated = GenerateSyntheticGraph(options, [&](const NamedTriple& fact) {
    if (out.empty()) out.reserve(options.facts);
    out.push_back(fact);
    return absl::OkStatus();
  });
  if (!generated.ok()) return generated;
  return out;
}

}  // namespace grail
