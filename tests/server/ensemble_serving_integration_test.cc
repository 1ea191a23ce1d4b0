// Ensemble archives (a path preset model and an ULTRA model; a GraIL model and a path preset
// model; a path preset model and a KGE model) served by the real grail-server binary (loopback
// port, real RocksDB directory, real gRPC): every score, of a fact or of a candidate in a ranking
// of every entity, is the ensemble's rule over what each member computes offline on the stored
// graph; scored_by names the ensemble; a GraIL member explains.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"
#include "model/ensemble/ensemble_model.h"
#include "model/grail/fact_scoring.h"
#include "model/kge/kge_model.h"
#include "model/path/path_batch.h"
#include "model/ultra/ultra_model.h"
#include "tests/testing/graph_calls.h"
#include "tests/testing/server_process.h"
#include "tests/testing/small_ultra.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using kg::v1::KnowledgeGraph;
using ::testing::HasSubstr;

// A ring of u0..u39, each entity linked to the next two, with chords: farther than the path
// member's two hops from most entities, so its far score stands in for them.
std::vector<NamedTriple> Graph() {
  const std::vector<std::string> relations = {"mentors", "cites", "funds"};
  std::vector<NamedTriple> facts;
  for (int i = 0; i < 40; ++i) {
    facts.push_back({absl::StrCat("u", i), relations[i % 3], absl::StrCat("u", (i + 1) % 40)});
    facts.push_back(
        {absl::StrCat("u", i), relations[(i + 1) % 3], absl::StrCat("u", (i + 2) % 40)});
    if (i % 5 == 0)
      facts.push_back({absl::StrCat("u", i), "cites", absl::StrCat("u", (i + 11) % 40)});
  }
  return facts;
}

constexpr double kBias = 0.25;
constexpr double kPathWeight = 0.7;
constexpr double kUltraWeight = -1.3;

// A path preset member of two layers: it reaches two hops from the source.
PathConfig SmallPath() {
  PathConfig path;
  path.num_layers = 2;
  path.dim = 8;
  return path;
}

