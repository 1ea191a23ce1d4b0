// The path family's pass cache: its bound, its keys and staleness (PassCache alone), and the
// serving path through it (LinkPredictor with a path model on a real TripleStore): a query
// asked again costs no forward, scores answered from kept passes are the bits a fresh pass
// gives, a write makes exact calls compute again while calls that accept staleness do not,
// and concurrent calls for one query run one pass.
#include "server/scoring/pass_cache.h"

#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"
#include "gtest/gtest.h"
#include "model/path/path_model.h"
#include "server/scoring/link_predictor.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

std::shared_ptr<const QueryPass> Pass(uint64_t sequence, size_t entities,
                                      PassClock::time_point at = PassClock::now()) {
  std::vector<EntityId> ids(entities);
  std::vector<float> scores(entities);
  for (size_t i = 0; i < entities; ++i) {
    ids[i] = static_cast<EntityId>(entities - i);  // not sorted: Find must sort
    scores[i] = static_cast<float>(i);
  }
  return std::make_shared<const QueryPass>(sequence, at, /*pruned=*/false, 10, 20, -1.0f,
                                           std::move(ids), std::move(scores),
                                           std::vector<uint8_t>{});
}

PassKey Key(EntityId source, int32_t relation = 0, std::vector<EntityId> targets = {}) {
  return PassKey{/*model=*/1, source, relation, 0, 0, 0, std::move(targets)};
}

TEST(QueryPassTest, FindsEveryEntityItKeptAndGivesTheFarScoreToOthers) {
  const std::shared_ptr<const QueryPass> pass = Pass(3, 50);
  for (size_t i = 0; i < pass->size(); ++i) {
    EXPECT_EQ(pass->Find(pass->entity(i)), static_cast<int64_t>(i));
    EXPECT_EQ(pass->Of(pass->entity(i)), pass->score(i));
  }
  EXPECT_EQ(pass->Find(0), -1);
  EXPECT_EQ(pass->Of(51), pass->far());
}

TEST(PassCacheTest, AnExactLookupFindsOnlyTheSameKeyAtTheSameSequence) {
  PassCache cache(1 << 20);
  cache.Insert(Key(7, 2, {4, 9}), Pass(5, 3));
  EXPECT_NE(cache.Find(Key(7, 2, {4, 9}), 5, {}), nullptr);
  EXPECT_EQ(cache.Find(Key(7, 2, {4, 9}), 6, {}), nullptr);  // the graph moved on
  EXPECT_EQ(cache.Find(Key(7, 2, {4}), 5, {}), nullptr);     // other targets
  EXPECT_EQ(cache.Find(Key(7, 2), 5, {}), nullptr);          // the whole pass
  EXPECT_EQ(cache.Find(Key(7, 3, {4, 9}), 5, {}), nullptr);  // other relation
  PassKey other_model = Key(7, 2, {4, 9});
  other_model.model = 2;
  EXPECT_EQ(cache.Find(other_model, 5, {}), nullptr);
  PassKey other_budget = Key(7, 2, {4, 9});
  other_budget.budget_nodes = 100;
  EXPECT_EQ(cache.Find(other_budget, 5, {}), nullptr);
  PassKey other_layers = Key(7, 2, {4, 9});
  other_layers.budget_layer_nodes = 2;  // a learned priority's call budget
  EXPECT_EQ(cache.Find(other_layers, 5, {}), nullptr);
  const PassCacheStats stats = cache.Stats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.entries, 1);
}

