// TripleStore::BulkAdd: triple files into the store through RocksDB table files.
//
// Four steps, each over every fact: the files are mapped and checked line by line in
// parallel (nothing is written until every line passed); names are numbered in one pass in
// file order (the order AddChunk numbers them in); the facts are sorted into the three
// orders the fact families keep and written with the names and counters as one table file
// per family (SstFileWriter, in parallel); and RocksDB ingests them all in one atomic step
// (IngestExternalFiles), after which the in-memory index is extended as Open would build it.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/elapsed.h"
#include "common/triple_line.h"
#include "rocksdb/db.h"
#include "rocksdb/sst_file_writer.h"
#include "store/store_families.h"
#include "store/store_layout.h"
#include "store/triple_store.h"

namespace grail {

using namespace store_internal;  // NOLINT(build/namespaces): the families and FromRocks

namespace {

namespace layout = store_layout;
using Clock = std::chrono::steady_clock;

// A file mapped read-only for the load's length; names are views into it until the table
// files are written.
class MappedFile {
 public:
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int error = errno;
      ::close(fd);
      return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(error)));
    }
    auto file = std::unique_ptr<MappedFile>(new MappedFile());
    file->size_ = static_cast<size_t>(st.st_size);
    if (file->size_ > 0) {
      void* data = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (data == MAP_FAILED) {
        const int error = errno;
        ::close(fd);
        return absl::NotFoundError(absl::StrCat("cannot map ", path, ": ", std::strerror(error)));
      }
      ::madvise(data, file->size_, MADV_SEQUENTIAL);
      file->data_ = static_cast<const char*>(data);
    }
    ::close(fd);
    return file;
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  absl::string_view text() const { return absl::string_view(data_, size_); }

 private:
  MappedFile() = default;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

// Calls `line(text)` for each line of `text` (without its LF; a last line without one too).
template <typename F>
void ForEachLine(absl::string_view text, F&& line) {
  while (!text.empty()) {
    const size_t end = text.find('\n');
    if (end == absl::string_view::npos) {
      line(text);
      return;
    }
    line(text.substr(0, end));
    text.remove_prefix(end + 1);
  }
}

bool IsBlank(absl::string_view line) { return line.empty() || line == "\r"; }

// `text` cut into at most `parts` pieces, each ending at a line end.
std::vector<absl::string_view> CutAtLines(absl::string_view text, int parts) {
  std::vector<absl::string_view> pieces;
  size_t start = 0;
  for (int p = 1; p <= parts && start < text.size(); ++p) {
    size_t end = p == parts ? text.size() : std::max(start, text.size() * p / parts);
    if (end < text.size()) {
      const size_t lf = text.find('\n', end);
      end = lf == absl::string_view::npos ? text.size() : lf + 1;
    }
    if (end > start) pieces.push_back(text.substr(start, end - start));
    start = end;
  }
  return pieces;
}

// What checking one piece of a file found.
struct PieceCheck {
  uint64_t lines = 0;  // every line, blank ones included (for the line numbers after it)
  uint64_t facts = 0;  // lines that are not blank
  std::optional<std::pair<uint64_t, std::string>> error;  // its first bad line (1-based within)
};

