#include "server/scoring/pass_cache.h"

#include <algorithm>
#include <numeric>

namespace grail {

QueryPass::QueryPass(uint64_t sequence, PassClock::time_point computed_at, bool whole, bool pruned,
                     int32_t nodes, int32_t edges, float far, std::vector<EntityId> entities,
                     std::vector<float> scores, std::vector<uint8_t> unvisited)
    : sequence_(sequence),
      computed_at_(computed_at),
      whole_(whole),
      pruned_(pruned),
      nodes_(nodes),
      edges_(edges),
      far_(far),
      entities_(std::move(entities)),
      scores_(std::move(scores)),
      unvisited_(std::move(unvisited)) {
  by_entity_.resize(entities_.size());
  std::iota(by_entity_.begin(), by_entity_.end(), 0u);
  std::sort(by_entity_.begin(), by_entity_.end(),
            [&](uint32_t a, uint32_t b) { return entities_[a] < entities_[b]; });
}

int64_t QueryPass::Find(EntityId entity) const {
  const auto it = std::lower_bound(by_entity_.begin(), by_entity_.end(), entity,
                                   [&](uint32_t i, EntityId e) { return entities_[i] < e; });
  return it != by_entity_.end() && entities_[*it] == entity ? static_cast<int64_t>(*it) : -1;
}

int64_t QueryPass::bytes() const {
  return static_cast<int64_t>(sizeof(QueryPass) + entities_.capacity() * sizeof(EntityId) +
                              scores_.capacity() * sizeof(float) + unvisited_.capacity() +
                              by_entity_.capacity() * sizeof(uint32_t));
}

bool Staleness::Accepts(uint64_t sequence, PassClock::time_point computed_at, uint64_t current,
                        PassClock::time_point now) const {
  if (sequence == current) return true;
  if (exact() || sequence > current || sequence < min_sequence) return false;
  if (max_sequences > 0 && current - sequence > max_sequences) return false;
  if (max_age.count() > 0 && now - computed_at > max_age) return false;
  return true;
}

PassCache::PassCache(int64_t capacity_bytes) : capacity_(std::max<int64_t>(0, capacity_bytes)) {}

std::shared_ptr<const QueryPass> PassCache::Find(const PassKey& key, uint64_t current,
                                                 const Staleness& staleness) {
  if (capacity_ == 0) return nullptr;
  const PassClock::time_point now = PassClock::now();
  absl::MutexLock lock(&mu_);
  const auto it = entries_.find(key);
  if (it == entries_.end() || !staleness.Accepts(it->second.pass->sequence(),
                                                 it->second.pass->computed_at(), current, now)) {
    return nullptr;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.pass;
}

void PassCache::CountMiss(int64_t queries) {
  if (capacity_ == 0) return;
  absl::MutexLock lock(&mu_);
  misses_ += queries;
}

void PassCache::Insert(const PassKey& key, std::shared_ptr<const QueryPass> pass) {
  // The key's size counts too: a targets' key holds its targets.
  const int64_t bytes = pass->bytes() + static_cast<int64_t>(sizeof(PassKey) + sizeof(Entry) +
                                                             key.targets.size() * sizeof(EntityId));
  if (bytes > capacity_) return;
  std::vector<std::shared_ptr<const QueryPass>> freed;  // released after the lock
  absl::MutexLock lock(&mu_);
  auto [it, added] = entries_.try_emplace(key);
  Entry& entry = it->second;
  if (!added) {
    if (entry.pass->sequence() > pass->sequence()) return;  // a newer one is kept
    bytes_ -= entry.bytes;
    freed.push_back(std::move(entry.pass));
    lru_.splice(lru_.begin(), lru_, entry.lru);
  } else {
    lru_.push_front(&it->first);
    entry.lru = lru_.begin();
  }
  entry.pass = std::move(pass);
  entry.bytes = bytes;
  bytes_ += bytes;
  ++insertions_;
  while (bytes_ > capacity_) {
    const PassKey* oldest = lru_.back();
    const auto victim = entries_.find(*oldest);
    bytes_ -= victim->second.bytes;
    freed.push_back(std::move(victim->second.pass));
    lru_.pop_back();
    entries_.erase(victim);
    ++evictions_;
  }
}

PassCacheStats PassCache::Stats() const {
  absl::MutexLock lock(&mu_);
  return PassCacheStats{hits_,       misses_, evictions_,
                        insertions_, bytes_,  static_cast<int64_t>(entries_.size()),
                        capacity_};
}

}  // namespace grail
