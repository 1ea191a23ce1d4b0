// TripleStore::Export against a real RocksDB directory: the facts of one version, in order of
// addition, in pages bounded by count and bytes, only those added after a sequence when
// asked, unchanged by chunks committed while it is read (without keeping the index's replaced
// lists), and the same after a reopen.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/triple_store.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

NamedTriple F(std::string head, std::string relation, std::string tail) {
  return NamedTriple{std::move(head), std::move(relation), std::move(tail)};
}

// "head relation tail @sequence", for readable expectations.
std::string Show(const ExportedFact& f) {
  return absl::StrCat(f.fact.head, " ", f.fact.relation, " ", f.fact.tail, " @", f.sequence);
}

class FactExportTest : public ::testing::Test {
 protected:
  std::unique_ptr<TripleStore> OpenStore() {
    absl::StatusOr<std::unique_ptr<TripleStore>> store =
        TripleStore::Open(temp_.Sub("store"), StoreOptions());
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  void MustAdd(TripleStore* store, const std::vector<NamedTriple>& chunk) {
    absl::StatusOr<ChunkResult> result = store->AddChunk(chunk);
    ASSERT_TRUE(result.ok()) << result.status();
  }

  // Every fact an export of `store` since `since` gives, read `page` at a time; the page
  // sizes in `pages` when given.
  std::vector<std::string> ExportAll(const TripleStore& store, uint64_t since, size_t page = 1000,
                                     std::vector<size_t>* pages = nullptr) {
    absl::StatusOr<std::unique_ptr<FactExport>> exported = store.Export(since);
    EXPECT_TRUE(exported.ok()) << exported.status();
    if (!exported.ok()) return {};
    return ReadAll(**exported, page, pages);
  }

  std::vector<std::string> ReadAll(FactExport& exported, size_t page = 1000,
                                   std::vector<size_t>* pages = nullptr) {
    std::vector<std::string> facts;
    for (;;) {
      absl::StatusOr<std::vector<ExportedFact>> next = exported.Next(page, 1 << 20);
      EXPECT_TRUE(next.ok()) << next.status();
      if (!next.ok() || next->empty()) break;
      if (pages != nullptr) pages->push_back(next->size());
      for (const ExportedFact& f : *next) facts.push_back(Show(f));
    }
    return facts;
  }

  ScopedTempDir temp_;
};

TEST_F(FactExportTest, GivesEveryFactOnceInOrderOfAdditionAndPageByPage) {
  auto store = OpenStore();
  MustAdd(store.get(), {F("b", "r", "c"), F("a", "r", "b")});  // ids: b 0, c 1, a 2
  MustAdd(store.get(), {F("c", "s", "a")});
  MustAdd(store.get(), {F("a", "r", "b"), F("d", "r", "a")});  // a repeat, and one new fact
  std::vector<size_t> pages;
  // Within a chunk, by ids: b r c (0 0 1) before a r b (2 0 0).
  EXPECT_THAT(ExportAll(*store, 0, 2, &pages),
              ElementsAre("b r c @1", "a r b @1", "c s a @2", "d r a @3"));
  EXPECT_THAT(pages, ElementsAre(2, 2));
  absl::StatusOr<std::unique_ptr<FactExport>> exported = store->Export(0);
  ASSERT_TRUE(exported.ok());
  EXPECT_EQ((*exported)->sequence(), 3u);
}

TEST_F(FactExportTest, SinceASequenceGivesOnlyTheFactsOfLaterChunks) {
  auto store = OpenStore();
  MustAdd(store.get(), {F("a", "r", "b")});
  MustAdd(store.get(), {F("b", "r", "c")});
  MustAdd(store.get(), {F("c", "r", "d")});
  EXPECT_THAT(ExportAll(*store, 1), ElementsAre("b r c @2", "c r d @3"));
  EXPECT_THAT(ExportAll(*store, 2), ElementsAre("c r d @3"));
  EXPECT_THAT(ExportAll(*store, 3), IsEmpty());
  absl::StatusOr<std::unique_ptr<FactExport>> ahead = store->Export(4);
  EXPECT_EQ(ahead.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(ahead.status().message(), HasSubstr("at sequence 3"));
}

TEST_F(FactExportTest, SeesItsVersionWhateverIsCommittedWhileItIsRead) {
  auto store = OpenStore();
  MustAdd(store.get(), {F("a", "r", "b"), F("b", "r", "c")});
  MustAdd(store.get(), {F("c", "r", "a")});
  absl::StatusOr<std::unique_ptr<FactExport>> exported = store->Export(0);
  ASSERT_TRUE(exported.ok());
  absl::StatusOr<std::vector<ExportedFact>> first = (*exported)->Next(1, 1 << 20);
  ASSERT_TRUE(first.ok());
  ASSERT_THAT(*first, SizeIs(1));

  // Meanwhile: a fact removed, a fact added, and a removed fact added again.
  const std::vector<NamedTriple> removed = {F("b", "r", "c"), F("a", "r", "b")};
  ASSERT_TRUE(store->RemoveChunk(removed).ok());
  MustAdd(store.get(), {F("d", "r", "a"), F("a", "r", "b")});
  // The export names ids without reading the adjacency, so it keeps none of the lists those
  // chunks replaced (an export of a large graph may run for minutes during a stream).
  EXPECT_EQ(store->retained_index_bytes(), 0u);

  std::vector<std::string> facts = {Show((*first)[0])};
  for (const std::string& f : ReadAll(**exported)) facts.push_back(f);
  EXPECT_THAT(facts, ElementsAre("a r b @1", "b r c @1", "c r a @2"));
  EXPECT_EQ((*exported)->sequence(), 2u);
  exported->reset();

  // A new export sees the new version; the fact added again counts from its new chunk.
  EXPECT_THAT(ExportAll(*store, 0), ElementsAre("c r a @2", "a r b @4", "d r a @4"));
  EXPECT_TRUE(store->CheckConsistency().ok());
}

TEST_F(FactExportTest, ARemovedEntityOrRelationTakesItsFactsOutOfTheExport) {
  auto store = OpenStore();
  MustAdd(store.get(), {F("a", "r", "b"), F("b", "s", "c"), F("c", "r", "d"), F("d", "t", "e")});
  const std::vector<std::string> entities = {"b"};
  const std::vector<std::string> relations = {"t"};
  ASSERT_TRUE(store->RemoveChunk({}, entities, relations).ok());
  EXPECT_THAT(ExportAll(*store, 0), ElementsAre("c r d @1"));
  EXPECT_TRUE(store->CheckConsistency().ok());
}

TEST_F(FactExportTest, APageHoldsAtMostItsBytesOfNamesButAlwaysOneFact) {
  auto store = OpenStore();
  const std::string long_name(300, 'x');
  MustAdd(store.get(), {F(long_name + "1", "r", "a"), F(long_name + "2", "r", "a"),
                        F(long_name + "3", "r", "a"), F("a", "r", "b")});
  absl::StatusOr<std::unique_ptr<FactExport>> exported = store->Export(0);
  ASSERT_TRUE(exported.ok());
  std::vector<size_t> pages;
  for (;;) {
    // Each long fact has 303 bytes of names: two do not fit in 400, one always goes.
    absl::StatusOr<std::vector<ExportedFact>> page = (*exported)->Next(100, 400);
    ASSERT_TRUE(page.ok());
    if (page->empty()) break;
    pages.push_back(page->size());
  }
  // By ids: x1 (0) r a (1), then a r b (3 bytes: fits beside it), x2, x3.
  EXPECT_THAT(pages, ElementsAre(2, 1, 1));
}

TEST_F(FactExportTest, SequencesSurviveAReopen) {
  {
    auto store = OpenStore();
    MustAdd(store.get(), {F("a", "r", "b")});
    MustAdd(store.get(), {F("b", "r", "c")});
  }
  auto store = OpenStore();
  EXPECT_THAT(ExportAll(*store, 0), ElementsAre("a r b @1", "b r c @2"));
  EXPECT_THAT(ExportAll(*store, 1), ElementsAre("b r c @2"));
  EXPECT_TRUE(store->CheckConsistency().ok());
}

}  // namespace
}  // namespace grail
