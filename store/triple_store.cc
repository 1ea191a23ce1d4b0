#include "store/triple_store.h"

#include <sys/stat.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "graph/vocabulary.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/listener.h"
#include "rocksdb/options.h"
#include "rocksdb/slice_transform.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_batch.h"
#include "store/store_families.h"
#include "store/store_layout.h"

namespace grail {

// The families, their options and FromRocks (store/store_families.h), throughout this file.
using namespace store_internal;  // NOLINT(build/namespaces)

namespace {

namespace layout = store_layout;

// Where AddChunk puts the rejected fact's position, for RejectedFactIndex().
constexpr char kRejectedFactPayload[] = "type.googleapis.com/grail.storage.RejectedFact";

// RocksDB's log lines, forwarded: warnings and errors to StoreOptions::log, the rest (info
// chatter, the options dump at open) dropped. Replaces RocksDB's info LOG file, whose writer
// aborts the process (an assertion in Debian's build) when the disk is full.
class ForwardingLogger final : public rocksdb::Logger {
 public:
  explicit ForwardingLogger(std::function<void(absl::string_view, absl::string_view)> sink)
      : rocksdb::Logger(rocksdb::InfoLogLevel::WARN_LEVEL), sink_(std::move(sink)) {}

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }
  void Logv(const rocksdb::InfoLogLevel level, const char* format, va_list ap) override {
    if (level < rocksdb::InfoLogLevel::WARN_LEVEL || level == rocksdb::InfoLogLevel::HEADER_LEVEL) {
      return;
    }
    char buffer[1024];
    std::vsnprintf(buffer, sizeof buffer, format, ap);
    sink_(level == rocksdb::InfoLogLevel::WARN_LEVEL ? "warning" : "error",
          absl::StrCat("rocksdb: ", buffer));
  }

 private:
  std::function<void(absl::string_view, absl::string_view)> sink_;
};

// Turns RocksDB's own recovery from a full disk off: it would resume in a background thread
// whenever its free-space poll says so, and a DB::Resume() meanwhile is refused as busy. The
// store resumes at the next chunk instead (TripleStore::Writable), so a chunk sent after
// space was freed is written, not refused by a poll that has not run yet.
class ManualRecovery final : public rocksdb::EventListener {
 public:
  void OnErrorRecoveryBegin(rocksdb::BackgroundErrorReason, rocksdb::Status,
                            bool* auto_recovery) override {
    *auto_recovery = false;
  }
};

rocksdb::DBOptions DatabaseOptions(rocksdb::Env* env, std::shared_ptr<rocksdb::Logger> logger) {
  rocksdb::DBOptions options;
  options.listeners.push_back(std::make_shared<ManualRecovery>());
  if (env != nullptr) options.env = env;
  options.info_log = std::move(logger);
  options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  // After a crash, replay the WAL and tolerate only an incomplete record at its very end
  // (a write the crash cut short, never acknowledged). A record that fails its checksum
  // with valid ones after it is corruption, not a crash: Open fails rather than silently
  // dropping every acknowledged chunk after it (StoreOptions::truncate_corrupted_wal).
  options.wal_recovery_mode = rocksdb::WALRecoveryMode::kTolerateCorruptedTailRecords;
  return options;
}

std::vector<rocksdb::ColumnFamilyDescriptor> FamilyDescriptors() {
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (int f = 0; f < kNumFamilies; ++f) {
    descriptors.emplace_back(kFamilyNames[f], FamilyOptions(static_cast<Family>(f)));
  }
  return descriptors;
}

// Closes a database and its column family handles.
void CloseDatabase(rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*>* families) {
  for (rocksdb::ColumnFamilyHandle* handle : *families) {
    db->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
  }
  families->clear();
  db->Close().PermitUncheckedError();
  delete db;
}

}  // namespace

namespace store_internal {

absl::Status FromRocks(const rocksdb::Status& s, absl::string_view context) {
  if (s.ok()) return absl::OkStatus();
  const std::string message = absl::StrCat(context, ": ", s.ToString());
  if (s.IsCorruption()) return absl::DataLossError(message);
  if (s.IsNoSpace()) return absl::ResourceExhaustedError(message);
  // RocksDB holds an exclusive lock on the directory while a database is open.
  if (s.IsIOError() && s.ToString().find("/LOCK") != std::string::npos) {
    return absl::FailedPreconditionError(
        absl::StrCat(message, " (is the store already open, in this or another process?)"));
  }
  return absl::InternalError(message);
}

rocksdb::ColumnFamilyOptions FamilyOptions(Family family) {
  rocksdb::ColumnFamilyOptions options;
  rocksdb::BlockBasedTableOptions table;
  // Whole-key bloom filters for point lookups (a fact, a name).
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  if (family == kFactsOutFamily || family == kFactsInFamily) {
    // The first id of a fact key is its prefix: the filters then also answer "does this
    // entity have any edges in this direction", and an adjacency scan is a prefix scan.
    options.prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(layout::kIdBytes));
    options.memtable_prefix_bloom_size_ratio = 0.05;
  }
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return options;
}

// See TripleStore::database_.
struct Database {
  Database(rocksdb::DB* db, std::vector<rocksdb::ColumnFamilyHandle*> families)
      : db(db), families(std::move(families)) {}
  ~Database() { CloseDatabase(db, &families); }
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  rocksdb::DB* const db;
  std::vector<rocksdb::ColumnFamilyHandle*> families;
};

}  // namespace store_internal

namespace {

// The facts of `facts` that `base` lacks, by id as AddChunk numbers them (names new to the
// graph take ids in order of first appearance, head, relation, tail), into delta->facts, with
// the names they add and the removed entities they bring back; `positions` their places in
// `facts`. Returns how many were repeated within the chunk or held already.
uint32_t ResolveAddedFacts(absl::Span<const NamedTriple> facts, const GraphSnapshot& base,
                           GraphDelta* delta, std::vector<uint32_t>* positions) {
  // Keys point into `facts`, which outlives this call's use of them.
  absl::flat_hash_map<absl::string_view, uint64_t> new_entity_ids, new_relation_ids;
  absl::flat_hash_set<EntityId> revived;
  auto entity_id = [&](const std::string& name) -> uint64_t {
    if (std::optional<EntityId> id = base.FindEntityIncludingRemoved(name)) {
      // A removed entity named again comes back with its id.
      if (base.IsRemoved(*id) && revived.insert(*id).second) {
        delta->revived_entities.push_back(*id);
      }
      return *id;
    }
    auto [it, inserted] =
        new_entity_ids.try_emplace(name, uint64_t{base.num_entities()} + new_entity_ids.size());
    if (inserted) delta->new_entities.push_back(name);
    return it->second;
  };
  auto relation_id = [&](const std::string& name) -> uint64_t {
    if (std::optional<RelationId> id = base.FindRelation(name)) return *id;
    auto [it, inserted] = new_relation_ids.try_emplace(
        name, uint64_t{base.num_relations()} + new_relation_ids.size());
    if (inserted) delta->new_relations.push_back(name);
    return it->second;
  };
  uint32_t duplicates = 0;
  absl::flat_hash_set<Triple> seen;
  seen.reserve(facts.size());
  delta->facts.reserve(facts.size());
  positions->reserve(facts.size());
  for (size_t i = 0; i < facts.size(); ++i) {
    const NamedTriple& fact = facts[i];
    // Head, relation, tail: the order "first appearance" refers to.
    const uint64_t head = entity_id(fact.head);
    const uint64_t relation = relation_id(fact.relation);
    const uint64_t tail = entity_id(fact.tail);
    const Triple triple{static_cast<EntityId>(head), static_cast<RelationId>(relation),
                        static_cast<EntityId>(tail)};
    if (!seen.insert(triple).second || base.HasFact(triple.head, triple.relation, triple.tail)) {
      ++duplicates;
      continue;
    }
    delta->facts.push_back(triple);
    positions->push_back(static_cast<uint32_t>(i));
  }
  return duplicates;
}

absl::Status RejectFact(size_t index, absl::string_view reason,
                        absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
  absl::Status status(code, absl::StrCat("fact ", index, ": ", reason));
  status.SetPayload(kRejectedFactPayload, absl::Cord(absl::StrCat(index)));
  return status;
}

// Accumulates the Status of WriteBatch::Put calls (they fail only on absurd sizes).
class BatchWriter {
 public:
  BatchWriter(rocksdb::WriteBatch* batch, const std::vector<rocksdb::ColumnFamilyHandle*>* families)
      : batch_(batch), families_(families) {}
  void Put(Family family, const rocksdb::Slice& key, const rocksdb::Slice& value) {
    if (status_.ok()) status_ = batch_->Put((*families_)[family], key, value);
  }
  const rocksdb::Status& status() const { return status_; }

