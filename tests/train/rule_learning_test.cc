// Theorem 1 of the paper, as a test: GraIL learns a path rule from one graph and applies it
// to a disjoint graph it has never seen, and the ablation without node labels and attention
// (which the theorem's construction needs) clearly cannot.
//
// The graphs: each relation r1..r6 is a random permutation of the entities (every entity has
// exactly one out-edge and one in-edge per relation), and target(X, Y) holds exactly where
// r1(X, Z) and r2(Z, Y). The trained model's explanation of its scores on the unseen graph
// (model/grail/explanation.h) must then be that rule: r1(h,z1) ∧ r2(z1,t) as the strongest path.
// The graphs are small enough that 2-hop neighbourhoods cover most of them, so "v has an r2
// in-neighbour that has an r1 in-neighbour, inside the subgraph" is true of almost any pair: only a
// model that knows which node is u (the labels) and which edges matter for the target (attention)
// can tell a rule instance from a random pair. r3..r6 are distractors.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"
#include "eval/evaluation.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "gtest/gtest.h"
#include "model/grail/explanation.h"
#include "tests/testing/rule_graph.h"
#include "train/grail_trainer.h"

namespace grail {
namespace {

class RuleLearningTest : public ::testing::Test {
 protected:
  static constexpr int kEntities = 200;

  void SetUp() override {
    // Training graph: body facts and 90% of the rule's facts; 10% validate.
    RuleGraph train = GenerateRuleGraph(kEntities, 1, "a");
    train_facts_ = train.body;
    for (size_t i = 0; i < train.targets.size(); ++i) {
      (i % 10 == 0 ? valid_ : train_facts_).push_back(train.targets[i]);
    }
    // A disjoint test graph from the same generator: 40% of its rule facts are held out.
    RuleGraph test = GenerateRuleGraph(kEntities, 2, "b");
    test_graph_ = test.body;
    std::vector<NamedTriple> held_out;
    for (size_t i = 0; i < test.targets.size(); ++i) {
      (i % 5 < 2 ? held_out : test_graph_).push_back(test.targets[i]);
    }
    IndexTriples(test_graph_, &test_indexed_);
    for (const NamedTriple& t : held_out) {
      test_ids_.push_back({*test_indexed_.entities.Find(t.head),
                           *test_indexed_.relations.Find(t.relation),
                           *test_indexed_.entities.Find(t.tail)});
    }
  }

  // Trains with `config` and returns the AUC-PR on the unseen graph's held-out rule facts;
  // the model goes to `*trained` if given.
  double TrainAndEvaluate(const GrailConfig& config,
                          std::unique_ptr<GrailModel>* trained = nullptr) {
    IndexedTriples train;
    IndexTriples(train_facts_, &train);
    GrailTrainOptions options;
    options.model = config;
    options.epochs = 15;
    options.eval_every = 5;
    options.seed = 3;
    // At test time a fact is never in the graph it is scored on. Training positives
    // extracted with their own fact present (the reference's default) would let the model
    // learn "u and v are adjacent", which here says nothing about the rule.
    options.exclude_target_edge = true;
    absl::StatusOr<std::unique_ptr<GrailModel>> model = TrainGrail(train, valid_, options);
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return 0;
    // The test graph's relation ids must be the model's: map them by name.
    const RelationMap relations =
        MapRelationsByName(test_indexed_.relations.names(), (*model)->relations());
    const StaticGraph graph(test_indexed_.entities.size(), test_indexed_.triples);
    EvaluationOptions eval;
    eval.seed = 5;
    eval.negatives = 10;
    absl::StatusOr<EvaluationResult> result =
        EvaluateGrail(**model, graph, relations, test_ids_, eval);
    EXPECT_TRUE(result.ok()) << result.status();
    if (trained != nullptr) *trained = *std::move(model);
    return result.ok() ? result->auc_pr : 0;
  }