TEST(PassCacheTest, StalenessAcceptsPassesWithinEachBoundItSets) {
  PassCache cache(1 << 20);
  const PassClock::time_point long_ago = PassClock::now() - std::chrono::hours(1);
  cache.Insert(Key(1), Pass(10, 3, long_ago));
  Staleness sequences;
  sequences.max_sequences = 2;
  EXPECT_NE(cache.Find(Key(1), 12, sequences), nullptr);
  EXPECT_EQ(cache.Find(Key(1), 13, sequences), nullptr);
  EXPECT_EQ(cache.Find(Key(1), 9, sequences), nullptr);  // a pass from the future is not this graph
  Staleness young;
  young.max_age = std::chrono::milliseconds(1000);
  EXPECT_EQ(cache.Find(Key(1), 11, young), nullptr);  // an hour old
  Staleness both = sequences;
  both.max_age = std::chrono::hours(2);
  EXPECT_NE(cache.Find(Key(1), 11, both), nullptr);
  both.min_sequence = 11;  // the call's min_graph_sequence
  EXPECT_EQ(cache.Find(Key(1), 11, both), nullptr);
}

TEST(PassCacheTest, AKeyKeepsItsNewestPass) {
  PassCache cache(1 << 20);
  cache.Insert(Key(1), Pass(10, 3));
  cache.Insert(Key(1), Pass(9, 3));  // late: an older graph's
  EXPECT_NE(cache.Find(Key(1), 10, {}), nullptr);
  cache.Insert(Key(1), Pass(11, 3));
  EXPECT_EQ(cache.Find(Key(1), 10, {}), nullptr);
  EXPECT_NE(cache.Find(Key(1), 11, {}), nullptr);
  EXPECT_EQ(cache.Stats().entries, 1);
}

TEST(PassCacheTest, NeverHoldsMoreThanItsBytesAndEvictsTheLeastRecentlyUsed) {
  const int64_t one = Pass(1, 1000)->bytes();
  PassCache cache(one * 4);
  for (EntityId s = 0; s < 3; ++s) cache.Insert(Key(s), Pass(1, 1000));
  ASSERT_NE(cache.Find(Key(0), 1, {}), nullptr);  // 0 is now the most recently used
  for (EntityId s = 3; s < 40; ++s) {
    cache.Insert(Key(s), Pass(1, 1000));
    EXPECT_LE(cache.Stats().bytes, cache.capacity_bytes());
    if (s == 4) {
      EXPECT_NE(cache.Find(Key(0), 1, {}), nullptr) << "used last, evicted first";
      EXPECT_EQ(cache.Find(Key(1), 1, {}), nullptr);
    }
  }
  const PassCacheStats stats = cache.Stats();
  EXPECT_LE(stats.entries, 4);
  EXPECT_GE(stats.evictions, 36);
  // A pass larger than the whole cache is not kept, and evicts nothing.
  cache.Insert(Key(100), Pass(1, 10000));
  EXPECT_EQ(cache.Find(Key(100), 1, {}), nullptr);
  EXPECT_EQ(cache.Stats().entries, stats.entries);
}

TEST(PassCacheTest, AnAliasCountsItsKeyAndFindsNothingOnceItsPassIsEvicted) {
  const std::shared_ptr<const QueryPass> whole = Pass(1, 1000);
  PassCache cache(whole->bytes() * 3 / 2);
  cache.Insert(Key(1), whole);
  cache.InsertAlias(Key(1, 0, {5}), whole);
  EXPECT_LT(cache.Stats().bytes, whole->bytes() * 5 / 4) << "the pass is counted once";
  EXPECT_EQ(cache.Find(Key(1, 0, {5}), 1, {}), whole);
  cache.Insert(Key(2), Pass(1, 1000));  // evicts the least recently used whole pass
  EXPECT_EQ(cache.Find(Key(1), 1, {}), nullptr);
  EXPECT_EQ(cache.Find(Key(1, 0, {5}), 1, {}), nullptr);
  EXPECT_LE(cache.Stats().bytes, cache.capacity_bytes());
}

TEST(PassCacheTest, ZeroBytesKeepsNothing) {
  PassCache cache(0);
  cache.Insert(Key(1), Pass(1, 1));
  EXPECT_EQ(cache.Find(Key(1), 1, {}), nullptr);
  EXPECT_EQ(cache.Stats().entries, 0);
}

