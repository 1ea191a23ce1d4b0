#include "server/scoring/grail_work.h"

#include <chrono>
#include <utility>
#include <vector>

#include "model/grail/subgraph_batch.h"

namespace grail {
namespace {

struct GrailItem final : WorkItem {
  EnclosingSubgraph subgraph;
  int32_t model_relation = 0;

  int64_t nodes() const override { return subgraph.num_nodes(); }
  int64_t edges() const override { return subgraph.num_edges(); }
  int64_t bytes() const override {
    const EnclosingSubgraph& s = subgraph;
    return static_cast<int64_t>(
        sizeof(GrailItem) + s.nodes.capacity() * sizeof(EntityId) + s.dist_u.capacity() +
        s.dist_v.capacity() + s.edge_src.capacity() * sizeof(int32_t) +
        s.edge_dst.capacity() * sizeof(int32_t) + s.edge_relation.capacity() * sizeof(RelationId));
  }
};

}  // namespace

const WorkNames& GrailRunner::names() const {
  static const WorkNames* const kNames = new WorkNames{
      "fact", "the enclosing subgraph",
      "serve a model trained with a per-hop cap (grail-train --max-nodes-per-hop) or raise the "
      "limits"};
  return *kNames;
}

BatchOutcome GrailRunner::Run(absl::Span<const BatchEntry> batch, ThreadScratch& scratch) const {
  SubgraphBatch* arrays = scratch.Find<SubgraphBatch>();
  if (arrays == nullptr) arrays = &scratch.Emplace<SubgraphBatch>();
  arrays->Clear();
  BatchOutcome outcome;
  for (const BatchEntry& entry : batch) {
    const auto& item = static_cast<const GrailItem&>(*entry.item);
    arrays->Add(item.subgraph, item.model_relation,
                static_cast<const GrailJob&>(*entry.job).relations());
    outcome.nodes += item.nodes();
    outcome.edges += item.edges();
  }
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<float>> scores = model_.Score(*arrays);
  outcome.forward_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  outcome.status = scores.status();
  if (!scores.ok()) return outcome;
  for (size_t b = 0; b < batch.size(); ++b) {
    const EnclosingSubgraph& s = static_cast<const GrailItem&>(*batch[b].item).subgraph;
    static_cast<GrailJob&>(*batch[b].job)
        .Accept(batch[b].index,
                FactScore{(*scores)[b], s.num_nodes(), s.num_edges(), s.target_in_graph});
  }
  return outcome;
}

absl::StatusOr<std::unique_ptr<WorkItem>> GrailJob::Extract(size_t i, ThreadScratch& scratch,
                                                            int64_t /*max_nodes*/) {
  // Each thread's extractor is made for the extraction config of the job at hand: jobs of a
  // model reloaded with another config (hops, per-hop cap) get one of their own config.
  const ExtractionConfig config = model().config().extraction();
  SubgraphExtractor* extractor = scratch.Find<SubgraphExtractor>();
  if (extractor == nullptr || !(extractor->config() == config)) {
    extractor = &scratch.Emplace<SubgraphExtractor>(config);
  }
  auto item = std::make_unique<GrailItem>();
  absl::StatusOr<int32_t> relation = ExtractSubgraph(i, *extractor, &item->subgraph);
  if (!relation.ok()) return relation.status();
  item->model_relation = *relation;
  return item;
}

}  // namespace grail
