// LinkPredictor in-process on a real TripleStore (RocksDB in a temporary directory): the
// exactness of rankings over every entity, which score far candidates once, against
// scoring every candidate alone; and the limits that bound a ranking.
#include "server/scoring/link_predictor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/scoring/online_evaluation.h"
#include "tests/testing/reference_extraction.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kRelations = {"r0", "r1", "r2", "r3"};

// Batched float32 products round differently for different batch shapes (the proto's
// contract for RankedEntity.score).
constexpr float kRelativeTolerance = 1e-5f;
float Tolerance(float score) { return kRelativeTolerance * std::max(1.0f, std::fabs(score)); }

class CountingObserver : public EngineObserver {
 public:
  void OnSubgraphExtracted(int, int, double) override { ++extracted; }
  void OnCallRejected(absl::string_view limit) override { last_rejected = std::string(limit); }
  std::atomic<int> extracted{0};
  std::string last_rejected;
};

absl::StatusOr<Ranking> RankNow(const LinkPredictor& predictor, RankQuery query) {
  std::promise<absl::StatusOr<Ranking>> outcome;
  predictor.Rank(std::move(query), std::make_shared<CallControl>(),
                 [&outcome](absl::StatusOr<Ranking> r) { outcome.set_value(std::move(r)); });
  return outcome.get_future().get();
}

absl::StatusOr<ScoredFacts> ScoreNow(const LinkPredictor& predictor, NamedTriple fact) {
  std::promise<absl::StatusOr<ScoredFacts>> outcome;
  predictor.Score({std::move(fact)}, std::make_shared<CallControl>(),
                  [&outcome](absl::StatusOr<ScoredFacts> s) { outcome.set_value(std::move(s)); });
  return outcome.get_future().get();
}

std::string Name(uint64_t e) { return absl::StrCat("e", e); }

// A random graph of several parts that share no entity: part 0 has a hub joined to about
// half of its entities; a few entities have self-loops; relation r3 is never used, so
// queries with it score a relation the graph does not hold.
std::vector<NamedTriple> RandomGraph(SeededRandom& rng, uint32_t n) {
  const uint32_t parts = 1 + static_cast<uint32_t>(rng.Uniform(4));
  std::vector<NamedTriple> facts;
  auto in_part = [&](uint32_t part) {
    const uint32_t slots = (n - part + parts - 1) / parts;
    return part + parts * rng.Uniform(slots);
  };
  const uint32_t m = n + static_cast<uint32_t>(rng.Uniform(n));
  for (uint32_t i = 0; i < m; ++i) {
    const uint32_t part = static_cast<uint32_t>(rng.Uniform(parts));
    const uint64_t h = in_part(part), t = in_part(part);
    if (h == t) continue;
    facts.push_back({Name(h), kRelations[rng.Uniform(3)], Name(t)});
  }
  facts.push_back({Name(0), "r1", Name(parts)});
  for (uint32_t e = 2 * parts; e < n; e += parts) {
    if (rng.Uniform(2) == 0) facts.push_back({Name(0), "r0", Name(e)});
  }
  for (int loops = static_cast<int>(rng.Uniform(3)); loops > 0; --loops) {
    const uint64_t e = rng.Uniform(n);
    facts.push_back({Name(e), kRelations[rng.Uniform(3)], Name(e)});
  }
  return facts;
}

struct ServingStack {
  GrailConfig config;
  std::unique_ptr<GrailModel> model;
  ScopedTempDir dir;
  std::unique_ptr<TripleStore> store;
  CountingObserver observer;
  std::unique_ptr<InferenceEngine> engine;
  std::unique_ptr<LinkPredictor> predictor;

  void Start(const std::vector<NamedTriple>& facts, const RankLimits& limits = RankLimits(),
             int max_batch_size = 7) {
    absl::StatusOr<std::unique_ptr<GrailModel>> created =
        GrailModel::Create(config, kRelations, /*seed=*/5);
    ASSERT_TRUE(created.ok()) << created.status();
    model = *std::move(created);
    absl::StatusOr<std::unique_ptr<TripleStore>> opened = TripleStore::Open(dir.Sub("store"), {});
    ASSERT_TRUE(opened.ok()) << opened.status();
    store = *std::move(opened);
    ASSERT_TRUE(store->AddChunk(facts).ok());
    EngineOptions options;
    options.max_batch_size = max_batch_size;
    options.extraction_threads = 2;
    engine = std::make_unique<InferenceEngine>(options, &observer);
    // The test keeps owning the model; the served copy only points at it.
    predictor = std::make_unique<LinkPredictor>(
        std::make_shared<const ServedModel>(
            std::shared_ptr<const GrailModel>(std::shared_ptr<void>(), model.get()), "test.pt",
            "0123456789abcdef", 1),
        *store, *engine, limits);
  }
};

