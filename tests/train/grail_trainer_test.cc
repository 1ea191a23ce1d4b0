#include "train/grail_trainer.h"

#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"
#include "eval/evaluation.h"
#include "gmock/gmock.h"
#include "graph/static_graph.h"
#include "gtest/gtest.h"
#include "model/grail/fact_scoring.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

// A small random graph with a few relations, and facts held out of it.
struct SmallData {
  IndexedTriples train;
  std::vector<NamedTriple> valid;
  std::vector<Triple> held_out;  // ids of `train`, not in the graph
};

SmallData MakeData(uint64_t seed) {
  SeededRandom random(seed);
  std::vector<NamedTriple> facts;
  for (int i = 0; i < 400; ++i) {
    const uint64_t h = random.Uniform(120);
    uint64_t t = random.Uniform(119);
    if (t >= h) ++t;
    facts.push_back(
        {absl::StrCat("e", h), absl::StrCat("r", random.Uniform(3)), absl::StrCat("e", t)});
  }
  SmallData d;
  std::vector<NamedTriple> graph(facts.begin() + 40, facts.end());
  IndexTriples(graph, &d.train);
  for (int i = 0; i < 40; ++i) {
    auto h = d.train.entities.Find(facts[i].head);
    auto r = d.train.relations.Find(facts[i].relation);
    auto t = d.train.entities.Find(facts[i].tail);
    if (!h || !r || !t) continue;
    d.valid.push_back(facts[i]);
    d.held_out.push_back({*h, *r, *t});
  }
  return d;
}

GrailTrainOptions SmallOptions() {
  GrailTrainOptions o;
  o.epochs = 2;
  o.eval_every = 1;
  o.model.hops = 2;
  o.model.num_layers = 2;
  o.seed = 11;
  return o;
}

TEST(TrainerTest, ReportsEveryEpochAndValidatesOnSchedule) {
  SmallData d = MakeData(1);
  GrailTrainOptions o = SmallOptions();
  o.epochs = 4;
  o.eval_every = 3;
  std::vector<EpochReport> reports;
  absl::StatusOr<std::unique_ptr<GrailModel>> model =
      TrainGrail(d.train, d.valid, o, [&](const EpochReport& r) { reports.push_back(r); });
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(reports.size(), 4u);
  EXPECT_TRUE(reports[0].validations.empty());
  EXPECT_EQ(reports[2].validations.size(), 1u);  // epoch 3
  EXPECT_EQ(reports[3].validations.size(), 1u);  // the last epoch always validates
  for (const EpochReport& r : reports) {
    EXPECT_GT(r.positives, 300);
    EXPECT_GT(r.loss, 0);
  }
  EXPECT_TRUE(reports[2].best);
}

TEST(TrainerTest, SameSeedTrainsTheSameModel) {
  SmallData d = MakeData(2);
  std::unique_ptr<GrailModel> a = *TrainGrail(d.train, d.valid, SmallOptions());
  std::unique_ptr<GrailModel> b = *TrainGrail(d.train, d.valid, SmallOptions());
  const StaticGraph graph(d.train.entities.size(), d.train.triples);
  std::vector<float> sa = *ScoreGrailFacts(*a, graph, {}, d.held_out, {});
  std::vector<float> sb = *ScoreGrailFacts(*b, graph, {}, d.held_out, {});
  EXPECT_EQ(sa, sb);
  GrailTrainOptions other = SmallOptions();
  other.seed = 12;
  std::unique_ptr<GrailModel> c = *TrainGrail(d.train, d.valid, other);
  EXPECT_NE(sa, *ScoreGrailFacts(*c, graph, {}, d.held_out, {}));
}

TEST(TrainerTest, ExportedModelScoresExactlyAsTheTrainedOne) {
  SmallData d = MakeData(3);
  std::unique_ptr<GrailModel> trained = *TrainGrail(d.train, d.valid, SmallOptions());
  trained->set_training_fingerprint(FingerprintFacts(d.valid));
  const std::string path = ProcessTempPath("trained.pt");
  ASSERT_TRUE(trained->Save(path).ok());
  absl::StatusOr<std::unique_ptr<GrailModel>> loaded = GrailModel::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->training_fingerprint(), trained->training_fingerprint());
  const StaticGraph graph(d.train.entities.size(), d.train.triples);
  EXPECT_EQ(*ScoreGrailFacts(**loaded, graph, {}, d.held_out, {}),
            *ScoreGrailFacts(*trained, graph, {}, d.held_out, {}));
}

