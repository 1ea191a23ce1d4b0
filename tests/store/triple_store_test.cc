// The live triple store against a real RocksDB directory: validation and atomicity of
// chunks, ids, reopen, the on-disk layout, snapshots and concurrent readers.
#include "store/triple_store.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "store/store_layout.h"
#include "tests/testing/full_disk.h"
#include "tests/testing/raw_store.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wal_damage.h"

namespace grail {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;
using ::testing::StartsWith;

using NamedFact = std::array<std::string, 3>;

NamedTriple F(std::string head, std::string relation, std::string tail) {
  return NamedTriple{std::move(head), std::move(relation), std::move(tail)};
}

// Every fact of `graph`, by name, sorted.
std::vector<NamedFact> FactsByName(const GraphSnapshot& graph) {
  std::vector<NamedFact> facts;
  for (EntityId h = 0; h < graph.num_entities(); ++h) {
    for (const Neighbor& n : graph.OutEdges(h)) {
      facts.push_back(
          {graph.EntityName(h), graph.RelationName(n.relation), graph.EntityName(n.entity)});
    }
  }
  std::sort(facts.begin(), facts.end());
  return facts;
}

std::vector<std::string> EntityNames(const GraphSnapshot& graph) {
  std::vector<std::string> names;
  for (EntityId e = 0; e < graph.num_entities(); ++e) names.push_back(graph.EntityName(e));
  return names;
}

class TripleStoreTest : public ::testing::Test {
 protected:
  std::string store_dir() const { return temp_.Sub("store"); }

  std::unique_ptr<TripleStore> OpenStore(const StoreOptions& options = StoreOptions()) {
    absl::StatusOr<std::unique_ptr<TripleStore>> store = TripleStore::Open(store_dir(), options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  ChunkResult MustAdd(TripleStore* store, const std::vector<NamedTriple>& chunk) {
    absl::StatusOr<ChunkResult> result = store->AddChunk(chunk);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : ChunkResult();
  }

  ScopedTempDir temp_;
};

TEST_F(TripleStoreTest, OpenCreatesAnEmptyStore) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  auto graph = store->Snapshot();
  EXPECT_EQ(graph->num_entities(), 0u);
  EXPECT_EQ(graph->num_relations(), 0u);
  EXPECT_EQ(graph->num_facts(), 0u);
  EXPECT_EQ(graph->sequence(), 0u);
  EXPECT_TRUE(store->CheckConsistency().ok());
}

TEST_F(TripleStoreTest, IdsFollowFirstAppearanceHeadThenRelationThenTail) {
  auto store = OpenStore();
  ChunkResult result = MustAdd(store.get(), {F("a", "r", "b"), F("c", "s", "a"), F("b", "r", "d")});
  EXPECT_EQ(result.sequence, 1u);
  EXPECT_EQ(result.facts_added, 3u);
  EXPECT_EQ(result.entities_created, 4u);
  EXPECT_EQ(result.relations_created, 2u);
  auto graph = store->Snapshot();
  EXPECT_THAT(EntityNames(*graph), ElementsAre("a", "b", "c", "d"));
  EXPECT_THAT(graph->relation_names(), ElementsAre("r", "s"));
  EXPECT_EQ(graph->FindEntity("c"), 2u);
  EXPECT_EQ(graph->FindRelation("s"), 1u);
  EXPECT_TRUE(graph->HasFact(2, 1, 0));
}

TEST_F(TripleStoreTest, RepeatsWithinAChunkAndStoredFactsCountAsDuplicates) {
  auto store = OpenStore();
  MustAdd(store.get(), {F("a", "r", "b")});
  ChunkResult result = MustAdd(
      store.get(), {F("a", "r", "b"), F("b", "r", "a"), F("b", "r", "a"), F("a", "s", "b")});
  EXPECT_EQ(result.sequence, 2u);
  EXPECT_EQ(result.facts_added, 2u);
  EXPECT_EQ(result.duplicate_facts, 2u);
  EXPECT_EQ(result.entities_created, 0u);
  EXPECT_EQ(result.relations_created, 1u);
  EXPECT_EQ(store->Snapshot()->num_facts(), 3u);
  EXPECT_TRUE(store->CheckConsistency().ok());
}

TEST_F(TripleStoreTest, EmptyChunkCommitsAndTakesASequenceNumber) {
  auto store = OpenStore();
  EXPECT_EQ(MustAdd(store.get(), {}).sequence, 1u);
  EXPECT_EQ(MustAdd(store.get(), {F("a", "r", "b")}).sequence, 2u);
  EXPECT_EQ(MustAdd(store.get(), {}).sequence, 3u);
  store.reset();
  EXPECT_EQ(OpenStore()->Snapshot()->sequence(), 3u);
}

// A replica's store takes its log's sequence numbers, which may skip (an entry it skips).
TEST_F(TripleStoreTest, AChunkTakesTheSequenceItIsGivenAndKeepsItAcrossReopen) {
  std::vector<uint64_t> committed;
  StoreOptions options;
  options.on_commit = [&committed](uint64_t sequence) { committed.push_back(sequence); };
  auto store = OpenStore(options);
  EXPECT_EQ(store->AddChunk({F("a", "r", "b")}, 4)->sequence, 4u);
  EXPECT_EQ(store->RemoveChunk({F("a", "r", "b")}, {}, {}, 9)->sequence, 9u);
  EXPECT_EQ(MustAdd(store.get(), {F("c", "r", "d")}).sequence, 10u);  // 0: the next one
  EXPECT_THAT(committed, ElementsAre(4u, 9u, 10u));
  EXPECT_TRUE(store->CheckConsistency().ok());
  store.reset();
  auto reopened = OpenStore();
  EXPECT_EQ(reopened->Snapshot()->sequence(), 10u);
  EXPECT_THAT(FactsByName(*reopened->Snapshot()), ElementsAre(NamedFact{"c", "r", "d"}));
}

TEST_F(TripleStoreTest, AChunkWhoseSequenceIsAlreadyTakenIsRefusedAndStoresNothing) {
  auto store = OpenStore();
  ASSERT_TRUE(store->AddChunk({F("a", "r", "b")}, 5).ok());
  for (uint64_t sequence : {uint64_t{5}, uint64_t{3}}) {
    absl::StatusOr<ChunkResult> again = store->AddChunk({F("x", "r", "y")}, sequence);
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(again.status().message()), HasSubstr("already applied"));
    absl::StatusOr<ChunkResult> removal = store->RemoveChunk({F("a", "r", "b")}, {}, {}, sequence);
    EXPECT_EQ(removal.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(store->AdvanceSequence(sequence).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(store->Snapshot()->sequence(), 5u);
  EXPECT_THAT(FactsByName(*store->Snapshot()), ElementsAre(NamedFact{"a", "r", "b"}));
}

TEST_F(TripleStoreTest, AdvanceSequenceMovesTheSequenceDurablyWithoutChangingTheGraph) {
  auto store = OpenStore();
  MustAdd(store.get(), {F("a", "r", "b")});
  const auto before = store->Snapshot();
  EXPECT_EQ(store->AdvanceSequence(7)->sequence, 7u);
  const auto after = store->Snapshot();
  EXPECT_EQ(after->sequence(), 7u);
  EXPECT_EQ(FactsByName(*after), FactsByName(*before));
  EXPECT_EQ(after->num_entities(), before->num_entities());
  EXPECT_TRUE(store->CheckConsistency().ok());
  store.reset();
  EXPECT_EQ(OpenStore()->Snapshot()->sequence(), 7u);
}

TEST_F(TripleStoreTest, CheckChunkRefusesWhatTheWritersWouldAndWritesNothing) {
  StoreOptions options;
  options.allowed_relations = std::vector<std::string>{"r"};
  auto store = OpenStore(options);
  EXPECT_TRUE(store->CheckChunk({F("a", "r", "b")}, {}, {}, /*adding=*/true).ok());
  const absl::Status relation =
      store->CheckChunk({F("a", "r", "b"), F("a", "s", "b")}, {}, {}, true);
  EXPECT_EQ(RejectedFactIndex(relation), 1u);
  EXPECT_THAT(std::string(relation.message()), HasSubstr("allowed vocabulary"));
  // A removal names relations it does not check, but names it does.
  EXPECT_TRUE(store->CheckChunk({F("a", "s", "b")}, {}, {}, /*adding=*/false).ok());
  EXPECT_EQ(RejectedFactIndex(store->CheckChunk({F("a", "", "b")}, {}, {}, false)), 0u);
  const absl::Status entity = store->CheckChunk({}, {"ok", "bad\tname"}, {}, false);
  EXPECT_EQ(entity.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(entity.message()), StartsWith("entities[1]: "));
  EXPECT_EQ(store->Snapshot()->sequence(), 0u);
  EXPECT_EQ(store->Snapshot()->num_entities(), 0u);
}

TEST_F(TripleStoreTest, ACheckpointOpensAsTheGraphOfItsSequence) {
  auto store = OpenStore();
  MustAdd(store.get(), {F("a", "r", "b"), F("b", "s", "c")});
  ASSERT_TRUE(store->RemoveChunk({F("a", "r", "b")}, {}).ok());
  const std::string copy = temp_.Sub("checkpoint");
  absl::StatusOr<uint64_t> sequence = store->CreateCheckpoint(copy);
  ASSERT_TRUE(sequence.ok()) << sequence.status();
  EXPECT_EQ(*sequence, 2u);
  const std::vector<NamedFact> at_checkpoint = FactsByName(*store->Snapshot());
  MustAdd(store.get(), {F("x", "r", "y")});  // after the checkpoint: not in it
  const absl::Status exists = store->CreateCheckpoint(copy).status();
  EXPECT_EQ(exists.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(exists.message()), HasSubstr("exists"));

  absl::StatusOr<std::unique_ptr<TripleStore>> opened = TripleStore::Open(copy, StoreOptions());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->Snapshot()->sequence(), 2u);
  EXPECT_EQ(FactsByName(*(*opened)->Snapshot()), at_checkpoint);
  EXPECT_EQ(EntityNames(*(*opened)->Snapshot()), std::vector<std::string>({"a", "b", "c"}));
  EXPECT_TRUE((*opened)->CheckConsistency().ok());
}

// A checkpoint path the caller got wrong is said to be wrong (it was INTERNAL, from RocksDB,
// and a NUL byte was echoed back raw), and nothing is written.
TEST_F(TripleStoreTest, ACheckpointPathTheCallerGotWrongIsRefusedAsSuch) {
  auto store = OpenStore();
  MustAdd(store.get(), {F("a", "r", "b")});
  const struct {
    std::string dir;
    absl::StatusCode code;
    std::string says;
  } cases[] = {
      {"relative/dir", absl::StatusCode::kInvalidArgument, "is not an absolute path"},
      {temp_.Sub(std::string("nul\0byte", 8)), absl::StatusCode::kInvalidArgument,
       "\" holds a NUL byte"},
      {temp_.Sub("missing/child"), absl::StatusCode::kFailedPrecondition,
       "is not an existing directory"},
      // The parent named is the parent, whatever trails the name.
      {temp_.Sub("missing/child/"), absl::StatusCode::kFailedPrecondition,
       absl::StrCat(", ", temp_.Sub("missing"), ", is not an existing directory")},
      {temp_.Sub("missing/child/."), absl::StatusCode::kFailedPrecondition,
       absl::StrCat(", ", temp_.Sub("missing"), ", is not an existing directory")},
      {"/proc/grail-checkpoint", absl::StatusCode::kFailedPrecondition,
       "the server cannot create /proc/grail-checkpoint: "},
  };
  for (const auto& c : cases) {
    const absl::Status status = store->CreateCheckpoint(c.dir).status();
    EXPECT_EQ(status.code(), c.code) << c.dir << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.says));
    EXPECT_EQ(std::string(status.message()).find('\0'), std::string::npos);
  }
  EXPECT_FALSE(std::filesystem::exists(temp_.Sub("missing")));