// Checks one ranking against every candidate scored alone (ScoreTriplet's path).
void CheckRanking(const LinkPredictor& predictor, const RankQuery& query,
                  const GrailConfig& config) {
  SCOPED_TRACE(absl::StrCat(query.rank_tails ? "tails of (" : "heads of (?, ", query.fixed, ", ",
                            query.relation, query.rank_tails ? ", ?)" : ")", " top_k=", query.top_k,
                            " filter=", query.filter_known_facts, " k=", config.hops,
                            " cap=", config.max_nodes_per_hop));
  const std::shared_ptr<const GraphSnapshot> graph = predictor.store().Snapshot();
  const EntityId fixed = *graph->FindEntity(query.fixed);
  const std::optional<RelationId> relation = graph->FindRelation(query.relation);

  // Every candidate alone.
  absl::flat_hash_map<std::string, float> alone;
  absl::flat_hash_map<std::string, bool> known;
  uint32_t filtered = 0;
  for (EntityId c = 0; c < graph->num_entities(); ++c) {
    if (c == fixed) continue;
    const EntityId head = query.rank_tails ? fixed : c, tail = query.rank_tails ? c : fixed;
    const bool is_fact = relation.has_value() && graph->HasFact(head, *relation, tail);
    if (query.filter_known_facts && is_fact) {
      ++filtered;
      continue;
    }
    absl::StatusOr<ScoredFacts> s =
        ScoreNow(predictor, {graph->EntityName(head), query.relation, graph->EntityName(tail)});
    ASSERT_TRUE(s.ok()) << s.status();
    alone[graph->EntityName(c)] = s->scores[0].score;
    known[graph->EntityName(c)] = s->scores[0].known_fact;
  }

  absl::StatusOr<Ranking> ranking = RankNow(predictor, query);
  ASSERT_TRUE(ranking.ok()) << ranking.status();
  EXPECT_EQ(ranking->candidates_scored, alone.size());
  EXPECT_EQ(ranking->candidates_filtered, filtered);
  const size_t expected_size =
      query.top_k == 0 ? alone.size() : std::min<size_t>(query.top_k, alone.size());
  ASSERT_EQ(ranking->ranked.size(), expected_size);

  // Far candidates (k + 2 hops or more, no self-loop) share one score.
  if (config.enclosing) {
    const std::vector<int> dist = ReferenceDistances(*graph, fixed);
    const absl::Span<const EntityId> loops = graph->SelfLoopEntities();
    uint32_t far = 0;
    for (EntityId c = 0; c < graph->num_entities(); ++c) {
      if (c == fixed || std::binary_search(loops.begin(), loops.end(), c)) continue;
      far += dist[c] < 0 || dist[c] >= config.hops + 2;
    }
    EXPECT_EQ(ranking->candidates_shared_score, far);
  }

  for (size_t i = 0; i < ranking->ranked.size(); ++i) {
    const RankedEntity& r = ranking->ranked[i];
    ASSERT_TRUE(alone.contains(r.entity)) << r.entity;
    const float expected = alone[r.entity];
    EXPECT_NEAR(r.score, expected, Tolerance(expected)) << r.entity;
    EXPECT_EQ(r.known_fact, known[r.entity]) << r.entity;
    // Rank: 1 + the candidates scoring higher; ties within the tolerance may go either way.
    int higher = 0, tied = 0;
    for (const auto& [name, score] : alone) {
      if (name == r.entity) continue;
      if (score > expected + Tolerance(expected)) {
        ++higher;
      } else if (score >= expected - Tolerance(expected)) {
        ++tied;
      }
    }
    EXPECT_GE(static_cast<int>(r.rank), 1 + higher) << r.entity;
    EXPECT_LE(static_cast<int>(r.rank), 1 + higher + tied) << r.entity;
    if (i > 0) {
      const RankedEntity& previous = ranking->ranked[i - 1];
      EXPECT_GE(previous.score, r.score);
      EXPECT_EQ(r.rank, previous.score == r.score ? previous.rank : i + 1);
    }
  }
  // A top_k list holds the best: nothing left out scores clearly higher than its last.
  if (!ranking->ranked.empty() && ranking->ranked.size() < alone.size()) {
    absl::flat_hash_map<std::string, bool> kept;
    for (const RankedEntity& r : ranking->ranked) kept[r.entity] = true;
    const float last = alone[ranking->ranked.back().entity];
    for (const auto& [name, score] : alone) {
      if (!kept.contains(name)) {
        EXPECT_LE(score, last + Tolerance(last)) << name;
      }
    }
  }
}

