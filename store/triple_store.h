// The live triple store: the product's source of truth, on RocksDB, with an in-memory
// index (LiveGraph) that mirrors it for reads.
//
// Facts arrive in chunks (the AddTriples stream) and leave in chunks (RemoveTriples). A chunk is
// validated whole, then written as ONE rocksdb::WriteBatch with the WAL on, then published to the
// in-memory index, then acknowledged. So a chunk is all or nothing on disk (one batch), all or
// nothing in memory (one version swap), and anything acknowledged survives a process crash (kill
// -9); with StoreOptions::sync it also survives a machine crash. Reopening the directory restores
// the same entities, relations, facts and ids, and rebuilds the index from disk.
//
// RocksDB layout (format version 3; an older store is upgraded on open; constants and key encodings
// in store/store_layout.h; ids are u32 and counters u64, both fixed-width big-endian, so bytewise
// order is numeric order):
//   column family     key                          value
//   meta              "format_version"             3
//                     "entities" "relations"       counts (= next free id)
//                     "facts"                      number of distinct facts
//                     "sequence"                   chunks committed so far (a replica:
//                                                  the log sequence of the last applied)
//                     "sequenced_from"             (upgraded stores) the sequence at the
//                                                  upgrade: older facts carry sequence 0
//   entity_by_name    name                         id
//   entity_names      id                           name
//   relation_by_name  name                         id
//   relation_names    id                           name
//   facts_out         head|relation|tail           sequence of the chunk that added it
//   facts_in          tail|relation|head           (empty)
//   removed_entities  id                           (empty)   entities removed explicitly
//   facts_by_sequence sequence|head|relation|tail  (empty)   the facts in order of addition
// The fact families use a fixed 4-byte prefix extractor and bloom filters, so one entity's
// out- or in-adjacency is one prefix scan and a fact lookup is one bloom-filtered Get; the
// dictionaries both ways let tools look names up without loading the index. The default
// column family is unused. A chunk's batch holds its new names (both directions), its new
// facts (both directions) and the four counters, so the counters always agree with the
// data; Open checks that they do. facts_by_sequence is what Export reads: every stored
// fact once, keyed first by the sequence of the chunk that added it.
//
// Ids are dense and assigned in order of first appearance (within a fact: head, then
// relation, then tail) and never change or get reused. Names are opaque bytes: any
// non-empty string without TAB, CR or LF of at most StoreOptions::max_name_bytes.
// docs/STORAGE.md has the overview: write path, recovery, how snapshots share structure.
#ifndef GRAIL_STORE_TRIPLE_STORE_H_
#define GRAIL_STORE_TRIPLE_STORE_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "graph/triple_file.h"
#include "store/live_graph.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
class Env;
class FileSystem;
class Logger;
class WriteBatch;
}  // namespace rocksdb

