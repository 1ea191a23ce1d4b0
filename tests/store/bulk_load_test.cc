// TripleStore::BulkAdd against real RocksDB directories: a load builds, byte for byte, the
// store that AddChunk calls of the same lines build (new or existing, removed entities named
// again included), its index answers like a reopened store's, and a bad line, a missing file
// or a relation outside the allowed vocabulary fails the load naming it, with nothing written.
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/store_layout.h"
#include "store/triple_store.h"
#include "tests/testing/raw_store.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::HasSubstr;

// Writes `lines` to `path`, each ended by `\n` (the line carries its own `\r` when wanted).
void WriteLines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (const std::string& line : lines) out << line << '\n';
}

// A random graph's lines: repeats, blank lines and CRLF endings among them.
std::vector<std::string> RandomLines(uint32_t seed, size_t count, size_t entities) {
  std::mt19937 rng(seed);
  std::vector<std::string> lines;
  for (size_t i = 0; i < count; ++i) {
    if (rng() % 53 == 0) lines.push_back(rng() % 2 == 0 ? "" : "\r");
    const std::string line = absl::StrCat("e", rng() % entities, "\tr", rng() % 7, "\te",
                                          rng() % entities, rng() % 29 == 0 ? "\r" : "");
    lines.push_back(line);
    if (rng() % 17 == 0) lines.push_back(line);  // the same fact again
  }
  return lines;
}

// What grail-client add would send: the lines that are not blank, `chunk` at a time.
std::vector<std::vector<NamedTriple>> Chunks(const std::vector<std::vector<std::string>>& files,
                                             size_t chunk) {
  std::vector<std::vector<NamedTriple>> chunks(1);
  for (const std::vector<std::string>& lines : files) {
    for (const std::string& line : lines) {
      if (line.empty() || line == "\r") continue;
      absl::StatusOr<NamedTriple> fact = ParseTripleLine(line);
      EXPECT_TRUE(fact.ok()) << fact.status();
      if (chunks.back().size() == chunk) chunks.emplace_back();
      chunks.back().push_back(*fact);
    }
  }
  if (chunks.back().empty()) chunks.pop_back();
  return chunks;
}