 private:
  rocksdb::WriteBatch* batch_;
  const std::vector<rocksdb::ColumnFamilyHandle*>* families_;
  rocksdb::Status status_;
};

absl::string_view View(const rocksdb::Slice& slice) {
  return absl::string_view(slice.data(), slice.size());
}

// Full scans must see every key, not stop at a prefix boundary of the fact families.
rocksdb::ReadOptions ScanOptions() {
  rocksdb::ReadOptions options;
  options.total_order_seek = true;
  options.fill_cache = false;
  return options;
}

// Fails unless the database in `dir` (with column families `families`) holds no key.
// Opens it read-only, so a foreign database is left exactly as it was.
absl::Status CheckEmptyForeignDatabase(const std::string& dir,
                                       const std::vector<std::string>& families) {
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : families) {
    descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s =
      rocksdb::DB::OpenForReadOnly(rocksdb::DBOptions(), dir, descriptors, &handles, &raw);
  if (!s.ok()) return FromRocks(s, absl::StrCat("inspecting ", dir));
  std::unique_ptr<rocksdb::DB> db(raw);
  bool empty = true;
  for (rocksdb::ColumnFamilyHandle* handle : handles) {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ScanOptions(), handle));
    it->SeekToFirst();
    if (it->Valid() || !it->status().ok()) empty = false;
  }
  for (rocksdb::ColumnFamilyHandle* handle : handles) {
    db->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
  }
  if (!empty) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, " holds a RocksDB database that is not a triple store (it has data but no ",
        layout::kMeta, " column family)"));
  }
  return absl::OkStatus();
}

}  // namespace

TripleStore::TripleStore(std::string dir, StoreOptions options)
    : dir_(std::move(dir)), options_(std::move(options)), graph_(options_.track_relation_sides) {
  if (options_.file_system != nullptr) env_ = rocksdb::NewCompositeEnv(options_.file_system);
  logger_ = std::make_shared<ForwardingLogger>(
      [this](absl::string_view level, absl::string_view message) { Log(level, message); });
  if (options_.allowed_relations.has_value()) {
    allowed_relations_.insert(options_.allowed_relations->begin(),
                              options_.allowed_relations->end());
    restricted_ = true;
  }
}

TripleStore::~TripleStore() {
  if (db_ == nullptr) return;
  // Nothing can report a failure from here; a failed sync leaves the usual process-crash
  // durability, which AddChunk already guaranteed.
  Sync().IgnoreError();
  database_.reset();  // closes it, unless an export still reads it
}

void TripleStore::Log(absl::string_view level, absl::string_view message) const {
  if (options_.log) return options_.log(level, message);
  std::fprintf(stderr, "%.*s: %.*s\n", static_cast<int>(level.size()), level.data(),
               static_cast<int>(message.size()), message.data());
}

absl::StatusOr<std::unique_ptr<TripleStore>> TripleStore::Open(const std::string& dir,
                                                               const StoreOptions& options) {
  std::unique_ptr<TripleStore> store(new TripleStore(dir, options));
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return absl::InternalError(absl::StrCat("creating ", dir, ": ", error.message()));
  }
  const rocksdb::DBOptions db_options = DatabaseOptions(store->env_.get(), store->logger_);
  if (std::filesystem::exists(std::filesystem::path(dir) / "CURRENT", error)) {
    // RocksDB refuses to open a database without naming all its column families; list
    // them first so that a foreign database gets a clear error rather than that one.
    std::vector<std::string> existing;
    rocksdb::Status s = rocksdb::DB::ListColumnFamilies(db_options, dir, &existing);
    if (!s.ok()) return FromRocks(s, absl::StrCat("listing the column families in ", dir));
    for (const std::string& name : existing) {
      if (std::find(std::begin(kFamilyNames), std::end(kFamilyNames), name) ==
          std::end(kFamilyNames)) {
        return absl::FailedPreconditionError(
            absl::StrCat(dir,
                         " holds a RocksDB database that is not a triple store (it has a "
                         "column family named \"",
                         absl::CHexEscape(name), "\")"));
      }
    }
    // Without our meta family this is either a store whose first Open crashed early (then
    // it is empty) or someone else's database: look before creating anything in it.
    if (std::find(existing.begin(), existing.end(), layout::kMeta) == existing.end()) {
      if (absl::Status empty = CheckEmptyForeignDatabase(dir, existing); !empty.ok()) return empty;
    }
  }
  const std::vector<rocksdb::ColumnFamilyDescriptor> descriptors = FamilyDescriptors();
  rocksdb::Status s =
      rocksdb::DB::Open(db_options, dir, descriptors, &store->families_, &store->db_);
  if (s.IsCorruption() && options.truncate_corrupted_wal) {
    // The operator chose to serve what precedes the corruption: replay up to it and stop.
    rocksdb::DBOptions truncating = db_options;
    truncating.wal_recovery_mode = rocksdb::WALRecoveryMode::kPointInTimeRecovery;
    store->recovery_note_ =
        absl::StrCat("the write-ahead log was corrupted (", s.ToString(),
                     "); the store was recovered up to the corruption and every chunk after it, "
                     "acknowledged or not, is lost");
    store->families_.clear();
    s = rocksdb::DB::Open(truncating, dir, descriptors, &store->families_, &store->db_);
  } else if (s.IsCorruption()) {
    return absl::DataLossError(absl::StrCat(
        "the store in ", dir, " has a corrupted write-ahead log (", s.ToString(),
        "): replaying it only up to the corruption would silently lose the acknowledged chunks "
        "after it, so the store was not opened and nothing was changed. Restore the directory "
        "from a backup, or accept the loss with --truncate-corrupted-wal (it is logged)"));
  } else if (s.IsNoSpace()) {
    // Opening writes (the WAL's replay into a table, a new WAL, a new MANIFEST); a read-only
    // open writes nothing. Serve the graph, and become writable once space is freed.
    store->read_only_because_ = FromRocks(s, absl::StrCat("opening the store in ", dir));
    store->families_.clear();
    s = rocksdb::DB::OpenForReadOnly(db_options, dir, descriptors, &store->families_, &store->db_);
    if (!s.ok()) return store->read_only_because_;
    store->writable_ = false;
    store->Log("warning",
               absl::StrCat("the disk is full; the store is open read-only until space is freed (",
                            store->read_only_because_.message(), ")"));
  }
  if (!s.ok()) return FromRocks(s, absl::StrCat("opening the store in ", dir));
  store->database_ = std::make_shared<store_internal::Database>(store->db_, store->families_);
  if (absl::Status loaded = store->Load(); !loaded.ok()) return loaded;
  return store;
}