// --- Serving through the cache ---------------------------------------------------------

const std::vector<std::string> kRelations = {"r0", "r1", "r2"};

class ForwardCounter : public EngineObserver {
 public:
  void OnBatch(int, int64_t, int64_t, double, double) override { ++forwards; }
  std::atomic<int> forwards{0};
};

std::string Name(uint64_t e) { return absl::StrCat("e", e); }

// A path model, with the reach mask (a fact's pass runs on its tails' enclosing neighbourhood)
// or without (the whole graph), on one store, with a cached and an uncached predictor over one
// engine that runs one query per forward (so no score depends on what shares its forward).
class PassServingTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    PathConfig config;
    config.num_layers = 3;
    config.dim = 8;
    config.reach_mask = GetParam();
    absl::StatusOr<std::unique_ptr<PathModel>> model = PathModel::Create(config, kRelations, 3);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    absl::StatusOr<std::unique_ptr<TripleStore>> store = TripleStore::Open(dir_.Sub("store"), {});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    SeededRandom rng(17);
    std::vector<NamedTriple> facts;
    for (int i = 0; i < 150; ++i) {
      const uint64_t h = rng.Uniform(60), t = rng.Uniform(60);
      if (h != t) facts.push_back({Name(h), kRelations[rng.Uniform(3)], Name(t)});
    }
    ASSERT_TRUE(store_->AddChunk(facts).ok());
    EngineOptions options;
    options.max_batch_size = 1;
    engine_ = std::make_unique<InferenceEngine>(options, &forwards_);
    auto served = std::make_shared<const ServedModel>(
        std::shared_ptr<const PathModel>(std::shared_ptr<void>(), model_.get()), "test.pt",
        "0123456789abcdef", 1);
    cached_ = std::make_unique<LinkPredictor>(served, *store_, *engine_, RankLimits(), 64 << 20);
    plain_ = std::make_unique<LinkPredictor>(served, *store_, *engine_, RankLimits(), 0);
  }

  static absl::StatusOr<ScoredFacts> Score(const LinkPredictor& predictor,
                                           std::vector<NamedTriple> facts,
                                           Staleness staleness = {}) {
    std::promise<absl::StatusOr<ScoredFacts>> outcome;
    predictor.Score(
        std::move(facts), std::make_shared<CallControl>(),
        [&outcome](absl::StatusOr<ScoredFacts> s) { outcome.set_value(std::move(s)); }, 0,
        staleness);
    return outcome.get_future().get();
  }

  static absl::StatusOr<Ranking> RankTails(const LinkPredictor& predictor, std::string head,
                                           std::string relation) {
    RankQuery query;
    query.fixed = std::move(head);
    query.relation = std::move(relation);
    std::promise<absl::StatusOr<Ranking>> ranked;
    predictor.Rank(query, std::make_shared<CallControl>(),
                   [&ranked](absl::StatusOr<Ranking> r) { ranked.set_value(std::move(r)); });
    return ranked.get_future().get();
  }

  // A mixed batch: facts sharing a query, repeated facts, and facts of their own.
  static std::vector<NamedTriple> MixedBatch() {
    std::vector<NamedTriple> facts;
    SeededRandom rng(5);
    for (int i = 0; i < 30; ++i) {
      const uint64_t h = i < 12 ? 3 : rng.Uniform(60);
      uint64_t t = rng.Uniform(60);
      if (t == h) t = (t + 1) % 60;
      facts.push_back({Name(h), kRelations[i < 12 ? 1 : rng.Uniform(3)], Name(t)});
    }
    facts.push_back(facts[4]);
    facts.push_back(facts[20]);
    return facts;
  }

  static void ExpectSameBits(const ScoredFacts& a, const ScoredFacts& b) {
    ASSERT_EQ(a.scores.size(), b.scores.size());
    for (size_t i = 0; i < a.scores.size(); ++i) {
      EXPECT_EQ(std::memcmp(&a.scores[i].score, &b.scores[i].score, sizeof(float)), 0)
          << "fact " << i << ": " << a.scores[i].score << " vs " << b.scores[i].score;
      EXPECT_EQ(a.scores[i].subgraph_nodes, b.scores[i].subgraph_nodes) << "fact " << i;
      EXPECT_EQ(a.scores[i].known_fact, b.scores[i].known_fact) << "fact " << i;
    }
  }

  ScopedTempDir dir_;
  std::unique_ptr<PathModel> model_;
  std::unique_ptr<TripleStore> store_;
  ForwardCounter forwards_;
  std::unique_ptr<InferenceEngine> engine_;
  std::unique_ptr<LinkPredictor> cached_, plain_;
};