class BulkLoadTest : public ::testing::Test {
 protected:
  std::unique_ptr<TripleStore> Open(const std::string& name,
                                    const StoreOptions& options = StoreOptions()) {
    absl::StatusOr<std::unique_ptr<TripleStore>> store =
        TripleStore::Open(temp_.Sub(name), options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // Writes each file's lines into the temporary directory; their paths.
  std::vector<std::string> Files(const std::vector<std::vector<std::string>>& files) {
    std::vector<std::string> paths;
    for (size_t f = 0; f < files.size(); ++f) {
      paths.push_back(temp_.Sub(absl::StrCat("facts", f, ".tsv")));
      WriteLines(paths.back(), files[f]);
    }
    return paths;
  }

  // Every family of the two closed stores holds the same keys and values.
  void ExpectSameBytes(const std::string& a, const std::string& b) {
    RawStore raw_a(temp_.Sub(a)), raw_b(temp_.Sub(b));
    for (const char* family :
         {store_layout::kMeta, store_layout::kEntityByName, store_layout::kEntityNames,
          store_layout::kRelationByName, store_layout::kRelationNames, store_layout::kFactsOut,
          store_layout::kFactsIn, store_layout::kRemovedEntities, store_layout::kFactsBySequence}) {
      EXPECT_EQ(raw_a.Entries(family), raw_b.Entries(family)) << family;
    }
  }

  // The two stores' latest versions answer alike: names, removals, every adjacency.
  void ExpectSameGraph(const TripleStore& a, const TripleStore& b) {
    const std::shared_ptr<const GraphSnapshot> x = a.Snapshot(), y = b.Snapshot();
    ASSERT_EQ(x->num_entities(), y->num_entities());
    ASSERT_EQ(x->num_relations(), y->num_relations());
    EXPECT_EQ(x->num_facts(), y->num_facts());
    EXPECT_EQ(x->sequence(), y->sequence());
    EXPECT_EQ(x->relation_names(), y->relation_names());
    for (EntityId e = 0; e < x->num_entities(); ++e) {
      ASSERT_EQ(x->EntityName(e), y->EntityName(e)) << e;
      EXPECT_EQ(x->IsRemoved(e), y->IsRemoved(e)) << e;
      const absl::Span<const Neighbor> out_x = x->OutEdges(e), out_y = y->OutEdges(e);
      const absl::Span<const Neighbor> in_x = x->InEdges(e), in_y = y->InEdges(e);
      EXPECT_TRUE(std::equal(out_x.begin(), out_x.end(), out_y.begin(), out_y.end())) << e;
      EXPECT_TRUE(std::equal(in_x.begin(), in_x.end(), in_y.begin(), in_y.end())) << e;
    }
  }

  ScopedTempDir temp_;
};

TEST_F(BulkLoadTest, ALoadBuildsTheStoreItsChunksWouldBuild) {
  const std::vector<std::vector<std::string>> files = {RandomLines(1, 1500, 400),
                                                       RandomLines(2, 700, 600)};
  const std::vector<std::string> paths = Files(files);
  constexpr size_t kChunk = 97;  // chunks that straddle the two files
  {
    std::unique_ptr<TripleStore> loaded = Open("loaded");
    std::unique_ptr<TripleStore> streamed = Open("streamed");
    BulkLoadOptions options;
    options.chunk_lines = kChunk;
    options.threads = 3;  // each file cut in three, so lines are checked across the cuts
    absl::StatusOr<BulkLoadResult> result = loaded->BulkAdd(paths, options);
    ASSERT_TRUE(result.ok()) << result.status();
    uint64_t added = 0, duplicates = 0, entities = 0, relations = 0, lines = 0;
    for (const std::vector<NamedTriple>& chunk : Chunks(files, kChunk)) {
      absl::StatusOr<ChunkResult> r = streamed->AddChunk(chunk);
      ASSERT_TRUE(r.ok()) << r.status();
      added += r->facts_added;
      duplicates += r->duplicate_facts;
      entities += r->entities_created;
      relations += r->relations_created;
      lines += chunk.size();
    }
    EXPECT_EQ(result->lines, lines);
    EXPECT_EQ(result->facts_added, added);
    EXPECT_GT(result->duplicate_facts, 0u);
    EXPECT_EQ(result->duplicate_facts, duplicates);
    EXPECT_EQ(result->entities_created, entities);
    EXPECT_EQ(result->relations_created, relations);
    EXPECT_EQ(result->first_sequence, 1u);
    EXPECT_EQ(result->last_sequence, streamed->Snapshot()->sequence());
    ExpectSameGraph(*loaded, *streamed);
    EXPECT_TRUE(loaded->CheckConsistency().ok()) << loaded->CheckConsistency();
    EXPECT_FALSE(std::filesystem::exists(temp_.Sub("loaded/bulk-load.tmp")));
  }
  ExpectSameBytes("loaded", "streamed");
  std::unique_ptr<TripleStore> reopened = Open("loaded");
  std::unique_ptr<TripleStore> streamed = Open("streamed");
  ExpectSameGraph(*reopened, *streamed);
  // And it keeps taking chunks as any store does.
  const std::vector<NamedTriple> more = {{"e1", "r1", "new"}, {"e1", "r9", "e2"}};
  absl::StatusOr<ChunkResult> a = reopened->AddChunk(more);
  absl::StatusOr<ChunkResult> b = streamed->AddChunk(more);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->sequence, b->sequence);
  ExpectSameGraph(*reopened, *streamed);
}

TEST_F(BulkLoadTest, ALoadIntoAStoreThatHoldsAGraphContinuesItLikeItsChunks) {
  const std::vector<NamedTriple> first = {
      {"e1", "r0", "e2"}, {"e2", "r1", "e3"}, {"e5", "r0", "e1"}, {"e7", "r2", "e5"}};
  std::vector<std::vector<std::string>> files = {RandomLines(3, 900, 60)};
  files[0].insert(files[0].begin() + 400, "e2\tr1\te3");  // stored already: not added again
  const std::vector<std::string> paths = Files(files);
  {
    std::unique_ptr<TripleStore> loaded = Open("loaded");
    std::unique_ptr<TripleStore> streamed = Open("streamed");
    for (TripleStore* store : {loaded.get(), streamed.get()}) {
      ASSERT_TRUE(store->AddChunk(first).ok());
      // e5 removed by name: the load names it again and brings it back with its id.
      ASSERT_TRUE(store->RemoveChunk({{"e1", "r0", "e2"}}, {"e5"}).ok());
    }
    BulkLoadOptions options;
    options.chunk_lines = 250;
    absl::StatusOr<BulkLoadResult> result = loaded->BulkAdd(paths, options);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->first_sequence, 3u);
    for (const std::vector<NamedTriple>& chunk : Chunks(files, options.chunk_lines)) {
      ASSERT_TRUE(streamed->AddChunk(chunk).ok());
    }
    EXPECT_EQ(result->last_sequence, streamed->Snapshot()->sequence());
    ASSERT_TRUE(loaded->Snapshot()->FindEntity("e5").has_value());
    ExpectSameGraph(*loaded, *streamed);
    EXPECT_TRUE(loaded->CheckConsistency().ok()) << loaded->CheckConsistency();
  }
  ExpectSameBytes("loaded", "streamed");
}