  // A trailing separator names the same new directory, and the copy is written there.
  const absl::StatusOr<uint64_t> written = store->CreateCheckpoint(temp_.Sub("trail/"));
  ASSERT_TRUE(written.ok()) << written.status();
  store.reset();
  auto copy = TripleStore::Open(temp_.Sub("trail"), StoreOptions());
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ((*copy)->Snapshot()->num_facts(), 1u);
}

// Expects `chunk` to be rejected naming fact `index`, and the store to be unchanged.
void ExpectRejectedWhole(TripleStore* store, const std::vector<NamedTriple>& chunk, size_t index,
                         const std::string& reason) {
  auto before = store->Snapshot();
  absl::StatusOr<ChunkResult> result = store->AddChunk(chunk);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(result.status().message()),
              StartsWith(absl::StrCat("fact ", index, ": ")));
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(reason));
  EXPECT_EQ(RejectedFactIndex(result.status()), index);
  auto after = store->Snapshot();
  EXPECT_EQ(after->sequence(), before->sequence());
  EXPECT_EQ(after->num_entities(), before->num_entities());
  EXPECT_EQ(after->num_relations(), before->num_relations());
  EXPECT_EQ(after->num_facts(), before->num_facts());
}

TEST_F(TripleStoreTest, ChunkWithAnEmptyNameIsRejectedWhole) {
  auto store = OpenStore();
  const std::vector<NamedTriple> good = {F("x", "r", "y"), F("y", "r", "z")};
  for (const auto& [bad, role] :
       {std::pair{F("", "r", "y"), "head"}, std::pair{F("x", "", "y"), "relation"},
        std::pair{F("x", "r", ""), "tail"}}) {
    std::vector<NamedTriple> chunk = good;
    chunk.push_back(bad);
    ExpectRejectedWhole(store.get(), chunk, 2, absl::StrCat(role, " name is empty"));
  }
  EXPECT_EQ(store->Snapshot()->FindEntity("x"), std::nullopt);
}

TEST_F(TripleStoreTest, ChunkWithAnOversizeNameIsRejectedWhole) {
  StoreOptions options;
  options.max_name_bytes = 8;
  auto store = OpenStore(options);
  ExpectRejectedWhole(store.get(), {F("12345678", "r", "b"), F("a", "r", "123456789")}, 1,
                      "tail name is 9 bytes; the limit is 8");
  ExpectRejectedWhole(store.get(), {F("a", "123456789", "b")}, 0, "relation name is 9 bytes");
  EXPECT_EQ(MustAdd(store.get(), {F("12345678", "r", "b")}).facts_added, 1u);
}

TEST_F(TripleStoreTest, ChunkWithATabCarriageReturnOrLineFeedInANameIsRejectedWhole) {
  auto store = OpenStore();
  ExpectRejectedWhole(store.get(), {F("a", "r", "b"), F("a\tb", "r", "c")}, 1,
                      "head name contains a TAB at byte 1");
  ExpectRejectedWhole(store.get(), {F("a", "r\r", "b")}, 0,
                      "relation name contains a carriage return");
  ExpectRejectedWhole(store.get(), {F("a", "r", "b"), F("a", "r", "c"), F("a", "r", "\nb")}, 2,
                      "tail name contains a line feed at byte 0");
  // Other bytes are opaque: spaces, UTF-8, NUL.
  EXPECT_EQ(MustAdd(store.get(), {F("a b", "ré", std::string("c\0d", 3))}).facts_added, 1u);
  EXPECT_EQ(store->Snapshot()->FindEntity(std::string("c\0d", 3)), 1u);
}

