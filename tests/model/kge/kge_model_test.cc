// The KGE models: each model's score equation, ranking every entity in one call, archives,
// training (training facts above their corruptions, a held-out symmetric fact, resume) and
// the evaluation's filtered ranking against every entity.
#include "model/kge/kge_model.h"

#include <cmath>
#include <complex>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"
#include "eval/kge_evaluation.h"
#include "eval/ranking_metrics.h"
#include "gmock/gmock.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "gtest/gtest.h"
#include "model/families.h"
#include "model/grail/grail_model.h"
#include "model/path/path_model.h"
#include "tests/testing/temp_dir.h"
#include "train/kge_trainer.h"

namespace grail {
namespace {

using ::testing::HasSubstr;

constexpr double kPi = 3.14159265358979323846;

std::vector<std::string> Names(const std::string& prefix, int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(absl::StrCat(prefix, i));
  return names;
}

std::unique_ptr<KgeModel> Make(KgeKind kind, int entities = 7, int relations = 3, int dim = 5) {
  KgeConfig config;
  config.kind = kind;
  config.dim = dim;
  config.gamma = 6;
  absl::StatusOr<std::unique_ptr<KgeModel>> model =
      KgeModel::Create(config, Names("e", entities), Names("r", relations), /*seed=*/3);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

// The score of (h, r, t) computed here from the embeddings, as kge_model.h writes it.
double ByHand(const KgeModel& model, const Triple& f) {
  const std::vector<float> h = model.EntityEmbedding(f.head);
  const std::vector<float> r = model.RelationEmbedding(f.relation);
  const std::vector<float> t = model.EntityEmbedding(f.tail);
  const KgeConfig& c = model.config();
  const int d = c.dim;
  double s = 0;
  switch (c.kind) {
    case KgeKind::kTransE:
      for (int i = 0; i < d; ++i) s += std::abs(h[i] + r[i] - t[i]);
      return c.gamma - s;
    case KgeKind::kDistMult:
      for (int i = 0; i < d; ++i) s += h[i] * r[i] * t[i];
      return s;
    case KgeKind::kComplEx:
      for (int i = 0; i < d; ++i) {
        const std::complex<double> hc(h[i], h[d + i]), rc(r[i], r[d + i]), tc(t[i], t[d + i]);
        s += (hc * rc * std::conj(tc)).real();
      }
      return s;
    case KgeKind::kRotatE:
      for (int i = 0; i < d; ++i) {
        const double theta = r[i] / (c.embedding_range() / kPi);
        const std::complex<double> hc(h[i], h[d + i]), tc(t[i], t[d + i]);
        s += std::abs(hc * std::polar(1.0, theta) - tc);
      }
      return c.gamma - s;
  }
  return 0;
}

class KgeKindTest : public ::testing::TestWithParam<KgeKind> {};

INSTANTIATE_TEST_SUITE_P(AllModels, KgeKindTest,
                         ::testing::Values(KgeKind::kTransE, KgeKind::kDistMult, KgeKind::kComplEx,
                                           KgeKind::kRotatE),
                         [](const auto& info) { return std::string(KgeKindName(info.param)); });

TEST_P(KgeKindTest, ScoresFollowTheModelsEquation) {
  std::unique_ptr<KgeModel> model = Make(GetParam());
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->EntityEmbedding(0).size(), static_cast<size_t>(model->config().entity_width()));
  const std::vector<Triple> facts = {{0, 0, 1}, {2, 1, 3}, {6, 2, 0}, {4, 1, 4}};
  absl::StatusOr<std::vector<float>> scores = model->ScoreGrailFacts(facts);
  ASSERT_TRUE(scores.ok()) << scores.status();
  for (size_t i = 0; i < facts.size(); ++i) {
    EXPECT_NEAR((*scores)[i], ByHand(*model, facts[i]), 1e-5) << "fact " << i;
  }
  EXPECT_FALSE(model->ScoreGrailFacts(std::vector<Triple>{{7, 0, 1}}).ok());
  EXPECT_FALSE(model->ScoreGrailFacts(std::vector<Triple>{{0, 3, 1}}).ok());
}

TEST_P(KgeKindTest, RankingEveryEntityScoresAsEachFact) {
  std::unique_ptr<KgeModel> model = Make(GetParam(), /*entities=*/9);
  ASSERT_NE(model, nullptr);
  const std::vector<KgeQuery> queries = {{2, 1, false}, {5, 0, true}, {0, 2, false}, {8, 2, true}};
  absl::StatusOr<std::vector<float>> all = model->ScoreAll(queries);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), queries.size() * 9);
  for (size_t q = 0; q < queries.size(); ++q) {
    for (EntityId e = 0; e < 9; ++e) {
      const KgeQuery& k = queries[q];
      const Triple fact =
          k.inverse ? Triple{e, k.relation, k.anchor} : Triple{k.anchor, k.relation, e};
      absl::StatusOr<std::vector<float>> one = model->ScoreGrailFacts(std::vector<Triple>{fact});
      ASSERT_TRUE(one.ok());
      EXPECT_NEAR((*all)[q * 9 + e], (*one)[0], 1e-4) << "query " << q << " entity " << e;
    }
  }
}