TEST_F(BulkLoadTest, ABadLineFailsTheLoadNamingItsFileAndLineAndWritesNothing) {
  std::vector<std::string> lines = RandomLines(4, 600, 100);
  const size_t bad = lines.size() * 3 / 4;  // past the cut: its number counts earlier pieces
  lines[bad] = "a\tb";
  const std::vector<std::string> paths = Files({RandomLines(5, 50, 20), lines});
  std::unique_ptr<TripleStore> store = Open("store");
  ASSERT_TRUE(store->AddChunk({{"x", "r", "y"}}).ok());
  BulkLoadOptions options;
  options.threads = 2;
  absl::StatusOr<BulkLoadResult> result = store->BulkAdd(paths, options);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              HasSubstr(absl::StrCat(paths[1], ":", bad + 1, ": expected 3 tab-separated")));
  // A name AddChunk would refuse, too.
  WriteLines(paths[1], {"a\tb\tc", std::string(2000, 'n') + "\tr\tc"});
  result = store->BulkAdd(paths, options);
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr(absl::StrCat(paths[1], ":2: head name is")));
  EXPECT_EQ(store->Snapshot()->sequence(), 1u);
  EXPECT_EQ(store->Snapshot()->num_facts(), 1u);
  store.reset();
  store = Open("store");
  EXPECT_EQ(store->Snapshot()->sequence(), 1u);
  EXPECT_EQ(store->Snapshot()->num_entities(), 2u);
}

TEST_F(BulkLoadTest, AMissingFileFailsTheLoadBeforeAnyIsRead) {
  const std::vector<std::string> paths = {Files({{"a\tr\tb"}})[0], temp_.Sub("absent.tsv")};
  std::unique_ptr<TripleStore> store = Open("store");
  absl::StatusOr<BulkLoadResult> result = store->BulkAdd(paths, BulkLoadOptions());
  ASSERT_EQ(result.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(result.status().message(), HasSubstr("absent.tsv"));
  EXPECT_EQ(store->Snapshot()->num_facts(), 0u);
}

TEST_F(BulkLoadTest, ARelationOutsideTheAllowedVocabularyFailsTheLoad) {
  StoreOptions options;
  options.allowed_relations = std::vector<std::string>{"r0", "r1"};
  std::unique_ptr<TripleStore> store = Open("store", options);
  const std::vector<std::string> paths = Files({{"a\tr0\tb", "b\tr1\tc", "c\tr2\td"}});
  absl::StatusOr<BulkLoadResult> result = store->BulkAdd(paths, BulkLoadOptions());
  ASSERT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(),
              HasSubstr(absl::StrCat(paths[0], ":3: relation \"r2\" is not in the allowed")));
  EXPECT_EQ(store->Snapshot()->num_facts(), 0u);
}

TEST_F(BulkLoadTest, EmptyFilesLoadNothingAndTakeNoSequence) {
  std::unique_ptr<TripleStore> store = Open("store");
  absl::StatusOr<BulkLoadResult> result =
      store->BulkAdd(Files({{}, {"", "\r"}}), BulkLoadOptions());
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->lines, 0u);
  EXPECT_EQ(store->Snapshot()->sequence(), 0u);
}

}  // namespace
}  // namespace grail
