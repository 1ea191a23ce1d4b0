// The crash-recovery test's workload: a deterministic stream of chunks, and an
// independent model of what a store must hold after any prefix of it.
//
// Chunk n (n = 1, 2, ...) of seed s is a pure function of (s, n), so the writer process
// that streams chunks and the test that kills it agree on every chunk without talking.
// Chunks mix new entities, entities and relations seen before, facts repeated within the
// chunk and facts stored by earlier chunks; a few are large, a few names are long or not
// ASCII. Every fifth chunk removes facts instead (RemoveChunk): mostly stored ones, some
// never stored, some repeated.
#ifndef GRAIL_TESTS_STORE_CRASH_WORKLOAD_H_
#define GRAIL_TESTS_STORE_CRASH_WORKLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "graph/ids.h"
#include "graph/triple_file.h"
#include "graph/vocabulary.h"
#include "store/triple_store.h"

namespace grail {

// Chunk `sequence` (from 1) of the workload `seed`.
std::vector<NamedTriple> CrashWorkloadChunk(uint64_t seed, uint64_t sequence);
// Whether chunk `sequence` is a removal (RemoveChunk) rather than an addition.
inline bool CrashWorkloadRemoves(uint64_t sequence) { return sequence % 5 == 0; }
// The entities removal chunk `sequence` removes (with all their facts): every other
// removal chunk names two, mostly stored, sometimes unknown or already removed; later
// additions bring many of them back.
std::vector<std::string> CrashWorkloadRemovedEntities(uint64_t seed, uint64_t sequence);

// The store's documented semantics, restated plainly: ids by first appearance (head,
// relation, tail), duplicates ignored, removals forget facts but never names, every chunk
// takes a sequence number.
class ExpectedStore {
 public:
  // Applies `chunk` as the next chunk; returns what AddChunk must report for it.
  ChunkResult Apply(const std::vector<NamedTriple>& chunk);
  // Removes `chunk`'s facts, then `entities` with all their facts, as the next chunk;
  // returns what RemoveChunk must report.
  ChunkResult Remove(const std::vector<NamedTriple>& chunk,
                     const std::vector<std::string>& entities);
  // Ids of the removed entities, sorted.
  std::vector<EntityId> RemovedEntities() const;

  uint64_t sequence() const { return sequence_; }
  const Vocabulary& entities() const { return entities_; }
  const Vocabulary& relations() const { return relations_; }
  // Every fact, sorted.
  std::vector<Triple> SortedFacts() const;

 private:
  uint64_t sequence_ = 0;
  Vocabulary entities_;
  Vocabulary relations_;
  absl::flat_hash_set<Triple> facts_;
  absl::flat_hash_set<EntityId> removed_;
};

}  // namespace grail

#endif  // GRAIL_TESTS_STORE_CRASH_WORKLOAD_H_