// Runs `task(i)` for i in [0, count) on `threads` threads.
void RunParallel(size_t count, int threads, const std::function<void(size_t)>& task) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < count; i = next++) task(i);
  };
  std::vector<std::thread> pool;
  const size_t extra = std::min<size_t>(count, static_cast<size_t>(std::max(threads, 1))) - 1;
  for (size_t t = 0; t < extra; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

// Sorts `v` with `threads` threads: pieces sorted in parallel, then merged.
template <typename T, typename Less>
void ParallelSort(std::vector<T>* v, int threads, Less less) {
  const size_t parts = std::max<size_t>(1, std::min<size_t>(threads, v->size() / 65536 + 1));
  std::vector<size_t> bounds;
  for (size_t p = 0; p <= parts; ++p) bounds.push_back(v->size() * p / parts);
  RunParallel(parts, threads, [&](size_t p) {
    std::sort(v->begin() + bounds[p], v->begin() + bounds[p + 1], less);
  });
  for (size_t width = 1; width < parts; width *= 2) {
    std::vector<size_t> merges;
    for (size_t p = 0; p + width < parts; p += 2 * width) merges.push_back(p);
    RunParallel(merges.size(), threads, [&](size_t m) {
      const size_t p = merges[m];
      std::inplace_merge(v->begin() + bounds[p], v->begin() + bounds[p + width],
                         v->begin() + bounds[std::min(p + 2 * width, parts)], less);
    });
  }
}

// Names to ids for one dictionary, in order of first appearance: a name seen before keeps its
// id, one the store holds takes the stored id (`stored(name)`), a new one the next free id.
// Names are views into the mapped files.
class Numbering {
 public:
  explicit Numbering(uint64_t first_free) : first_free_(first_free) {}

  template <typename Stored>
  uint32_t Id(absl::string_view name, Stored&& stored) {
    if (auto it = ids_.find(name); it != ids_.end()) return it->second;
    uint32_t id;
    if (const std::optional<uint32_t> known = stored(name)) {
      id = *known;
    } else {
      const uint64_t next = first_free_ + added_.size();
      if (next >= kMaxIds) overflow_ = true;
      id = static_cast<uint32_t>(next);
      added_.push_back(name);
    }
    ids_.emplace(name, id);
    return id;
  }
  // The new names, by id from first_free.
  const std::vector<absl::string_view>& added() const { return added_; }
  // Whether more names came than ids fit (ids past it are wrong).
  bool overflow() const { return overflow_; }

 private:
  const uint64_t first_free_;
  absl::flat_hash_map<absl::string_view, uint32_t> ids_;
  std::vector<absl::string_view> added_;
  bool overflow_ = false;
};

// One fact of the load by id, with the index of the chunk (options.chunk_lines lines) that
// brings it first.
struct LoadedFact {
  uint32_t head, relation, tail, chunk;
};
bool ByFact(const LoadedFact& a, const LoadedFact& b) {
  if (a.head != b.head) return a.head < b.head;
  if (a.relation != b.relation) return a.relation < b.relation;
  if (a.tail != b.tail) return a.tail < b.tail;
  return a.chunk < b.chunk;
}

// A table file of one family, written in key order.
class TableFile {
 public:
  TableFile(Family family, std::string path)
      : family_(family),
        path_(std::move(path)),
        writer_(rocksdb::EnvOptions(),
                rocksdb::Options(rocksdb::DBOptions(), FamilyOptions(family))) {}

  void Put(const rocksdb::Slice& key, const rocksdb::Slice& value) {
    if (!Start()) return;
    status_ = writer_.Put(key, value);
    ++entries_;
  }
  void Delete(const rocksdb::Slice& key) {
    if (!Start()) return;
    status_ = writer_.Delete(key);
    ++entries_;
  }
  // Closes the file; OK with nothing written when nothing was put (RocksDB refuses an empty
  // table file, and there is nothing to ingest).
  absl::Status Finish() {
    if (status_.ok() && entries_ > 0) status_ = writer_.Finish();
    return FromRocks(status_, absl::StrCat("writing the table file of ", kFamilyNames[family_]));
  }
  bool empty() const { return entries_ == 0; }
  Family family() const { return family_; }
  const std::string& path() const { return path_; }

 private:
  bool Start() {
    if (!status_.ok()) return false;
    if (!opened_) {
      opened_ = true;
      status_ = writer_.Open(path_);
    }
    return status_.ok();
  }

  const Family family_;
  const std::string path_;
  rocksdb::SstFileWriter writer_;
  rocksdb::Status status_;
  bool opened_ = false;
  uint64_t entries_ = 0;
};

// Names new to the store, in id order, and the table files of the two families that hold
// them: by id (already in order) and by name (sorted here).
absl::Status WriteNames(const std::vector<absl::string_view>& names, uint64_t first_id,
                        TableFile* by_id, TableFile* by_name) {
  for (size_t i = 0; i < names.size(); ++i) {
    by_id->Put(layout::EncodeId(static_cast<uint32_t>(first_id + i)),
               rocksdb::Slice(names[i].data(), names[i].size()));
  }
  std::vector<uint32_t> order(names.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return names[a] < names[b]; });
  for (uint32_t i : order) {
    by_name->Put(rocksdb::Slice(names[i].data(), names[i].size()),
                 layout::EncodeId(static_cast<uint32_t>(first_id + i)));
  }
  if (absl::Status s = by_id->Finish(); !s.ok()) return s;
  return by_name->Finish();
}

}  // namespace

