// Negative facts, drawn the way GraIL's training and evaluation protocol draws them: the
// head or the tail of a true fact is replaced by an entity drawn uniformly, and the result
// must not be a fact of the graph, nor a self-loop, nor the original fact itself. (The
// reference sampler only checks the graph, so a held-out test fact could be drawn as its
// own negative; we never do that.)
#ifndef GRAIL_GRAPH_NEGATIVE_SAMPLING_H_
#define GRAIL_GRAPH_NEGATIVE_SAMPLING_H_

#include <optional>
#include <vector>

#include "common/seeded_random.h"
#include "graph/graph_view.h"
#include "graph/ids.h"

namespace grail {

enum class Side { kHead, kTail };

// Whether `candidate` may stand in for `fact`'s `side`.
bool IsValidReplacement(const GraphView& graph, const Triple& fact, Side side, EntityId candidate);

// One negative for `fact`: the side is a fair coin, the entity uniform over the graph's
// entities. Returns nullopt if no valid replacement was found in `max_tries` draws.
std::optional<Triple> CorruptHeadOrTail(const GraphView& graph, const Triple& fact,
                                        SeededRandom& random, int max_tries = 1000);

// Up to `count` distinct entities that validly replace `fact`'s `side`, drawn uniformly
// without replacement. Fewer only if fewer exist.
std::vector<EntityId> SampleReplacements(const GraphView& graph, const Triple& fact, Side side,
                                         int count, SeededRandom& random);

// Whether the query's own source may be one of its negatives.
enum class SourceNegative {
  kNever,
  kUnlessAnswer,  // like any other entity: unless (source, r, source) is a fact
};

// Up to `count` entities that do not answer the query (source, r, ?) in `graph` (with
// `inverse`, (?, r, source)), drawn uniformly with replacement in at most 100 * count draws;
// never `answer`, and the source only as `source_negative` says. The training negatives of the
// path family (NBFNet's strict negatives, which may be the source) and of the KGE models (the
// RotatE code's filtered negatives).
std::vector<EntityId> SampleNonAnswers(const GraphView& graph, EntityId source, RelationId r,
                                       bool inverse, EntityId answer, int count,
                                       SeededRandom& random,
                                       SourceNegative source_negative = SourceNegative::kNever);

}  // namespace grail

#endif  // GRAIL_GRAPH_NEGATIVE_SAMPLING_H_