TEST_F(TripleStoreTest, ChunkOverTheFactLimitIsRejectedWhole) {
  StoreOptions options;
  options.max_chunk_facts = 3;
  auto store = OpenStore(options);
  ExpectRejectedWhole(store.get(),
                      {F("a", "r", "b"), F("b", "r", "c"), F("c", "r", "d"), F("d", "r", "e")}, 3,
                      "the chunk has 4 facts; at most 3");
  EXPECT_EQ(
      MustAdd(store.get(), {F("a", "r", "b"), F("b", "r", "c"), F("c", "r", "d")}).facts_added, 3u);
}

TEST_F(TripleStoreTest, ChunkWithARelationOutsideTheAllowedVocabularyIsRejectedWhole) {
  StoreOptions options;
  options.allowed_relations = std::vector<std::string>{"_hypernym", "_has_part"};
  auto store = OpenStore(options);
  ExpectRejectedWhole(store.get(), {F("a", "_hypernym", "b"), F("a", "_invented", "b")}, 1,
                      "relation \"_invented\" is not in the allowed vocabulary");
  EXPECT_EQ(MustAdd(store.get(), {F("a", "_has_part", "b")}).relations_created, 1u);
  // Ids follow first appearance in the data, not the allowed list's order.
  EXPECT_EQ(store->Snapshot()->FindRelation("_has_part"), 0u);
}

TEST_F(TripleStoreTest, RejectedChunkStoresNothingAndEarlierChunksStayIntact) {
  auto store = OpenStore();
  MustAdd(store.get(), {F("a", "r", "b")});
  // Valid facts with new entities and a new relation before the bad one at position 5.
  std::vector<NamedTriple> chunk = {F("a", "r", "c"), F("c", "s", "d"), F("d", "s", "e"),
                                    F("e", "s", "f"), F("f", "s", "g"), F("g", "s", "")};
  ExpectRejectedWhole(store.get(), chunk, 5, "tail name is empty");
  store.reset();

  // Nothing of it reached the disk either, and the next chunk's ids continue densely.
  store = OpenStore();
  auto graph = store->Snapshot();
  EXPECT_EQ(graph->sequence(), 1u);
  EXPECT_THAT(EntityNames(*graph), ElementsAre("a", "b"));
  EXPECT_THAT(graph->relation_names(), ElementsAre("r"));
  EXPECT_THAT(FactsByName(*graph), ElementsAre(NamedFact{"a", "r", "b"}));
  ChunkResult next = MustAdd(store.get(), {F("c", "s", "a")});
  EXPECT_EQ(next.sequence, 2u);
  EXPECT_EQ(store->Snapshot()->FindEntity("c"), 2u);
  EXPECT_EQ(store->Snapshot()->FindRelation("s"), 1u);
  EXPECT_TRUE(store->CheckConsistency().ok());
}

TEST_F(TripleStoreTest, RemovedFactsAreGoneFromLaterSnapshotsAndAfterReopen) {
  auto store = OpenStore();
  MustAdd(store.get(), {F("a", "r", "b"), F("b", "r", "c"), F("c", "s", "a"), F("a", "s", "a")});
  auto before = store->Snapshot();
  absl::StatusOr<ChunkResult> removed =
      store->RemoveChunk({F("a", "r", "b"), F("a", "s", "a"), F("a", "r", "b"), F("x", "r", "b"),
                          F("a", "q", "b"), F("b", "s", "c")});
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->sequence, 2u);
  EXPECT_EQ(removed->facts_removed, 2u);
  // A repeat, an unknown entity, an unknown relation and a fact that is not stored.
  EXPECT_EQ(removed->facts_not_present, 4u);
  EXPECT_EQ(removed->facts_added, 0u);

  auto after = store->Snapshot();
  EXPECT_EQ(after->sequence(), 2u);
  EXPECT_EQ(after->num_facts(), 2u);
  EXPECT_THAT(FactsByName(*after), ElementsAre(NamedFact{"b", "r", "c"}, NamedFact{"c", "s", "a"}));
  EXPECT_THAT(after->SelfLoopEntities(), IsEmpty());
  // The snapshot taken before still sees every fact.
  EXPECT_EQ(before->num_facts(), 4u);
  EXPECT_TRUE(before->HasFact(0, 0, 1));
  EXPECT_THAT(before->SelfLoopEntities(), ElementsAre(0u));
  EXPECT_TRUE(store->CheckConsistency().ok());

  store.reset();
  store = OpenStore();
  auto reopened = store->Snapshot();
  EXPECT_EQ(reopened->sequence(), 2u);
  EXPECT_THAT(FactsByName(*reopened),
              ElementsAre(NamedFact{"b", "r", "c"}, NamedFact{"c", "s", "a"}));
  EXPECT_TRUE(store->CheckConsistency().ok());
}

TEST_F(TripleStoreTest, AnEntityLeftWithoutFactsKeepsItsNameAndIdAndCanComeBack) {
  auto store = OpenStore();
  MustAdd(store.get(), {F("a", "r", "b"), F("b", "r", "c")});
  absl::StatusOr<ChunkResult> removed = store->RemoveChunk({F("a", "r", "b")});
  ASSERT_TRUE(removed.ok()) << removed.status();
  auto graph = store->Snapshot();
  EXPECT_EQ(graph->FindEntity("a"), 0u);
  EXPECT_EQ(graph->num_entities(), 3u);
  EXPECT_EQ(graph->Degree(0), 0u);
  ChunkResult again = MustAdd(store.get(), {F("a", "r", "b")});
  EXPECT_EQ(again.facts_added, 1u);
  EXPECT_EQ(again.entities_created, 0u);
  EXPECT_EQ(store->Snapshot()->FindEntity("a"), 0u);
  EXPECT_TRUE(store->CheckConsistency().ok());
}

TEST_F(TripleStoreTest, ARemovedEntityLosesItsFactsAndNameUntilAFactNamesItAgain) {
  auto store = OpenStore();
  MustAdd(store.get(), {F("a", "r", "b"), F("b", "r", "c"), F("c", "s", "a"), F("b", "s", "b")});
  const std::vector<std::string> entities = {"b", "nobody", "b"};
  absl::StatusOr<ChunkResult> removed = store->RemoveChunk({F("c", "s", "a")}, entities);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->entities_removed, 1u);
  EXPECT_EQ(removed->entities_not_present, 2u);  // unknown, and a repeat
  EXPECT_EQ(removed->facts_removed, 4u);         // b's three facts and (c, s, a)
  auto graph = store->Snapshot();
  EXPECT_EQ(graph->FindEntity("b"), std::nullopt);
  EXPECT_EQ(graph->FindEntityIncludingRemoved("b"), 1u);
  EXPECT_THAT(graph->RemovedEntities(), ElementsAre(1u));
  EXPECT_EQ(graph->num_entities(), 3u);
  EXPECT_EQ(graph->num_live_entities(), 2u);
  EXPECT_EQ(graph->num_facts(), 0u);
  EXPECT_THAT(graph->SelfLoopEntities(), IsEmpty());
  EXPECT_TRUE(store->CheckConsistency().ok());

  // Durable: the reopened store has the same removed entity.
  store.reset();
  store = OpenStore();
  EXPECT_EQ(store->Snapshot()->FindEntity("b"), std::nullopt);
  EXPECT_THAT(store->Snapshot()->RemovedEntities(), ElementsAre(1u));
  EXPECT_TRUE(store->CheckConsistency().ok());

  // Named again, it comes back with its id.
  ChunkResult again = MustAdd(store.get(), {F("b", "r", "a"), F("d", "r", "b")});
  EXPECT_EQ(again.entities_created, 2u);  // b revived, d new
  EXPECT_EQ(store->Snapshot()->FindEntity("b"), 1u);
  EXPECT_EQ(store->Snapshot()->FindEntity("d"), 3u);
  EXPECT_THAT(store->Snapshot()->RemovedEntities(), IsEmpty());
  EXPECT_TRUE(store->CheckConsistency().ok());
  store.reset();
  EXPECT_THAT(OpenStore()->Snapshot()->RemovedEntities(), IsEmpty());
}