namespace grail {

namespace store_internal {
struct Database;
}  // namespace store_internal

struct StoreOptions {
  // Whether each chunk's write is fsynced before AddChunk returns. false (default): the
  // WAL is written to the OS before AddChunk returns, so acknowledged chunks survive a
  // process crash but a machine crash may lose the most recent ones (never part of one:
  // recovery replays the WAL up to the last complete batch). true: they survive a machine
  // crash too, at the cost of one fsync per chunk.
  bool sync = false;
  // Longest accepted entity or relation name, in bytes.
  size_t max_name_bytes = 1024;
  // Largest accepted chunk, in facts.
  size_t max_chunk_facts = 100000;
  // Most pairs of relation sides that may meet at some entity (graph/relation_sides.h): the
  // nodes ULTRA's graph of relations joins, whose edges (8 a pair) its every forward reads.
  // They grow with the square of the distinct relations meeting at an entity, so one entity
  // given thousands of relations is enough to exhaust memory. A chunk that would pass it is
  // refused naming the fact (RESOURCE_EXHAUSTED). 0: no bound.
  uint64_t max_relation_side_pairs = 0;
  // Whether the index follows which relation sides meet (GraphView::SidePairs(), what a model
  // of any relation reads; max_relation_side_pairs applies only then). Off, chunks skip that
  // work; TrackRelationSides turns it on or off later.
  bool track_relation_sides = true;
  // When set, a fact whose relation is not in this list rejects its chunk (the operator's
  // choice to accept only relations the model knows).
  std::optional<std::vector<std::string>> allowed_relations;
  // What Open does with a write-ahead log corrupted before its end (a record failing its
  // checksum with valid records after it: a bad disk or a damaged copy, not a crash, which
  // only ever cuts the last record short). false: Open fails with DATA_LOSS and changes
  // nothing. true: the store is recovered up to the corruption, the chunks after it are
  // lost, and recovery_note() says so.
  bool truncate_corrupted_wal = false;
  // Where the store's warnings go (RocksDB's own warnings and errors, prefixed "rocksdb: ",
  // and the store's: read-only on a full disk, writes resumed): level ("warning", "error")
  // and message. Unset: stderr. RocksDB's info-level lines are dropped, and RocksDB writes no
  // info LOG file into the store: on a full disk that file's writer aborts the process.
  std::function<void(absl::string_view level, absl::string_view message)> log;
  // The file system RocksDB runs on; unset: the local one. Tests inject faults through it.
  std::shared_ptr<rocksdb::FileSystem> file_system;
  // Called with the new sequence after each chunk is committed and visible to Snapshot(), on
  // the writer's thread with the writers' lock held: it must be quick and must not write.
  std::function<void(uint64_t sequence)> on_commit;
};

// What one committed chunk did.
struct ChunkResult {
  // Chunks committed so far in this store, this one included; persisted with the chunk, so
  // it keeps counting across reopen. A client that saw sequence n knows chunks 1..n are
  // stored.
  uint64_t sequence = 0;
  uint32_t facts_added = 0;
  // Facts of the chunk already stored, or repeated within the chunk.
  uint32_t duplicate_facts = 0;
  uint32_t entities_created = 0;
  uint32_t relations_created = 0;
  // RemoveChunk only: facts removed (those of removed entities included), and facts of the
  // chunk that were not stored (unknown names included) or repeated within it; entities
  // removed, and entity names that were unknown, already removed or repeated.
  uint32_t facts_removed = 0;
  uint32_t facts_not_present = 0;
  uint32_t entities_removed = 0;
  uint32_t entities_not_present = 0;
  // Relations whose every fact the chunk removed (named in `relations`), and relation names
  // that were unknown, had no facts, or were repeated.
  uint32_t relations_removed = 0;
  uint32_t relations_not_present = 0;
};

// How TripleStore::BulkAdd reads and numbers its files.
struct BulkLoadOptions {
  // The load's facts take one sequence per this many lines (blank lines not counted), as
  // AddChunk calls of this many lines each would: the store a load builds is the store those
  // chunks build, sequences included. At least 1.
  uint64_t chunk_lines = 100000;
  // Threads that validate the files (each file is cut at line ends) and sort the facts.
  int threads = 2;
  // Where the table files are written before they are ingested: a directory on the store's
  // file system (so that ingesting moves them instead of copying). Empty: DIR/bulk-load.tmp,
  // removed afterwards, and at the next load if a crash left it.
  std::string work_dir;
  // Told of each step as it starts ("validating", "numbering", ...); unset: nothing.
  std::function<void(absl::string_view step)> progress;
};

// What a BulkAdd did, and how long each step took.
struct BulkLoadResult {
  uint64_t lines = 0;             // facts read (lines that are not blank)
  uint64_t facts_added = 0;       // facts new to the store, each once
  uint64_t duplicate_facts = 0;   // repeated in the files or stored already
  uint64_t entities_created = 0;  // new names, and removed entities named again
  uint64_t relations_created = 0;
  uint64_t first_sequence = 0;  // the sequences the load's chunks took (none when no lines)
  uint64_t last_sequence = 0;
  double validate_seconds = 0;  // reading and checking every line
  double number_seconds = 0;    // names to ids, in order of first appearance
  double sort_seconds = 0;      // the facts in the three orders the families keep
  double write_seconds = 0;     // the table files
  double ingest_seconds = 0;    // RocksDB's ingestion and the in-memory index
};

// One fact of an export, by name, with the sequence of the chunk that added it (0 for a
// fact stored before the store recorded sequences; see TripleStore::Export).
struct ExportedFact {
  NamedTriple fact;
  uint64_t sequence = 0;
};

// The facts of one version of the graph, read from disk in pages (TripleStore::Export): a
// RocksDB snapshot and an iterator over it, so that reading a graph of any size holds one
// page in memory, and chunks committed meanwhile are not seen. While it is open RocksDB
// keeps what the snapshot sees (compaction cannot drop facts removed since), so an export
// is read through and then dropped. It must be destroyed before its store.
//
// Thread safety: one thread at a time (it is a cursor); different exports are independent.
class FactExport {
 public:
  ~FactExport();
  FactExport(const FactExport&) = delete;
  FactExport& operator=(const FactExport&) = delete;