TEST_P(PassServingTest, AMixedBatchScoredThroughTheCacheAgreesToTheBitWithoutIt) {
  absl::StatusOr<ScoredFacts> plain = Score(*plain_, MixedBatch());
  ASSERT_TRUE(plain.ok()) << plain.status();
  absl::StatusOr<ScoredFacts> first = Score(*cached_, MixedBatch());
  ASSERT_TRUE(first.ok()) << first.status();
  const int forwards = forwards_.forwards;
  absl::StatusOr<ScoredFacts> again = Score(*cached_, MixedBatch());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(forwards_.forwards, forwards) << "asked again on the same graph: lookups only";
  ExpectSameBits(*plain, *first);
  ExpectSameBits(*plain, *again);
  for (const FactScore& s : again->scores) EXPECT_EQ(s.graph_sequence, again->graph_sequence);
  EXPECT_GT(cached_->passes().Stats().hits, 0);
}

TEST_P(PassServingTest, ARankingsPassAnswersTheFactsItCompletesWhenTheirPassIsTheQuerys) {
  absl::StatusOr<Ranking> ranking = RankTails(*cached_, Name(3), "r1");
  ASSERT_TRUE(ranking.ok()) << ranking.status();
  const int forwards = forwards_.forwards;
  std::vector<NamedTriple> facts;
  for (const RankedEntity& r : ranking->ranked) facts.push_back({Name(3), "r1", r.entity});
  absl::StatusOr<ScoredFacts> scored = Score(*cached_, facts);
  ASSERT_TRUE(scored.ok()) << scored.status();
  if (GetParam()) {
    // With the reach mask the facts' own neighbourhood is their tails' (smaller): a pass of
    // its own, equal but for the last bits.
    EXPECT_EQ(forwards_.forwards, forwards + 1);
    return;
  }
  // Without it, the tails' S is most of the graph: the query's whole pass, the ranking's.
  EXPECT_EQ(forwards_.forwards, forwards);
  for (size_t i = 0; i < facts.size(); ++i) {
    EXPECT_EQ(std::memcmp(&scored->scores[i].score, &ranking->ranked[i].score, sizeof(float)), 0)
        << facts[i].tail;
  }
}

TEST_P(PassServingTest, AWriteMakesExactCallsComputeAgainAndStaleCallsSayTheirSequence) {
  const std::vector<NamedTriple> fact = {{Name(3), "r1", Name(8)}};
  absl::StatusOr<ScoredFacts> before = Score(*cached_, fact);
  ASSERT_TRUE(before.ok()) << before.status();
  const uint64_t old_sequence = before->graph_sequence;
  ASSERT_TRUE(store_->AddChunk({{Name(40), "r2", Name(41)}}).ok());
  const uint64_t new_sequence = store_->Snapshot()->sequence();
  ASSERT_GT(new_sequence, old_sequence);

  int forwards = forwards_.forwards;
  Staleness stale;
  stale.max_sequences = new_sequence - old_sequence;
  absl::StatusOr<ScoredFacts> accepted = Score(*cached_, fact, stale);
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  EXPECT_EQ(forwards_.forwards, forwards);
  EXPECT_EQ(accepted->scores[0].graph_sequence, old_sequence);
  EXPECT_EQ(accepted->scores[0].score, before->scores[0].score);

  stale.min_sequence = new_sequence;  // read-your-writes wins over staleness
  absl::StatusOr<ScoredFacts> fresh = Score(*cached_, fact, stale);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(forwards_.forwards, forwards + 1);
  EXPECT_EQ(fresh->scores[0].graph_sequence, new_sequence);

  forwards = forwards_.forwards;
  absl::StatusOr<ScoredFacts> exact = Score(*cached_, fact);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(forwards_.forwards, forwards) << "the pass at the new sequence is kept";
  EXPECT_EQ(exact->scores[0].graph_sequence, new_sequence);
}