// Saves an ensemble, starts the real grail-server on it with a fresh store and streams Graph()
// in.
class ServedEnsembleTest : public ::testing::Test {
 protected:
  void Serve(std::unique_ptr<EnsembleModel> ensemble) {
    ASSERT_TRUE(ensemble->Save(dir_.Sub("ensemble.pt")).ok());
    ensemble_ = std::move(ensemble);
    ASSERT_TRUE(
        server_.Start({"--model=" + dir_.Sub("ensemble.pt"), "--data-dir=" + dir_.Sub("store")},
                      dir_.Sub("server.log")));
    stub_ = KnowledgeGraph::NewStub(
        grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials()));
    const AddOutcome added = AddChunks(*stub_, {Graph()});
    ASSERT_TRUE(added.status.ok()) << added.status.error_message();
  }

  // Every entity's score for (source, relation, ?) (inverse: (?, relation, source)) by member
  // m, a path-family model, alone on the stored facts.
  std::map<std::string, float> Member(size_t m, const std::string& source,
                                      const std::string& relation, bool inverse) {
    IndexedTriples indexed;
    IndexTriples(Graph(), &indexed);
    const StaticGraph graph(indexed.entities.size(), indexed.triples);
    const PathModel& model = *ensemble_->path_member(m);
    const RelationMap relations = ensemble_->MemberRelations(m, indexed.relations.names());
    const PathNeighbourhoodSpec spec = model.Neighbourhood(&graph, &relations, 0);
    const int32_t r = relations(*indexed.relations.Find(relation));
    PathBatchBuilder builder;
    PathBatch batch;
    EXPECT_TRUE(builder
                    .Build(spec,
                           {PathQuery(*indexed.entities.Find(source),
                                      r + (inverse ? model.NumRelations(graph) : 0))},
                           &batch)
                    .ok());
    absl::StatusOr<PathScores> scores = model.Score(batch);
    EXPECT_TRUE(scores.ok()) << scores.status();
    std::map<std::string, float> out;
    for (EntityId e = 0; e < graph.num_entities(); ++e) {
      out[indexed.entities.Name(e)] = scores->Of(batch, 0, e);
    }
    return out;
  }

  kg::v1::ScoreTripletResponse Score(const NamedTriple& fact, bool explain) {
    grpc::ClientContext context;
    kg::v1::ScoreTripletRequest request;
    *request.mutable_triple() = ToProto(fact);
    request.set_explain(explain);
    kg::v1::ScoreTripletResponse response;
    const grpc::Status status = stub_->ScoreTriplet(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  ScopedTempDir dir_;
  ServerProcess server_;
  std::unique_ptr<KnowledgeGraph::Stub> stub_;
  std::unique_ptr<EnsembleModel> ensemble_;
};

class EnsembleServingTest : public ServedEnsembleTest {
 protected:
  void SetUp() override {
    // More relations than twice the warm-up's synthetic graph of an empty store has (2 x 33): the
    // ULTRA member warms up on the ones it has.
    std::vector<std::string> vocabulary = {"funds", "cites", "mentors", "advises"};
    for (int r = 0; r < 80; ++r) vocabulary.push_back(absl::StrCat("unused", r));
    absl::StatusOr<std::unique_ptr<PathModel>> preset =
        PathModel::Create(SmallPath(), vocabulary, 3);
    ASSERT_TRUE(preset.ok()) << preset.status();
    absl::StatusOr<std::unique_ptr<PathModel>> zero_shot = CreateUltraModel(SmallUltraConfig(), 5);
    ASSERT_TRUE(zero_shot.ok()) << zero_shot.status();
    std::vector<std::unique_ptr<PathModel>> members;
    members.push_back(*std::move(preset));
    members.push_back(*std::move(zero_shot));
    absl::StatusOr<std::unique_ptr<EnsembleModel>> ensemble =
        EnsembleModel::Create(std::move(members), LinearFusion{{kPathWeight, kUltraWeight}, kBias});
    ASSERT_TRUE(ensemble.ok()) << ensemble.status();
    Serve(*std::move(ensemble));
  }

  // The rule over both members' offline scores.
  std::map<std::string, double> Offline(const std::string& source, const std::string& relation,
                                        bool inverse) {
    const std::map<std::string, float> path = Member(0, source, relation, inverse);
    const std::map<std::string, float> ultra = Member(1, source, relation, inverse);
    std::map<std::string, double> out;
    for (const auto& [entity, score] : path) {
      out[entity] = kBias + kPathWeight * score + kUltraWeight * ultra.at(entity);
    }
    return out;
  }

  kg::v1::RankResponse Rank(const std::string& fixed, const std::string& relation, bool tails,
                            const kg::v1::RankOptions& options = {},
                            grpc::Status* status_out = nullptr) {
    kg::v1::RankResponse response;
    const grpc::Status status = RankCall(*stub_, tails, fixed, relation, options, &response);
    if (status_out != nullptr) {
      *status_out = status;
    } else {
      EXPECT_TRUE(status.ok()) << status.error_message();
    }
    return response;
  }

  void ExpectOffline(const kg::v1::RankResponse& ranking, const std::string& source,
                     const std::string& relation, bool inverse) {
    const std::map<std::string, double> offline = Offline(source, relation, inverse);
    ASSERT_GT(ranking.ranked_size(), 0);
    for (const kg::v1::RankedEntity& e : ranking.ranked()) {
      EXPECT_NEAR(e.score(), offline.at(e.entity()), 1e-4 * (1 + std::fabs(e.score())))
          << source << " " << relation << " " << e.entity();
      EXPECT_EQ(e.scored_by(), kg::v1::SCORED_BY_ENSEMBLE);
    }
  }
};

TEST_F(EnsembleServingTest, RankingsOfEveryEntityAreTheRuleOverEachMembersOfflineScores) {
  const kg::v1::RankResponse tails = Rank("u4", "cites", true);
  EXPECT_EQ(tails.ranked_size(), 39);  // every entity but u4
  ExpectOffline(tails, "u4", "cites", false);
  // The path member reaches only u4's two hops: the rest are near through ULTRA alone.
  EXPECT_EQ(tails.candidates_shared_score(), 0u);
  for (int i = 1; i < tails.ranked_size(); ++i) {
    EXPECT_GE(tails.ranked(i - 1).score(), tails.ranked(i).score());
  }
  ExpectOffline(Rank("u9", "funds", false), "u9", "funds", true);

  grpc::ClientContext context;
  kg::v1::GetStatsResponse stats;
  ASSERT_TRUE(stub_->GetStats(&context, kg::v1::GetStatsRequest(), &stats).ok());
  EXPECT_EQ(stats.model().format(), kEnsembleModelFormat);
  EXPECT_EQ(stats.model().parameters(), static_cast<uint64_t>(ensemble_->num_parameters()));
}

TEST_F(EnsembleServingTest, AFactsScoreIsItsScoreInTheRanking) {
  const std::map<std::string, double> offline = Offline("u7", "mentors", false);
  for (const char* tail : {"u8", "u9", "u30"}) {
    const kg::v1::ScoreTripletResponse response = Score({"u7", "mentors", tail}, false);
    EXPECT_NEAR(response.score(), offline.at(tail), 1e-4 * (1 + std::fabs(response.score())))
        << tail;
    EXPECT_EQ(response.scored_by(), kg::v1::SCORED_BY_ENSEMBLE);
  }
}

TEST_F(EnsembleServingTest,
       ATopKFilteredRankingKeepsTheBestNewFactsAndExplicitCandidatesScoreAlike) {
  const kg::v1::RankResponse all = Rank("u10", "cites", true);
  kg::v1::RankOptions options;
  options.set_top_k(5);
  options.set_filter_known_facts(true);
  const kg::v1::RankResponse best = Rank("u10", "cites", true, options);
  ASSERT_EQ(best.ranked_size(), 5);
  EXPECT_GT(best.candidates_filtered(), 0u);  // u10 cites u12 and u21
  std::vector<std::string> expected;
  for (const kg::v1::RankedEntity& e : all.ranked()) {
    if (!e.known_fact() && expected.size() < 5) expected.push_back(e.entity());
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(best.ranked(i).entity(), expected[i]);
    EXPECT_FALSE(best.ranked(i).known_fact());
  }

  kg::v1::RankOptions listed;
  for (const char* c : {"u11", "u25", "u39", "u10"}) listed.add_candidates(c);
  const kg::v1::RankResponse some = Rank("u10", "cites", true, listed);
  EXPECT_EQ(some.ranked_size(), 3);  // u10 itself left out
  ExpectOffline(some, "u10", "cites", false);
}

TEST_F(EnsembleServingTest, ARelationOutsideTheEnsemblesVocabularyIsRefusedNamingIt) {
  grpc::Status refused;
  Rank("u3", "employs", true, {}, &refused);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("employs"));
  // Known to the path member but without a fact yet: the ULTRA member cannot read it.
  Rank("u3", "advises", true, {}, &refused);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("advises"));
  EXPECT_THAT(refused.error_message(), HasSubstr("ULTRA member"));
}