  // The version exported: every chunk up to this sequence and none after.
  uint64_t sequence() const;
  // The next facts in order of addition (by sequence, then head, relation and tail ids): at
  // most `max_facts` (at least 1) and, past the first, at most `max_bytes` of names; empty
  // once every fact has been read. INTERNAL / DATA_LOSS for RocksDB's errors and a
  // malformed key.
  absl::StatusOr<std::vector<ExportedFact>> Next(size_t max_facts, size_t max_bytes);

 private:
  friend class TripleStore;
  struct State;
  explicit FactExport(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Thread safety: every method may be called from any thread. AddChunk and RemoveChunk
// calls are serialised internally (one writer at a time). Snapshot() never waits for a
// chunk being written: it copies a pointer under a mutex that writers hold only to swap
// that pointer.
class TripleStore {
 public:
  // Opens the store in `dir`, creating it if the directory holds no store, and rebuilds
  // the in-memory index from it. Errors: FAILED_PRECONDITION if `dir` holds another
  // RocksDB database, a store of an unknown format version, or a store another process has
  // open; DATA_LOSS if the store's contents contradict each other (e.g. counters vs data)
  // or its write-ahead log is corrupted before its end (see truncate_corrupted_wal);
  // INTERNAL (with RocksDB's message) for other RocksDB errors.
  static absl::StatusOr<std::unique_ptr<TripleStore>> Open(const std::string& dir,
                                                           const StoreOptions& options);

  // Syncs the WAL (so a clean shutdown is durable against a later machine crash) and
  // closes the database. Snapshots taken from the store stay valid.
  ~TripleStore();
  TripleStore(const TripleStore&) = delete;
  TripleStore& operator=(const TripleStore&) = delete;

  // Adds a chunk of facts atomically and durably (see StoreOptions::sync); on success every
  // snapshot taken afterwards sees the whole chunk. Facts already stored, and repeats
  // within the chunk, are ignored (counted in duplicate_facts). An empty chunk, or one of
  // only duplicates, still commits and takes a sequence number.
  //
  // The chunk is validated before anything is written. INVALID_ARGUMENT rejects the whole
  // chunk, storing nothing and leaving the sequence unchanged, with a message that starts
  // "fact N: " where N is the 0-based position of the first offending fact (also
  // available as RejectedFactIndex(status)), for: an empty name; a name longer than
  // max_name_bytes; a name containing TAB, CR or LF; a relation outside allowed_relations;
  // more than max_chunk_facts facts (N is then max_chunk_facts, the first fact too many).
  // RESOURCE_EXHAUSTED if the chunk would need more than 2^32 - 1 entities or relations, and,
  // also "fact N: ..." with its RejectedFactIndex, if its fact N would make more than
  // max_relation_side_pairs pairs of relation sides meet.
  //
  // If RocksDB fails the write, that error is returned and nothing of the chunk is served.
  // A full disk is RESOURCE_EXHAUSTED "...No space left on device": reads go on, every later
  // chunk first asks RocksDB to resume (DB::Resume, which starts a new WAL and flushes the
  // memtables), so writes start again by themselves once space is freed; until then each
  // fails RESOURCE_EXHAUSTED. Any other failed write makes the store refuse every later chunk
  // (FAILED_PRECONDITION) until reopened: whether the failed batch reached the WAL is unknown,
  // and the index must not disagree with the disk. A store opened on a full disk (the WAL
  // replay or a new WAL could not be written) is opened read-only, serves its graph, and
  // becomes writable at the first chunk after space is freed.
  //
  // `sequence`: 0 gives the chunk the next sequence number (current + 1). Otherwise the
  // chunk takes `sequence`, which must be above the current one (FAILED_PRECONDITION, storing
  // nothing, if not): a replica takes its log's sequence numbers, stored in the chunk's own
  // batch, so that after a crash it knows exactly which log entry it applied last.
  absl::StatusOr<ChunkResult> AddChunk(absl::Span<const NamedTriple> facts, uint64_t sequence = 0);

  // Removes a chunk of facts, and of entities, atomically and durably, like AddChunk: one
  // WriteBatch deletes the facts from both fact families, records the removed entities and
  // updates the counters, then one version swap hides them. Facts not stored (including
  // facts naming an entity or relation the store does not know) and repeats within the
  // chunk are ignored, counted in facts_not_present; the chunk still commits and takes a
  // sequence number.
  //
  // An entity left with no facts by removed facts stays: it keeps its id and name, stays
  // resolvable and is still ranked as a candidate. An entity named in `entities` is removed
  // with every fact it is in: FindEntity no longer finds it and rankings skip it; its id
  // stays taken, and a later AddChunk that names it brings it back with that id (counted in
  // entities_created). Unknown or already removed names are counted in
  // entities_not_present. Removing an entity costs O(its degree): a hub's every fact goes
  // into the one batch.
  //
  // A relation named in `relations` loses every fact it has: it then no longer counts as
  // one the graph uses (GraphSnapshot::num_live_relations, SetAllowedRelations), and a later
  // fact naming it uses it again, with its id. Finding its facts costs a pass over the
  // graph's adjacency; a relation with more than max_chunk_facts facts is refused
  // (INVALID_ARGUMENT "relations[N]: ...": remove its facts over several chunks first).
  // Unknown names, relations without facts and repeats are counted in
  // relations_not_present.
  //
  // Validation and errors as AddChunk, except that relations outside allowed_relations are
  // simply not present; a bad entity or relation name is INVALID_ARGUMENT "entities[N]: ..."
  // / "relations[N]: ..." (not a RejectedFactIndex).
  // `sequence` as for AddChunk.
  absl::StatusOr<ChunkResult> RemoveChunk(absl::Span<const NamedTriple> facts,
                                          absl::Span<const std::string> entities = {},
                                          absl::Span<const std::string> relations = {},
                                          uint64_t sequence = 0);

  // Adds the facts of triple files (graph/triple_file.h) as AddChunk calls of
  // options.chunk_lines lines each would, file after file, but by writing RocksDB's table
  // files directly and ingesting them in one atomic step: the same ids (in order of first
  // appearance), names, facts, sequences and counters, at the rate the disk and the threads
  // allow. Every line is checked first, and a bad one (malformed, a name AddChunk would refuse,
  // a relation outside allowed_relations) fails the load as INVALID_ARGUMENT "FILE:LINE: ..."
  // with nothing written; NOT_FOUND for a file that cannot be read. A crash before the
  // ingestion leaves the store as it was, and after it, the whole load. Writers wait meanwhile.
  // Memory: about 40 bytes a fact and the names' bytes twice, besides the files, which are
  // mapped. Not for a replica of a replicated graph (its sequences are the log's), and the
  // relation-pair bound (max_relation_side_pairs) is not applied.
  absl::StatusOr<BulkLoadResult> BulkAdd(absl::Span<const std::string> files,
                                         const BulkLoadOptions& options);

  // Moves the sequence to `sequence` (above the current one) without changing the graph: a
  // replica records a log entry that it skips (one that every replica rejects), so that
  // the entry is not read again after a restart. Durable and visible like a chunk.
  absl::StatusOr<ChunkResult> AdvanceSequence(uint64_t sequence);

  // Checks a chunk against the rules AddChunk (adding) or RemoveChunk applies before writing,
  // without writing: the same errors, so a chunk that passes is one the store would take
  // (unless the disk fails). For replication, where a chunk is validated before it is
  // logged and applied later.
  absl::Status CheckChunk(absl::Span<const NamedTriple> facts,
                          absl::Span<const std::string> entities,
                          absl::Span<const std::string> relations, bool adding) const;

  // The latest version of the graph: every chunk whose AddChunk or RemoveChunk returned
  // before this call.
  std::shared_ptr<const GraphSnapshot> Snapshot() const { return graph_.Snapshot(); }
  // Bytes of the index's adjacency lists kept for older snapshots still held (LiveGraph).
  uint64_t retained_index_bytes() const { return graph_.retained_adjacency_bytes(); }

  // Starts or stops following which relation sides meet (StoreOptions::track_relation_sides):
  // for a server that starts serving a model of any relation, or stops. On counts the pairs
  // off the latest version once, O(facts) (writers wait meanwhile; readers do not); off frees
  // them. Either way a new version of the same graph and sequence is published.
  void TrackRelationSides(bool on);
  bool tracks_relation_sides() const;

  // Makes `relations` the allowed vocabulary, for a new model whose vocabulary is closed:
  // from now on a fact of any other relation rejects its chunk, also on a store opened
  // without one or after AllowAnyRelation (a server that served ULTRA, then a learned model).
  // FAILED_PRECONDITION, changing nothing, if a relation the stored graph uses (one with
  // facts) is not in `relations` (the message names the first few). Serialised with the
  // writers, so no chunk slips in between the check and the swap.
  absl::Status SetAllowedRelations(const std::vector<std::string>& relations);
  // Lifts the allowed vocabulary (for a model that scores any relation, ULTRA's): every
  // relation is accepted until the next SetAllowedRelations.
  void AllowAnyRelation();

  // Fsyncs the WAL: every chunk committed so far survives a machine crash. After a failed
  // write it returns that error instead (RocksDB must not touch the failed WAL again).
  absl::Status Sync();

  // Writes a consistent copy of the store into `dir` (which must not exist; hard links where
  // the file system allows) and returns the sequence it holds. Writers wait meanwhile. A
  // store opened on the copy holds exactly the graph of that sequence. FAILED_PRECONDITION
  // if `dir` exists; INTERNAL for RocksDB's errors.
  absl::StatusOr<uint64_t> CreateCheckpoint(const std::string& requested);

  // The facts of the latest version that chunks after `since_sequence` added (0: every
  // fact), read in pages (FactExport). Costs a RocksDB snapshot and an iterator; waits only
  // for a chunk being committed. A fact removed and added again counts as added again.
  // Errors: OUT_OF_RANGE if `since_sequence` is above the store's sequence (the caller has
  // seen a later version than this store holds: another replica's, or a store restored from
  // an older backup); FAILED_PRECONDITION if it is below the sequence at which the store was
  // upgraded to record sequences (sequenced_from) and not 0: which older facts came after it
  // is unknown, so only a full export is exact.
  absl::StatusOr<std::unique_ptr<FactExport>> Export(uint64_t since_sequence) const;

  // false while writes fail for want of disk space (after a failed write, or opened
  // read-only on a full disk), until a chunk finds space again.
  bool writable() const { return writable_.load(std::memory_order_relaxed); }

  // Scans every column family and checks that the disk agrees with itself and with the
  // in-memory index: counters, dense dictionaries in both directions, and facts_out and
  // facts_in each holding exactly the index's facts. O(store size); blocks writers while it
  // runs. Errors: DATA_LOSS describing the first disagreement found.
  absl::Status CheckConsistency() const;

  // Sizes of the in-memory index (walks it; O(entities)).
  LiveGraph::MemoryUsage IndexMemoryUsage() const { return graph_.ApproximateMemoryUsage(); }

  const std::string& dir() const { return dir_; }
  // Set when Open recovered past a corrupted write-ahead log (truncate_corrupted_wal): what
  // happened and what was lost. Empty otherwise.
  const std::string& recovery_note() const { return recovery_note_; }

 private:
  TripleStore(std::string dir, StoreOptions options);
  // Reads the whole store into the in-memory index (Open's second half).
  absl::Status Load();
  // Brings a store of an older format version up to kFormatVersion (Load's first step):
  // creates what it lacks and indexes its facts by sequence (at 0), in batches, writing
  // the new version last, so an upgrade cut short by a crash runs again at the next open.
  absl::Status Upgrade(uint64_t version);
  // The sequence of the chunk that added fact `t`, which must be stored (from facts_out).
  absl::StatusOr<uint64_t> FactSequence(const Triple& t) const;
  // Checks the chunk against the validation rules (see AddChunk); the allowed relations only
  // with `check_relations`. Requires write_mu_.
  absl::Status Validate(absl::Span<const NamedTriple> facts, bool check_relations) const;
  // Checks one fact's names (head, relation, tail) by AddChunk's rules, and its relation
  // against the allowed vocabulary with `check_relations`: INVALID_ARGUMENT saying why, without
  // a position (AddChunk adds "fact N: ", a bulk load "FILE:LINE: "). Requires write_mu_.
  absl::Status CheckFact(const std::array<absl::string_view, 3>& names, bool check_relations) const;
  // RESOURCE_EXHAUSTED "fact N: ..." where adding `facts` would pass
  // max_relation_side_pairs. write_mu_ held.
  absl::Status CheckRelationPairs(absl::Span<const NamedTriple> facts) const;
  // The same for `added`, the facts of `facts` new to `base` (the latest version) by id, in
  // order, `positions` their places in `facts`: what AddChunk has resolved already.
  absl::Status CheckRelationPairs(absl::Span<const NamedTriple> facts,
                                  absl::Span<const Triple> added,
                                  absl::Span<const uint32_t> positions,
                                  const GraphSnapshot& base) const;
  // RemoveChunk's check of its entity names.
  // Each name valid as `what` ("entities", "relations"): INVALID_ARGUMENT "what[N]: ...".
  absl::Status ValidateNames(absl::Span<const std::string> names, absl::string_view what) const;
  // The sequence a chunk on `base` takes: `sequence`, or base's + 1 for 0 (see AddChunk).
  absl::StatusOr<uint64_t> NextSequence(const GraphSnapshot& base, uint64_t sequence) const;
  // OK when a chunk can be written now: after a write failed for want of space, or when
  // opened read-only on a full disk, tries to get RocksDB writing again first.
  // RESOURCE_EXHAUSTED while the disk is still full; FAILED_PRECONDITION after any other
  // failed write. Requires write_mu_.
  absl::Status Writable();
  // Replaces the read-only database with a writable one. Requires write_mu_.
  absl::Status ReopenWritable();
  // To StoreOptions::log, or stderr: the store's own warnings and RocksDB's forwarded lines.
  void Log(absl::string_view level, absl::string_view message) const;
  // Writes `batch` (the chunk's changes, without the counters, which this adds) and
  // publishes `delta` once it is durable. Requires write_mu_.
  absl::Status Commit(rocksdb::WriteBatch& batch, const GraphDelta& delta, uint64_t num_entities,
                      uint64_t num_relations, uint64_t num_facts);

  const std::string dir_;
  const StoreOptions options_;
  std::string recovery_note_;
  // RocksDB's environment on StoreOptions::file_system (when given) and its logger; both
  // outlive db_.
  std::unique_ptr<rocksdb::Env> env_;
  std::shared_ptr<rocksdb::Logger> logger_;
  // Guarded by write_mu_ (SetAllowedRelations replaces it). Checked only while restricted_:
  // set by StoreOptions::allowed_relations and by SetAllowedRelations, cleared by
  // AllowAnyRelation.
  absl::flat_hash_set<std::string> allowed_relations_;
  bool restricted_ = false;  // guarded by write_mu_
  // The open database, shared with the exports reading it, so that ReopenWritable can
  // replace it while one is open (the old one closes when its last export does). db_ and
  // families_ are its members, for brevity; families_ is indexed by the Family enum in the
  // .cc file. All three change only in Open and ReopenWritable (write_mu_ held).
  std::shared_ptr<store_internal::Database> database_;
  rocksdb::DB* db_ = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> families_;
  // Facts stored before this sequence carry sequence 0 (the store was upgraded then).
  uint64_t sequenced_from_ = 0;
  LiveGraph graph_;

  // Serialises AddChunk, RemoveChunk and CheckConsistency.
  mutable std::mutex write_mu_;
  // The error of a failed RocksDB write (guarded by write_mu_): cleared once RocksDB writes
  // again after a full disk, otherwise kept and every later chunk fails.
  absl::Status write_error_;
  // Why the database is open read-only (the disk was full at Open); OK when writable.
  // Guarded by write_mu_.
  absl::Status read_only_because_;
  std::atomic<bool> writable_{true};
};

// For a chunk AddChunk refused because of one fact (INVALID_ARGUMENT, or RESOURCE_EXHAUSTED
// for the relation pairs' bound): its 0-based position. nullopt for any other status.
std::optional<size_t> RejectedFactIndex(const absl::Status& status);

}  // namespace grail

#endif  // GRAIL_STORE_TRIPLE_STORE_H_