TEST(LinkPredictorRankingTest, RankingEveryEntityEqualsScoringEachCandidateAlone) {
  SeededRandom rng(20261123);
  int rankings = 0, shared = 0;
  for (int trial = 0; trial < 12; ++trial) {
    ServingStack s;
    s.config.hops = 1 + static_cast<int>(rng.Uniform(3));
    s.config.max_nodes_per_hop = trial % 3 == 2 ? 2 + static_cast<int>(rng.Uniform(3)) : 0;
    const uint32_t n = 30 + static_cast<uint32_t>(rng.Uniform(50));
    const std::vector<NamedTriple> facts = RandomGraph(rng, n);
    ASSERT_NO_FATAL_FAILURE(s.Start(facts));
    const std::shared_ptr<const GraphSnapshot> graph = s.store->Snapshot();
    // The hub, a random entity, one with a self-loop if any.
    std::vector<EntityId> fixed = {*graph->FindEntity("e0"),
                                   static_cast<EntityId>(rng.Uniform(graph->num_entities()))};
    if (!graph->SelfLoopEntities().empty()) fixed.push_back(graph->SelfLoopEntities()[0]);
    for (EntityId f : fixed) {
      RankQuery query;
      query.rank_tails = rng.Uniform(2) == 0;
      query.fixed = graph->EntityName(f);
      query.relation = kRelations[rng.Uniform(4)];  // r3: a relation the graph never uses
      query.top_k = std::vector<uint32_t>{0, 1, 5}[rng.Uniform(3)];
      query.filter_known_facts = rng.Uniform(2) == 0;
      ASSERT_NO_FATAL_FAILURE(CheckRanking(*s.predictor, query, s.config));
      ++rankings;
      absl::StatusOr<Ranking> r = RankNow(*s.predictor, query);
      shared += r.ok() && r->candidates_shared_score > 0;
    }
  }
  EXPECT_GE(rankings, 24);
  EXPECT_GT(shared, 5);  // the shortcut was exercised
}