TEST_F(TripleStoreTest, AVersionOneStoreIsUpgradedOnOpenKeepingItsData) {
  MustAdd(OpenStore().get(), {F("a", "r", "b")});
  {
    RawStore raw(store_dir());
    raw.RewriteAsFormatVersion(1);
  }
  {
    std::vector<std::string> families;
    ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), store_dir(), &families).ok());
    ASSERT_THAT(families, Not(Contains(std::string(store_layout::kRemovedEntities))));
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(FactsByName(*store->Snapshot()), ElementsAre(NamedFact{"a", "r", "b"}));
  const std::vector<std::string> entities = {"a"};
  ASSERT_TRUE(store->RemoveChunk({}, entities).ok());
  EXPECT_TRUE(store->CheckConsistency().ok());
  store.reset();
  RawStore raw(store_dir());
  std::string version;
  ASSERT_TRUE(raw.db()
                  ->Get(rocksdb::ReadOptions(), raw.family(store_layout::kMeta),
                        store_layout::kFormatVersionKey, &version)
                  .ok());
  EXPECT_EQ(store_layout::DecodeCounter(version), store_layout::kFormatVersion);
  EXPECT_EQ(raw.Keys(store_layout::kRemovedEntities).size(), 1u);
}

TEST_F(TripleStoreTest, AVersionTwoStoreIsUpgradedWithItsFactsExportedAtSequenceZero) {
  {
    auto store = OpenStore();
    MustAdd(store.get(), {F("a", "r", "b")});
    MustAdd(store.get(), {F("b", "r", "c")});
  }
  {
    RawStore raw(store_dir());
    raw.RewriteAsFormatVersion(2);
  }
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->CheckConsistency().ok()) << store->CheckConsistency();
  MustAdd(store.get(), {F("c", "r", "d")});
  auto exported = [&](uint64_t since) {
    std::vector<std::pair<std::string, uint64_t>> facts;
    absl::StatusOr<std::unique_ptr<FactExport>> e = store->Export(since);
    EXPECT_TRUE(e.ok()) << e.status();
    if (!e.ok()) return facts;
    absl::StatusOr<std::vector<ExportedFact>> page = (*e)->Next(100, 1 << 20);
    EXPECT_TRUE(page.ok());
    for (const ExportedFact& f : *page) facts.emplace_back(f.fact.head, f.sequence);
    return facts;
  };
  // The facts held at the upgrade (sequence 2) say 0; the chunk after it says its own.
  EXPECT_THAT(exported(0), ElementsAre(std::pair<std::string, uint64_t>{"a", 0},
                                       std::pair<std::string, uint64_t>{"b", 0},
                                       std::pair<std::string, uint64_t>{"c", 3}));
  EXPECT_THAT(exported(2), ElementsAre(std::pair<std::string, uint64_t>{"c", 3}));
  // Since 1 cannot be told: "b r c" came after it, but the store no longer knows that.
  absl::StatusOr<std::unique_ptr<FactExport>> unknown = store->Export(1);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kFailedPrecondition) << unknown.status();
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("from sequence 2"));
  // An upgraded fact is removed like any other.
  ASSERT_TRUE(store->RemoveChunk({F("a", "r", "b")}).ok());
  EXPECT_TRUE(store->CheckConsistency().ok());
  store.reset();
  store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_THAT(exported(0), ElementsAre(std::pair<std::string, uint64_t>{"b", 0},
                                       std::pair<std::string, uint64_t>{"c", 3}));
  EXPECT_EQ(store->Export(1).status().code(), absl::StatusCode::kFailedPrecondition);
}

// A relation whose facts are all gone, by fact or by name, stops counting as one the graph
// uses: in the live count and in the vocabulary check of a new model; durably.
TEST_F(TripleStoreTest, ARelationWithoutFactsNoLongerCountsAndCanBeRemovedByName) {
  StoreOptions options;
  options.allowed_relations = std::vector<std::string>{"r", "s", "t"};
  options.max_chunk_facts = 3;
  {
    auto store = OpenStore(options);
    ASSERT_NE(store, nullptr);
    MustAdd(store.get(), {F("a", "r", "b"), F("b", "s", "c"), F("c", "s", "a")});
    MustAdd(store.get(), {F("a", "t", "c")});
    EXPECT_EQ(store->Snapshot()->num_live_relations(), 3u);
    // A model without "t" cannot serve the graph yet.
    EXPECT_EQ(store->SetAllowedRelations({"r", "s"}).code(), absl::StatusCode::kFailedPrecondition);

    // "t" loses its last fact by fact removal; "s" is removed by name, with its two facts.
    ASSERT_TRUE(store->RemoveChunk({F("a", "t", "c")}).ok());
    const std::vector<std::string> relations = {"s", "nope", "s", "t"};
    absl::StatusOr<ChunkResult> removed = store->RemoveChunk({}, {}, relations);
    ASSERT_TRUE(removed.ok()) << removed.status();
    EXPECT_EQ(removed->relations_removed, 1u);
    EXPECT_EQ(removed->relations_not_present, 3u);  // unknown, repeated, already without facts
    EXPECT_EQ(removed->facts_removed, 2u);
    const auto graph = store->Snapshot();
    EXPECT_EQ(graph->num_relations(), 3u);  // ids stay taken
    EXPECT_EQ(graph->num_live_relations(), 1u);
    EXPECT_THAT(graph->LiveRelationNames(), ElementsAre("r"));
    EXPECT_THAT(FactsByName(*graph), ElementsAre(NamedFact{"a", "r", "b"}));
    EXPECT_TRUE(store->CheckConsistency().ok());
  }
  auto store = OpenStore(options);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Snapshot()->num_live_relations(), 1u);
  EXPECT_TRUE(store->SetAllowedRelations({"r"}).ok());
  // A later fact naming a relation the vocabulary allows uses it again.
  ASSERT_TRUE(store->SetAllowedRelations({"r", "s"}).ok());
  MustAdd(store.get(), {F("b", "s", "a")});
  EXPECT_EQ(store->Snapshot()->num_live_relations(), 2u);
  // A relation with more facts than a chunk may remove is refused, naming it.
  MustAdd(store.get(), {F("c", "r", "a"), F("b", "r", "c"), F("c", "r", "b")});
  const std::vector<std::string> big = {"r"};
  const absl::Status refused = store->RemoveChunk({}, {}, big).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("relations[0]: \"r\" has 4 facts"));
  EXPECT_EQ(store->Snapshot()->num_facts(), 5u);
}