// The same graph served by an ensemble of a GraIL model (one hop: entities within two hops of
// the source, on their own subgraphs) and a path preset model (two layers): most of the ring is
// beyond both, so those entities share the ensemble's far score.
class GrailEnsembleServingTest : public ServedEnsembleTest {
 protected:
  void SetUp() override {
    GrailConfig grail;
    grail.hops = 1;
    grail.num_layers = 2;
    grail.dim = 8;
    grail.relation_dim = 8;
    absl::StatusOr<std::unique_ptr<GrailModel>> subgraphs =
        GrailModel::Create(grail, {"mentors", "funds", "cites"}, 7);
    ASSERT_TRUE(subgraphs.ok()) << subgraphs.status();
    absl::StatusOr<std::unique_ptr<PathModel>> preset =
        PathModel::Create(SmallPath(), {"funds", "cites", "mentors"}, 3);
    ASSERT_TRUE(preset.ok()) << preset.status();
    std::vector<EnsembleMember> members(2);
    members[0].grail = *std::move(subgraphs);
    members[1].path = *std::move(preset);
    absl::StatusOr<std::unique_ptr<EnsembleModel>> ensemble =
        EnsembleModel::Create(std::move(members), LinearFusion{{kGrailWeight, kPathWeight}, kBias});
    ASSERT_TRUE(ensemble.ok()) << ensemble.status();
    Serve(*std::move(ensemble));
    IndexTriples(Graph(), &indexed_);
    graph_ = std::make_unique<StaticGraph>(indexed_.entities.size(), indexed_.triples);
  }