// With an answer, a ranking also says where it ranks among every candidate, as the benchmarks
// rank an answer (1 + those above + half those level), whatever top_k keeps: near or far (the
// far ones share a score), and 0 for one that is no candidate (the fixed entity, a filtered
// known answer, one left out of an explicit list).
TEST(LinkPredictorRankingTest, TheAnswersRankIsItsMeanPlaceAmongEveryCandidate) {
  SeededRandom rng(20261207);
  int far_answers = 0, near_answers = 0;
  for (int trial = 0; trial < 6; ++trial) {
    ServingStack s;
    s.config.hops = 1 + static_cast<int>(rng.Uniform(2));
    ASSERT_NO_FATAL_FAILURE(s.Start(RandomGraph(rng, 30 + static_cast<uint32_t>(rng.Uniform(30)))));
    const std::shared_ptr<const GraphSnapshot> graph = s.store->Snapshot();
    RankQuery query;
    query.rank_tails = trial % 2 == 0;
    query.fixed = "e0";
    query.relation = "r0";
    query.filter_known_facts = true;
    query.top_k = 0;
    for (int a = 0; a < 4; ++a) {
      query.answer = graph->EntityName(static_cast<EntityId>(rng.Uniform(graph->num_entities())));
      if (query.answer == query.fixed) continue;
      const EntityId answer = *graph->FindEntity(query.answer);
      const EntityId fixed = *graph->FindEntity(query.fixed);
      const std::optional<RelationId> r0 = graph->FindRelation("r0");
      const bool known = r0 && (query.rank_tails ? graph->HasFact(fixed, *r0, answer)
                                                 : graph->HasFact(answer, *r0, fixed));
      absl::StatusOr<Ranking> all = RankNow(*s.predictor, query);
      ASSERT_TRUE(all.ok()) << all.status();
      const auto it = std::find_if(all->ranked.begin(), all->ranked.end(),
                                   [&](const RankedEntity& r) { return r.entity == query.answer; });
      if (known) {
        EXPECT_EQ(it, all->ranked.end());
        EXPECT_EQ(all->answer_rank, 0);  // filtered
        continue;
      }
      ASSERT_NE(it, all->ranked.end()) << query.answer;
      double higher = 0, level = 0;
      for (const RankedEntity& r : all->ranked) {
        if (r.entity == query.answer) continue;
        higher += r.score > it->score;
        level += r.score == it->score;
      }
      EXPECT_EQ(all->answer_rank, 1 + higher + level / 2) << query.answer;
      (level > 0 ? far_answers : near_answers) += 1;
      // Kept or not, the answer ranks the same.
      RankQuery top = query;
      top.top_k = 1;
      absl::StatusOr<Ranking> one = RankNow(*s.predictor, top);
      ASSERT_TRUE(one.ok()) << one.status();
      EXPECT_EQ(one->ranked.size(), 1u);
      EXPECT_NEAR(one->answer_rank, all->answer_rank, level / 2 + 1) << query.answer;
    }
    query.answer = query.fixed;
    absl::StatusOr<Ranking> itself = RankNow(*s.predictor, query);
    ASSERT_TRUE(itself.ok());
    EXPECT_EQ(itself->answer_rank, 0);
    RankQuery listed = query;
    std::vector<std::string> others;  // three entities other than e0
    for (EntityId e = 0; others.size() < 3; ++e) {
      if (graph->EntityName(e) != query.fixed) others.push_back(graph->EntityName(e));
    }
    listed.candidates = {others[0], others[1]};
    listed.answer = others[2];
    absl::StatusOr<Ranking> left_out = RankNow(*s.predictor, listed);
    ASSERT_TRUE(left_out.ok());
    EXPECT_EQ(left_out->answer_rank, 0);
    listed.answer = "no-such-entity";
    EXPECT_EQ(RankNow(*s.predictor, listed).status().code(), absl::StatusCode::kNotFound);
  }
  EXPECT_GT(far_answers, 0);
  EXPECT_GT(near_answers, 0);
}

TEST(LinkPredictorRankingTest, WithoutEnclosingSubgraphsEveryCandidateIsScoredAlone) {
  SeededRandom rng(3);
  ServingStack s;
  s.config.hops = 2;
  s.config.enclosing = false;
  ASSERT_NO_FATAL_FAILURE(s.Start(RandomGraph(rng, 40)));
  RankQuery query;
  query.fixed = "e0";
  query.relation = "r1";
  ASSERT_NO_FATAL_FAILURE(CheckRanking(*s.predictor, query, s.config));
  absl::StatusOr<Ranking> r = RankNow(*s.predictor, query);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->candidates_shared_score, 0u);
}

// A ranking over every entity extracts the near candidates and one representative of the
// far ones, whatever the size of the rest of the graph.
TEST(LinkPredictorRankingTest, FarCandidatesCostOneSubgraphTogether) {
  // A path e0 - e1 - e2 - e3 - e4, then 300 isolated pairs.
  std::vector<NamedTriple> facts = {
      {"e0", "r0", "e1"}, {"e1", "r1", "e2"}, {"e2", "r0", "e3"}, {"e3", "r2", "e4"}};
  for (int i = 0; i < 300; ++i) facts.push_back({Name(100 + 2 * i), "r0", Name(101 + 2 * i)});
  ServingStack s;
  s.config.hops = 2;  // near: within k + 1 = 3 hops of e0, i.e. e1, e2, e3
  ASSERT_NO_FATAL_FAILURE(s.Start(facts));
  RankQuery query;
  query.fixed = "e0";
  query.relation = "r0";
  query.top_k = 10;
  const int before = s.observer.extracted.load();
  absl::StatusOr<Ranking> r = RankNow(*s.predictor, query);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(s.observer.extracted.load() - before, 3 + 1);
  EXPECT_EQ(r->candidates_scored, 4u + 600u);
  EXPECT_EQ(r->candidates_shared_score, 1u + 600u);  // e4 and every isolated entity
  EXPECT_EQ(r->ranked.size(), 10u);
}

