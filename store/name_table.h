// An append-only table of distinct names with dense ids (0, 1, 2, ...), readable while a
// writer appends: the entity dictionary of the live graph's in-memory index.
//
// All versions of the live graph share one table; a version hides the names appended
// after it by ignoring ids >= its own entity count. That is what lets a chunk that creates
// new entities cost O(new names) rather than a copy of the dictionary.
//
// Storage: names live in segments that never move (segment k holds kFirstSegment << k
// names), so a `const std::string&` handed out stays valid for the table's lifetime, and
// Name(id) reads without any lock. Name -> id goes through kShards hash maps, each behind
// its own reader-writer lock; a writer holds one shard's lock only while inserting into it
// (and, rarely, while that shard rehashes), never while the store writes to disk.
//
// Thread safety: Append() must be called by one thread at a time (the store's writer).
// Find() and ApproximateMemoryUsage() may be called from any thread at any time. Name(id)
// may be called from any thread for an id whose Append() happened-before the call, e.g.
// one published through a GraphSnapshot.
#ifndef GRAIL_STORE_NAME_TABLE_H_
#define GRAIL_STORE_NAME_TABLE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <shared_mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace grail {

class NameTable {
 public:
  NameTable() = default;
  ~NameTable();
  NameTable(const NameTable&) = delete;
  NameTable& operator=(const NameTable&) = delete;

  // Number of names appended so far (the writer's view; readers use their snapshot's count).
  uint32_t size() const { return size_.load(std::memory_order_acquire); }

  // Gives `name` the id size(). Requires: `name` is not in the table, and size() < 2^32 - 1.
  void Append(absl::string_view name);

  // The id of `name`, or nullopt. May return an id appended after the caller's snapshot;
  // callers compare it with their own count.
  std::optional<uint32_t> Find(absl::string_view name) const;

  // The name of `id`. Requires: Append of `id` happened-before this call (see above). The
  // reference is valid for the lifetime of the table.
  const std::string& Name(uint32_t id) const;

  // Bytes held, from the structures' sizes: name slots, out-of-line name characters, hash
  // map slots and control bytes. Allocator overhead is not included.
  uint64_t ApproximateMemoryUsage() const;

 private:
  static constexpr uint32_t kFirstSegment = 1024;
  // Segments 0..22 hold kFirstSegment * (2^23 - 1) > 2^32 names.
  static constexpr int kSegments = 23;
  static constexpr int kShards = 16;

  struct Shard {
    mutable std::shared_mutex mu;
    // Keys point into the segments, which never move.
    absl::flat_hash_map<absl::string_view, uint32_t> ids;
  };

  // Segment and offset of `id`.
  static void Locate(uint32_t id, int* segment, uint32_t* offset);
  static size_t SegmentSize(int segment) { return size_t{kFirstSegment} << segment; }
  static size_t ShardIndex(absl::string_view name);

  // Raw storage; only slots < size_ hold constructed strings. Allocated on first use and
  // published with release so a reader that learns of an id also sees its segment.
  std::array<std::atomic<std::string*>, kSegments> segments_{};
  std::atomic<uint32_t> size_{0};
  std::array<Shard, kShards> shards_;
};

}  // namespace grail

#endif  // GRAIL_STORE_NAME_TABLE_H_