// A store opened with no vocabulary (a server that started on ULTRA) takes one from the next
// closed-vocabulary model: checked against the stored graph, then enforced on every chunk
// until AllowAnyRelation lifts it again.
TEST_F(TripleStoreTest, SetAllowedRelationsChecksAndRestrictsAStoreOpenedWithoutAVocabulary) {
  auto store = OpenStore();
  ASSERT_NE(store, nullptr);
  MustAdd(store.get(), {F("a", "r", "b"), F("H", "brand_new", "T")});
  const absl::Status refused = store->SetAllowedRelations({"r"});
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("\"brand_new\""));
  // Refused: nothing changed, any relation is still taken.
  MustAdd(store.get(), {F("a", "other", "b")});

  ASSERT_TRUE(store->RemoveChunk({}, {}, std::vector<std::string>{"brand_new", "other"}).ok());
  ASSERT_TRUE(store->SetAllowedRelations({"r"}).ok());
  const absl::Status outside = store->AddChunk({F("a", "r", "c"), F("c", "newer", "d")}).status();
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(outside.message(), HasSubstr("fact 1: relation \"newer\" is not in the allowed"));
  EXPECT_EQ(store->Snapshot()->num_facts(), 1u);  // the whole chunk was refused

  store->AllowAnyRelation();
  MustAdd(store.get(), {F("c", "newer", "d")});
  EXPECT_EQ(store->Snapshot()->num_facts(), 2u);
}

// One entity given many relations makes the pairs of relation sides grow with their square:
// a chunk that would pass the bound is refused whole, naming its fact, and what the bound
// admits is still taken, also after a reopen (the pairs are rebuilt from the facts).
TEST_F(TripleStoreTest, AChunkThatWouldPassTheRelationPairBoundIsRefusedNamingItsFact) {
  StoreOptions options;
  options.max_relation_side_pairs = 20;
  {
    auto store = OpenStore(options);
    ASSERT_NE(store, nullptr);
    // hub -m0-> t0, hub -m1-> t1, ...: hub's head sides pair with each other (k(k+1)/2), and
    // each t_i holds one tail side (one pair each).
    std::vector<NamedTriple> chunk;
    for (int i = 0; i < 8; ++i)
      chunk.push_back(F("hub", absl::StrCat("m", i), absl::StrCat("t", i)));
    // After m0..m3: 10 pairs at the hub and 4 tails' = 14; m4 adds 5 + 1 = 20; m5 passes.
    const absl::Status refused = store->AddChunk(chunk).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(refused.message()), StartsWith("fact 5: relation \"m5\" at \"hub\""));
    EXPECT_THAT(std::string(refused.message()), HasSubstr("more than 20 pairs"));
    EXPECT_EQ(RejectedFactIndex(refused), 5u);
    EXPECT_EQ(store->Snapshot()->num_facts(), 0u);
    EXPECT_EQ(store->Snapshot()->sequence(), 0u);

    chunk.resize(5);
    MustAdd(store.get(), chunk);
    EXPECT_EQ(store->Snapshot()->SidePairs()->size(), 20u);
    // Facts that make no new pair meet are still taken at the bound.
    MustAdd(store.get(), {F("hub", "m1", "x"), F("hub", "m2", "y")});
  }
  auto store = OpenStore(options);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Snapshot()->SidePairs()->size(), 20u);
  EXPECT_EQ(store->AddChunk({F("hub", "m5", "t5")}).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_F(TripleStoreTest, AWalCorruptedBeforeItsEndIsRefusedUnlessTruncationIsAllowed) {
  {
    auto store = OpenStore();
    for (int i = 0; i < 40; ++i) {
      MustAdd(store.get(), {F(absl::StrCat("a", i), "r", absl::StrCat("b", i))});
    }
  }  // closed cleanly: the chunks are still only in the WAL
  // One flipped byte at 40% of the log: valid records follow the damaged one.
  const DamagedWal wal = FlipAByteOfTheLargestWal(store_dir(), 0.4);
  ASSERT_FALSE(wal.path.empty());
  ASSERT_GT(wal.size, 1000u);

  absl::StatusOr<std::unique_ptr<TripleStore>> refused = TripleStore::Open(store_dir(), {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("corrupted write-ahead log"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--truncate-corrupted-wal"));
  // Nothing was changed: the damaged log is still there, whole.
  ASSERT_TRUE(std::filesystem::exists(wal.path));
  EXPECT_EQ(std::filesystem::file_size(wal.path), wal.size);

  StoreOptions truncate;
  truncate.truncate_corrupted_wal = true;
  auto store = OpenStore(truncate);
  ASSERT_NE(store, nullptr);
  const uint64_t recovered = store->Snapshot()->sequence();
  EXPECT_GT(recovered, 0u);
  EXPECT_LT(recovered, 40u);
  EXPECT_THAT(store->recovery_note(), HasSubstr("lost"));
  EXPECT_EQ(store->Snapshot()->num_facts(), recovered);
  EXPECT_TRUE(store->CheckConsistency().ok());
  // The recovered store is whole again: a strict open takes it as it is.
  store.reset();
  store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Snapshot()->sequence(), recovered);
  EXPECT_EQ(store->recovery_note(), "");
}

// Options on a disk the test can fill, with the store's warnings collected.
struct FullDiskOptions {
  FullDiskOptions() {
    options.file_system = disk;
    options.log = [this](absl::string_view level, absl::string_view message) {
      warnings.push_back(absl::StrCat(level, ": ", message));
    };
  }
  std::shared_ptr<FullDiskFileSystem> disk = std::make_shared<FullDiskFileSystem>();
  std::vector<std::string> warnings;
  StoreOptions options;
};

TEST_F(TripleStoreTest, AFullDiskFailsTheChunkKeepsReadsAndWritesResumeOnceSpaceIsFreed) {
  FullDiskOptions full;
  auto store = OpenStore(full.options);
  ASSERT_NE(store, nullptr);
  MustAdd(store.get(), {F("a", "r", "b")});

  full.disk->SetFull(true);
  absl::StatusOr<ChunkResult> failed = store->AddChunk({F("b", "r", "c")});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted) << failed.status();
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("No space left on device"));
  EXPECT_GT(full.disk->refused_appends(), 0);
  EXPECT_FALSE(store->writable());
  // Reads go on, and see exactly what was acknowledged.
  EXPECT_EQ(store->Snapshot()->sequence(), 1u);
  EXPECT_THAT(FactsByName(*store->Snapshot()), ElementsAre(NamedFact{"a", "r", "b"}));
  // While the disk stays full, every chunk (adds and removals) fails the same way.
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<ChunkResult> again = store->AddChunk({F("b", "r", "c")});
    EXPECT_EQ(again.status().code(), absl::StatusCode::kResourceExhausted) << again.status();
  }
  EXPECT_EQ(store->RemoveChunk({F("a", "r", "b")}).status().code(),
            absl::StatusCode::kResourceExhausted);
  // Syncing after the failed write reports it instead of touching the failed WAL.
  EXPECT_EQ(store->Sync().code(), absl::StatusCode::kResourceExhausted);

  full.disk->SetFull(false);
  const ChunkResult resumed = MustAdd(store.get(), {F("b", "r", "c")});
  EXPECT_EQ(resumed.sequence, 2u);
  EXPECT_TRUE(store->writable());
  EXPECT_THAT(full.warnings, Contains(HasSubstr("writable again")));
  EXPECT_TRUE(store->Sync().ok());
  EXPECT_TRUE(store->CheckConsistency().ok());

  // Nothing acknowledged was lost, and the refused chunks left no trace.
  store.reset();
  store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Snapshot()->sequence(), 2u);
  EXPECT_THAT(FactsByName(*store->Snapshot()),
              ElementsAre(NamedFact{"a", "r", "b"}, NamedFact{"b", "r", "c"}));
  EXPECT_TRUE(store->CheckConsistency().ok());
}