  // The fraction of held-out rule facts of the unseen graph whose strongest explaining
  // path is the rule's body, r1(h,z1) ∧ r2(z1,t), followed forwards; `*in_top3` gets the
  // fraction where it is among the three strongest.
  double TopPathIsTheRule(const GrailModel& model, double* in_top3) {
    const RelationMap relations =
        MapRelationsByName(test_indexed_.relations.names(), model.relations());
    const StaticGraph graph(test_indexed_.entities.size(), test_indexed_.triples);
    const int32_t target = static_cast<int32_t>(
        std::find(model.relations().begin(), model.relations().end(), "target") -
        model.relations().begin());
    int rule_on_top = 0, rule_in_top3 = 0;
    for (const Triple& t : test_ids_) {
      absl::StatusOr<std::vector<ExplainedPath>> paths =
          ExplainFact(model, graph, t.head, t.relation, t.tail, target, relations, 3);
      EXPECT_TRUE(paths.ok()) << paths.status();
      if (!paths.ok() || paths->empty()) continue;
      const ExplainedPath& top = paths->front();
      // Weights are products of attentions in (0, 1), strongest first.
      EXPECT_GT(top.weight, 0.0);
      EXPECT_LE(top.weight, 1.0);
      for (size_t i = 1; i < paths->size(); ++i) EXPECT_GE(top.weight, (*paths)[i].weight);
      auto is_rule = [&](const ExplainedPath& p) {
        return p.steps.size() == 2 && !p.steps[0].inverse && !p.steps[1].inverse &&
               test_indexed_.relations.Name(p.steps[0].relation) == "r1" &&
               test_indexed_.relations.Name(p.steps[1].relation) == "r2" &&
               p.steps[0].from == t.head && p.steps[1].to == t.tail;
      };
      if (is_rule(top)) ++rule_on_top;
      if (std::any_of(paths->begin(), paths->end(), is_rule)) ++rule_in_top3;
    }
    *in_top3 = static_cast<double>(rule_in_top3) / test_ids_.size();
    return static_cast<double>(rule_on_top) / test_ids_.size();
  }

  static GrailConfig RuleConfig() {
    GrailConfig c;
    c.hops = 2;  // the rule has length 2 (Theorem 1: k layers for a rule of length k)
    c.num_layers = 2;
    c.dim = 16;
    c.relation_dim = 16;
    return c;
  }

  std::vector<NamedTriple> train_facts_, valid_, test_graph_;
  IndexedTriples test_indexed_;
  std::vector<Triple> test_ids_;
};

TEST_F(RuleLearningTest, LearnsAPathRuleAppliesItToADisjointGraphAndExplainsScoresByIt) {
  ASSERT_GT(test_ids_.size(), 70u);
  std::unique_ptr<GrailModel> model;
  const double full = TrainAndEvaluate(RuleConfig(), &model);
  EXPECT_GE(full, 0.95);
  ASSERT_NE(model, nullptr);
  // The explanation of a score on the unseen graph is the planted rule. Attention is not a
  // rule extractor: the trained model attends little to the rule's first edge (the node
  // labels already say that z1 neighbours h), so for some facts a spurious path that runs
  // over strongly attended edges comes first; the rule is then nearly always second.
  double in_top3 = 0;
  const double on_top = TopPathIsTheRule(*model, &in_top3);
  RecordProperty("top_path_is_the_rule", absl::StrCat(on_top));
  RecordProperty("rule_in_top3_paths", absl::StrCat(in_top3));
  std::printf(
      "the rule's body is the strongest path for %.1f%% of the unseen rule facts, among the "
      "three strongest for %.1f%%\n",
      100 * on_top, 100 * in_top3);
  EXPECT_GE(on_top, 0.75);
  EXPECT_GE(in_top3, 0.95);

  GrailConfig ablated = RuleConfig();
  ablated.attention = false;
  ablated.node_labels = false;
  const double ablation = TrainAndEvaluate(ablated);
  RecordProperty("auc_pr_full", absl::StrCat(full));
  RecordProperty("auc_pr_ablation", absl::StrCat(ablation));
  std::printf("AUC-PR on the unseen graph: full model %.4f, without labels and attention %.4f\n",
              full, ablation);
  EXPECT_LT(ablation, full - 0.1);
}

}  // namespace
}  // namespace grail
