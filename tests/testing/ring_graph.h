// The ring graphs the serving tests store, and how they compare a served score with one
// computed offline.
#ifndef GRAIL_TESTS_TESTING_RING_GRAPH_H_
#define GRAIL_TESTS_TESTING_RING_GRAPH_H_

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "graph/triple_file.h"
#include "gtest/gtest.h"

namespace grail {

// A ring of entities <prefix>0 .. <prefix>(n-1), each linked to the next by relations[i % R]
// and to the one after by relations[(i + 1) % R]. With a model of radius k, most of a long
// ring lies beyond any fact's or query's neighbourhood.
inline std::vector<NamedTriple> RingFacts(int n, const std::vector<std::string>& relations,
                                          absl::string_view prefix = "c") {
  const int r = static_cast<int>(relations.size());
  std::vector<NamedTriple> facts;
  for (int i = 0; i < n; ++i) {
    facts.push_back({absl::StrCat(prefix, i), relations[i % r], absl::StrCat(prefix, (i + 1) % n)});
    facts.push_back(
        {absl::StrCat(prefix, i), relations[(i + 1) % r], absl::StrCat(prefix, (i + 2) % n)});
  }
  return facts;
}

// A served score against the same fact's offline one: equal up to the last bits of a float
// (batched products round differently for other batch shapes).
inline void ExpectClose(float served, float expected, const std::string& what) {
  EXPECT_NEAR(served, expected, 1e-5 * (1 + std::fabs(expected))) << what;
}

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_RING_GRAPH_H_
