#include "server/scoring/pass_cache.h"

#include <algorithm>
#include <numeric>

namespace grail {

QueryPass::QueryPass(uint64_t sequence, PassClock::time_point computed_at, bool pruned,
                     int32_t nodes, int32_t edges, float far, std::vector<EntityId> entities,
                     std::vector<float> scores, std::vector<uint8_t> unvisited)
    : sequence_(sequence),
      computed_at_(computed_at),
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
                                                 const Staleness& staleness, bool count_hit) {
  if (capacity_ == 0) return nullptr;
  const PassClock::time_point now = PassClock::now();
  absl::MutexLock lock(&mu_);
  const auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  Entry& entry = it->second;
  std::shared_ptr<const QueryPass> pass = entry.pass;
  if (pass == nullptr) {  // an alias: its pass, if still kept under the whole key
    const auto whole = entries_.find(key.Whole());
    if (whole == entries_.end() || whole->second.sequence != entry.sequence) {
      bytes_ -= entry.bytes;
      lru_.erase(entry.lru);
      entries_.erase(it);
      return nullptr;
    }
    pass = whole->second.pass;
    lru_.splice(lru_.begin(), lru_, whole->second.lru);  // used through its alias
  }
  if (!staleness.Accepts(pass->sequence(), pass->computed_at(), current, now)) return nullptr;
  if (count_hit) ++hits_;
  lru_.splice(lru_.begin(), lru_, entry.lru);
  return pass;
}

void PassCache::CountHit() {
  absl::MutexLock lock(&mu_);
  ++hits_;
}

void PassCache::CountMiss(int64_t queries) {
  if (capacity_ == 0) return;
  absl::MutexLock lock(&mu_);
  misses_ += queries;
}

namespace {

// The bytes an entry of `entry_size` counts besides its pass: itself and its key (a targets'
// key holds its targets).
int64_t KeyBytes(const PassKey& key, size_t entry_size) {
  return static_cast<int64_t>(sizeof(PassKey) + entry_size + key.targets.size() * sizeof(EntityId));
}

}  // namespace

void PassCache::Insert(const PassKey& key, std::shared_ptr<const QueryPass> pass) {
  const int64_t bytes = pass->bytes() + KeyBytes(key, sizeof(Entry));
  if (bytes > capacity_) return;
  std::vector<std::shared_ptr<const QueryPass>> freed;  // released after the lock
  absl::MutexLock lock(&mu_);
  Entry entry;
  entry.sequence = pass->sequence();
  entry.pass = std::move(pass);
  entry.bytes = bytes;
  Place(key, std::move(entry), &freed);
}

void PassCache::InsertAlias(const PassKey& alias, const std::shared_ptr<const QueryPass>& pass) {
  const int64_t bytes = KeyBytes(alias, sizeof(Entry));
  if (bytes > capacity_) return;
  std::vector<std::shared_ptr<const QueryPass>> freed;
  absl::MutexLock lock(&mu_);
  Entry entry;
  entry.sequence = pass->sequence();
  entry.bytes = bytes;
  Place(alias, std::move(entry), &freed);
}

void PassCache::Place(const PassKey& key, Entry entry,
                      std::vector<std::shared_ptr<const QueryPass>>* freed) {
  auto [it, added] = entries_.try_emplace(key);
  Entry& slot = it->second;
  if (!added) {
    if (slot.sequence > entry.sequence) return;  // a newer one is kept
    bytes_ -= slot.bytes;
    if (slot.pass) freed->push_back(std::move(slot.pass));
    entry.lru = slot.lru;
    lru_.splice(lru_.begin(), lru_, entry.lru);
  } else {
    lru_.push_front(&it->first);
    entry.lru = lru_.begin();
  }
  bytes_ += entry.bytes;
  slot = std::move(entry);
  ++insertions_;
  while (bytes_ > capacity_) {
    const auto victim = entries_.find(*lru_.back());
    bytes_ -= victim->second.bytes;
    if (victim->second.pass) freed->push_back(std::move(victim->second.pass));
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
