// The graphs of Theorem 1 of the paper, for tests that check a model learns a path rule:
// each relation r1..r6 is a random permutation of the entities (every entity has exactly one
// out-edge and one in-edge per relation), and target(X, Y) holds exactly where r1(X, Z) and
// r2(Z, Y). r3..r6 are distractors.
#ifndef GRAIL_TESTS_TESTING_RULE_GRAPH_H_
#define GRAIL_TESTS_TESTING_RULE_GRAPH_H_

#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"
#include "graph/triple_file.h"

namespace grail {

struct RuleGraph {
  std::vector<NamedTriple> body;     // r1..r6 facts
  std::vector<NamedTriple> targets;  // target facts implied by the rule
};

// A random permutation of 0..n-1 without fixed points (no self-loops).
inline std::vector<int> Derangement(int n, SeededRandom& random) {
  std::vector<int> p(n);
  for (int i = 0; i < n; ++i) p[i] = i;
  random.Shuffle(p);
  for (int i = 0; i < n; ++i) {
    if (p[i] == i) std::swap(p[i], p[(i + 1) % n]);
  }
  return p;
}

inline RuleGraph GenerateRuleGraph(int entities, uint64_t seed, const std::string& prefix) {
  SeededRandom random(seed);
  auto name = [&prefix](int e) { return absl::StrCat(prefix, e); };
  RuleGraph g;
  constexpr int kBodyRelations = 6;
  std::vector<std::vector<int>> relation(kBodyRelations);
  for (int r = 0; r < kBodyRelations; ++r) {
    relation[r] = Derangement(entities, random);
    for (int e = 0; e < entities; ++e) {
      g.body.push_back({name(e), absl::StrCat("r", r + 1), name(relation[r][e])});
    }
  }
  for (int x = 0; x < entities; ++x) {
    const int y = relation[1][relation[0][x]];
    if (y != x) g.targets.push_back({name(x), "target", name(y)});
  }
  return g;
}

// GenerateRuleGraph's facts as a live stream brings them: the rule's targets among the body's
// facts, in an order drawn from `order_seed`.
inline std::vector<NamedTriple> RuleGraphStream(int entities, uint64_t seed, uint64_t order_seed,
                                                const std::string& prefix) {
  const RuleGraph g = GenerateRuleGraph(entities, seed, prefix);
  std::vector<NamedTriple> facts = g.body;
  facts.insert(facts.end(), g.targets.begin(), g.targets.end());
  SeededRandom random(order_seed);
  random.Shuffle(facts);
  return facts;
}

// The rule graph for a model that reads relations by their place in the graph rather than
// by name (ULTRA): in GenerateRuleGraph every relation spans all entities, so no structure
// tells r1 from r3 and only the names say which two make the rule. Here the entities come in
// three types of `per_type` each, and each relation links two types: r1 T0->T1 and r2
// T1->T2 one-to-one, r3 T0->T0 and r4 T0->T2 from each entity to 3 others, and
// target(X, Y) (T0->T2) holds exactly where r1(X, Z) and r2(Z, Y). r4, r3 then r4, and
// r3 then target lead from a T0 entity to ~15 other T2 entities in at most two facts; a
// model tells the rule's path from theirs by how each relation meets the query's in the
// relation graph (r1 shares only its heads with target's, r2 only its tails, r3 and r4
// both), which ULTRA reads. Entities and relations are named after `prefix`.
inline RuleGraph GenerateTypedRuleGraph(int per_type, uint64_t seed, const std::string& prefix) {
  SeededRandom random(seed);
  auto id = [&](int type, int e) { return type * per_type + e; };
  struct Signature {
    int from, to, fanout;
  };
  constexpr Signature kRelations[] = {{0, 1, 1}, {1, 2, 1}, {0, 0, 3}, {0, 2, 3}};
  RuleGraph g;
  std::vector<std::vector<int>> maps;
  for (size_t r = 0; r < std::size(kRelations); ++r) {
    const Signature& sig = kRelations[r];
    std::vector<int> p(per_type);
    for (int i = 0; i < per_type; ++i) p[i] = i;
    random.Shuffle(p);
    for (int e = 0; e < per_type; ++e) {
      // Fanout k: e's tails are the k entities after its place in a random order.
      for (int k = 0; k < sig.fanout; ++k) {
        const int head = id(sig.from, e), tail = id(sig.to, p[(e + k) % per_type]);
        if (head == tail) continue;
        g.body.push_back({absl::StrCat(prefix, head), absl::StrCat(prefix, "r", r + 1),
                          absl::StrCat(prefix, tail)});
      }
    }
    maps.push_back(std::move(p));
  }
  for (int x = 0; x < per_type; ++x) {
    g.targets.push_back({absl::StrCat(prefix, id(0, x)), absl::StrCat(prefix, "target"),
                         absl::StrCat(prefix, id(2, maps[1][maps[0][x]]))});
  }
  return g;
}

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_RULE_GRAPH_H_
