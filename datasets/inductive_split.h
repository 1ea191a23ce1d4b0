// The paper's inductive benchmark generator (appendix "Inductive Graph Generation").
//
// From one knowledge graph it cuts a pair of graphs with disjoint entity sets: sample root
// entities uniformly, take the union of their k-hop (undirected) neighbourhoods with a cap
// on new neighbours per hop, keep every fact among those entities: that is the train graph.
// Remove its entities from the whole graph and sample the test graph the same way. Test
// facts whose relation does not occur in the train graph are dropped. Each graph then
// holds out a fraction of its facts as valid and test. Deterministic per seed.
#ifndef GRAIL_DATASETS_INDUCTIVE_SPLIT_H_
#define GRAIL_DATASETS_INDUCTIVE_SPLIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/triple_file.h"

namespace grail {

// How one graph of the pair is sampled.
struct GraphSampleOptions {
  int roots = 100;          // root entities drawn uniformly without replacement
  int hops = 6;             // k of the k-hop neighbourhoods
  int max_new_per_hop = 5;  // cap on newly reached entities per root per hop (0: no cap)
};

struct InductiveSplitOptions {
  uint64_t seed = 0;
  // The defaults cut from WordNet's ~112k linked synsets a pair about the size of
  // WN18RR_v1 (seed 0: a train graph of ~3.3k entities / ~5k facts, a test graph of ~1.2k
  // entities / ~1.8k facts). WordNet is sparse and its hubs are huge: a small cap keeps hubs
  // from swallowing the sample, and deep walks give denser induced graphs than many
  // shallow ones (induced graphs of BFS samples stay near 1.5 facts per entity either way).
  GraphSampleOptions train{/*roots=*/130};
  GraphSampleOptions test{/*roots=*/50};
  double valid_fraction = 0.1;  // of each graph's facts
  double test_fraction = 0.1;   // of each graph's facts
};

// One graph of the pair: its facts partitioned into train / valid / test.
struct SplitGraph {
  std::vector<NamedTriple> train;
  std::vector<NamedTriple> valid;
  std::vector<NamedTriple> test;
};

struct InductiveSplit {
  SplitGraph train_graph;  // written as <name>/
  SplitGraph test_graph;   // written as <name>_ind/
};

// Repeated input facts count once. Roots are drawn among the entities that still have a
// neighbour to walk to. A fact is held out (valid or test) only if both its entities keep a
// fact in their graph's train part and its relation keeps one in the train graph's train
// part, so the held-out counts can fall short of the fractions in sparse graphs. Each part
// comes back sorted by (head, relation, tail). The same facts (in the same order) and
// options give the same split on every platform.
// Errors: INVALID_ARGUMENT for options out of range or a graph too small to sample from.
absl::StatusOr<InductiveSplit> GenerateInductiveSplit(absl::Span<const NamedTriple> facts,
                                                      const InductiveSplitOptions& options);

// Writes out_dir/<name>/{train,valid,test}.txt and out_dir/<name>_ind/{...}, creating the
// directories.
absl::Status WriteInductiveSplit(const InductiveSplit& split, const std::string& out_dir,
                                 const std::string& name);

}  // namespace grail

#endif  // GRAIL_DATASETS_INDUCTIVE_SPLIT_H_