absl::Status TripleStore::Load() {
  const rocksdb::ReadOptions read = ScanOptions();
  std::string value;
  rocksdb::Status s = db_->Get(read, families_[kMetaFamily], layout::kFormatVersionKey, &value);
  if (s.IsNotFound()) {
    // A new store, or a crash during the very first Open (families created, version not
    // yet written). Anything else without a version is not ours to interpret.
    for (int f = kDefaultFamily; f < kNumFamilies; ++f) {
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, families_[f]));
      it->SeekToFirst();
      if (it->Valid()) {
        return absl::DataLossError(absl::StrCat("the store in ", dir_, " has data in ",
                                                kFamilyNames[f], " but no format version"));
      }
      if (!it->status().ok()) return FromRocks(it->status(), "reading the store");
    }
    rocksdb::WriteBatch batch;
    BatchWriter writer(&batch, &families_);
    writer.Put(kMetaFamily, layout::kFormatVersionKey,
               layout::EncodeCounter(layout::kFormatVersion));
    for (const char* key : {layout::kEntityCountKey, layout::kRelationCountKey,
                            layout::kFactCountKey, layout::kSequenceKey}) {
      writer.Put(kMetaFamily, key, layout::EncodeCounter(0));
    }
    if (!writer.status().ok()) return FromRocks(writer.status(), "creating the store");
    if (!read_only_because_.ok()) return read_only_because_;
    rocksdb::WriteOptions write;
    write.sync = true;  // once per store: the directory is a store from now on
    return FromRocks(db_->Write(write, &batch), absl::StrCat("creating the store in ", dir_));
  }
  if (!s.ok()) return FromRocks(s, "reading the format version");
  const std::optional<uint64_t> version = layout::DecodeCounter(value);
  if (!version.has_value()) {
    return absl::DataLossError(
        absl::StrCat("the store in ", dir_, " has a malformed format version"));
  }
  if (*version < layout::kOldestReadableFormatVersion || *version > layout::kFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the store in ", dir_, " has format version ", *version, "; this build reads versions ",
        layout::kOldestReadableFormatVersion, " to ", layout::kFormatVersion));
  }
  if (*version < layout::kFormatVersion) {
    if (absl::Status upgraded = Upgrade(*version); !upgraded.ok()) return upgraded;
  }
  value.clear();
  s = db_->Get(read, families_[kMetaFamily], layout::kSequencedFromKey, &value);
  if (s.ok()) {
    const std::optional<uint64_t> from = layout::DecodeCounter(value);
    if (!from.has_value()) {
      return absl::DataLossError(
          absl::StrCat("malformed \"", layout::kSequencedFromKey, "\" counter in ", dir_));
    }
    sequenced_from_ = *from;
  } else if (!s.IsNotFound()) {
    return FromRocks(s, "reading the counters");
  }

  auto read_counter = [&](const char* key, uint64_t* out) -> absl::Status {
    std::string bytes;
    rocksdb::Status got = db_->Get(read, families_[kMetaFamily], key, &bytes);
    if (got.IsNotFound()) {
      return absl::DataLossError(
          absl::StrCat("the store in ", dir_, " has no \"", key, "\" counter"));
    }
    if (!got.ok()) return FromRocks(got, "reading the counters");
    std::optional<uint64_t> decoded = layout::DecodeCounter(bytes);
    if (!decoded.has_value()) {
      return absl::DataLossError(absl::StrCat("malformed \"", key, "\" counter in ", dir_));
    }
    *out = *decoded;
    return absl::OkStatus();
  };
  uint64_t num_entities = 0, num_relations = 0, num_facts = 0, sequence = 0;
  for (auto [key, out] :
       {std::pair{layout::kEntityCountKey, &num_entities},
        std::pair{layout::kRelationCountKey, &num_relations},
        std::pair{layout::kFactCountKey, &num_facts}, std::pair{layout::kSequenceKey, &sequence}}) {
    if (absl::Status counted = read_counter(key, out); !counted.ok()) return counted;
  }
  if (num_entities > kMaxIds || num_relations > kMaxIds) {
    return absl::DataLossError(absl::StrCat("the store in ", dir_, " counts more ids than fit"));
  }

  // Dictionaries: ids must run 0, 1, 2, ... with no gap, up to the counter.
  auto read_names = [&](Family family, uint64_t count,
                        std::vector<std::string>* names) -> absl::Status {
    names->reserve(count);
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, families_[family]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const std::optional<uint32_t> id = layout::DecodeId(View(it->key()));
      if (!id.has_value() || *id != names->size()) {
        return absl::DataLossError(absl::StrCat(kFamilyNames[family], " in ", dir_,
                                                " is not dense at id ", names->size()));
      }
      names->push_back(it->value().ToString());
    }
    if (!it->status().ok()) return FromRocks(it->status(), "reading the dictionaries");
    if (names->size() != count) {
      return absl::DataLossError(absl::StrCat(kFamilyNames[family], " in ", dir_, " holds ",
                                              names->size(), " names; the counter says ", count));
    }
    return absl::OkStatus();
  };
  GraphDelta delta;
  delta.sequence = sequence;
  if (absl::Status read_ok = read_names(kRelationNamesFamily, num_relations, &delta.new_relations);
      !read_ok.ok()) {
    return read_ok;
  }
  if (absl::Status read_ok = read_names(kEntityNamesFamily, num_entities, &delta.new_entities);
      !read_ok.ok()) {
    return read_ok;
  }

  // The index is rebuilt from facts_out alone; facts_in mirrors it (CheckConsistency
  // verifies that) and would only double the bytes read.
  delta.facts.reserve(num_facts);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, families_[kFactsOutFamily]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::optional<Triple> fact = layout::DecodeOutFactKey(View(it->key()));
    if (!fact.has_value() || fact->head >= num_entities || fact->tail >= num_entities ||
        fact->relation >= num_relations) {
      return absl::DataLossError(
          absl::StrCat("facts_out in ", dir_, " holds a malformed fact key"));
    }
    delta.facts.push_back(*fact);
  }
  if (!it->status().ok()) return FromRocks(it->status(), "reading the facts");
  if (delta.facts.size() != num_facts) {
    return absl::DataLossError(absl::StrCat("facts_out in ", dir_, " holds ", delta.facts.size(),
                                            " facts; the counter says ", num_facts));
  }
  it.reset(db_->NewIterator(read, families_[kRemovedEntitiesFamily]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::optional<uint32_t> id = layout::DecodeId(View(it->key()));
    if (!id.has_value() || *id >= num_entities) {
      return absl::DataLossError(
          absl::StrCat("removed_entities in ", dir_, " holds a malformed entity id"));
    }
    delta.removed_entities.push_back(*id);
  }
  if (!it->status().ok()) return FromRocks(it->status(), "reading the removed entities");
  graph_.Apply(delta);
  delta = GraphDelta();
#ifdef __GLIBC__
  // Building the index sorted every fact twice in buffers several times its size; their
  // pages go back to the system now instead of staying resident as free heap until later
  // allocations reuse them (a loaded 10^7-entity graph served without a warm-up: 3.8 GB
  // resident before, 2.5 GB after).
  malloc_trim(0);
#endif
  return absl::OkStatus();
}

