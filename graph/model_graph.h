// A triple file indexed the way a model reads it, for the offline tools (grail-fuse, the
// fusion benchmark): the model's relations take the first ids, so a relation the model knows
// has the same id in the graph and in the model, and relations it never saw get later ids
// that map to -1.
#ifndef GRAIL_GRAPH_MODEL_GRAPH_H_
#define GRAIL_GRAPH_MODEL_GRAPH_H_

#include <string>
#include <vector>

#include "absl/types/span.h"
#include "graph/relation_map.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"

namespace grail {

struct ModelGraph {
  // `graph_facts` indexed after `model_relations` (names in the model's id order). A model of
  // any relation (`any_relation`: ULTRA's, an ensemble of them) has the graph's ids as its own.
  ModelGraph(absl::Span<const NamedTriple> graph_facts,
             const std::vector<std::string>& model_relations, bool any_relation = false);

  // `facts` in the graph's ids, leaving out each one whose head or tail the graph lacks, whose
  // relation the model lacks, whose head is its tail, or that is a fact of the graph already:
  // the facts a model can be asked to predict on this graph.
  std::vector<Triple> NewFacts(absl::Span<const NamedTriple> facts) const;

  IndexedTriples indexed;
  StaticGraph graph;
  RelationMap relations;  // graph relation id -> model relation id, -1 if unknown
  size_t model_relations = 0;
};

}  // namespace grail

#endif  // GRAIL_GRAPH_MODEL_GRAPH_H_