TEST(TrainerTest, ScoringIsIndependentOfBatchingAndThreads) {
  SmallData d = MakeData(4);
  std::unique_ptr<GrailModel> model = *TrainGrail(d.train, d.valid, SmallOptions());
  const StaticGraph graph(d.train.entities.size(), d.train.triples);
  GrailScoringOptions one_by_one{/*batch_size=*/1, /*threads=*/1};
  GrailScoringOptions batched{/*batch_size=*/16, /*threads=*/2};
  std::vector<float> a = *ScoreGrailFacts(*model, graph, {}, d.held_out, one_by_one);
  std::vector<float> b = *ScoreGrailFacts(*model, graph, {}, d.held_out, batched);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4 * (1 + std::abs(a[i])));
}

TEST(TrainerTest, RejectsBadOptionsAndEmptyData) {
  SmallData d = MakeData(5);
  GrailTrainOptions o = SmallOptions();
  o.epochs = 0;
  EXPECT_EQ(TrainGrail(d.train, d.valid, o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TrainGrail(IndexedTriples{}, d.valid, SmallOptions()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Edge dropout, negatives, the order and Adam's state all continue where the checkpoint left
// them: 2 epochs then a resume to 4 give the model 4 epochs straight give. The first run
// validates at its last epoch, off the schedule, where the straight run does not: that
// validation touches nothing training reads (its negatives come from a generator of its own,
// the same at every validation), so epochs 3 and 4 report what they report straight.
TEST(TrainerTest, TrainingResumedFromACheckpointEqualsTrainingStraight) {
  SmallData d = MakeData(6);
  GrailTrainOptions straight = SmallOptions();
  straight.epochs = 4;
  straight.eval_every = 3;  // epoch 2 is off the schedule: only the first run validates it
  ASSERT_GT(straight.model.edge_dropout, 0);
  std::vector<EpochReport> straight_reports;
  std::unique_ptr<GrailModel> reference = *TrainGrail(
      d.train, d.valid, straight, [&](const EpochReport& r) { straight_reports.push_back(r); });

  ScopedTempDir dir;
  GrailTrainOptions first = straight;
  first.epochs = 2;
  first.checkpoint_dir = dir.Sub("run");
  ASSERT_TRUE(TrainGrail(d.train, d.valid, first).ok());
  EXPECT_TRUE(std::filesystem::exists(dir.Sub("run/state.json")));
  GrailTrainOptions rest = straight;
  rest.checkpoint_dir = dir.Sub("run");
  rest.resume = true;
  std::vector<int> epochs_run;
  std::vector<EpochReport> resumed_reports;
  absl::StatusOr<std::unique_ptr<GrailModel>> resumed =
      TrainGrail(d.train, d.valid, rest, [&](const EpochReport& r) {
        epochs_run.push_back(r.epoch);
        resumed_reports.push_back(r);
      });
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_THAT(epochs_run, ::testing::ElementsAre(3, 4));
  ASSERT_EQ(straight_reports.size(), 4u);
  ASSERT_EQ(resumed_reports.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    const EpochReport& a = resumed_reports[e];
    const EpochReport& b = straight_reports[e + 2];
    EXPECT_EQ(a.loss, b.loss) << "epoch " << b.epoch;
    ASSERT_EQ(a.validations.size(), b.validations.size()) << "epoch " << b.epoch;
    for (size_t v = 0; v < a.validations.size(); ++v) {
      EXPECT_EQ(a.validations[v].auc_pr, b.validations[v].auc_pr) << "epoch " << b.epoch;
    }
  }
  // To the bit: the resumed run is the straight one (TrainingRun trains with the TorchScript
  // graph as written, so its first step rounds as the straight run's third epoch did).
  const StaticGraph graph(d.train.entities.size(), d.train.triples);
  const std::vector<float> a = *ScoreGrailFacts(**resumed, graph, {}, d.held_out, {});
  const std::vector<float> b = *ScoreGrailFacts(*reference, graph, {}, d.held_out, {});
  EXPECT_EQ(a, b);

  // Another run's checkpoint is refused, not silently continued.
  GrailTrainOptions other = rest;
  other.model.edge_dropout = 0.25;
  absl::StatusOr<std::unique_ptr<GrailModel>> refused = TrainGrail(d.train, d.valid, other);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("another run"));
}

// Early fusion: fixed features for every other training entity, `scale` times random values.
std::shared_ptr<const NodeFeatures> SomeFeatures(const IndexedTriples& train, float scale) {
  auto f = std::make_shared<NodeFeatures>();
  f->dim = 4;
  SeededRandom random(3);
  const std::vector<std::string>& names = train.entities.names();
  for (size_t i = 0; i < names.size(); i += 2) {
    f->entities.push_back(names[i]);
    for (int k = 0; k < f->dim; ++k) {
      f->values.push_back(scale * (static_cast<float>(random.Uniform(1000)) / 500.0f - 1.0f));
    }
  }
  return f;
}

TEST(TrainerTest, EarlyFusionTrainsOnTheNodeFeaturesAndItsArchiveScoresLikeTheTrainedModel) {
  SmallData d = MakeData(9);
  GrailTrainOptions o = SmallOptions();
  o.model.node_feature_dim = 4;
  o.node_features = SomeFeatures(d.train, 1.0f);
  std::vector<EpochReport> reports;
  absl::StatusOr<std::unique_ptr<GrailModel>> model =
      TrainGrail(d.train, d.valid, o, [&](const EpochReport& r) { reports.push_back(r); });
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[1].validations.size(), 1u);  // validation scored with the features
  EXPECT_EQ((*model)->node_feature_entities(), o.node_features->entities);

  const StaticGraph graph(d.train.entities.size(), d.train.triples);
  const std::vector<int32_t> rows = (*model)->NodeFeatureRows(d.train.entities.names());
  GrailScoringOptions scoring;
  scoring.node_feature_rows = &rows;
  const std::vector<float> trained = *ScoreGrailFacts(**model, graph, {}, d.held_out, scoring);
  // Scoring without the rows is refused, not done on zeros.
  EXPECT_EQ(ScoreGrailFacts(**model, graph, {}, d.held_out, {}).status().code(),
            absl::StatusCode::kInvalidArgument);

  const std::string path = ProcessTempPath("early_fusion.pt");
  ASSERT_TRUE((*model)->Save(path).ok());
  std::unique_ptr<GrailModel> loaded = *GrailModel::Load(path);
  const std::vector<int32_t> loaded_rows = loaded->NodeFeatureRows(d.train.entities.names());
  GrailScoringOptions loaded_scoring;
  loaded_scoring.node_feature_rows = &loaded_rows;
  EXPECT_EQ(*ScoreGrailFacts(*loaded, graph, {}, d.held_out, loaded_scoring), trained);

  // Other feature values train another model, and the training steps themselves read them:
  // the first step (same seed, same initial weights) already has another loss.
  GrailTrainOptions other = o;
  other.node_features = SomeFeatures(d.train, 3.0f);
  std::vector<double> first_losses;
  auto first_step = [&](const StepReport& s) {
    if (s.epoch == 1 && s.steps_done == 1) first_losses.push_back(s.loss);
  };
  std::unique_ptr<GrailModel> retrained = *TrainGrail(d.train, d.valid, other, nullptr, first_step);
  EXPECT_NE(*ScoreGrailFacts(*retrained, graph, {}, d.held_out, scoring), trained);
  ASSERT_TRUE(TrainGrail(d.train, d.valid, o, nullptr, first_step).ok());
  ASSERT_EQ(first_losses.size(), 2u);
  EXPECT_NE(first_losses[0], first_losses[1]);

  // A width without features is refused.
  GrailTrainOptions missing = SmallOptions();
  missing.model.node_feature_dim = 4;
  EXPECT_EQ(TrainGrail(d.train, d.valid, missing).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The reference code's schedule (GrailTrainOptions' eval_every_steps, select_metric, clip_norm 0,
// dropout_off_after_eval, fixed_negatives).

// Every step's loss, in order, and every epoch's report.
struct TrainingTrace {
  std::vector<std::vector<double>> step_losses;  // [epoch][step]
  std::vector<EpochReport> epochs;
  std::unique_ptr<GrailModel> model;
};

TrainingTrace Trace(const SmallData& d, const GrailTrainOptions& o) {
  TrainingTrace trace;
  absl::StatusOr<std::unique_ptr<GrailModel>> model = TrainGrail(
      d.train, d.valid, o, [&](const EpochReport& r) { trace.epochs.push_back(r); },
      [&](const StepReport& s) {
        if (trace.step_losses.size() < static_cast<size_t>(s.epoch))
          trace.step_losses.resize(s.epoch);
        trace.step_losses[s.epoch - 1].push_back(s.loss);
      });
  EXPECT_TRUE(model.ok()) << model.status();
  if (model.ok()) trace.model = *std::move(model);
  return trace;
}

// A learning rate so small that no parameter moves: every epoch sees the same model.
GrailTrainOptions FrozenOptions() {
  GrailTrainOptions o = SmallOptions();
  o.learning_rate = 1e-30;
  o.l2 = 0;
  return o;
}

TEST(TrainerTest, StepScheduleValidatesEveryNStepsCountedAcrossEpochs) {
  SmallData d = MakeData(7);
  GrailTrainOptions o = SmallOptions();
  o.epochs = 3;
  o.eval_every_steps = 15;
  TrainingTrace trace = Trace(d, o);
  ASSERT_EQ(trace.epochs.size(), 3u);
  int64_t run_steps = 0;
  for (size_t e = 0; e < trace.epochs.size(); ++e) {
    const int64_t steps = static_cast<int64_t>(trace.step_losses[e].size());
    ASSERT_GT(steps, 15);
    std::vector<int64_t> expected;  // the multiples of 15 within this epoch's steps
    for (int64_t s = run_steps + 1; s <= run_steps + steps; ++s) {
      if (s % 15 == 0) expected.push_back(s);
    }
    std::vector<int64_t> validated;
    for (const Validation& v : trace.epochs[e].validations) validated.push_back(v.step);
    EXPECT_EQ(validated, expected) << "epoch " << e + 1;
    run_steps += steps;
  }
  // Nothing validates off the schedule, not even the last epoch.
  EXPECT_NE(run_steps % 15, 0);
}

TEST(TrainerTest, TheBestModelIsChosenOnTheSelectedMetric) {
  SmallData d = MakeData(8);
  const StaticGraph graph(d.train.entities.size(), d.train.triples);
  std::vector<Triple> valid;
  for (const NamedTriple& v : d.valid) {
    valid.push_back({*d.train.entities.Find(v.head), *d.train.relations.Find(v.relation),
                     *d.train.entities.Find(v.tail)});
  }
  for (SelectMetric metric : {SelectMetric::kAucPr, SelectMetric::kAucRoc}) {
    GrailTrainOptions o = SmallOptions();
    o.epochs = 3;
    o.eval_every_steps = 4;
    o.select_metric = metric;
    TrainingTrace trace = Trace(d, o);
    auto chosen = [metric](const Validation& v) {
      return metric == SelectMetric::kAucRoc ? v.auc_roc : v.auc_pr;
    };
    // Each validation is flagged best when it reaches the running maximum of the chosen
    // figure, and the returned model is the last one flagged.
    double running = -1;
    std::optional<Validation> last_best;
    int flagged = 0;
    for (const EpochReport& r : trace.epochs) {
      for (const Validation& v : r.validations) {
        EXPECT_EQ(v.best, chosen(v) >= running) << "step " << v.step;
        if (chosen(v) >= running) {
          running = chosen(v);
          last_best = v;
          ++flagged;
        }
      }
    }
    ASSERT_TRUE(last_best.has_value());
    EXPECT_GE(flagged, 2);
    absl::StatusOr<ClassificationMetrics> returned =
        EvaluateClassification(*trace.model, graph, {}, valid, o.seed + 1, {});
    ASSERT_TRUE(returned.ok()) << returned.status();
    EXPECT_NEAR(returned->auc_pr, last_best->auc_pr, 1e-9);
    EXPECT_NEAR(returned->auc_roc, last_best->auc_roc, 1e-9);
  }
}

TEST(TrainerTest, FixedNegativesAreTheSameEveryEpoch) {
  SmallData d = MakeData(9);
  GrailTrainOptions o = FrozenOptions();
  o.epochs = 3;
  o.model.edge_dropout = 0;  // the model and the negatives alone decide the loss
  o.fixed_negatives = true;
  TrainingTrace fixed = Trace(d, o);
  ASSERT_EQ(fixed.epochs.size(), 3u);
  // The loss is about the margin (10) plus the mean score gap, which is what moves.
  for (const EpochReport& r : fixed.epochs) EXPECT_NEAR(r.loss, fixed.epochs[0].loss, 1e-5);
  // Negatives drawn anew each epoch change the loss of the same model.
  o.fixed_negatives = false;
  TrainingTrace redrawn = Trace(d, o);
  EXPECT_GT(std::abs(redrawn.epochs[1].loss - redrawn.epochs[0].loss), 1e-4);
}

TEST(TrainerTest, AfterAValidationTheRestOfTheEpochTrainsWithoutEdgeDropout) {
  SmallData d = MakeData(10);
  GrailTrainOptions o = FrozenOptions();
  o.fixed_negatives = true;  // the same batches in both runs, whatever dropout draws
  o.eval_every_steps = 5;
  o.dropout_off_after_eval = true;
  ASSERT_GT(o.model.edge_dropout, 0);
  TrainingTrace with = Trace(d, o);
  o.model.edge_dropout = 0;
  TrainingTrace without = Trace(d, o);
  ASSERT_EQ(with.step_losses.size(), 2u);
  int64_t run_steps = 0;
  for (size_t e = 0; e < 2; ++e) {
    ASSERT_EQ(with.step_losses[e].size(), without.step_losses[e].size());
    bool validated = false;  // every epoch starts with edge dropout on
    for (size_t i = 0; i < with.step_losses[e].size(); ++i) {
      const double a = with.step_losses[e][i], b = without.step_losses[e][i];
      if (validated) {
        EXPECT_NEAR(a, b, 1e-5 * b) << "epoch " << e + 1 << " step " << i + 1;
      } else {
        EXPECT_GT(std::abs(a - b), 1e-5 * b) << "epoch " << e + 1 << " step " << i + 1;
      }
      ++run_steps;
      if (run_steps % 5 == 0) validated = true;
    }
  }
}

TEST(TrainerTest, ClipZeroLeavesTheGradientsAlone) {
  SmallData d = MakeData(11);
  GrailTrainOptions unclipped = SmallOptions();
  unclipped.clip_norm = 0;
  GrailTrainOptions loose = SmallOptions();
  loose.clip_norm = 1e30;  // never binds
  GrailTrainOptions tight = SmallOptions();
  tight.clip_norm = 1e-3;  // always binds
  const StaticGraph graph(d.train.entities.size(), d.train.triples);
  auto scores = [&](const GrailTrainOptions& o) {
    return *ScoreGrailFacts(**TrainGrail(d.train, d.valid, o), graph, {}, d.held_out, {});
  };
  const std::vector<float> a = scores(unclipped), b = scores(loose), c = scores(tight);
  ASSERT_EQ(a.size(), b.size());
  double differs_from_tight = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-4 * (1 + std::abs(b[i])));
    differs_from_tight = std::max<double>(differs_from_tight, std::abs(a[i] - c[i]));
  }
  EXPECT_GT(differs_from_tight, 1e-2);
  GrailTrainOptions negative = SmallOptions();
  negative.clip_norm = -1;
  EXPECT_EQ(TrainGrail(d.train, d.valid, negative).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The schedule's state (steps of the run, dropout after a validation, the fixed negatives)
// survives a resume: 2 epochs then a resume to 4 give what 4 straight give.
TEST(TrainerTest, TheReferenceScheduleResumesToTheSameModel) {
  SmallData d = MakeData(12);
  GrailTrainOptions straight = SmallOptions();
  straight.epochs = 4;
  straight.eval_every_steps = 15;
  straight.select_metric = SelectMetric::kAucRoc;
  straight.clip_norm = 0;
  straight.dropout_off_after_eval = true;
  straight.fixed_negatives = true;
  // The steps after which each run validated.
  auto steps_into = [](std::vector<int64_t>& steps) {
    return [&steps](const EpochReport& r) {
      for (const Validation& v : r.validations) steps.push_back(v.step);
    };
  };
  std::vector<int64_t> straight_steps, resumed_steps;
  std::unique_ptr<GrailModel> reference =
      *TrainGrail(d.train, d.valid, straight, steps_into(straight_steps));
  ScopedTempDir dir;
  GrailTrainOptions first = straight;
  first.epochs = 2;
  first.checkpoint_dir = dir.Sub("run");
  ASSERT_TRUE(TrainGrail(d.train, d.valid, first, steps_into(resumed_steps)).ok());
  GrailTrainOptions rest = straight;
  rest.checkpoint_dir = dir.Sub("run");
  rest.resume = true;
  absl::StatusOr<std::unique_ptr<GrailModel>> resumed =
      TrainGrail(d.train, d.valid, rest, steps_into(resumed_steps));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed_steps, straight_steps);
  const StaticGraph graph(d.train.entities.size(), d.train.triples);
  const std::vector<float> a = *ScoreGrailFacts(**resumed, graph, {}, d.held_out, {});
  const std::vector<float> b = *ScoreGrailFacts(*reference, graph, {}, d.held_out, {});
  EXPECT_EQ(a, b);  // to the bit
}

// One small trained model shared by the evaluation tests (training is what takes time).
class EvaluationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = new SmallData(MakeData(6));
    model_ = TrainGrail(data_->train, data_->valid, SmallOptions())->release();
    graph_ = new StaticGraph(data_->train.entities.size(), data_->train.triples);
  }
  static void TearDownTestSuite() {
    delete graph_;
    delete model_;
    delete data_;
  }
  static absl::StatusOr<EvaluationResult> EvaluateWithSeed(uint64_t seed) {
    EvaluationOptions o;
    o.seed = seed;
    return EvaluateGrail(*model_, *graph_, {}, data_->held_out, o);
  }

  static SmallData* data_;
  static GrailModel* model_;
  static StaticGraph* graph_;
};
SmallData* EvaluationTest::data_ = nullptr;
GrailModel* EvaluationTest::model_ = nullptr;
StaticGraph* EvaluationTest::graph_ = nullptr;

TEST_F(EvaluationTest, IsDeterministicPerSeedAndCountsEveryFact) {
  EvaluationResult a = *EvaluateWithSeed(9);
  EvaluationResult b = *EvaluateWithSeed(9);
  EXPECT_EQ(a.ToJson(), b.ToJson());
  EXPECT_EQ(a.n, static_cast<int64_t>(data_->held_out.size()));
  for (double m : {a.auc_pr, a.mrr, a.hits_at_1, a.hits_at_5, a.hits_at_10}) {
    EXPECT_GE(m, 0);
    EXPECT_LE(m, 1);
  }
  EXPECT_LE(a.hits_at_1, a.hits_at_5);
  EXPECT_LE(a.hits_at_5, a.hits_at_10);
  EXPECT_NE(EvaluateWithSeed(10)->ToJson(), a.ToJson());
}

TEST_F(EvaluationTest, ResultJsonHasTheContractFields) {
  EvaluationResult r;
  r.auc_pr = 0.5;
  r.mrr = 0.123456789;  // fractions are reported to 6 decimals
  r.n = 3;
  EXPECT_EQ(r.ToJson(),
            "{\"auc_pr\":0.5,\"mrr\":0.123457,\"hits_at_1\":0.0,\"hits_at_5\":0.0,"
            "\"hits_at_10\":0.0,\"n\":3}");
  r.runs = 5;
  r.auc_pr_std = 0.25;
  EXPECT_EQ(r.ToJson(),
            "{\"auc_pr\":0.5,\"mrr\":0.123457,\"hits_at_1\":0.0,\"hits_at_5\":0.0,"
            "\"hits_at_10\":0.0,\"n\":3,\"runs\":5,\"auc_pr_std\":0.25}");
}

TEST_F(EvaluationTest, RunsAverageIndependentDrawsOfNegatives) {
  EvaluationOptions o;
  o.seed = 20;
  // One run is EvaluateGrail() itself.
  EXPECT_EQ(EvaluateGrailRuns(*model_, *graph_, {}, data_->held_out, o, 1)->ToJson(),
            EvaluateWithSeed(20)->ToJson());

  std::vector<EvaluationResult> single;
  for (uint64_t seed : {20, 21, 22}) single.push_back(*EvaluateWithSeed(seed));
  const EvaluationResult runs = *EvaluateGrailRuns(*model_, *graph_, {}, data_->held_out, o, 3);
  EXPECT_EQ(runs.runs, 3);
  EXPECT_EQ(runs.n, single[0].n);
  const double mean_auc = (single[0].auc_pr + single[1].auc_pr + single[2].auc_pr) / 3;
  EXPECT_NEAR(runs.auc_pr, mean_auc, 1e-12);
  EXPECT_NEAR(runs.hits_at_10,
              (single[0].hits_at_10 + single[1].hits_at_10 + single[2].hits_at_10) / 3, 1e-12);
  EXPECT_NEAR(runs.mrr, (single[0].mrr + single[1].mrr + single[2].mrr) / 3, 1e-12);
  double squares = 0;
  for (const EvaluationResult& r : single) squares += (r.auc_pr - mean_auc) * (r.auc_pr - mean_auc);
  EXPECT_NEAR(runs.auc_pr_std, std::sqrt(squares / 2), 1e-12);
  EXPECT_GT(runs.auc_pr_std, 0);  // the draws differ, so their AUC-PR does too

  EXPECT_EQ(EvaluateGrailRuns(*model_, *graph_, {}, data_->held_out, o, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace grail