absl::Status TripleStore::Upgrade(uint64_t version) {
  // Version 1 lacks removed_entities, and versions 1 and 2 facts_by_sequence: Open has just
  // created both empty. What is left is to index the stored facts by sequence; when each
  // was added was not recorded, so all of them take 0 and sequenced_from says so.
  if (!read_only_because_.ok()) return read_only_because_;
  std::string bytes;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), families_[kMetaFamily], layout::kSequenceKey, &bytes);
  const std::optional<uint64_t> sequence =
      s.ok() ? layout::DecodeCounter(bytes) : std::optional<uint64_t>();
  if (!sequence.has_value()) {
    return s.ok() || s.IsNotFound()
               ? absl::DataLossError(
                     absl::StrCat("the store in ", dir_, " has no valid \"sequence\" counter"))
               : FromRocks(s, "reading the counters");
  }
  rocksdb::WriteOptions write;
  constexpr size_t kBatchFacts = 100000;
  rocksdb::WriteBatch batch;
  BatchWriter writer(&batch, &families_);
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(ScanOptions(), families_[kFactsOutFamily]));
  size_t batched = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::optional<Triple> fact = layout::DecodeOutFactKey(View(it->key()));
    if (!fact.has_value()) {
      return absl::DataLossError(
          absl::StrCat("facts_out in ", dir_, " holds a malformed fact key"));
    }
    writer.Put(kFactsBySequenceFamily, layout::SequencedFactKey(0, *fact), rocksdb::Slice());
    if (++batched == kBatchFacts) {
      if (!writer.status().ok()) return FromRocks(writer.status(), "upgrading the store");
      if (s = db_->Write(write, &batch); !s.ok()) return FromRocks(s, "upgrading the store");
      batch.Clear();
      batched = 0;
    }
  }
  if (!it->status().ok()) return FromRocks(it->status(), "upgrading the store");
  writer.Put(kMetaFamily, layout::kSequencedFromKey, layout::EncodeCounter(*sequence));
  writer.Put(kMetaFamily, layout::kFormatVersionKey, layout::EncodeCounter(layout::kFormatVersion));
  if (!writer.status().ok()) return FromRocks(writer.status(), "upgrading the store");
  write.sync = true;  // the new version last, and durably: a store is upgraded once
  if (s = db_->Write(write, &batch); !s.ok()) {
    return FromRocks(s, absl::StrCat("upgrading the store from format version ", version));
  }
  Log("warning", absl::StrCat("the store in ", dir_, " was upgraded from format version ", version,
                              " to ", layout::kFormatVersion, "; the facts it held at sequence ",
                              *sequence, " count as added at sequence 0 in exports"));
  return absl::OkStatus();
}

void TripleStore::TrackRelationSides(bool on) {
  std::lock_guard<std::mutex> lock(write_mu_);
  graph_.TrackRelationSides(on);
}

bool TripleStore::tracks_relation_sides() const {
  std::lock_guard<std::mutex> lock(write_mu_);
  return graph_.tracks_relation_sides();
}

absl::StatusOr<uint64_t> TripleStore::FactSequence(const Triple& t) const {
  std::string value;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), families_[kFactsOutFamily], layout::OutFactKey(t), &value);
  if (!s.ok()) return FromRocks(s, "reading a fact's sequence");
  const std::optional<uint64_t> sequence = layout::DecodeFactSequence(value);
  if (!sequence.has_value()) {
    return absl::DataLossError(absl::StrCat("facts_out in ", dir_, " holds a malformed value"));
  }
  return *sequence;
}

absl::Status TripleStore::Validate(absl::Span<const NamedTriple> facts,
                                   bool check_relations) const {
  if (facts.size() > options_.max_chunk_facts) {
    return RejectFact(options_.max_chunk_facts,
                      absl::StrCat("the chunk has ", facts.size(), " facts; at most ",
                                   options_.max_chunk_facts, " are accepted per chunk"));
  }
  for (size_t i = 0; i < facts.size(); ++i) {
    const NamedTriple& fact = facts[i];
    if (absl::Status valid = CheckFact({fact.head, fact.relation, fact.tail}, check_relations);
        !valid.ok()) {
      return RejectFact(i, valid.message());
    }
  }
  return absl::OkStatus();
}

absl::Status TripleStore::CheckFact(const std::array<absl::string_view, 3>& names,
                                    bool check_relations) const {
  static constexpr const char* kRoles[3] = {"head name", "relation name", "tail name"};
  for (int i = 0; i < 3; ++i) {
    if (absl::Status valid = ValidateName(names[i], kRoles[i], options_.max_name_bytes);
        !valid.ok()) {
      return valid;
    }
  }
  if (check_relations && restricted_ && !allowed_relations_.contains(names[1])) {
    return absl::InvalidArgumentError(
        absl::StrCat("relation ", QuoteName(names[1]), " is not in the allowed vocabulary"));
  }
  return absl::OkStatus();
}

absl::Status TripleStore::Writable() {
  if (!read_only_because_.ok()) {
    if (absl::Status reopened = ReopenWritable(); !reopened.ok()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          read_only_because_.message(),
          "; the store is read-only until space is freed (retried: ", reopened.message(), ")"));
    }
    Log("warning", absl::StrCat("the store is writable again (it was opened read-only: ",
                                read_only_because_.message(), ")"));
    read_only_because_ = absl::OkStatus();
    writable_ = true;
  }
  if (write_error_.ok()) return absl::OkStatus();
  if (!absl::IsResourceExhausted(write_error_)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the store refuses writes after a failed write; reopen it: ", write_error_.message()));
  }
  // Out of space: RocksDB stopped writing. Resume switches to a new WAL and flushes the
  // memtables, which fails while the disk is still full.
  if (rocksdb::Status resumed = db_->Resume(); !resumed.ok()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        write_error_.message(),
        "; writes start again once space is freed (retried: ", resumed.ToString(), ")"));
  }
  Log("warning", absl::StrCat("the store is writable again after: ", write_error_.message()));
  write_error_ = absl::OkStatus();
  writable_ = true;
  return absl::OkStatus();
}

