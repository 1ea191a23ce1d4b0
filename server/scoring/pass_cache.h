// Passes of the path family, kept so that a query asked again costs a lookup, not a
// propagation.
//
// A pass of query (source, relation) scores every entity of the query's neighbourhood (a
// ranking's pass, or a fact's whose neighbourhood is the whole query's: PathBatchBuilder::
// last_query_whole) or only the targets it was built for (a fact's pass over the enclosing
// neighbourhood of its tails). Its key names everything its scores depend on: the model
// (PathRunner's instance), the query, the propagation budget and, for a targets' pass, the
// targets; the graph sequence it was computed at comes with it. A lookup is exact by default
// (the pass of the same key at the same sequence, so the same neighbourhood and the same
// forward: the same bits as computing it again); a caller may accept a pass up to a number of
// sequences or milliseconds behind (Staleness).
//
// The cache is bounded in bytes; inserting past the bound evicts the least recently used
// passes under the lock, in time proportional to what it evicts, and their memory is freed
// after the lock is released (a pass still in use by a call lives on until that call ends).
// Each key keeps only its newest pass.
//
// Thread safety: every method may be called from any number of threads.
#ifndef GRAIL_SERVER_SCORING_PASS_CACHE_H_
#define GRAIL_SERVER_SCORING_PASS_CACHE_H_

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/synchronization/mutex.h"
#include "graph/ids.h"

namespace grail {

using PassClock = std::chrono::steady_clock;

// One query's pass, as its scores are read: per entity it kept, the score and whether the
// pass visited it (a pruned pass gives an entity it did not visit the far score).
class QueryPass {
 public:
  QueryPass(uint64_t sequence, PassClock::time_point computed_at, bool pruned, int32_t nodes,
            int32_t edges, float far, std::vector<EntityId> entities, std::vector<float> scores,
            std::vector<uint8_t> unvisited);

  uint64_t sequence() const { return sequence_; }
  PassClock::time_point computed_at() const { return computed_at_; }
  // Whether the neighbourhood was pruned to the budget (its scores are approximate).
  bool pruned() const { return pruned_; }
  // The neighbourhood it ran on.
  int32_t nodes() const { return nodes_; }
  int32_t edges() const { return edges_; }
  // The score of every entity it did not keep.
  float far() const { return far_; }

  // Entities it kept, in the neighbourhood's order, with their scores.
  size_t size() const { return entities_.size(); }
  EntityId entity(size_t i) const { return entities_[i]; }
  float score(size_t i) const { return scores_[i]; }
  bool unvisited(size_t i) const { return !unvisited_.empty() && unvisited_[i] != 0; }
  // Index of `entity`, or -1 where the pass did not keep it.
  int64_t Find(EntityId entity) const;
  // The score of `entity`: its own where kept, else the far score.
  float Of(EntityId entity) const {
    const int64_t i = Find(entity);
    return i >= 0 ? scores_[i] : far_;
  }

  // Heap bytes held, for the cache's bound.
  int64_t bytes() const;

 private:
  const uint64_t sequence_;
  const PassClock::time_point computed_at_;
  const bool pruned_;
  const int32_t nodes_, edges_;
  const float far_;
  const std::vector<EntityId> entities_;
  const std::vector<float> scores_;
  const std::vector<uint8_t> unvisited_;
  std::vector<uint32_t> by_entity_;  // indices sorted by entity, for Find
};

// What a pass's scores depend on, the graph's version aside.
struct PassKey {
  uint64_t model = 0;  // PathRunner::instance()
  EntityId source = 0;
  int32_t relation = 0;  // the model's, in [0, 2R)
  // The propagation budget (PathBudget: what the pass materialises, and the entities each
  // layer of a learned priority propagates from).
  int64_t budget_nodes = 0, budget_edges = 0, budget_layer_nodes = 0;
  std::vector<EntityId> targets;  // sorted; empty: the query's whole neighbourhood

