// The JSON form of an extracted subgraph, printed by `grail-tools subgraph`.
#ifndef GRAIL_MODEL_SUBGRAPH_JSON_H_
#define GRAIL_MODEL_SUBGRAPH_JSON_H_

#include <string>

#include "model/enclosing_subgraph.h"
#include "storage/vocabulary.h"

namespace grail {

// One object: `nodes` (each `name`, `du`, `dv`; a distance beyond k is null), `edges`
// (each `head`, `relation`, `tail`, the target edge included), `target_edge` (its index)
// and `target_in_graph`. Node and edge order are the extraction's (u, v first).
std::string SubgraphToJson(const EnclosingSubgraph& subgraph, const Vocabulary& entities,
                           const Vocabulary& relations);

}  // namespace grail

#endif  // GRAIL_MODEL_SUBGRAPH_JSON_H_