  // The rule over GraIL's offline score of (source, relation, e) (inverse: (e, relation,
  // source)), each fact on its own subgraph, and the path member's, for every entity e.
  std::map<std::string, double> Offline(const std::string& source, const std::string& relation,
                                        bool inverse) {
    const EntityId s = *indexed_.entities.Find(source);
    const uint32_t r = *indexed_.relations.Find(relation);
    std::vector<Triple> facts;
    for (EntityId e = 0; e < graph_->num_entities(); ++e) {
      if (e != s) facts.push_back(inverse ? Triple{e, r, s} : Triple{s, r, e});
    }
    const RelationMap grail_map = ensemble_->MemberRelations(0, indexed_.relations.names());
    absl::StatusOr<std::vector<float>> grail = ScoreGrailFacts(
        *ensemble_->grail_member(0), *graph_, grail_map, facts, GrailScoringOptions());
    EXPECT_TRUE(grail.ok()) << grail.status();

    const std::map<std::string, float> path = Member(1, source, relation, inverse);
    std::map<std::string, double> out;
    for (size_t i = 0; i < facts.size(); ++i) {
      const std::string& e = indexed_.entities.Name(inverse ? facts[i].head : facts[i].tail);
      out[e] = kBias + kGrailWeight * (*grail)[i] + kPathWeight * path.at(e);
    }
    return out;
  }

  static constexpr double kGrailWeight = 1.1;

  IndexedTriples indexed_;
  std::unique_ptr<StaticGraph> graph_;
};

TEST_F(GrailEnsembleServingTest, RankingsOfEveryEntityAreTheRuleOverGraILsSubgraphsAndThePath) {
  for (const bool tails : {true, false}) {
    kg::v1::RankResponse ranking;
    const grpc::Status status = RankCall(*stub_, tails, "u4", "cites", {}, &ranking);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(ranking.ranked_size(), 39);  // every entity but u4
    // Beyond both members' reach: one shared score for most of the ring.
    EXPECT_GT(ranking.candidates_shared_score(), 10u);
    const std::map<std::string, double> offline = Offline("u4", "cites", !tails);
    for (int i = 0; i < ranking.ranked_size(); ++i) {
      const kg::v1::RankedEntity& e = ranking.ranked(i);
      EXPECT_NEAR(e.score(), offline.at(e.entity()), 1e-4 * (1 + std::fabs(e.score())))
          << tails << " " << e.entity();
      EXPECT_EQ(e.scored_by(), kg::v1::SCORED_BY_ENSEMBLE);
      if (i > 0) {
        EXPECT_GE(ranking.ranked(i - 1).score(), e.score());
      }
    }
  }
}

TEST_F(GrailEnsembleServingTest, AFactsScoreIsItsScoreInTheRankingAndGraILExplainsIt) {
  const std::map<std::string, double> offline = Offline("u7", "mentors", false);
  for (const char* tail : {"u8", "u9", "u30"}) {
    const kg::v1::ScoreTripletResponse response = Score({"u7", "mentors", tail}, true);
    EXPECT_NEAR(response.score(), offline.at(tail), 1e-4 * (1 + std::fabs(response.score())))
        << tail;
    EXPECT_EQ(response.scored_by(), kg::v1::SCORED_BY_ENSEMBLE);
    // u8 and u9 are within GraIL's hop of u7's neighbours: paths link them; u30 is far.
    if (std::string(tail) != "u30") {
      EXPECT_GT(response.paths_size(), 0) << tail;
    }
    for (const kg::v1::ExplanationPath& p : response.paths()) EXPECT_GT(p.steps_size(), 0);
  }
}

