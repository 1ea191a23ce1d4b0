// The store's column families as the code opening them sees them: their index among the
// handles, their names, their options, and RocksDB's errors as the store reports them.
// Internal to store/ (triple_store.cc and bulk_load.cc, which write the same families).
#ifndef GRAIL_STORE_STORE_FAMILIES_H_
#define GRAIL_STORE_STORE_FAMILIES_H_

#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "rocksdb/options.h"
#include "rocksdb/status.h"
#include "store/store_layout.h"

namespace grail {
namespace store_internal {

// Index into TripleStore::families_, in the order the families are opened.
enum Family {
  kDefaultFamily,
  kMetaFamily,
  kEntityByNameFamily,
  kEntityNamesFamily,
  kRelationByNameFamily,
  kRelationNamesFamily,
  kFactsOutFamily,
  kFactsInFamily,
  kRemovedEntitiesFamily,
  kFactsBySequenceFamily,
  kNumFamilies,
};

inline constexpr const char* kFamilyNames[kNumFamilies] = {
    "default",
    store_layout::kMeta,
    store_layout::kEntityByName,
    store_layout::kEntityNames,
    store_layout::kRelationByName,
    store_layout::kRelationNames,
    store_layout::kFactsOut,
    store_layout::kFactsIn,
    store_layout::kRemovedEntities,
    store_layout::kFactsBySequence,
};

// Ids are u32 and every id must be representable, so a count may reach 2^32 - 1.
inline constexpr uint64_t kMaxIds = std::numeric_limits<uint32_t>::max();

// The options `family` is opened with (and its table files are written with).
rocksdb::ColumnFamilyOptions FamilyOptions(Family family);

// RocksDB's status as the store's: DATA_LOSS for corruption, RESOURCE_EXHAUSTED for a full
// disk, FAILED_PRECONDITION for a store another process holds open, INTERNAL otherwise;
// the message starts with `context`.
absl::Status FromRocks(const rocksdb::Status& s, absl::string_view context);

}  // namespace store_internal
}  // namespace grail

#endif  // GRAIL_STORE_STORE_FAMILIES_H_