TEST_F(TripleStoreTest, ALargeChunkThatFailsToBeWrittenLeavesTheIndexAsItWas) {
  // A chunk of LiveGraph::kConcurrentFacts facts or more has its index lists built while it
  // is written: when the write fails, they must come back out, and the chunk after it must
  // build on the version before.
  FullDiskOptions full;
  auto store = OpenStore(full.options);
  ASSERT_NE(store, nullptr);
  MustAdd(store.get(), {F("a", "r", "b"), F("c", "r", "a")});
  auto big_chunk = [](const std::string& prefix) {
    std::vector<NamedTriple> chunk;
    for (size_t i = 0; i < LiveGraph::kConcurrentFacts + 10; ++i) {
      // Old entities' lists replaced, and new entities.
      chunk.push_back(F(i % 2 == 0 ? "a" : "b", "r", absl::StrCat(prefix, i)));
    }
    return chunk;
  };
  const std::shared_ptr<const GraphSnapshot> before = store->Snapshot();
  const EntityId a = *before->FindEntity("a");

  full.disk->SetFull(true);
  absl::StatusOr<ChunkResult> failed = store->AddChunk(big_chunk("x"));
  ASSERT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted) << failed.status();
  const std::shared_ptr<const GraphSnapshot> after = store->Snapshot();
  EXPECT_EQ(after->sequence(), 1u);
  EXPECT_EQ(after->num_entities(), 3u);
  EXPECT_EQ(after->num_facts(), 2u);
  EXPECT_THAT(after->OutEdges(a), SizeIs(1));
  EXPECT_THAT(after->InEdges(a), SizeIs(1));
  EXPECT_FALSE(after->FindEntity("x0").has_value());

  full.disk->SetFull(false);
  const ChunkResult written = MustAdd(store.get(), big_chunk("y"));
  EXPECT_EQ(written.sequence, 2u);
  EXPECT_EQ(written.facts_added, LiveGraph::kConcurrentFacts + 10);
  const std::shared_ptr<const GraphSnapshot> latest = store->Snapshot();
  EXPECT_EQ(latest->num_facts(), 2 + LiveGraph::kConcurrentFacts + 10);
  EXPECT_THAT(latest->OutEdges(a), SizeIs(1 + (LiveGraph::kConcurrentFacts + 10 + 1) / 2));
  EXPECT_FALSE(latest->FindEntity("x0").has_value());
  EXPECT_TRUE(latest->FindEntity("y0").has_value());
  // The versions held across the failure still read what they read.
  EXPECT_THAT(before->OutEdges(a), SizeIs(1));
  EXPECT_TRUE(store->CheckConsistency().ok());
  store.reset();
  store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Snapshot()->num_facts(), 2 + LiveGraph::kConcurrentFacts + 10);
  EXPECT_TRUE(store->CheckConsistency().ok());
}

TEST_F(TripleStoreTest, AStoreOpenedOnAFullDiskServesReadOnlyAndBecomesWritableOnceSpaceIsFreed) {
  {
    auto store = OpenStore();
    ASSERT_NE(store, nullptr);
    MustAdd(store.get(), {F("a", "r", "b"), F("b", "r", "c")});
  }  // the chunk is only in the WAL: opening must replay it into a new table
  FullDiskOptions full;
  full.disk->SetFull(true);
  auto store = OpenStore(full.options);
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(store->writable());
  EXPECT_THAT(full.warnings, Contains(HasSubstr("read-only")));
  EXPECT_THAT(FactsByName(*store->Snapshot()),
              ElementsAre(NamedFact{"a", "r", "b"}, NamedFact{"b", "r", "c"}));
  absl::StatusOr<ChunkResult> refused = store->AddChunk({F("c", "r", "d")});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("read-only"));
  EXPECT_TRUE(store->Sync().ok());
  // An export opened on the read-only database reads on once a writable one replaces it.
  absl::StatusOr<std::unique_ptr<FactExport>> exported = store->Export(0);
  ASSERT_TRUE(exported.ok()) << exported.status();

  full.disk->SetFull(false);
  const ChunkResult added = MustAdd(store.get(), {F("c", "r", "d")});
  EXPECT_EQ(added.sequence, 2u);
  EXPECT_TRUE(store->writable());
  absl::StatusOr<std::vector<ExportedFact>> page = (*exported)->Next(10, 1 << 20);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->size(), 2u);
  exported->reset();
  EXPECT_EQ(store->Snapshot()->EntityName(3), "d");
  EXPECT_TRUE(store->CheckConsistency().ok());
  store.reset();
  store = OpenStore();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Snapshot()->num_facts(), 3u);
  EXPECT_EQ(store->Snapshot()->sequence(), 2u);
}

TEST_F(TripleStoreTest, RocksDbWarningsGoToTheLogAndNoInfoLogFileIsWritten) {
  FullDiskOptions full;
  auto store = OpenStore(full.options);
  ASSERT_NE(store, nullptr);
  MustAdd(store.get(), {F("a", "r", "b")});
  store.reset();
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(store_dir()) / "LOG"));
  // A failed write makes RocksDB itself warn; that arrives through StoreOptions::log.
  store = OpenStore(full.options);
  full.disk->SetFull(true);
  EXPECT_FALSE(store->AddChunk({F("b", "r", "c")}).ok());
  EXPECT_THAT(full.warnings, Contains(AllOf(StartsWith("warning: rocksdb: "),
                                            HasSubstr("No space left on device"))));
  full.disk->SetFull(false);
}

TEST_F(TripleStoreTest, RemovalChunkWithABadNameIsRejectedWholeNamingTheFact) {
  auto store = OpenStore();
  MustAdd(store.get(), {F("a", "r", "b"), F("b", "r", "c")});
  absl::StatusOr<ChunkResult> removed = store->RemoveChunk({F("a", "r", "b"), F("b", "", "c")});
  ASSERT_FALSE(removed.ok());
  EXPECT_EQ(removed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(removed.status().message()), StartsWith("fact 1: relation name"));
  EXPECT_EQ(RejectedFactIndex(removed.status()), 1u);
  auto graph = store->Snapshot();
  EXPECT_EQ(graph->sequence(), 1u);
  EXPECT_EQ(graph->num_facts(), 2u);
}

TEST_F(TripleStoreTest, ReopenRestoresEntitiesRelationsFactsAndIdsExactly) {
  std::vector<std::string> names_before;
  std::vector<std::string> relations_before;
  std::vector<NamedFact> facts_before;
  {
    auto store = OpenStore();
    std::mt19937_64 rng(3);
    const std::string long_name(1024, 'L');
    for (int chunk = 0; chunk < 20; ++chunk) {
      std::vector<NamedTriple> facts;
      for (int i = 0; i < 50; ++i) {
        auto name = [&] {
          const uint64_t k = rng() % 400;
          return k == 0 ? long_name : k == 1 ? "entité ü" : absl::StrCat("e", k);
        };
        facts.push_back(F(name(), absl::StrCat("rel", rng() % 7), name()));
      }
      MustAdd(store.get(), facts);
    }
    auto graph = store->Snapshot();
    names_before = EntityNames(*graph);
    relations_before = graph->relation_names();
    facts_before = FactsByName(*graph);
    EXPECT_EQ(graph->sequence(), 20u);
  }
  auto store = OpenStore();
  auto graph = store->Snapshot();
  EXPECT_EQ(graph->sequence(), 20u);
  EXPECT_EQ(EntityNames(*graph), names_before);
  EXPECT_EQ(graph->relation_names(), relations_before);
  EXPECT_EQ(FactsByName(*graph), facts_before);
  EXPECT_EQ(graph->num_facts(), facts_before.size());
  for (size_t id = 0; id < names_before.size(); ++id) {
    EXPECT_EQ(graph->FindEntity(names_before[id]), id);
  }
  EXPECT_TRUE(store->CheckConsistency().ok());
}