absl::Status TripleStore::ReopenWritable() {
  std::vector<rocksdb::ColumnFamilyHandle*> families;
  rocksdb::DB* db = nullptr;
  // The writable database replays the same WAL the read-only one did: the index stays true.
  rocksdb::Status s = rocksdb::DB::Open(DatabaseOptions(env_.get(), logger_), dir_,
                                        FamilyDescriptors(), &families, &db);
  if (!s.ok()) return FromRocks(s, absl::StrCat("opening the store in ", dir_));
  // The read-only database closes now, or when the last export reading it does.
  database_ = std::make_shared<store_internal::Database>(db, families);
  db_ = db;
  families_ = std::move(families);
  return absl::OkStatus();
}

absl::Status TripleStore::CheckChunk(absl::Span<const NamedTriple> facts,
                                     absl::Span<const std::string> entities,
                                     absl::Span<const std::string> relations, bool adding) const {
  std::lock_guard<std::mutex> lock(write_mu_);
  if (absl::Status valid = Validate(facts, /*check_relations=*/adding); !valid.ok()) return valid;
  if (adding) {
    if (absl::Status fits = CheckRelationPairs(facts); !fits.ok()) return fits;
  }
  if (absl::Status valid = ValidateNames(entities, "entities"); !valid.ok()) return valid;
  return ValidateNames(relations, "relations");
}

absl::Status TripleStore::CheckRelationPairs(absl::Span<const NamedTriple> facts) const {
  if (options_.max_relation_side_pairs == 0) return absl::OkStatus();
  const std::shared_ptr<const GraphSnapshot> base = graph_.Snapshot();
  GraphDelta resolved;  // not applied: only its facts, numbered as AddChunk numbers them
  std::vector<uint32_t> positions;
  ResolveAddedFacts(facts, *base, &resolved, &positions);
  return CheckRelationPairs(facts, resolved.facts, positions, *base);
}

absl::Status TripleStore::CheckRelationPairs(absl::Span<const NamedTriple> facts,
                                             absl::Span<const Triple> added,
                                             absl::Span<const uint32_t> positions,
                                             const GraphSnapshot& base) const {
  const uint64_t limit = options_.max_relation_side_pairs;
  if (limit == 0) return absl::OkStatus();
  const std::optional<size_t> past = graph_.FirstFactPastRelationPairLimit(added, limit);
  if (!past.has_value()) return absl::OkStatus();
  const NamedTriple& f = facts[positions[*past]];
  return RejectFact(
      positions[*past],
      absl::StrCat("relation ", QuoteName(f.relation), " at ", QuoteName(f.head), " and ",
                   QuoteName(f.tail), " would make more than ", limit,
                   " pairs of relation sides meet at entities (now ", base.SidePairs()->size(),
                   "; --max-relation-pairs): the graph of relations a model of any relation "
                   "(ULTRA) reads grows with the square of the distinct relations meeting at an "
                   "entity"),
      absl::StatusCode::kResourceExhausted);
}