TEST(LinkPredictorRankingTest, TooManyNearCandidatesIsRefusedSayingHowToNarrowTheCall) {
  std::vector<NamedTriple> facts;
  for (int i = 1; i <= 50; ++i) facts.push_back({"e0", "r0", Name(i)});  // a star
  ServingStack s;
  s.config.hops = 1;
  RankLimits limits;
  limits.max_rank_subgraphs = 20;
  ASSERT_NO_FATAL_FAILURE(s.Start(facts, limits));
  RankQuery query;
  query.fixed = "e0";
  query.relation = "r0";
  absl::StatusOr<Ranking> r = RankNow(*s.predictor, query);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("--max-rank-subgraphs"));
  EXPECT_THAT(r.status().message(), HasSubstr("options.candidates"));
  EXPECT_EQ(s.observer.last_rejected, "max_rank_subgraphs");
  // An explicit list within the limit is fine.
  query.candidates = {"e1", "e2", "e3"};
  EXPECT_TRUE(RankNow(*s.predictor, query).ok());
}

TEST(LinkPredictorRankingTest, ReturningEverythingBeyondTheResultLimitAsksForTopK) {
  std::vector<NamedTriple> facts;
  for (int i = 0; i < 40; ++i) facts.push_back({Name(2 * i), "r0", Name(2 * i + 1)});
  ServingStack s;
  RankLimits limits;
  limits.max_rank_results = 30;
  ASSERT_NO_FATAL_FAILURE(s.Start(facts, limits));
  RankQuery query;
  query.fixed = "e0";
  query.relation = "r0";
  absl::StatusOr<Ranking> r = RankNow(*s.predictor, query);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(r.status().message(), HasSubstr("--max-rank-results"));
  EXPECT_THAT(r.status().message(), HasSubstr("top_k"));
  query.top_k = 30;
  absl::StatusOr<Ranking> top = RankNow(*s.predictor, query);
  ASSERT_TRUE(top.ok()) << top.status();
  EXPECT_EQ(top->ranked.size(), 30u);
}

