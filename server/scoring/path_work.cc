#include "server/scoring/path_work.h"

#include <atomic>
#include <chrono>
#include <optional>
#include <utility>
#include <vector>

namespace grail {
namespace {

struct PathItem final : WorkItem {
  PathBatch neighbourhood;  // one query's
  // The key its pass is kept under, and the targets' key that names the same pass where the
  // targets' neighbourhood turned out to be the query's whole one (else empty).
  PassKey key;
  std::optional<PassKey> alias;

  int64_t nodes() const override { return neighbourhood.num_nodes(); }
  int64_t edges() const override { return neighbourhood.num_edges(); }
  int64_t bytes() const override {
    return static_cast<int64_t>(sizeof(PathItem) + neighbourhood.MemoryBytes() +
                                key.targets.capacity() * sizeof(EntityId) * 2);
  }
};

// Query q's pass from `batch` and its `scores`: every entity of the neighbourhood for a whole
// pass, the targets alone otherwise (only their scores are exact).
std::shared_ptr<const QueryPass> MakePass(const PathBatch& batch, int64_t q,
                                          const PathScores& scores, const PassKey& key,
                                          uint64_t sequence) {
  std::vector<EntityId> entities;
  std::vector<float> values;
  std::vector<uint8_t> unvisited;
  const bool any_unvisited = !scores.node_reached.empty();
  const auto keep = [&](int64_t node) {
    entities.push_back(static_cast<EntityId>(batch.node_entity[node]));
    values.push_back(scores.node[node]);
    if (any_unvisited) unvisited.push_back(scores.Unvisited(node) ? 1 : 0);
  };
  if (key.targets.empty()) {
    const int64_t n = batch.node_begin[q + 1] - batch.node_begin[q];
    entities.reserve(n);
    values.reserve(n);
    for (int64_t node = batch.node_begin[q]; node < batch.node_begin[q + 1]; ++node) keep(node);
  } else {
    for (EntityId t : key.targets) {
      const int64_t node = batch.NodeOf(q, t);
      if (node >= 0) keep(node);
    }
  }
  return std::make_shared<const QueryPass>(
      sequence, PassClock::now(), batch.query_pruned[q] != 0,
      static_cast<int32_t>(batch.node_begin[q + 1] - batch.node_begin[q]),
      static_cast<int32_t>(batch.edge_begin[q + 1] - batch.edge_begin[q]), scores.far[q],
      std::move(entities), std::move(values), std::move(unvisited));
}

uint64_t NextRunnerInstance() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

PathRunner::PathRunner(const PathModel& model) : model_(model), instance_(NextRunnerInstance()) {}

const WorkNames& PathRunner::names() const {
  static const WorkNames* const kNames =
      new WorkNames{"query", "the query's neighbourhood", "raise the limits"};
  return *kNames;
}

bool PathRunner::Compatible(const WorkItem& first, const WorkItem& next) const {
  const PathBatch& a = static_cast<const PathItem&>(first).neighbourhood;
  const PathBatch& b = static_cast<const PathItem&>(next).neighbourhood;
  return a.side_pairs == b.side_pairs && a.graph_relations == b.graph_relations;
}

BatchOutcome PathRunner::Run(absl::Span<const BatchEntry> batch, ThreadScratch& scratch) const {
  PathBatch* arrays = scratch.Find<PathBatch>();
  if (arrays == nullptr) arrays = &scratch.Emplace<PathBatch>();
  arrays->Clear();
  // Entries whose pass another forward made since they were extracted are answered now; the
  // others are the forward's, identical neighbourhoods sharing one query.
  std::vector<const BatchEntry*> forwarded;
  std::vector<int64_t> query_of;
  forwarded.reserve(batch.size());
  query_of.reserve(batch.size());
  for (const BatchEntry& entry : batch) {
    const auto& item = static_cast<const PathItem&>(*entry.item);
    auto& job = static_cast<PathJob&>(*entry.job);
    const PassLookup& lookup = job.lookup();
    if (lookup.cache != nullptr) {
      if (std::shared_ptr<const QueryPass> pass =
              lookup.cache->Find(item.key, lookup.sequence, lookup.staleness)) {
        job.AcceptQuery(entry.index, *pass);
        continue;
      }
    }
    forwarded.push_back(&entry);
    query_of.push_back(arrays->AppendOrShare(item.neighbourhood));
  }
  BatchOutcome outcome;
  if (forwarded.empty()) {
    outcome.ran = false;
    return outcome;
  }
  outcome.nodes = arrays->num_nodes();  // what the forward runs: shared queries once
  outcome.edges = arrays->num_edges();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<PathScores> scores = model_.Score(*arrays);
  outcome.forward_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  outcome.status = scores.status();
  if (!scores.ok()) return outcome;
  // One pass per query of the forward, key and sequence (entries sharing a query may come
  // from snapshots of different sequences, or name other targets, with the same
  // neighbourhood).
  std::vector<std::shared_ptr<const QueryPass>> made(arrays->num_queries());
  std::vector<const PassKey*> made_for(arrays->num_queries(), nullptr);
  for (size_t b = 0; b < forwarded.size(); ++b) {
    const BatchEntry& entry = *forwarded[b];
    const auto& item = static_cast<const PathItem&>(*entry.item);
    auto& job = static_cast<PathJob&>(*entry.job);
    const PassLookup& lookup = job.lookup();
    std::shared_ptr<const QueryPass>& pass = made[query_of[b]];
    if (pass == nullptr || pass->sequence() != lookup.sequence ||
        !(*made_for[query_of[b]] == item.key)) {
      made_for[query_of[b]] = &item.key;
      pass = MakePass(*arrays, query_of[b], *scores, item.key, lookup.sequence);
      if (lookup.cache != nullptr) {
        lookup.cache->CountMiss();
        lookup.cache->Insert(item.key, pass);
        if (item.alias) lookup.cache->InsertAlias(*item.alias, pass);
      }
    }
    job.AcceptQuery(entry.index, *pass);
  }
  return outcome;
}

std::shared_ptr<const QueryPass> PathJob::Cached(const PassKey& key) const {
  if (lookup_.cache == nullptr) return nullptr;
  return lookup_.cache->Find(key, lookup_.sequence, lookup_.staleness);
}

absl::StatusOr<std::unique_ptr<WorkItem>> PathJob::Extract(size_t i, ThreadScratch& scratch,
                                                           int64_t max_nodes) {
  PassKey key = KeyOf(i);
  std::shared_ptr<const QueryPass> pass = Cached(key);  // a pass of this very key
  PathBatchBuilder* builder = scratch.Find<PathBatchBuilder>();
  if (builder == nullptr) builder = &scratch.Emplace<PathBatchBuilder>();
  if (pass == nullptr && !key.targets.empty() && lookup_.cache != nullptr) {
    // The query's whole pass. Where the call accepts a pass behind the graph, it scores every
    // target too. On the call's own graph (exact), an unpruned one answers the targets when
    // their neighbourhood would be the whole one: their search decides it, none is built.
    std::shared_ptr<const QueryPass> whole =
        lookup_.cache->Find(key.Whole(), lookup_.sequence, lookup_.staleness, /*count_hit=*/false);
    const bool exact = lookup_.staleness.exact();
    if (whole != nullptr &&
        (!exact || (!whole->pruned() && TargetsKeepWholeQuery(i, *builder, max_nodes)))) {
      lookup_.cache->CountHit();
      if (exact) lookup_.cache->InsertAlias(key, whole);
      pass = std::move(whole);
    }
  }
  if (pass != nullptr) {
    AcceptQuery(i, *pass);
    return nullptr;  // answered
  }
  auto item = std::make_unique<PathItem>();
  absl::Status built = ExtractQuery(i, *builder, max_nodes, &item->neighbourhood);
  if (!built.ok()) return built;
  if (builder->last_query_whole() && !key.targets.empty()) {
    // The query's whole neighbourhood: its pass is the whole one, which another call (a
    // ranking, facts with other tails) may have made already.
    item->alias = key;
    key = key.Whole();
    if ((pass = Cached(key)) != nullptr) {
      AcceptQuery(i, *pass);
      return nullptr;
    }
  }
  item->key = std::move(key);
  return item;
}

}  // namespace grail