absl::StatusOr<BulkLoadResult> TripleStore::BulkAdd(absl::Span<const std::string> files,
                                                    const BulkLoadOptions& options) {
  if (options.chunk_lines == 0) {
    return absl::InvalidArgumentError("a bulk load's chunk_lines must be at least 1");
  }
  const int threads = std::max(options.threads, 1);
  auto progress = [&](absl::string_view step) {
    if (options.progress) options.progress(step);
  };
  std::lock_guard<std::mutex> lock(write_mu_);
  if (absl::Status writable = Writable(); !writable.ok()) return writable;
  const std::shared_ptr<const GraphSnapshot> base = graph_.Snapshot();
  BulkLoadResult result;

  // 1. Every line checked, in parallel, before anything is numbered or written.
  progress("validating");
  Clock::time_point start = Clock::now();
  std::vector<std::unique_ptr<MappedFile>> mapped;
  for (const std::string& path : files) {
    absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
    if (!file.ok()) return file.status();
    mapped.push_back(*std::move(file));
  }
  struct Piece {
    size_t file;
    absl::string_view text;
    PieceCheck check;
  };
  std::vector<Piece> pieces;
  for (size_t f = 0; f < mapped.size(); ++f) {
    for (absl::string_view text : CutAtLines(mapped[f]->text(), threads)) {
      pieces.push_back({f, text, {}});
    }
  }
  RunParallel(pieces.size(), threads, [&](size_t p) {
    PieceCheck& check = pieces[p].check;
    ForEachLine(pieces[p].text, [&](absl::string_view line) {
      ++check.lines;
      if (check.error.has_value() || IsBlank(line)) return;
      ++check.facts;
      absl::StatusOr<std::array<absl::string_view, 3>> fields = SplitTripleFields(line);
      absl::Status valid =
          fields.ok() ? CheckFact(*fields, /*check_relations=*/true) : fields.status();
      if (!valid.ok()) check.error.emplace(check.lines, std::string(valid.message()));
    });
  });
  {
    uint64_t lines_before = 0;  // in the file of the piece, before it
    for (size_t p = 0; p < pieces.size(); ++p) {
      if (p > 0 && pieces[p].file != pieces[p - 1].file) lines_before = 0;
      const PieceCheck& check = pieces[p].check;
      if (check.error.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(files[pieces[p].file], ":",
                                                       lines_before + check.error->first, ": ",
                                                       check.error->second));
      }
      lines_before += check.lines;
      result.lines += check.facts;
    }
  }
  if (result.lines > kMaxIds) {
    return absl::ResourceExhaustedError(absl::StrCat("a bulk load reads at most ", kMaxIds,
                                                     " facts; this one has ", result.lines,
                                                     ": load the files in several runs"));
  }
  result.validate_seconds = SecondsSince(start);
  if (result.lines == 0) return result;  // no chunk: nothing to number, write or ingest

  // 2. Names to ids in file order, head, relation, tail: AddChunk's order of first appearance.
  progress("numbering");
  start = Clock::now();
  const uint64_t chunks = (result.lines + options.chunk_lines - 1) / options.chunk_lines;
  Numbering entities(base->num_entities()), relations(base->num_relations());
  std::vector<EntityId> revived;
  absl::flat_hash_set<EntityId> revived_set;
  const bool base_has_entities = base->num_entities() > 0;
  auto stored_entity = [&](absl::string_view name) -> std::optional<uint32_t> {
    if (!base_has_entities) return std::nullopt;
    const std::optional<EntityId> id = base->FindEntityIncludingRemoved(name);
    // A removed entity named again comes back with its id.
    if (id.has_value() && base->IsRemoved(*id) && revived_set.insert(*id).second) {
      revived.push_back(*id);
    }
    return id;
  };
  auto stored_relation = [&](absl::string_view name) { return base->FindRelation(name); };
  std::vector<LoadedFact> facts;
  facts.reserve(result.lines);
  uint64_t ordinal = 0;
  for (const std::unique_ptr<MappedFile>& file : mapped) {
    ForEachLine(file->text(), [&](absl::string_view line) {
      if (IsBlank(line)) return;
      const std::array<absl::string_view, 3> fields = *SplitTripleFields(line);
      const uint32_t head = entities.Id(fields[0], stored_entity);
      const uint32_t relation = relations.Id(fields[1], stored_relation);
      const uint32_t tail = entities.Id(fields[2], stored_entity);
      facts.push_back({head, relation, tail, static_cast<uint32_t>(ordinal / options.chunk_lines)});
      ++ordinal;
    });
  }
  if (entities.overflow() || relations.overflow()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the load would exceed the store's capacity of ", kMaxIds, " entities or relations"));
  }
  result.number_seconds = SecondsSince(start);

  // 3. The facts by (head, relation, tail), each kept once, at its first chunk, and only if
  // the store lacks it; then the other two orders, and every family's table file.
  progress("sorting and writing");
  start = Clock::now();
  ParallelSort(&facts, threads, ByFact);
  const bool base_has_facts = base->num_facts() > 0;
  size_t kept = 0;
  for (size_t i = 0; i < facts.size(); ++i) {
    const LoadedFact& f = facts[i];
    if (kept > 0 && facts[kept - 1].head == f.head && facts[kept - 1].relation == f.relation &&
        facts[kept - 1].tail == f.tail) {
      continue;
    }
    if (base_has_facts && base->HasFact(f.head, f.relation, f.tail)) continue;
    facts[kept++] = f;
  }
  facts.resize(kept);
  facts.shrink_to_fit();
  result.facts_added = kept;
  result.duplicate_facts = result.lines - kept;
  result.sort_seconds = SecondsSince(start);
  const uint64_t first_sequence = base->sequence() + 1;
  const uint64_t last_sequence = base->sequence() + chunks;
  const uint64_t num_entities = base->num_entities() + entities.added().size();
  const uint64_t num_relations = base->num_relations() + relations.added().size();
  const uint64_t num_facts = base->num_facts() + kept;

  start = Clock::now();
  const std::string work_dir = options.work_dir.empty()
                                   ? (std::filesystem::path(dir_) / "bulk-load.tmp").string()
                                   : options.work_dir;
  std::error_code error;
  std::filesystem::remove_all(work_dir, error);  // what a crashed load left
  std::filesystem::create_directories(work_dir, error);
  if (error) {
    return absl::InternalError(absl::StrCat("creating ", work_dir, ": ", error.message()));
  }
  struct RemoveWorkDir {
    std::string dir;
    ~RemoveWorkDir() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  } remove_work_dir{work_dir};
  std::vector<std::unique_ptr<TableFile>> tables;
  for (int f = kMetaFamily; f < kNumFamilies; ++f) {
    tables.push_back(std::make_unique<TableFile>(
        static_cast<Family>(f),
        (std::filesystem::path(work_dir) / absl::StrCat(kFamilyNames[f], ".sst")).string()));
  }
  auto table = [&](Family f) { return tables[f - kMetaFamily].get(); };
  std::vector<std::function<absl::Status()>> writes = {
      [&] {
        TableFile* out = table(kFactsOutFamily);
        for (const LoadedFact& f : facts) {
          out->Put(layout::OutFactKey({f.head, f.relation, f.tail}),
                   layout::EncodeCounter(first_sequence + f.chunk));
        }
        return out->Finish();
      },
      [&] {
        // By chunk, then (head, relation, tail): a stable counting sort of the sorted facts.
        std::vector<uint64_t> starts(chunks + 1, 0);
        for (const LoadedFact& f : facts) ++starts[f.chunk + 1];
        for (uint64_t c = 0; c < chunks; ++c) starts[c + 1] += starts[c];
        std::vector<uint32_t> order(facts.size());
        for (uint32_t i = 0; i < facts.size(); ++i) order[starts[facts[i].chunk]++] = i;
        TableFile* out = table(kFactsBySequenceFamily);
        for (uint32_t i : order) {
          const LoadedFact& f = facts[i];
          out->Put(layout::SequencedFactKey(first_sequence + f.chunk, {f.head, f.relation, f.tail}),
                   rocksdb::Slice());
        }
        return out->Finish();
      },
      [&] {
        std::vector<Triple> in_order;
        in_order.reserve(facts.size());
        for (const LoadedFact& f : facts) in_order.push_back({f.head, f.relation, f.tail});
        std::sort(in_order.begin(), in_order.end(), layout::InFactKeyLess);
        TableFile* out = table(kFactsInFamily);
        for (const Triple& t : in_order) out->Put(layout::InFactKey(t), rocksdb::Slice());
        return out->Finish();
      },
      [&] {
        return WriteNames(entities.added(), base->num_entities(), table(kEntityNamesFamily),
                          table(kEntityByNameFamily));
      },
      [&] {
        if (absl::Status s = WriteNames(relations.added(), base->num_relations(),
                                        table(kRelationNamesFamily), table(kRelationByNameFamily));
            !s.ok()) {
          return s;
        }
        std::vector<EntityId> ids = revived;
        std::sort(ids.begin(), ids.end());
        TableFile* removed = table(kRemovedEntitiesFamily);
        for (EntityId e : ids) removed->Delete(layout::EncodeId(e));
        if (absl::Status s = removed->Finish(); !s.ok()) return s;
        TableFile* meta = table(kMetaFamily);  // keys in byte order
        meta->Put(layout::kEntityCountKey, layout::EncodeCounter(num_entities));
        meta->Put(layout::kFactCountKey, layout::EncodeCounter(num_facts));
        meta->Put(layout::kRelationCountKey, layout::EncodeCounter(num_relations));
        meta->Put(layout::kSequenceKey, layout::EncodeCounter(last_sequence));
        return meta->Finish();
      },
  };
  std::vector<absl::Status> written(writes.size());
  RunParallel(writes.size(), threads, [&](size_t w) { written[w] = writes[w](); });
  for (const absl::Status& s : written) {
    if (!s.ok()) return s;
  }
  result.write_seconds = SecondsSince(start);

  // 4. One atomic ingestion, then the index, as Open builds it.
  progress("ingesting");
  start = Clock::now();
  std::vector<rocksdb::IngestExternalFileArg> args;
  for (const std::unique_ptr<TableFile>& t : tables) {
    if (t->empty()) continue;
    rocksdb::IngestExternalFileArg arg;
    arg.column_family = families_[t->family()];
    arg.external_files = {t->path()};
    arg.options.move_files = true;  // hard links: the files are on the store's file system
    args.push_back(std::move(arg));
  }
  if (rocksdb::Status s = db_->IngestExternalFiles(args); !s.ok()) {
    return FromRocks(s, absl::StrCat("ingesting the load into ", dir_));
  }
  GraphDelta delta;
  delta.sequence = last_sequence;
  delta.new_entities.reserve(entities.added().size());
  for (absl::string_view name : entities.added()) delta.new_entities.emplace_back(name);
  for (absl::string_view name : relations.added()) delta.new_relations.emplace_back(name);
  delta.revived_entities = std::move(revived);
  delta.facts.reserve(facts.size());
  for (const LoadedFact& f : facts) delta.facts.push_back({f.head, f.relation, f.tail});
  std::vector<LoadedFact>().swap(facts);
  graph_.Apply(delta);
  if (options_.on_commit) options_.on_commit(last_sequence);
  result.first_sequence = first_sequence;
  result.last_sequence = last_sequence;
  result.entities_created = entities.added().size() + revived_set.size();
  result.relations_created = relations.added().size();
  result.ingest_seconds = SecondsSince(start);
  return result;
}

}  // namespace grail
