// Scoring many facts of one graph: extraction per the model's config, subgraphs grouped
// into batches (one forward each), spread over worker threads.
#ifndef GRAIL_MODEL_GRAIL_FACT_SCORING_H_
#define GRAIL_MODEL_GRAIL_FACT_SCORING_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/graph_view.h"
#include "graph/ids.h"
#include "model/grail/grail_model.h"
#include "model/grail/subgraph_batch.h"

namespace grail {

struct GrailScoringOptions {
  int batch_size = 256;  // subgraphs per forward
  int threads = 1;       // workers, each extracting and running its own forwards
  // Early fusion: the model's feature row of each of the graph's entities, in the graph's id
  // order (GrailModel::NodeFeatureRows of its names). Required for a model with node
  // features, unused otherwise; must outlive the call.
  const std::vector<int32_t>* node_feature_rows = nullptr;
};

// Scores each of `facts` (ids of `graph`; `relations` maps the graph's relation ids to the
// model's, empty for identity). Every fact's relation must map to a model relation, and
// head != tail. Result i is the score of facts[i]. Deterministic: batches are fixed by
// position, so the same input gives the same scores whatever the thread count.
absl::StatusOr<std::vector<float>> ScoreGrailFacts(const GrailModel& model, const GraphView& graph,
                                                   const RelationMap& relations,
                                                   absl::Span<const Triple> facts,
                                                   const GrailScoringOptions& options);

}  // namespace grail

#endif  // GRAIL_MODEL_GRAIL_FACT_SCORING_H_