TEST(KgeModelTest, ArchivesRoundTripAndNameTheirFamily) {
  std::unique_ptr<KgeModel> model = Make(KgeKind::kComplEx);
  ASSERT_NE(model, nullptr);
  model->set_training_fingerprint("fnv1a64:test");
  const std::string path = ProcessTempPath("kge_archive.pt");
  ASSERT_TRUE(model->Save(path).ok());
  absl::StatusOr<std::unique_ptr<KgeModel>> loaded = KgeModel::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->config().kind, KgeKind::kComplEx);
  EXPECT_EQ((*loaded)->config().dim, 5);
  EXPECT_EQ((*loaded)->entities(), model->entities());
  EXPECT_EQ((*loaded)->relations(), model->relations());
  EXPECT_EQ((*loaded)->training_fingerprint(), "fnv1a64:test");
  const std::vector<Triple> facts = {{0, 0, 1}, {3, 2, 5}};
  EXPECT_EQ(*(*loaded)->ScoreGrailFacts(facts), *model->ScoreGrailFacts(facts));

  absl::StatusOr<AnyModel> any = LoadAnyModel(path);
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(any->family(), ModelFamily::kKge);
  ASSERT_NE(any->kge, nullptr);
  EXPECT_THAT(GrailModel::Load(path).status().message(), HasSubstr("not a"));
  EXPECT_THAT(PathModel::Load(path).status().message(), HasSubstr("not a"));
  std::filesystem::remove(path);
}

TEST(KgeModelTest, BadConfigsAndNamesAreRefused) {
  EXPECT_EQ(*ParseKgeKind("RotatE"), KgeKind::kRotatE);
  EXPECT_EQ(*ParseKgeKind("transe"), KgeKind::kTransE);
  EXPECT_THAT(ParseKgeKind("conve").status().message(), HasSubstr("transe, distmult"));
  KgeConfig config;
  config.dim = 0;
  EXPECT_FALSE(KgeModel::Create(config, Names("e", 3), Names("r", 1), 0).ok());
  config.dim = 4;
  config.gamma = 0;
  EXPECT_FALSE(KgeModel::Create(config, Names("e", 3), Names("r", 1), 0).ok());
  config.gamma = 1;
  EXPECT_FALSE(KgeModel::Create(config, {}, Names("r", 1), 0).ok());
  EXPECT_TRUE(KgeModel::Create(config, Names("e", 3), Names("r", 1), 0).ok());
}

// Random facts over `entities` entities and 3 relations, by name.
std::vector<NamedTriple> RandomFacts(int entities, int facts, uint64_t seed) {
  SeededRandom random(seed);
  std::set<std::string> seen;
  std::vector<NamedTriple> out;
  while (static_cast<int>(out.size()) < facts) {
    const uint64_t h = random.Uniform(entities);
    const uint64_t t = random.Uniform(entities);
    const uint64_t r = random.Uniform(3);
    if (h == t || !seen.insert(absl::StrCat(h, " ", r, " ", t)).second) continue;
    out.push_back({absl::StrCat("e", h), absl::StrCat("r", r), absl::StrCat("e", t)});
  }
  return out;
}

KgeTrainOptions SmallRun(KgeKind kind) {
  KgeTrainOptions o;
  o.model.kind = kind;
  o.model.dim = 16;
  o.model.gamma = 6;
  o.epochs = 40;
  o.batch_size = 64;
  o.negatives = 16;
  o.learning_rate = 0.02;
  o.eval_every = 1000;  // only the last epoch validates
  o.threads = 1;
  return o;
}

// The share of training facts that score above the same fact with a random other tail.
double ShareAboveCorruptions(const KgeModel& model, const IndexedTriples& data) {
  SeededRandom random(99);
  std::vector<Triple> corrupted;
  for (const Triple& f : data.triples) {
    EntityId t = static_cast<EntityId>(random.Uniform(data.entities.size() - 1));
    if (t >= f.tail) ++t;
    corrupted.push_back({f.head, f.relation, t});
  }
  const std::vector<float> positive = *model.ScoreGrailFacts(data.triples);
  const std::vector<float> negative = *model.ScoreGrailFacts(corrupted);
  double above = 0;
  for (size_t i = 0; i < positive.size(); ++i) above += positive[i] > negative[i];
  return above / static_cast<double>(positive.size());
}