absl::Status TripleStore::ValidateNames(absl::Span<const std::string> names,
                                        absl::string_view what) const {
  const absl::string_view kind = what == "entities" ? "entity name" : "relation name";
  for (size_t i = 0; i < names.size(); ++i) {
    const absl::Status valid = ValidateName(names[i], kind, options_.max_name_bytes);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, "[", i, "]: ", valid.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> TripleStore::NextSequence(const GraphSnapshot& base,
                                                   uint64_t sequence) const {
  if (sequence == 0) return base.sequence() + 1;
  if (sequence <= base.sequence()) {
    return absl::FailedPreconditionError(absl::StrCat("the store is at sequence ", base.sequence(),
                                                      "; a chunk of sequence ", sequence,
                                                      " is already applied"));
  }
  return sequence;
}

absl::StatusOr<ChunkResult> TripleStore::AdvanceSequence(uint64_t sequence) {
  std::lock_guard<std::mutex> lock(write_mu_);
  if (absl::Status writable = Writable(); !writable.ok()) return writable;
  const std::shared_ptr<const GraphSnapshot> base = graph_.Snapshot();
  GraphDelta delta;
  absl::StatusOr<uint64_t> next = NextSequence(*base, sequence);
  if (!next.ok()) return next.status();
  delta.sequence = *next;
  rocksdb::WriteBatch batch;
  if (absl::Status committed =
          Commit(batch, delta, base->num_entities(), base->num_relations(), base->num_facts());
      !committed.ok()) {
    return committed;
  }
  ChunkResult result;
  result.sequence = delta.sequence;
  return result;
}

absl::StatusOr<ChunkResult> TripleStore::AddChunk(absl::Span<const NamedTriple> facts,
                                                  uint64_t sequence) {
  std::lock_guard<std::mutex> lock(write_mu_);
  if (absl::Status valid = Validate(facts, /*check_relations=*/true); !valid.ok()) return valid;
  if (absl::Status writable = Writable(); !writable.ok()) return writable;

  // The writer is the only one publishing versions, so this is the latest one.
  const std::shared_ptr<const GraphSnapshot> base = graph_.Snapshot();
  GraphDelta delta;
  absl::StatusOr<uint64_t> next = NextSequence(*base, sequence);
  if (!next.ok()) return next.status();
  delta.sequence = *next;
  ChunkResult result;
  std::vector<uint32_t> positions;  // of delta.facts in `facts`
  result.duplicate_facts = ResolveAddedFacts(facts, *base, &delta, &positions);
  const uint64_t num_entities = base->num_entities() + delta.new_entities.size();
  const uint64_t num_relations = base->num_relations() + delta.new_relations.size();
  if (num_entities > kMaxIds || num_relations > kMaxIds) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the chunk would exceed the store's capacity of ", kMaxIds, " entities or relations"));
  }
  if (absl::Status fits = CheckRelationPairs(facts, delta.facts, positions, *base); !fits.ok()) {
    return fits;
  }
  const uint64_t num_facts = base->num_facts() + delta.facts.size();

  rocksdb::WriteBatch batch;
  BatchWriter writer(&batch, &families_);
  for (size_t i = 0; i < delta.new_entities.size(); ++i) {
    const std::string id = layout::EncodeId(static_cast<uint32_t>(base->num_entities() + i));
    writer.Put(kEntityByNameFamily, delta.new_entities[i], id);
    writer.Put(kEntityNamesFamily, id, delta.new_entities[i]);
  }
  for (size_t i = 0; i < delta.new_relations.size(); ++i) {
    const std::string id = layout::EncodeId(static_cast<uint32_t>(base->num_relations() + i));
    writer.Put(kRelationByNameFamily, delta.new_relations[i], id);
    writer.Put(kRelationNamesFamily, id, delta.new_relations[i]);
  }
  // Each family's keys in key order: a memtable inserts a run of ascending keys from the
  // previous key's place in its skip list instead of searching it from the top (in random
  // order, that search was a third of a chunk's time at 10^7 facts).
  const std::string added_at = layout::EncodeCounter(delta.sequence);
  std::vector<Triple> sorted(delta.facts.begin(), delta.facts.end());
  std::sort(sorted.begin(), sorted.end());  // facts_out's and facts_by_sequence's order
  for (const Triple& t : sorted) {
    writer.Put(kFactsOutFamily, layout::OutFactKey(t), added_at);
    writer.Put(kFactsBySequenceFamily, layout::SequencedFactKey(delta.sequence, t),
               rocksdb::Slice());
  }
  std::sort(sorted.begin(), sorted.end(), layout::InFactKeyLess);
  for (const Triple& t : sorted) writer.Put(kFactsInFamily, layout::InFactKey(t), rocksdb::Slice());
  if (!writer.status().ok()) return FromRocks(writer.status(), "building the chunk's batch");
  for (EntityId e : delta.revived_entities) {
    if (rocksdb::Status s = batch.Delete(families_[kRemovedEntitiesFamily], layout::EncodeId(e));
        !s.ok()) {
      return FromRocks(s, "building the chunk's batch");
    }
  }
  if (absl::Status committed = Commit(batch, delta, num_entities, num_relations, num_facts);
      !committed.ok()) {
    return committed;
  }

  result.sequence = delta.sequence;
  result.facts_added = static_cast<uint32_t>(delta.facts.size());
  result.entities_created =
      static_cast<uint32_t>(delta.new_entities.size() + delta.revived_entities.size());
  result.relations_created = static_cast<uint32_t>(delta.new_relations.size());
  return result;
}

absl::StatusOr<ChunkResult> TripleStore::RemoveChunk(absl::Span<const NamedTriple> facts,
                                                     absl::Span<const std::string> entities,
                                                     absl::Span<const std::string> relations,
                                                     uint64_t sequence) {
  std::lock_guard<std::mutex> lock(write_mu_);
  if (absl::Status valid = Validate(facts, /*check_relations=*/false); !valid.ok()) return valid;
  if (absl::Status valid = ValidateNames(entities, "entities"); !valid.ok()) return valid;
  if (absl::Status valid = ValidateNames(relations, "relations"); !valid.ok()) return valid;
  if (absl::Status writable = Writable(); !writable.ok()) return writable;

  const std::shared_ptr<const GraphSnapshot> base = graph_.Snapshot();
  GraphDelta delta;
  absl::StatusOr<uint64_t> next = NextSequence(*base, sequence);
  if (!next.ok()) return next.status();
  delta.sequence = *next;
  ChunkResult result;
  absl::flat_hash_set<Triple> seen;
  seen.reserve(facts.size());
  for (const NamedTriple& fact : facts) {
    const std::optional<EntityId> head = base->FindEntity(fact.head);
    const std::optional<RelationId> relation = base->FindRelation(fact.relation);
    const std::optional<EntityId> tail = base->FindEntity(fact.tail);
    if (!head || !relation || !tail || !base->HasFact(*head, *relation, *tail) ||
        !seen.insert(Triple{*head, *relation, *tail}).second) {
      ++result.facts_not_present;
      continue;
    }
    delta.removed_facts.push_back(Triple{*head, *relation, *tail});
  }
  // Each removed entity takes every fact it is in with it.
  absl::flat_hash_set<EntityId> removed;
  for (const std::string& name : entities) {
    const std::optional<EntityId> e = base->FindEntity(name);
    if (!e || !removed.insert(*e).second) {
      ++result.entities_not_present;
      continue;
    }
    delta.removed_entities.push_back(*e);
    for (const Neighbor& n : base->OutEdges(*e)) {
      const Triple t{*e, n.relation, n.entity};
      if (seen.insert(t).second) delta.removed_facts.push_back(t);
    }
    for (const Neighbor& n : base->InEdges(*e)) {
      const Triple t{n.entity, n.relation, *e};
      if (seen.insert(t).second) delta.removed_facts.push_back(t);
    }
  }
  // Each removed relation takes every fact it has with it: one pass over the adjacency.
  absl::flat_hash_set<RelationId> emptied;
  for (size_t i = 0; i < relations.size(); ++i) {
    const std::optional<RelationId> r = base->FindRelation(relations[i]);
    if (!r || base->RelationFacts(*r) == 0 || !emptied.insert(*r).second) {
      ++result.relations_not_present;
      continue;
    }
    if (base->RelationFacts(*r) > options_.max_chunk_facts) {
      return absl::InvalidArgumentError(
          absl::StrCat("relations[", i, "]: \"", relations[i], "\" has ", base->RelationFacts(*r),
                       " facts; one chunk removes at most ", options_.max_chunk_facts,
                       " (--max-chunk-facts): remove its facts over several chunks first"));
    }
  }
  if (!emptied.empty()) {
    for (EntityId e = 0; e < base->num_entities(); ++e) {
      for (const Neighbor& n : base->OutEdges(e)) {
        const Triple t{e, n.relation, n.entity};
        if (emptied.contains(n.relation) && seen.insert(t).second) delta.removed_facts.push_back(t);
      }
    }
  }

  rocksdb::WriteBatch batch;
  rocksdb::Status deleted;
  for (const Triple& t : delta.removed_facts) {
    // Its facts_by_sequence key needs the sequence it was added at: one Get (a hub's removal
    // reads as many as it has facts).
    absl::StatusOr<uint64_t> added_at = FactSequence(t);
    if (!added_at.ok()) return added_at.status();
    if (deleted.ok()) deleted = batch.Delete(families_[kFactsOutFamily], layout::OutFactKey(t));
    if (deleted.ok()) deleted = batch.Delete(families_[kFactsInFamily], layout::InFactKey(t));
    if (deleted.ok()) {
      deleted =
          batch.Delete(families_[kFactsBySequenceFamily], layout::SequencedFactKey(*added_at, t));
    }
  }
  for (EntityId e : delta.removed_entities) {
    if (deleted.ok()) {
      deleted = batch.Put(families_[kRemovedEntitiesFamily], layout::EncodeId(e), rocksdb::Slice());
    }
  }
  if (!deleted.ok()) return FromRocks(deleted, "building the chunk's batch");
  if (absl::Status committed = Commit(batch, delta, base->num_entities(), base->num_relations(),
                                      base->num_facts() - delta.removed_facts.size());
      !committed.ok()) {
    return committed;
  }
  result.sequence = delta.sequence;
  result.facts_removed = static_cast<uint32_t>(delta.removed_facts.size());
  result.entities_removed = static_cast<uint32_t>(delta.removed_entities.size());
  result.relations_removed = static_cast<uint32_t>(emptied.size());
  return result;
}

absl::Status TripleStore::Commit(rocksdb::WriteBatch& batch, const GraphDelta& delta,
                                 uint64_t num_entities, uint64_t num_relations,
                                 uint64_t num_facts) {
  BatchWriter writer(&batch, &families_);
  writer.Put(kMetaFamily, layout::kEntityCountKey, layout::EncodeCounter(num_entities));
  writer.Put(kMetaFamily, layout::kRelationCountKey, layout::EncodeCounter(num_relations));
  writer.Put(kMetaFamily, layout::kFactCountKey, layout::EncodeCounter(num_facts));
  writer.Put(kMetaFamily, layout::kSequenceKey, layout::EncodeCounter(delta.sequence));
  if (!writer.status().ok()) return FromRocks(writer.status(), "building the chunk's batch");

  rocksdb::WriteOptions write;
  write.sync = options_.sync;
  write.disableWAL = false;  // the WAL is what makes an acknowledged chunk durable
  // A large chunk's index lists are built on another thread meanwhile. Published only once
  // durable: a reader never sees a chunk that a crash could take back.
  absl::StatusOr<uint64_t> applied = graph_.ApplyAlongside(delta, [&]() -> absl::Status {
    if (rocksdb::Status s = db_->Write(write, &batch); !s.ok()) {
      write_error_ = FromRocks(s, absl::StrCat("writing the chunk of sequence ", delta.sequence));
      if (absl::IsResourceExhausted(write_error_)) writable_ = false;
      return write_error_;
    }
    return absl::OkStatus();
  });
  if (!applied.ok()) return applied.status();
  if (options_.on_commit) options_.on_commit(delta.sequence);
  return absl::OkStatus();
}

void TripleStore::AllowAnyRelation() {
  std::lock_guard<std::mutex> lock(write_mu_);
  restricted_ = false;
}

absl::Status TripleStore::SetAllowedRelations(const std::vector<std::string>& relations) {
  std::lock_guard<std::mutex> lock(write_mu_);
  absl::flat_hash_set<std::string> allowed(relations.begin(), relations.end());
  std::vector<std::string> missing;
  for (const std::string& relation : graph_.Snapshot()->LiveRelationNames()) {
    if (!allowed.contains(relation)) missing.push_back(QuoteName(relation));
  }
  if (!missing.empty()) {
    const size_t count = missing.size();
    missing.resize(std::min<size_t>(count, 5));
    return absl::FailedPreconditionError(
        absl::StrCat(count, " relation(s) of the stored graph are not in the new vocabulary (",
                     absl::StrJoin(missing, ", "), count > 5 ? ", ..." : "", ")"));
  }
  allowed_relations_ = std::move(allowed);
  restricted_ = true;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> TripleStore::CreateCheckpoint(const std::string& requested) {
  // The caller's mistakes, said as such before RocksDB reports them as I/O errors.
  if (requested.empty() || requested[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint directory \"", absl::CHexEscape(requested), "\" is not an absolute path"));
  }
  if (requested.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint directory \"", absl::CHexEscape(requested), "\" holds a NUL byte"));
  }
  // "/srv/cp/new/" names /srv/cp/new, whose parent is /srv/cp: trailing separators (and "."
  // or "..") go before the parent is taken, and RocksDB is given the normal form (it stages
  // the copy in DIR.tmp, which "/srv/cp/new/" would put inside the missing directory).
  std::filesystem::path normal = std::filesystem::path(requested).lexically_normal();
  if (!normal.has_filename() && normal.has_relative_path()) normal = normal.parent_path();
  const std::string dir = normal.string();
  const std::filesystem::path parent = normal.parent_path();
  std::error_code error;
  if (!std::filesystem::is_directory(parent, error)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the parent of checkpoint directory ", dir, ", ", parent.string(),
                     ", is not an existing directory on the server's machine"));
  }
  std::lock_guard<std::mutex> lock(write_mu_);
  if (std::filesystem::exists(dir, error)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " exists; a checkpoint is written into a new directory"));
  }
  // Whether the directory can be made there at all (a read-only or virtual file system, no
  // permission): tried, and undone, before RocksDB starts writing.
  if (mkdir(dir.c_str(), 0755) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the server cannot create ", dir, ": ", std::strerror(errno)));
  }
  rmdir(dir.c_str());
  rocksdb::Checkpoint* raw = nullptr;
  if (rocksdb::Status s = rocksdb::Checkpoint::Create(db_, &raw); !s.ok()) {
    return FromRocks(s, "preparing a checkpoint");
  }
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // Flushes the memtables first (log_size_for_flush 0), so the copy needs no WAL replay.
  if (rocksdb::Status s = checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0); !s.ok()) {
    return FromRocks(s, absl::StrCat("writing a checkpoint into ", dir));
  }
  return graph_.Snapshot()->sequence();
}

