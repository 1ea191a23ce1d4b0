#include "graph/model_graph.h"

namespace grail {

ModelGraph::ModelGraph(absl::Span<const NamedTriple> graph_facts,
                       const std::vector<std::string>& model_relations, bool any_relation)
    : model_relations(model_relations.size()) {
  indexed.relations = Vocabulary(model_relations);
  IndexTriples(graph_facts, &indexed);
  graph = StaticGraph(indexed.entities.size(), indexed.triples);
  if (any_relation) {
    this->model_relations = indexed.relations.size();  // the identity map
  } else {
    relations = MapRelationsByName(indexed.relations.names(), model_relations);
  }
}

std::vector<Triple> ModelGraph::NewFacts(absl::Span<const NamedTriple> facts) const {
  std::vector<Triple> out;
  for (const NamedTriple& t : facts) {
    auto h = indexed.entities.Find(t.head);
    auto r = indexed.relations.Find(t.relation);
    auto v = indexed.entities.Find(t.tail);
    if (h && r && v && *h != *v && *r < model_relations && !graph.HasFact(*h, *r, *v)) {
      out.push_back({*h, *r, *v});
    }
  }
  return out;
}

}  // namespace grail
