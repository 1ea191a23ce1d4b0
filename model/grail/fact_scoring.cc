#include "model/grail/fact_scoring.h"

#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace grail {

absl::StatusOr<std::vector<float>> ScoreGrailFacts(const GrailModel& model, const GraphView& graph,
                                                   const RelationMap& relations,
                                                   absl::Span<const Triple> facts,
                                                   const GrailScoringOptions& options) {
  const bool features = model.config().node_feature_dim > 0;
  if (features && (options.node_feature_rows == nullptr ||
                   options.node_feature_rows->size() < graph.num_entities())) {
    return absl::InvalidArgumentError(
        "the model reads node features (early fusion): scoring needs the feature row of every "
        "entity of the graph (GrailScoringOptions::node_feature_rows)");
  }
  const int64_t n = static_cast<int64_t>(facts.size());
  const int64_t batch_size = std::max(1, options.batch_size);
  const int64_t num_batches = (n + batch_size - 1) / batch_size;
  std::vector<float> scores(n);
  std::atomic<int64_t> next_batch{0};
  absl::Mutex mu;
  absl::Status error;

  auto worker = [&] {
    SubgraphExtractor extractor(model.config().extraction());
    EnclosingSubgraph subgraph;
    SubgraphBatch batch;
    for (int64_t b = next_batch++; b < num_batches; b = next_batch++) {
      {
        absl::MutexLock lock(&mu);
        if (!error.ok()) return;
      }
      batch.Clear();
      const int64_t begin = b * batch_size;
      const int64_t end = std::min(n, begin + batch_size);
      absl::Status status;
      for (int64_t i = begin; i < end && status.ok(); ++i) {
        const Triple& f = facts[i];
        const int64_t target = relations(f.relation);
        if (target < 0) {
          status = absl::InvalidArgumentError(
              absl::StrCat("fact ", i, ": relation id ", f.relation, " is unknown to the model"));
          break;
        }
        status = extractor.Extract(graph, f.head, f.relation, f.tail, false, &subgraph);
        if (status.ok() && features) AttachNodeFeatures(*options.node_feature_rows, &subgraph);
        if (status.ok()) batch.Add(subgraph, target, relations);
      }
      absl::StatusOr<std::vector<float>> batch_scores =
          status.ok() ? model.Score(batch) : absl::StatusOr<std::vector<float>>(status);
      if (!batch_scores.ok()) {
        absl::MutexLock lock(&mu);
        if (error.ok()) error = batch_scores.status();
        return;
      }
      std::copy(batch_scores->begin(), batch_scores->end(), scores.begin() + begin);
    }
  };

  const int threads =
      static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(options.threads, num_batches)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (!error.ok()) return error;
  return scores;
}

}  // namespace grail