absl::Status TripleStore::Sync() {
  std::lock_guard<std::mutex> lock(write_mu_);
  // A read-only database has nothing to sync; after a failed write the WAL's writer must not
  // be used again (RocksDB asserts), and whatever was acknowledged is in the OS already.
  if (!read_only_because_.ok()) return absl::OkStatus();
  if (!write_error_.ok()) return write_error_;
  return FromRocks(db_->SyncWAL(), "syncing the WAL");
}

absl::Status TripleStore::CheckConsistency() const {
  std::lock_guard<std::mutex> lock(write_mu_);
  const std::shared_ptr<const GraphSnapshot> graph = graph_.Snapshot();
  const rocksdb::ReadOptions read = ScanOptions();
  auto mismatch = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("store ", dir_, ": ", what));
  };

  const std::pair<const char*, uint64_t> counters[] = {
      {layout::kFormatVersionKey, layout::kFormatVersion},
      {layout::kEntityCountKey, graph->num_entities()},
      {layout::kRelationCountKey, graph->num_relations()},
      {layout::kFactCountKey, graph->num_facts()},
      {layout::kSequenceKey, graph->sequence()},
  };
  for (const auto& [key, expected] : counters) {
    std::string bytes;
    rocksdb::Status s = db_->Get(read, families_[kMetaFamily], key, &bytes);
    if (!s.ok()) return FromRocks(s, absl::StrCat("reading counter ", key));
    if (layout::DecodeCounter(bytes) != expected) {
      return mismatch(absl::StrCat("counter \"", key, "\" disagrees with the index"));
    }
  }

  // A dictionary agrees when by-id holds exactly ids 0..count-1 with the index's names and
  // by-name holds count entries, each mapping a name to the id that has it.
  auto check_dictionary = [&](Family by_id, Family by_name, uint64_t count,
                              auto name_of) -> absl::Status {
    uint64_t seen = 0;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, families_[by_id]));
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++seen) {
      const std::optional<uint32_t> id = layout::DecodeId(View(it->key()));
      if (!id.has_value() || *id != seen || seen >= count || View(it->value()) != name_of(*id)) {
        return mismatch(absl::StrCat(kFamilyNames[by_id], " disagrees at id ", seen));
      }
    }
    if (!it->status().ok()) return FromRocks(it->status(), "scanning a dictionary");
    if (seen != count) return mismatch(absl::StrCat(kFamilyNames[by_id], " is short"));
    seen = 0;
    it.reset(db_->NewIterator(read, families_[by_name]));
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++seen) {
      const std::optional<uint32_t> id = layout::DecodeId(View(it->value()));
      if (!id.has_value() || *id >= count || name_of(*id) != View(it->key())) {
        return mismatch(absl::StrCat(kFamilyNames[by_name], " disagrees at name \"",
                                     absl::CHexEscape(View(it->key())), "\""));
      }
    }
    if (!it->status().ok()) return FromRocks(it->status(), "scanning a dictionary");
    if (seen != count) return mismatch(absl::StrCat(kFamilyNames[by_name], " has extra names"));
    return absl::OkStatus();
  };
  if (absl::Status s =
          check_dictionary(kEntityNamesFamily, kEntityByNameFamily, graph->num_entities(),
                           [&](uint32_t id) -> absl::string_view { return graph->EntityName(id); });
      !s.ok()) {
    return s;
  }
  if (absl::Status s = check_dictionary(
          kRelationNamesFamily, kRelationByNameFamily, graph->num_relations(),
          [&](uint32_t id) -> absl::string_view { return graph->RelationName(id); });
      !s.ok()) {
    return s;
  }

  // Each fact family holds distinct keys (RocksDB keys are unique); if all are facts of
  // the index and there are num_facts of them, the family equals the index's fact set.
  for (Family family : {kFactsOutFamily, kFactsInFamily}) {
    uint64_t seen = 0;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, families_[family]));
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++seen) {
      const absl::string_view key = View(it->key());
      const std::optional<Triple> fact =
          family == kFactsOutFamily ? layout::DecodeOutFactKey(key) : layout::DecodeInFactKey(key);
      if (!fact.has_value() || !graph->HasFact(fact->head, fact->relation, fact->tail)) {
        return mismatch(absl::StrCat(kFamilyNames[family], " holds a fact the index lacks"));
      }
      // facts_out's value is the sequence it was added at; facts_in's is empty.
      const std::optional<uint64_t> added_at = layout::DecodeFactSequence(View(it->value()));
      if (family == kFactsOutFamily ? !added_at.has_value() || *added_at > graph->sequence()
                                    : !it->value().empty()) {
        return mismatch(absl::StrCat(kFamilyNames[family], " holds a malformed value"));
      }
    }
    if (!it->status().ok()) return FromRocks(it->status(), "scanning the facts");
    if (seen != graph->num_facts()) {
      return mismatch(absl::StrCat(kFamilyNames[family], " holds ", seen, " facts; the index ",
                                   graph->num_facts()));
    }
  }

  // facts_by_sequence holds each fact once, at the sequence facts_out gives it.
  {
    uint64_t seen = 0;
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(read, families_[kFactsBySequenceFamily]));
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++seen) {
      const std::optional<layout::SequencedFact> entry =
          layout::DecodeSequencedFactKey(View(it->key()));
      if (!entry.has_value() ||
          !graph->HasFact(entry->fact.head, entry->fact.relation, entry->fact.tail)) {
        return mismatch("facts_by_sequence holds a fact the index lacks");
      }
      absl::StatusOr<uint64_t> added_at = FactSequence(entry->fact);
      if (!added_at.ok()) return added_at.status();
      if (*added_at != entry->sequence) {
        return mismatch(absl::StrCat("facts_by_sequence has a fact at sequence ", entry->sequence,
                                     "; facts_out says ", *added_at));
      }
    }
    if (!it->status().ok()) return FromRocks(it->status(), "scanning the facts by sequence");
    if (seen != graph->num_facts()) {
      return mismatch(
          absl::StrCat("facts_by_sequence holds ", seen, " facts; the index ", graph->num_facts()));
    }
  }

  // removed_entities holds exactly the index's removed entities, none of which has a fact.
  std::vector<EntityId> removed;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(read, families_[kRemovedEntitiesFamily]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const std::optional<uint32_t> id = layout::DecodeId(View(it->key()));
    if (!id.has_value()) return mismatch("removed_entities holds a malformed id");
    removed.push_back(*id);
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scanning the removed entities");
  const absl::Span<const EntityId> index_removed = graph->RemovedEntities();
  if (!std::equal(removed.begin(), removed.end(), index_removed.begin(), index_removed.end())) {
    return mismatch("removed_entities disagrees with the index");
  }
  for (EntityId e : removed) {
    if (graph->Degree(e) != 0) return mismatch(absl::StrCat("removed entity ", e, " has facts"));
  }
  return absl::OkStatus();
}

