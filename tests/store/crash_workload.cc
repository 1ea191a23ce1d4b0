#include "tests/store/crash_workload.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"

namespace grail {
namespace {

std::string EntityName(uint64_t k) {
  // Some names long, some not ASCII: the dictionaries must round-trip any bytes.
  if (k % 97 == 5) return absl::StrCat("long-", k, "-", std::string(300, 'x'));
  if (k % 31 == 7) return absl::StrCat("entité-", k);
  return absl::StrCat("e", k);
}

}  // namespace

std::vector<NamedTriple> CrashWorkloadChunk(uint64_t seed, uint64_t sequence) {
  SeededRandom rng(MixBits(seed) ^ sequence);
  if (CrashWorkloadRemoves(sequence)) {
    // About half the facts of a recent addition (stored, unless removed since), a few of
    // the dense corner, a few never stored, and a repeat.
    uint64_t source = sequence - 1 - rng.Uniform(std::min<uint64_t>(sequence - 1, 8));
    if (CrashWorkloadRemoves(source)) --source;
    std::vector<NamedTriple> chunk;
    if (source > 0) {
      for (const NamedTriple& fact : CrashWorkloadChunk(seed, source)) {
        if (rng.Uniform(2) == 0) chunk.push_back(fact);
      }
    }
    for (int i = 0; i < 3; ++i) {
      chunk.push_back({EntityName(rng.Uniform(10)), absl::StrCat("r", rng.Uniform(2)),
                       EntityName(rng.Uniform(10))});
    }
    chunk.push_back({"never-stored", "r0", EntityName(rng.Uniform(10))});
    chunk.push_back(chunk[rng.Uniform(chunk.size())]);
    return chunk;
  }
  // Mostly small chunks (many commits per second, so kills land between and inside them),
  // one in ten large (a big batch in flight when the kill comes).
  const size_t size = rng.Uniform(10) == 0 ? 100 + rng.Uniform(400) : 1 + rng.Uniform(40);
  // The pool of names grows with the sequence, so every chunk meets new entities and
  // relations as well as old ones.
  const uint64_t entity_pool = 30 + 6 * sequence;
  const uint64_t relation_pool = std::min<uint64_t>(3 + sequence / 16, 60);
  std::vector<NamedTriple> chunk;
  chunk.reserve(size);
  while (chunk.size() < size) {
    const uint64_t roll = rng.Uniform(10);
    if (roll == 0 && !chunk.empty()) {
      chunk.push_back(chunk[rng.Uniform(chunk.size())]);  // repeated within the chunk
    } else if (roll < 3) {
      // A small dense corner of the graph: these facts are mostly stored already.
      chunk.push_back({EntityName(rng.Uniform(10)), absl::StrCat("r", rng.Uniform(2)),
                       EntityName(rng.Uniform(10))});
    } else {
      chunk.push_back({EntityName(rng.Uniform(entity_pool)),
                       absl::StrCat("r", rng.Uniform(relation_pool)),
                       EntityName(rng.Uniform(entity_pool))});
    }
  }
  return chunk;
}

std::vector<std::string> CrashWorkloadRemovedEntities(uint64_t seed, uint64_t sequence) {
  if (!CrashWorkloadRemoves(sequence) || sequence % 10 != 0) return {};
  SeededRandom rng(MixBits(seed + 1) ^ sequence);
  const uint64_t entity_pool = 30 + 6 * sequence;
  return {EntityName(rng.Uniform(entity_pool)), EntityName(rng.Uniform(entity_pool))};
}

ChunkResult ExpectedStore::Remove(const std::vector<NamedTriple>& chunk,
                                  const std::vector<std::string>& entities) {
  ChunkResult result;
  // A removed entity's name is unknown to removals, as if never stored.
  auto live = [&](const std::string& name) -> std::optional<uint32_t> {
    std::optional<uint32_t> id = entities_.Find(name);
    if (id && removed_.contains(*id)) return std::nullopt;
    return id;
  };
  for (const NamedTriple& fact : chunk) {
    const std::optional<uint32_t> head = live(fact.head);
    const std::optional<uint32_t> relation = relations_.Find(fact.relation);
    const std::optional<uint32_t> tail = live(fact.tail);
    if (head && relation && tail && facts_.erase(Triple{*head, *relation, *tail}) == 1) {
      ++result.facts_removed;
    } else {
      ++result.facts_not_present;
    }
  }
  for (const std::string& name : entities) {
    const std::optional<uint32_t> id = live(name);
    if (!id) {
      ++result.entities_not_present;  // unknown, removed, or named twice in this chunk
      continue;
    }
    removed_.insert(*id);
    ++result.entities_removed;
    for (auto it = facts_.begin(); it != facts_.end();) {
      if (it->head == *id || it->tail == *id) {
        facts_.erase(it++);
        ++result.facts_removed;
      } else {
        ++it;
      }
    }
  }
  result.sequence = ++sequence_;
  return result;
}

std::vector<EntityId> ExpectedStore::RemovedEntities() const {
  std::vector<EntityId> ids(removed_.begin(), removed_.end());
  std::sort(ids.begin(), ids.end());
  return ids;
}

ChunkResult ExpectedStore::Apply(const std::vector<NamedTriple>& chunk) {
  ChunkResult result;
  const uint32_t entities_before = entities_.size();
  const uint32_t relations_before = relations_.size();
  uint32_t revived = 0;
  auto entity = [&](const std::string& name) {
    const uint32_t id = entities_.Intern(name);
    if (removed_.erase(id) == 1) ++revived;  // a removed entity named again comes back
    return id;
  };
  for (const NamedTriple& fact : chunk) {
    const uint32_t head = entity(fact.head);
    const uint32_t relation = relations_.Intern(fact.relation);
    const Triple t{head, relation, entity(fact.tail)};
    if (facts_.insert(t).second) {
      ++result.facts_added;
    } else {
      ++result.duplicate_facts;
    }
  }
  result.sequence = ++sequence_;
  result.entities_created = entities_.size() - entities_before + revived;
  result.relations_created = relations_.size() - relations_before;
  return result;
}

std::vector<Triple> ExpectedStore::SortedFacts() const {
  std::vector<Triple> facts(facts_.begin(), facts_.end());
  std::sort(facts.begin(), facts.end());
  return facts;
}

}  // namespace grail