TEST_P(KgeKindTest, TrainingScoresTheTrainingFactsAboveTheirCorruptions) {
  IndexedTriples data;
  IndexTriples(RandomFacts(40, 240, 5), &data);
  KgeTrainOptions options = SmallRun(GetParam());
  KgeTrainOptions untrained = options;
  untrained.learning_rate = 1e-12;
  untrained.epochs = 1;
  absl::StatusOr<std::unique_ptr<KgeModel>> before = TrainKge(data, {}, untrained);
  ASSERT_TRUE(before.ok()) << before.status();
  absl::StatusOr<std::unique_ptr<KgeModel>> after = TrainKge(data, {}, options);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_LT(ShareAboveCorruptions(**before, data), 0.7);
  EXPECT_GT(ShareAboveCorruptions(**after, data), 0.8);
}

// A symmetric relation whose reverse facts are held out for 20 of its 100 pairs: the
// bilinear models score (a, s, b) and (b, s, a) alike, so they must rank the held-out ones.
struct SymmetricSplit {
  std::vector<NamedTriple> train, test;
};

SymmetricSplit Symmetric() {
  SymmetricSplit split;
  SeededRandom random(8);
  std::set<std::pair<uint64_t, uint64_t>> pairs;
  while (pairs.size() < 100) {
    const uint64_t a = random.Uniform(60), b = random.Uniform(60);
    if (a < b) pairs.insert({a, b});
  }
  int i = 0;
  for (const auto& [a, b] : pairs) {
    const std::string x = absl::StrCat("e", a), y = absl::StrCat("e", b);
    split.train.push_back({x, "s", y});
    (i++ < 20 ? split.test : split.train).push_back({y, "s", x});
  }
  return split;
}

TEST(KgeTrainingTest, DistMultRanksHeldOutSymmetricFactsNearTheTop) {
  const SymmetricSplit split = Symmetric();
  IndexedTriples data;
  IndexTriples(split.train, &data);
  const StaticGraph graph(data.entities.size(), data.triples);
  std::vector<Triple> test;
  for (const NamedTriple& f : split.test) {
    test.push_back({*data.entities.Find(f.head), *data.relations.Find(f.relation),
                    *data.entities.Find(f.tail)});
  }
  KgeTrainOptions options = SmallRun(KgeKind::kDistMult);
  options.epochs = 60;
  KgeEvaluationOptions eval;
  eval.sampled = false;
  KgeTrainOptions untrained = options;
  untrained.epochs = 1;
  untrained.learning_rate = 1e-12;
  absl::StatusOr<std::unique_ptr<KgeModel>> before = TrainKge(data, {}, untrained);
  absl::StatusOr<std::unique_ptr<KgeModel>> after = TrainKge(data, split.test, options);
  ASSERT_TRUE(before.ok() && after.ok());
  const double mrr_before = EvaluateKge(**before, graph, {}, test, eval)->full->mrr;
  const double mrr_after = EvaluateKge(**after, graph, {}, test, eval)->full->mrr;
  EXPECT_LT(mrr_before, 0.3);
  EXPECT_GT(mrr_after, 0.6);
}

TEST(KgeTrainingTest, TrainingResumedFromACheckpointEqualsTrainingStraight) {
  IndexedTriples data;
  IndexTriples(RandomFacts(30, 150, 6), &data);
  const std::vector<NamedTriple> valid = RandomFacts(30, 20, 7);
  KgeTrainOptions options = SmallRun(KgeKind::kRotatE);
  options.epochs = 4;
  options.lr_decay_epoch = 2;
  options.eval_every = 1;
  absl::StatusOr<std::unique_ptr<KgeModel>> straight = TrainKge(data, valid, options);
  ASSERT_TRUE(straight.ok()) << straight.status();

  const std::string dir = ProcessTempPath("kge_resume");
  std::filesystem::remove_all(dir);
  KgeTrainOptions first = options;
  first.epochs = 2;
  first.checkpoint_dir = dir;
  ASSERT_TRUE(TrainKge(data, valid, first).ok());
  KgeTrainOptions second = options;
  second.checkpoint_dir = dir;
  second.resume = true;
  std::vector<int> epochs;
  absl::StatusOr<std::unique_ptr<KgeModel>> resumed =
      TrainKge(data, valid, second, [&](const EpochReport& r) { epochs.push_back(r.epoch); });
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(epochs, (std::vector<int>{3, 4}));
  const std::vector<float> a = *(*straight)->ScoreGrailFacts(data.triples);
  const std::vector<float> b = *(*resumed)->ScoreGrailFacts(data.triples);
  EXPECT_EQ(a, b);  // to the bit

  // Another decay epoch is another run: its checkpoint is not resumed.
  KgeTrainOptions other = second;
  other.lr_decay_epoch = 3;
  EXPECT_FALSE(TrainKge(data, valid, other).ok());
  std::filesystem::remove_all(dir);
}