struct FactExport::State {
  std::shared_ptr<store_internal::Database> database;  // kept open while this reads it
  const rocksdb::Snapshot* snapshot = nullptr;
  std::unique_ptr<rocksdb::Iterator> it;
  // The same version in memory, for names: ids are never reused, so it names every id.
  std::shared_ptr<const GraphSnapshot> names;
  std::string dir;

  ~State() {
    it.reset();  // before the snapshot it reads
    if (snapshot != nullptr) database->db->ReleaseSnapshot(snapshot);
  }
};

FactExport::FactExport(std::unique_ptr<State> state) : state_(std::move(state)) {}
FactExport::~FactExport() = default;

uint64_t FactExport::sequence() const { return state_->names->sequence(); }

absl::StatusOr<std::vector<ExportedFact>> FactExport::Next(size_t max_facts, size_t max_bytes) {
  std::vector<ExportedFact> page;
  size_t bytes = 0;
  rocksdb::Iterator& it = *state_->it;
  const GraphSnapshot& names = *state_->names;
  for (; it.Valid() && page.size() < std::max<size_t>(max_facts, 1); it.Next()) {
    const std::optional<layout::SequencedFact> entry =
        layout::DecodeSequencedFactKey(View(it.key()));
    if (!entry.has_value() || entry->fact.head >= names.num_entities() ||
        entry->fact.tail >= names.num_entities() || entry->fact.relation >= names.num_relations()) {
      return absl::DataLossError(
          absl::StrCat("facts_by_sequence in ", state_->dir, " holds a malformed fact key"));
    }
    ExportedFact out{
        NamedTriple{names.EntityName(entry->fact.head), names.RelationName(entry->fact.relation),
                    names.EntityName(entry->fact.tail)},
        entry->sequence};
    const size_t size = out.fact.head.size() + out.fact.relation.size() + out.fact.tail.size();
    if (!page.empty() && bytes + size > max_bytes) break;
    bytes += size;
    page.push_back(std::move(out));
  }
  if (!it.status().ok()) return FromRocks(it.status(), "reading an export");
  return page;
}

absl::StatusOr<std::unique_ptr<FactExport>> TripleStore::Export(uint64_t since_sequence) const {
  auto state = std::make_unique<FactExport::State>();
  state->dir = dir_;
  {
    // Under the writers' lock, the disk and the index are at the same chunk.
    std::lock_guard<std::mutex> lock(write_mu_);
    // Names only: an export may take minutes, and a whole snapshot held that long would keep
    // every adjacency list the chunks meanwhile replace.
    state->names = graph_.NamesSnapshot();
    if (since_sequence > state->names->sequence()) {
      return absl::OutOfRangeError(
          absl::StrCat("the graph is at sequence ", state->names->sequence(),
                       "; an export of the facts added after ", since_sequence,
                       " would name a version this server has not seen"));
    }
    if (since_sequence != 0 && since_sequence < sequenced_from_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "this store records when facts were added only from sequence ", sequenced_from_,
          " (its format was upgraded then); the facts added after ", since_sequence,
          " cannot be told apart from older ones: export them all, or from ", sequenced_from_));
    }
    state->database = database_;
    state->snapshot = db_->GetSnapshot();
  }
  rocksdb::ReadOptions read = ScanOptions();
  read.snapshot = state->snapshot;
  state->it.reset(
      state->database->db->NewIterator(read, state->database->families[kFactsBySequenceFamily]));
  if (since_sequence == 0) {
    state->it->SeekToFirst();  // the facts an upgrade left at sequence 0 too
  } else {
    state->it->Seek(layout::EncodeCounter(since_sequence + 1));
  }
  if (!state->it->status().ok()) return FromRocks(state->it->status(), "starting an export");
  return std::unique_ptr<FactExport>(new FactExport(std::move(state)));
}

std::optional<size_t> RejectedFactIndex(const absl::Status& status) {
  const auto payload = status.GetPayload(kRejectedFactPayload);
  size_t index = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &index)) {
    return std::nullopt;
  }
  return index;
}

}  // namespace grail
