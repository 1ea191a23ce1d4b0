// ULTRA's network as the path model runs it (ultra_model.h): the definition PathModel builds,
// checks and runs (model/path/path_module.h). Includes LibTorch: only the families' loader,
// the importer and tests include this header.
#ifndef GRAIL_MODEL_ULTRA_ULTRA_NETWORK_H_
#define GRAIL_MODEL_ULTRA_ULTRA_NETWORK_H_

#include "model/path/path_module.h"

namespace grail {

// Two networks of the one relational layer (model/path/relational_layer.h): over the graph of
// relations (relation_graph.h; forward() takes it after the batch), then over the entities.
const PathNetworkDefinition& UltraNetwork();

}  // namespace grail

#endif  // GRAIL_MODEL_ULTRA_ULTRA_NETWORK_H_