  // The key of the whole neighbourhood's pass of the same query.
  PassKey Whole() const {
    return PassKey{model, source, relation, budget_nodes, budget_edges, budget_layer_nodes, {}};
  }

  friend bool operator==(const PassKey& a, const PassKey& b) {
    return a.model == b.model && a.source == b.source && a.relation == b.relation &&
           a.budget_nodes == b.budget_nodes && a.budget_edges == b.budget_edges &&
           a.budget_layer_nodes == b.budget_layer_nodes && a.targets == b.targets;
  }
  template <typename H>
  friend H AbslHashValue(H h, const PassKey& k) {
    return H::combine(std::move(h), k.model, k.source, k.relation, k.budget_nodes, k.budget_edges,
                      k.budget_layer_nodes, k.targets);
  }
};

// How far behind the graph a call accepts a pass (kg.v1.Staleness). The default is exact.
struct Staleness {
  uint64_t max_sequences = 0;            // sequences behind the call's snapshot
  std::chrono::milliseconds max_age{0};  // since the pass was computed
  // The oldest sequence the call accepts in any case (its min_graph_sequence).
  uint64_t min_sequence = 0;

  bool exact() const { return max_sequences == 0 && max_age.count() == 0; }
  // Whether a pass computed at `sequence`, `computed_at`, may answer a call on snapshot
  // `current` at `now`: the same sequence, or, where the call accepts staleness, within each
  // bound it set and not before min_sequence.
  bool Accepts(uint64_t sequence, PassClock::time_point computed_at, uint64_t current,
               PassClock::time_point now) const;
};

struct PassCacheStats {
  int64_t hits = 0, misses = 0, evictions = 0, insertions = 0;
  int64_t bytes = 0, entries = 0;
  int64_t capacity_bytes = 0;
};

class PassCache {
 public:
  // Holds at most `capacity_bytes` of passes (0: none; every lookup misses).
  explicit PassCache(int64_t capacity_bytes);

  // The pass of `key` that `staleness` accepts for a call on snapshot `current`, or null.
  // Counts a hit where found; a query that runs a forward instead counts its miss itself
  // (CountMiss), after the lookups that might have spared it.
  std::shared_ptr<const QueryPass> Find(const PassKey& key, uint64_t current,
                                        const Staleness& staleness, bool count_hit = true);
  void CountHit();  // a pass Find gave with count_hit false answered a query after all
  void CountMiss(int64_t queries = 1);
  // Keeps `pass` as key's newest (unless key already has a newer one). A pass larger than the
  // whole capacity is not kept.
  void Insert(const PassKey& key, std::shared_ptr<const QueryPass> pass);
  // Makes `alias`, a targets' key whose neighbourhood was the query's whole one, name `pass`,
  // kept under alias.Whole(). The alias holds no pass of its own: it counts its key's bytes,
  // and once the whole key holds no pass of that sequence the alias finds nothing.
  void InsertAlias(const PassKey& alias, const std::shared_ptr<const QueryPass>& pass);

  PassCacheStats Stats() const;
  int64_t capacity_bytes() const { return capacity_; }

 private:
  using Lru = std::list<const PassKey*>;  // most recently used first; keys are the map's
  struct Entry {
    // Null for an alias, which names the pass of its whole key at `sequence` (the same key
    // and graph: the same neighbourhood and pass, whichever object holds it).
    std::shared_ptr<const QueryPass> pass;
    uint64_t sequence = 0;  // the pass's
    int64_t bytes = 0;
    Lru::iterator lru;
  };
  // Puts `entry` (new or not) first in lru_, counts `bytes` for it and evicts past the bound
  // into `freed`.
  void Place(const PassKey& key, Entry entry, std::vector<std::shared_ptr<const QueryPass>>* freed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t capacity_;
  mutable absl::Mutex mu_;
  // Stable keys, which lru_ points to.
  absl::node_hash_map<PassKey, Entry> entries_ ABSL_GUARDED_BY(mu_);
  Lru lru_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t insertions_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace grail

#endif  // GRAIL_SERVER_SCORING_PASS_CACHE_H_