TEST_P(PassServingTest, AStaleCallTakesTheQuerysWholePassForAnyTail) {
  absl::StatusOr<Ranking> ranking = RankTails(*cached_, Name(3), "r1");
  ASSERT_TRUE(ranking.ok()) << ranking.status();
  ASSERT_TRUE(store_->AddChunk({{Name(40), "r2", Name(41)}}).ok());
  const int forwards = forwards_.forwards;
  Staleness stale;
  stale.max_sequences = 1;
  const RankedEntity& tail = ranking->ranked.back();
  absl::StatusOr<ScoredFacts> scored = Score(*cached_, {{Name(3), "r1", tail.entity}}, stale);
  ASSERT_TRUE(scored.ok()) << scored.status();
  EXPECT_EQ(forwards_.forwards, forwards) << "the ranking's pass, a version behind";
  EXPECT_EQ(scored->scores[0].graph_sequence, ranking->graph_sequence);
  EXPECT_EQ(scored->scores[0].score, tail.score);
}

TEST_P(PassServingTest, ConcurrentCallsForOneQueryRunOnePass) {
  const std::vector<NamedTriple> fact = {{Name(5), "r0", Name(9)}};
  const PassCacheStats before = cached_->passes().Stats();
  std::vector<std::thread> callers;
  std::vector<absl::StatusOr<ScoredFacts>> results(16, absl::UnknownError("not run"));
  for (int c = 0; c < 16; ++c) {
    callers.emplace_back([&, c] { results[c] = Score(*cached_, fact); });
  }
  for (std::thread& t : callers) t.join();
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->scores[0].score, results[0]->scores[0].score);
  }
  const PassCacheStats after = cached_->passes().Stats();
  EXPECT_EQ(after.misses - before.misses, 1);
  EXPECT_EQ(after.hits - before.hits, 15);
}

// A warm-up builds a path model's queries as ScoreTriplet serves them: past the subgraph limit
// without pruning, a query is skipped (serving refuses it) instead of read whole; with the
// server's budget, it is pruned to it and run.
TEST_P(PassServingTest, AWarmUpPrunesOrSkipsQueriesAsServingDoes) {
  const ServedModel& served = *cached_->served_model();
  WarmupOptions warmup;
  warmup.batches = 2;
  warmup.batch_size = 4;
  warmup.max_subgraph_nodes = 3;
  absl::StatusOr<int> forwards = WarmUp(served, *store_->Snapshot(), warmup);
  ASSERT_TRUE(forwards.ok()) << forwards.status();
  EXPECT_EQ(*forwards, 0);
  warmup.path_budget = PathBudget{3, 12};
  warmup.path_cap = warmup.path_budget;
  forwards = WarmUp(served, *store_->Snapshot(), warmup);
  ASSERT_TRUE(forwards.ok()) << forwards.status();
  EXPECT_EQ(*forwards, 2);
}

INSTANTIATE_TEST_SUITE_P(ReachMask, PassServingTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Masked" : "WholeGraph";
                         });

}  // namespace
}  // namespace grail
