#include "store/name_table.h"

#include <memory>
#include <mutex>
#include <new>

#include "absl/hash/hash.h"
#include "absl/numeric/bits.h"

namespace grail {

NameTable::~NameTable() {
  const uint32_t n = size();
  for (int s = 0; s < kSegments; ++s) {
    std::string* segment = segments_[s].load(std::memory_order_relaxed);
    if (segment == nullptr) continue;
    const uint64_t first = uint64_t{kFirstSegment} * ((uint64_t{1} << s) - 1);
    const uint64_t constructed = n > first ? std::min<uint64_t>(n - first, SegmentSize(s)) : 0;
    std::destroy_n(segment, constructed);
    ::operator delete(segment);
  }
}

void NameTable::Locate(uint32_t id, int* segment, uint32_t* offset) {
  // Segment k starts at kFirstSegment * (2^k - 1).
  const uint64_t block = uint64_t{id} / kFirstSegment + 1;
  *segment = 63 - absl::countl_zero(block);
  *offset = static_cast<uint32_t>(id - uint64_t{kFirstSegment} * ((uint64_t{1} << *segment) - 1));
}

size_t NameTable::ShardIndex(absl::string_view name) {
  // The top bits: the maps index their slots with the low bits of the same hash.
  return (absl::Hash<absl::string_view>{}(name) >> 60) % kShards;
}

void NameTable::Append(absl::string_view name) {
  const uint32_t id = size_.load(std::memory_order_relaxed);
  int s;
  uint32_t offset;
  Locate(id, &s, &offset);
  std::string* segment = segments_[s].load(std::memory_order_relaxed);
  if (segment == nullptr) {
    // Raw memory: slots are constructed one by one, and untouched pages of a large
    // segment are never faulted in.
    segment = static_cast<std::string*>(::operator new(SegmentSize(s) * sizeof(std::string)));
    segments_[s].store(segment, std::memory_order_release);
  }
  const std::string* slot = new (segment + offset) std::string(name);
  Shard& shard = shards_[ShardIndex(name)];
  {
    std::unique_lock<std::shared_mutex> lock(shard.mu);
    shard.ids.emplace(absl::string_view(*slot), id);
  }
  size_.store(id + 1, std::memory_order_release);
}

std::optional<uint32_t> NameTable::Find(absl::string_view name) const {
  const Shard& shard = shards_[ShardIndex(name)];
  std::shared_lock<std::shared_mutex> lock(shard.mu);
  auto it = shard.ids.find(name);
  if (it == shard.ids.end()) return std::nullopt;
  return it->second;
}

const std::string& NameTable::Name(uint32_t id) const {
  int s;
  uint32_t offset;
  Locate(id, &s, &offset);
  return segments_[s].load(std::memory_order_acquire)[offset];
}

uint64_t NameTable::ApproximateMemoryUsage() const {
  const uint32_t n = size();
  uint64_t bytes = uint64_t{n} * sizeof(std::string);
  for (uint32_t id = 0; id < n; ++id) {
    const std::string& name = Name(id);
    // Short names live inside the std::string (small-string optimisation).
    if (name.capacity() > std::string().capacity()) bytes += name.capacity() + 1;
  }
  for (const Shard& shard : shards_) {
    std::shared_lock<std::shared_mutex> lock(shard.mu);
    // flat_hash_map: one slot and one control byte per unit of capacity.
    bytes += shard.ids.capacity() * (sizeof(std::pair<absl::string_view, uint32_t>) + 1);
  }
  return bytes;
}

}  // namespace grail
