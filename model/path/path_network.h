// NBFNet's and A*Net's networks (model/path/path_model.h's equations) as TorchScript source,
// composed of the one relational layer (model/path/relational_layer.h). ULTRA's is in
// ultra_module.h. Text only: no LibTorch.
#ifndef GRAIL_MODEL_PATH_PATH_NETWORK_H_
#define GRAIL_MODEL_PATH_PATH_NETWORK_H_

#include <string>

#include "model/path/path_model.h"
#include "model/path/relational_layer.h"

namespace grail {

// The module's source for `c` (not ULTRA's): NBFNet's over the fused operator, over either
// batch layout; with PathConfig::priority, A*Net's, whose pruned pass is driven from C++
// (PrioritizedForward in path_module.h) through its layer_<l>, queries, score and far methods;
// with PathMessagePassing::kPerEdge, NBFNet's with every message materialised, over disjoint
// batches.
std::string PathNetworkSource(const PathConfig& c);

// The layer those networks stack, as far as its parameters go (its messages, aggregation and
// layer norm).
RelationalLayer PathNetworkLayer(const PathConfig& c);

}  // namespace grail

#endif  // GRAIL_MODEL_PATH_PATH_NETWORK_H_
