// The graphs of Theorem 1 of the paper, for tests that check a model learns a path rule:
// each relation r1..r6 is a random permutation of the entities (every entity has exactly one
// out-edge and one in-edge per relation), and target(X, Y) holds exactly where r1(X, Z) and
// r2(Z, Y). r3..r6 are distractors.
#ifndef GRAIL_TESTS_TESTING_RULE_GRAPH_H_
#define GRAIL_TESTS_TESTING_RULE_GRAPH_H_

#include <string>
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

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_RULE_GRAPH_H_