TEST_F(TripleStoreTest, IdsStayStableAcrossReopenAndLaterChunks) {
  {
    auto store = OpenStore();
    MustAdd(store.get(), {F("a", "r", "b"), F("c", "r", "a")});
  }
  {
    auto store = OpenStore();
    ChunkResult result = MustAdd(store.get(), {F("d", "s", "a"), F("a", "r", "b")});
    EXPECT_EQ(result.sequence, 2u);
    EXPECT_EQ(result.entities_created, 1u);
    EXPECT_EQ(result.duplicate_facts, 1u);
  }
  auto store = OpenStore();
  auto graph = store->Snapshot();
  EXPECT_THAT(EntityNames(*graph), ElementsAre("a", "b", "c", "d"));
  EXPECT_THAT(graph->relation_names(), ElementsAre("r", "s"));
  EXPECT_TRUE(graph->HasFact(3, 1, 0));
  EXPECT_EQ(graph->num_facts(), 3u);
}

TEST_F(TripleStoreTest, SyncModeCommitsChunksThatSurviveReopen) {
  StoreOptions options;
  options.sync = true;
  {
    auto store = OpenStore(options);
    MustAdd(store.get(), {F("a", "r", "b")});
    MustAdd(store.get(), {F("b", "r", "c")});
    EXPECT_TRUE(store->Sync().ok());
  }
  auto store = OpenStore(options);
  EXPECT_EQ(store->Snapshot()->sequence(), 2u);
  EXPECT_EQ(store->Snapshot()->num_facts(), 2u);
}

TEST_F(TripleStoreTest, SnapshotBeforeAChunkDoesNotSeeItAndOneAfterDoes) {
  auto store = OpenStore();
  MustAdd(store.get(), {F("a", "r", "b")});
  auto before = store->Snapshot();
  MustAdd(store.get(), {F("b", "r", "new"), F("a", "r", "new")});
  auto after = store->Snapshot();
  EXPECT_EQ(before->FindEntity("new"), std::nullopt);
  EXPECT_EQ(before->num_entities(), 2u);
  EXPECT_THAT(before->OutEdges(0), ElementsAre(Neighbor{1, 0}));
  EXPECT_THAT(before->InEdges(0), IsEmpty());
  EXPECT_EQ(after->FindEntity("new"), 2u);
  EXPECT_THAT(after->OutEdges(0), ElementsAre(Neighbor{1, 0}, Neighbor{2, 0}));
  EXPECT_THAT(after->InEdges(2), ElementsAre(Neighbor{0, 0}, Neighbor{1, 0}));
}

TEST_F(TripleStoreTest, SnapshotStaysValidAfterTheStoreIsClosed) {
  auto store = OpenStore();
  MustAdd(store.get(), {F("a", "r", "b")});
  auto graph = store->Snapshot();
  store.reset();
  EXPECT_EQ(graph->EntityName(1), "b");
  EXPECT_THAT(graph->OutEdges(0), ElementsAre(Neighbor{1, 0}));
}

TEST_F(TripleStoreTest, OpeningAStoreThatIsAlreadyOpenFails) {
  auto store = OpenStore();
  absl::StatusOr<std::unique_ptr<TripleStore>> second = TripleStore::Open(store_dir(), {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
}

TEST_F(TripleStoreTest, OpeningAStoreOfAnUnknownFormatVersionFails) {
  OpenStore().reset();
  {
    RawStore raw(store_dir());
    ASSERT_TRUE(raw.db()
                    ->Put(rocksdb::WriteOptions(), raw.family(store_layout::kMeta),
                          store_layout::kFormatVersionKey, store_layout::EncodeCounter(99))
                    .ok());
  }
  absl::StatusOr<std::unique_ptr<TripleStore>> store = TripleStore::Open(store_dir(), {});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("format version 99"));
}

TEST_F(TripleStoreTest, OpeningAnotherRocksDbDatabaseFails) {
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, store_dir(), &db).ok());
    rocksdb::ColumnFamilyHandle* handle = nullptr;
    ASSERT_TRUE(db->CreateColumnFamily(rocksdb::ColumnFamilyOptions(), "orders", &handle).ok());
    ASSERT_TRUE(db->DestroyColumnFamilyHandle(handle).ok());
    delete db;
  }
  absl::StatusOr<std::unique_ptr<TripleStore>> store = TripleStore::Open(store_dir(), {});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("not a triple store"));
}

TEST_F(TripleStoreTest, OpeningAPlainRocksDbWithDataFailsAndLeavesItUntouched) {
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(options, store_dir(), &db).ok());
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "customer", "42").ok());
    delete db;
  }
  absl::StatusOr<std::unique_ptr<TripleStore>> store = TripleStore::Open(store_dir(), {});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()), HasSubstr("not a triple store"));
  std::vector<std::string> families;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), store_dir(), &families).ok());
  EXPECT_THAT(families, ElementsAre("default"));
}

TEST_F(TripleStoreTest, FactsAreFixedWidthBigEndianKeysScannableByEntityPrefix) {
  {
    auto store = OpenStore();
    // Entity ids: x=0, y=1, z=2; 256 more entities push one id past a byte boundary.
    std::vector<NamedTriple> chunk = {F("x", "r", "y"), F("z", "r", "x"), F("x", "s", "z")};
    for (int i = 0; i < 300; ++i) chunk.push_back(F("y", "r", absl::StrCat("n", i)));
    MustAdd(store.get(), chunk);
  }
  RawStore raw(store_dir());
  const std::vector<std::string> out = raw.Keys(store_layout::kFactsOut);
  ASSERT_EQ(out.size(), 303u);
  for (const std::string& key : out) EXPECT_EQ(key.size(), store_layout::kFactKeyBytes);
  // Bytewise order is (head, relation, tail) order: x's facts first, then y's 300 in tail
  // order (ids 3..302, so the 4-byte encoding must be big-endian), then z's.
  EXPECT_EQ(out[0], store_layout::OutFactKey({0, 0, 1}));
  EXPECT_EQ(out[1], store_layout::OutFactKey({0, 1, 2}));
  for (uint32_t i = 0; i < 300; ++i) EXPECT_EQ(out[2 + i], store_layout::OutFactKey({1, 0, 3 + i}));
  EXPECT_EQ(out[302], store_layout::OutFactKey({2, 0, 0}));

  // x's in-adjacency is the facts_in keys with x's 4-byte prefix.
  rocksdb::ReadOptions read;
  read.prefix_same_as_start = true;
  std::unique_ptr<rocksdb::Iterator> it(
      raw.db()->NewIterator(read, raw.family(store_layout::kFactsIn)));
  std::vector<std::string> x_in;
  const std::string prefix = store_layout::EncodeId(0);
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    x_in.push_back(it->key().ToString());
  }
  EXPECT_THAT(x_in, ElementsAre(store_layout::InFactKey({2, 0, 0})));
}

TEST_F(TripleStoreTest, OpenDetectsCountersThatDisagreeWithTheFacts) {
  {
    auto store = OpenStore();
    MustAdd(store.get(), {F("a", "r", "b"), F("b", "r", "c")});
  }
  {
    RawStore raw(store_dir());
    ASSERT_TRUE(raw.db()
                    ->Delete(rocksdb::WriteOptions(), raw.family(store_layout::kFactsOut),
                             store_layout::OutFactKey({1, 0, 2}))
                    .ok());
  }
  absl::StatusOr<std::unique_ptr<TripleStore>> store = TripleStore::Open(store_dir(), {});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss) << store.status();
}

