#include "graph/negative_sampling.h"

#include "absl/container/flat_hash_set.h"

namespace grail {

bool IsValidReplacement(const GraphView& graph, const Triple& fact, Side side, EntityId candidate) {
  Triple t = fact;
  (side == Side::kHead ? t.head : t.tail) = candidate;
  return t.head != t.tail && t != fact && !graph.HasFact(t.head, t.relation, t.tail);
}

std::optional<Triple> CorruptHeadOrTail(const GraphView& graph, const Triple& fact,
                                        SeededRandom& random, int max_tries) {
  const uint32_t n = graph.num_entities();
  if (n == 0) return std::nullopt;
  for (int i = 0; i < max_tries; ++i) {
    const Side side = random.Uniform(2) == 0 ? Side::kHead : Side::kTail;
    const EntityId candidate = static_cast<EntityId>(random.Uniform(n));
    if (!IsValidReplacement(graph, fact, side, candidate)) continue;
    Triple t = fact;
    (side == Side::kHead ? t.head : t.tail) = candidate;
    return t;
  }
  return std::nullopt;
}

std::vector<EntityId> SampleReplacements(const GraphView& graph, const Triple& fact, Side side,
                                         int count, SeededRandom& random) {
  const uint32_t n = graph.num_entities();
  std::vector<EntityId> chosen;
  if (count <= 0 || n == 0) return chosen;
  // Rejection sampling while valid candidates are plentiful; when draws keep failing (a
  // small graph or a hub relation), enumerate the valid ones and draw among them.
  absl::flat_hash_set<EntityId> seen;
  int failures = 0;
  while (static_cast<int>(chosen.size()) < count && failures < 8 * count + 64) {
    const EntityId candidate = static_cast<EntityId>(random.Uniform(n));
    if (seen.contains(candidate) || !IsValidReplacement(graph, fact, side, candidate)) {
      ++failures;
      continue;
    }
    seen.insert(candidate);
    chosen.push_back(candidate);
  }
  if (static_cast<int>(chosen.size()) == count) return chosen;
  std::vector<EntityId> valid;
  for (EntityId e = 0; e < n; ++e) {
    if (!seen.contains(e) && IsValidReplacement(graph, fact, side, e)) valid.push_back(e);
  }
  random.Shuffle(valid);
  for (EntityId e : valid) {
    if (static_cast<int>(chosen.size()) == count) break;
    chosen.push_back(e);
  }
  return chosen;
}

std::vector<EntityId> SampleNonAnswers(const GraphView& graph, EntityId source, RelationId r,
                                       bool inverse, EntityId answer, int count,
                                       SeededRandom& random, SourceNegative source_negative) {
  std::vector<EntityId> negatives;
  const uint32_t n = graph.num_entities();
  for (int attempt = 0; attempt < 100 * count && static_cast<int>(negatives.size()) < count;
       ++attempt) {
    const EntityId e = static_cast<EntityId>(random.Uniform(n));
    if (e == answer || (e == source && source_negative == SourceNegative::kNever)) continue;
    if (inverse ? graph.HasFact(e, r, source) : graph.HasFact(source, r, e)) continue;
    negatives.push_back(e);
  }
  return negatives;
}

}  // namespace grail