// Adam moves each parameter by about the learning rate per step, so after the decay epoch
// an epoch moves the embeddings about a tenth as far as it would without the decay.
TEST(KgeTrainingTest, TheLearningRateDropsTenfoldAfterTheDecayEpoch) {
  IndexedTriples data;
  IndexTriples(RandomFacts(30, 150, 6), &data);
  KgeTrainOptions options = SmallRun(KgeKind::kTransE);
  options.epochs = 1;
  const std::unique_ptr<KgeModel> one = *TrainKge(data, {}, options);
  options.epochs = 2;
  const std::unique_ptr<KgeModel> steady = *TrainKge(data, {}, options);
  options.lr_decay_epoch = 1;
  const std::unique_ptr<KgeModel> decayed = *TrainKge(data, {}, options);
  auto moved = [&](const KgeModel& model) {
    double sum = 0;
    for (EntityId e = 0; e < model.num_entities(); ++e) {
      const std::vector<float> a = one->EntityEmbedding(e), b = model.EntityEmbedding(e);
      for (size_t i = 0; i < a.size(); ++i) sum += std::abs(b[i] - a[i]);
    }
    return sum;
  };
  EXPECT_GT(moved(*steady), 0);
  EXPECT_LT(moved(*decayed), 0.2 * moved(*steady));
  EXPECT_GT(moved(*decayed), 0.02 * moved(*steady));
}

TEST(KgeEvaluationTest, FullRankingIsTheFilteredRankAmongEveryEntity) {
  IndexedTriples data;
  IndexTriples(RandomFacts(25, 120, 9), &data);
  const StaticGraph graph(data.entities.size(), data.triples);
  // Held-out facts: random non-facts of the graph.
  std::vector<Triple> test;
  SeededRandom random(4);
  while (test.size() < 15) {
    const Triple f{static_cast<EntityId>(random.Uniform(25)),
                   static_cast<RelationId>(random.Uniform(3)),
                   static_cast<EntityId>(random.Uniform(25))};
    if (f.head != f.tail && !graph.HasFact(f.head, f.relation, f.tail)) test.push_back(f);
  }
  // Other known facts (validation facts, say): more random non-facts, sharing heads.
  std::vector<Triple> also_known;
  for (const Triple& f : test) {
    also_known.push_back({f.head, f.relation, static_cast<EntityId>((f.tail + 1) % 25)});
  }
  std::unique_ptr<KgeModel> model = Make(KgeKind::kTransE, 25, 3, 8);
  ASSERT_NE(model, nullptr);
  KgeEvaluationOptions options;
  options.sampled = false;
  options.known_facts = also_known;
  absl::StatusOr<EvaluationResult> result = EvaluateKge(*model, graph, {}, test, options);
  ASSERT_TRUE(result.ok()) << result.status();

  // By hand: every candidate scored as a fact, the other answers in the graph, the test set
  // or the other known facts left out, ties counted half.
  auto known = [&](const Triple& f) {
    if (graph.HasFact(f.head, f.relation, f.tail)) return true;
    for (const std::vector<Triple>* list : {&test, &also_known}) {
      for (const Triple& t : *list) {
        if (t.head == f.head && t.relation == f.relation && t.tail == f.tail) return true;
      }
    }
    return false;
  };
  double mrr = 0;
  for (const Triple& f : test) {
    for (bool tail_side : {true, false}) {
      const float positive = (*model->ScoreGrailFacts(std::vector<Triple>{f}))[0];
      std::vector<float> others;
      for (EntityId e = 0; e < 25; ++e) {
        const Triple c = tail_side ? Triple{f.head, f.relation, e} : Triple{e, f.relation, f.tail};
        if (e == (tail_side ? f.head : f.tail) || known(c)) continue;
        others.push_back((*model->ScoreGrailFacts(std::vector<Triple>{c}))[0]);
      }
      mrr += 1.0 / RankAmong(positive, others) / (2.0 * test.size());
    }
  }
  EXPECT_NEAR(result->full->mrr, mrr, 1e-9);
}

TEST(KgeEvaluationTest, AGraphWithEntitiesTheModelDoesNotKnowIsRefused) {
  std::unique_ptr<KgeModel> model = Make(KgeKind::kDistMult, 5, 2, 4);
  ASSERT_NE(model, nullptr);
  const StaticGraph graph(6, std::vector<Triple>{{0, 0, 5}});
  absl::StatusOr<EvaluationResult> result =
      EvaluateKge(*model, graph, {}, std::vector<Triple>{{1, 0, 2}}, {});
  EXPECT_THAT(result.status().message(), HasSubstr("knows only 5"));
}

}  // namespace
}  // namespace grail