TEST_F(TripleStoreTest, ConsistencyCheckDetectsAMissingMirrorFact) {
  {
    auto store = OpenStore();
    MustAdd(store.get(), {F("a", "r", "b"), F("b", "r", "c")});
    EXPECT_TRUE(store->CheckConsistency().ok());
  }
  {
    RawStore raw(store_dir());
    ASSERT_TRUE(raw.db()
                    ->Delete(rocksdb::WriteOptions(), raw.family(store_layout::kFactsIn),
                             store_layout::InFactKey({1, 0, 2}))
                    .ok());
  }
  auto store = OpenStore();
  absl::Status check = store->CheckConsistency();
  EXPECT_EQ(check.code(), absl::StatusCode::kDataLoss) << check;
  EXPECT_THAT(std::string(check.message()), HasSubstr("facts_in"));
}

TEST_F(TripleStoreTest, ConsistencyCheckDetectsANameMappedToTheWrongId) {
  {
    auto store = OpenStore();
    MustAdd(store.get(), {F("a", "r", "b")});
  }
  {
    RawStore raw(store_dir());
    ASSERT_TRUE(raw.db()
                    ->Put(rocksdb::WriteOptions(), raw.family(store_layout::kEntityByName), "a",
                          store_layout::EncodeId(1))
                    .ok());
  }
  auto store = OpenStore();
  EXPECT_EQ(store->CheckConsistency().code(), absl::StatusCode::kDataLoss);
}

// Chunk i (from 1) of the concurrency workload: kChunkFacts new entities c<i>-<j>, each
// linked from the hub and to the next entity of the same chunk, so every chunk adds
// exactly kChunkFacts entities and 2 * kChunkFacts facts (chunk 1 also creates the hub).
constexpr int kChunkFacts = 16;

std::string ChunkEntity(uint64_t chunk, int j) { return absl::StrCat("c", chunk, "-", j); }

std::vector<NamedTriple> ConcurrencyChunk(uint64_t chunk) {
  std::vector<NamedTriple> facts;
  for (int j = 0; j < kChunkFacts; ++j) {
    facts.push_back(F("hub", "link", ChunkEntity(chunk, j)));
    facts.push_back(F(ChunkEntity(chunk, j), "next", ChunkEntity(chunk, (j + 1) % kChunkFacts)));
  }
  return facts;
}

// Checks every invariant a reader may rely on; returns a description of the first broken
// one, or an empty string.
std::string CheckReaderInvariants(const GraphSnapshot& g, uint64_t committed_before,
                                  std::mt19937_64* rng) {
  const uint64_t s = g.sequence();
  if (s < committed_before) {
    return absl::StrCat("snapshot at ", s, " misses chunk ", committed_before,
                        " acknowledged before it was taken");
  }
  // Counts must match the sequence exactly: a torn version would have some of a chunk.
  const uint64_t entities = s == 0 ? 0 : 1 + kChunkFacts * s;
  if (g.num_entities() != entities || g.num_facts() != 2 * kChunkFacts * s) {
    return absl::StrCat("snapshot at ", s, " has ", g.num_entities(), " entities and ",
                        g.num_facts(), " facts");
  }
  if (s == 0) return "";
  const std::optional<EntityId> hub = g.FindEntity("hub");
  if (!hub.has_value() || g.OutEdges(*hub).size() != kChunkFacts * s) {
    return absl::StrCat("hub's out-degree is wrong at ", s);
  }
  // A random committed chunk is wholly there; the next one is wholly absent, even though
  // the writer may already have appended its names to the shared name table.
  const uint64_t chunk = 1 + (*rng)() % s;
  const std::optional<RelationId> next = g.FindRelation("next");
  for (int j = 0; j < kChunkFacts; ++j) {
    std::optional<EntityId> a = g.FindEntity(ChunkEntity(chunk, j));
    std::optional<EntityId> b = g.FindEntity(ChunkEntity(chunk, (j + 1) % kChunkFacts));
    if (!a || !b || !next || !g.HasFact(*a, *next, *b)) {
      return absl::StrCat("chunk ", chunk, " is not whole at ", s);
    }
    if (g.EntityName(*a) != ChunkEntity(chunk, j)) return "names and ids disagree";
  }
  for (int j = 0; j < kChunkFacts; ++j) {
    if (g.FindEntity(ChunkEntity(s + 1, j)).has_value()) {
      return absl::StrCat("snapshot at ", s, " sees an entity of chunk ", s + 1);
    }
  }
  // Adjacency sorted without duplicates, and out/in mirror each other, for a sample.
  for (int k = 0; k < 8; ++k) {
    const EntityId e = (*rng)() % g.num_entities();
    const absl::Span<const Neighbor> out = g.OutEdges(e);
    const absl::Span<const Neighbor> in = g.InEdges(e);
    for (auto span : {out, in}) {
      for (size_t i = 1; i < span.size(); ++i) {
        if (!(span[i - 1] < span[i])) return absl::StrCat("adjacency of ", e, " not sorted");
      }
    }
    for (const Neighbor& n : out) {
      const absl::Span<const Neighbor> back = g.InEdges(n.entity);
      if (!std::binary_search(back.begin(), back.end(), Neighbor{e, n.relation})) {
        return absl::StrCat("out-edge of ", e, " has no in-edge mirror");
      }
    }
    for (const Neighbor& n : in) {
      if (!g.HasFact(n.entity, n.relation, e)) return absl::StrCat("in-edge of ", e, " unmirrored");
    }
  }
  return "";
}

TEST_F(TripleStoreTest, ConcurrentReadersSeeWholeChunksWhileAWriterCommits) {
  auto store = OpenStore();
  MustAdd(store.get(), ConcurrencyChunk(1));
  const std::shared_ptr<const GraphSnapshot> held = store->Snapshot();
  const std::vector<Neighbor> held_hub_out(held->OutEdges(0).begin(), held->OutEdges(0).end());

  constexpr uint64_t kChunks = 150;
  std::atomic<uint64_t> committed{1};
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  std::atomic<uint64_t> snapshots_checked{0};
  std::vector<std::string> first_failure(3);
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      std::mt19937_64 rng(r);
      uint64_t last_sequence = 0;
      // At least a few rounds even if the writer finishes first.
      for (int round = 0; !done.load() || round < 20; ++round) {
        const uint64_t committed_before = committed.load();
        const std::shared_ptr<const GraphSnapshot> g = store->Snapshot();
        std::string error = CheckReaderInvariants(*g, committed_before, &rng);
        if (error.empty() && g->sequence() < last_sequence) error = "sequence went backwards";
        last_sequence = g->sequence();
        if (!error.empty() && failures.fetch_add(1) == 0) first_failure[r] = error;
        snapshots_checked.fetch_add(1);
      }
    });
  }
  for (uint64_t chunk = 2; chunk <= kChunks; ++chunk) {
    absl::StatusOr<ChunkResult> result = store->AddChunk(ConcurrencyChunk(chunk));
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->sequence, chunk);
    committed.store(chunk);
  }
  done.store(true);
  for (std::thread& t : readers) t.join();

  EXPECT_EQ(failures.load(), 0) << first_failure[0] << first_failure[1] << first_failure[2];
  EXPECT_GE(snapshots_checked.load(), 60u);
  // The snapshot held through all of it is unchanged.
  EXPECT_EQ(held->sequence(), 1u);
  EXPECT_EQ(held->num_facts(), 2u * kChunkFacts);
  EXPECT_EQ(std::vector<Neighbor>(held->OutEdges(0).begin(), held->OutEdges(0).end()),
            held_hub_out);
  EXPECT_EQ(held->FindEntity(ChunkEntity(2, 0)), std::nullopt);
  EXPECT_EQ(store->Snapshot()->num_facts(), 2u * kChunkFacts * kChunks);
  EXPECT_TRUE(store->CheckConsistency().ok());
}

}  // namespace
}  // namespace grail