TEST(LinkPredictorRankingTest, ExplicitCandidatesExcludeTheFixedEntityAndDuplicates) {
  SeededRandom rng(11);
  ServingStack s;
  s.config.hops = 2;
  ASSERT_NO_FATAL_FAILURE(s.Start(RandomGraph(rng, 30)));
  RankQuery query;
  query.fixed = "e0";
  query.relation = "r2";
  query.candidates = {"e3", "e0", "e5", "e3", "e7"};
  absl::StatusOr<Ranking> r = RankNow(*s.predictor, query);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->candidates_scored, 3u);
  EXPECT_EQ(r->candidates_shared_score, 0u);
  for (const RankedEntity& e : r->ranked) {
    absl::StatusOr<ScoredFacts> alone = ScoreNow(*s.predictor, {"e0", "r2", e.entity});
    ASSERT_TRUE(alone.ok());
    EXPECT_NEAR(e.score, alone->scores[0].score, Tolerance(alone->scores[0].score));
  }
  query.candidates = {"e3", "nobody"};
  EXPECT_EQ(RankNow(*s.predictor, query).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace grail

namespace grail {
namespace {

// What an OnlineEvaluator reported.
class RecordingOnlineObserver : public OnlineEvalObserver {
 public:
  void OnOnlineRank(const std::string& model_version, double rank, double window_mrr,
                    double window_hits_at_10, size_t window_ranks) override {
    absl::MutexLock lock(&mu);
    ranks.push_back(rank);
    last_mrr = window_mrr;
  }
  void OnOnlineSkipped(const std::string& reason, size_t queries) override {
    absl::MutexLock lock(&mu);
    skipped[reason] += queries;
  }
  absl::Mutex mu;
  std::vector<double> ranks;
  double last_mrr = 0;
  std::map<std::string, size_t> skipped;
};

void AwaitRankings(const OnlineEvaluator& evaluator) {
  while (evaluator.in_flight() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

TEST(RankWindowTest, AveragesTheLastRanksOnly) {
  RankWindow window(2);
  EXPECT_EQ(window.mrr(), 0);
  window.Add(1);
  window.Add(4);
  window.Add(10);
  EXPECT_EQ(window.count(), 2u);
  EXPECT_DOUBLE_EQ(window.mrr(), (1.0 / 4 + 1.0 / 10) / 2);
  EXPECT_EQ(window.hits_at_10(), 1.0);
  window.Add(11);
  EXPECT_EQ(window.hits_at_10(), 0.5);
}

// A chunk's facts are ranked on the graph before it (as a ranking with the answer ranks them
// then), reported only once it is stored; a refused chunk's ranks are dropped; within a small
// CPU share the next chunk waits out the pause unranked; new entities are counted apart.
TEST(OnlineEvaluatorTest, RanksOnTheGraphBeforeTheChunkAndReportsOnlyStoredChunks) {
  SeededRandom rng(7);
  ServingStack s;
  s.config.hops = 2;
  ASSERT_NO_FATAL_FAILURE(s.Start(RandomGraph(rng, 40)));
  std::shared_ptr<const GraphSnapshot> graph = s.store->Snapshot();
  std::vector<NamedTriple> fresh;  // facts between stored entities the graph lacks
  for (EntityId h = 0; fresh.size() < 4; ++h) {
    for (EntityId t = 0; t < graph->num_entities() && fresh.size() < 4; t += 7) {
      if (h != t && !graph->HasFact(h, *graph->FindRelation("r0"), t)) {
        fresh.push_back({graph->EntityName(h), "r0", graph->EntityName(t)});
        break;
      }
    }
  }
  std::vector<double> expected;
  for (const NamedTriple& f : {fresh[0], fresh[1]}) {
    for (const bool tails : {true, false}) {
      RankQuery q;
      q.rank_tails = tails;
      q.fixed = tails ? f.head : f.tail;
      q.answer = tails ? f.tail : f.head;
      q.relation = f.relation;
      q.top_k = 1;
      q.filter_known_facts = true;
      absl::StatusOr<Ranking> r = RankNow(*s.predictor, q);
      ASSERT_TRUE(r.ok()) << r.status();
      expected.push_back(r->answer_rank);
    }
  }

  RecordingOnlineObserver observer;
  OnlineEvalOptions options;
  options.rate = 1;
  options.cpu_share = 1;
  {
    OnlineEvaluator evaluator(*s.predictor, options, &observer);
    const std::vector<NamedTriple> chunk = {fresh[0], fresh[1], {fresh[0].head, "r0", "new"}};
    std::shared_ptr<OnlineEvaluator::Chunk> evaluated = evaluator.BeforeApply(chunk);
    ASSERT_NE(evaluated, nullptr);
    ASSERT_TRUE(s.store->AddChunk(chunk).ok());
    AwaitRankings(evaluator);  // ended, but not reported before the outcome
    {
      absl::MutexLock lock(&observer.mu);
      EXPECT_TRUE(observer.ranks.empty());
      EXPECT_EQ(observer.skipped["new_entity"], 2u);
    }
    evaluator.AfterApply(evaluated, /*stored=*/true);
    {
      absl::MutexLock lock(&observer.mu);
      ASSERT_EQ(observer.ranks.size(), 4u);
      std::vector<double> got = observer.ranks, want = expected;
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(got[i], want[i], 1) << i;
    }

    // Refused: its rankings run, and are dropped.
    std::shared_ptr<OnlineEvaluator::Chunk> refused = evaluator.BeforeApply({fresh[2]});
    ASSERT_NE(refused, nullptr);
    evaluator.AfterApply(refused, /*stored=*/false);
    AwaitRankings(evaluator);
    absl::MutexLock lock(&observer.mu);
    EXPECT_EQ(observer.skipped["dropped"], 2u);
    EXPECT_EQ(observer.ranks.size(), 4u);
  }

  // A share of 1e-6: the pause after one chunk's rankings outlasts the test.
  options.cpu_share = 1e-6;
  OnlineEvaluator paced(*s.predictor, options, &observer);
  std::shared_ptr<OnlineEvaluator::Chunk> first = paced.BeforeApply({fresh[2]});
  ASSERT_NE(first, nullptr);
  paced.AfterApply(first, true);
  AwaitRankings(paced);
  EXPECT_EQ(paced.BeforeApply({fresh[3]}), nullptr);
  absl::MutexLock lock(&observer.mu);
  EXPECT_EQ(observer.skipped["busy"], 2u);
  EXPECT_EQ(observer.ranks.size(), 6u);
}

}  // namespace
}  // namespace grail
