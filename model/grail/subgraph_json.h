// The JSON form of an extracted subgraph, printed by `grail-tools subgraph`.
#ifndef GRAIL_MODEL_GRAIL_SUBGRAPH_JSON_H_
#define GRAIL_MODEL_GRAIL_SUBGRAPH_JSON_H_

#include <string>

#include "graph/vocabulary.h"
#include "model/grail/enclosing_subgraph.h"

namespace grail {

// One object: `nodes` (each `name`, `du`, `dv`; a distance beyond k is null), `edges`
// (each `head`, `relation`, `tail`, the target edge included), `target_edge` (its index)
// and `target_in_graph`. Node and edge order are the extraction's (u, v first).
std::string SubgraphToJson(const EnclosingSubgraph& subgraph, const Vocabulary& entities,
                           const Vocabulary& relations);

}  // namespace grail

#endif  // GRAIL_MODEL_GRAIL_SUBGRAPH_JSON_H_