// The same graph served by an ensemble of a path preset model and a KGE model trained on u0..u29
// only: u30..u39 stand for entities added after it was trained, which it does not know, so
// they get its fitted unknown score.
class KgeEnsembleServingTest : public ServedEnsembleTest {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<PathModel>> preset =
        PathModel::Create(SmallPath(), {"funds", "cites", "mentors"}, 3);
    ASSERT_TRUE(preset.ok()) << preset.status();
    KgeConfig config;
    config.kind = KgeKind::kRotatE;  // not symmetric: heads rank apart from tails
    config.dim = 8;
    std::vector<std::string> known;
    for (int i = 29; i >= 0; --i) known.push_back(absl::StrCat("u", i));  // ids not the graph's
    absl::StatusOr<std::unique_ptr<KgeModel>> kge =
        KgeModel::Create(config, known, {"cites", "mentors", "funds"}, 5);
    ASSERT_TRUE(kge.ok()) << kge.status();
    std::vector<EnsembleMember> members(2);
    members[0].path = *std::move(preset);
    members[1].kge = *std::move(kge);
    absl::StatusOr<std::unique_ptr<EnsembleModel>> ensemble = EnsembleModel::Create(
        std::move(members), LinearFusion{{kPathWeight, kKgeWeight}, kBias}, {0.0, kUnknown});
    ASSERT_TRUE(ensemble.ok()) << ensemble.status();
    Serve(*std::move(ensemble));
  }

  // The rule over the path member's offline score of (source, relation, e) (inverse: (e,
  // relation, source)) and the KGE model's, or its unknown score where it does not know the
  // fact, for every entity e but the source.
  std::map<std::string, double> Offline(const std::string& source, const std::string& relation,
                                        bool inverse) {
    const KgeModel& kge = *ensemble_->kge_member(1);
    const std::map<std::string, float> path = Member(0, source, relation, inverse);
    const uint32_t r =
        static_cast<uint32_t>(std::find(kge.relations().begin(), kge.relations().end(), relation) -
                              kge.relations().begin());
    std::map<std::string, double> out;
    for (const auto& [e, path_score] : path) {
      if (e == source) continue;
      const std::optional<uint32_t> s = ensemble_->KgeEntity(1, source);
      const std::optional<uint32_t> other = ensemble_->KgeEntity(1, e);
      double kge_score = kUnknown;
      if (s && other) {
        absl::StatusOr<std::vector<float>> scored =
            kge.ScoreGrailFacts({inverse ? Triple{*other, r, *s} : Triple{*s, r, *other}});
        EXPECT_TRUE(scored.ok()) << scored.status();
        kge_score = (*scored)[0];
      }
      out[e] = kBias + kPathWeight * path_score + kKgeWeight * kge_score;
    }
    return out;
  }

  static constexpr double kKgeWeight = 0.9;
  static constexpr double kUnknown = -2.5;
};

TEST_F(KgeEnsembleServingTest, RankingsAreTheRuleOverThePathAndTheKGEScoresOrItsUnknownScore) {
  // u4 is known to the KGE model, u35 is not (every candidate then has the unknown score).
  for (const char* source : {"u4", "u35"}) {
    for (const bool tails : {true, false}) {
      kg::v1::RankResponse ranking;
      const grpc::Status status = RankCall(*stub_, tails, source, "cites", {}, &ranking);
      ASSERT_TRUE(status.ok()) << status.error_message();
      EXPECT_EQ(ranking.ranked_size(), 39);  // every entity but the source
      const std::map<std::string, double> offline = Offline(source, "cites", !tails);
      size_t known = 0;
      for (int i = 0; i < ranking.ranked_size(); ++i) {
        const kg::v1::RankedEntity& e = ranking.ranked(i);
        EXPECT_NEAR(e.score(), offline.at(e.entity()), 1e-4 * (1 + std::fabs(e.score())))
            << source << " " << tails << " " << e.entity();
        EXPECT_EQ(e.scored_by(), kg::v1::SCORED_BY_ENSEMBLE);
        if (i > 0) {
          EXPECT_GE(ranking.ranked(i - 1).score(), e.score());
        }
        known += ensemble_->KgeEntity(1, e.entity()).has_value();
      }
      EXPECT_EQ(known, std::string(source) == "u4" ? 29u : 30u);
    }
  }
}

TEST_F(KgeEnsembleServingTest, AFactsScoreIsItsScoreInTheRankingKnownToTheKGEModelOrNot) {
  const std::map<std::string, double> offline = Offline("u7", "mentors", false);
  for (const char* tail : {"u8", "u20", "u31", "u38"}) {
    const kg::v1::ScoreTripletResponse response = Score({"u7", "mentors", tail}, false);
    EXPECT_NEAR(response.score(), offline.at(tail), 1e-4 * (1 + std::fabs(response.score())))
        << tail;
    EXPECT_EQ(response.scored_by(), kg::v1::SCORED_BY_ENSEMBLE);
  }
  // The KGE model has no paths to explain with, and the ensemble no GraIL member.
  grpc::ClientContext context;
  kg::v1::ScoreTripletRequest request;
  *request.mutable_triple() = ToProto({"u7", "mentors", "u8"});
  request.set_explain(true);
  kg::v1::ScoreTripletResponse response;
  const grpc::Status refused = stub_->ScoreTriplet(&context, request, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("without a GraIL member"));
}

}  // namespace
}  // namespace grail
