// ULTRA's models served by the real grail-server binary (loopback port, real RocksDB
// directory, real gRPC): a graph whose relation names no model has seen is scored as the
// offline model scores it, a relation added at runtime is ranked by the next call, and the
// graph of relations follows removals.
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/relation_sides.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"
#include "model/path/path_batch.h"
#include "model/path/path_model.h"
#include "model/ultra/ultra_model.h"
#include "tests/testing/graph_calls.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/run_binary.h"
#include "tests/testing/saved_model.h"
#include "tests/testing/server_process.h"
#include "tests/testing/small_ultra.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using kg::v1::KnowledgeGraph;
using ::testing::HasSubstr;

// A ring of entities u0..u29 with three relations no model was trained on, each entity
// linked to the next two, plus chords.
std::vector<NamedTriple> Graph() {
  const std::vector<std::string> relations = {"mentors", "cites", "funds"};
  std::vector<NamedTriple> facts;
  for (int i = 0; i < 30; ++i) {
    facts.push_back({absl::StrCat("u", i), relations[i % 3], absl::StrCat("u", (i + 1) % 30)});
    facts.push_back(
        {absl::StrCat("u", i), relations[(i + 1) % 3], absl::StrCat("u", (i + 2) % 30)});
    if (i % 5 == 0)
      facts.push_back({absl::StrCat("u", i), "cites", absl::StrCat("u", (i + 11) % 30)});
  }
  return facts;
}

class UltraServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<PathModel>> model =
        CreateUltraModel(SmallUltraConfig(/*layers=*/3), 5);
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_TRUE((*model)->Save(dir_.Sub("ultra.pt")).ok());
    model_ = *std::move(model);
    ASSERT_NO_FATAL_FAILURE(StartServer());
    Add(Graph());
  }

  // Starts grail-server on the test's model and store, with `extra` flags.
  void StartServer(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--model=" + dir_.Sub("ultra.pt"),
                                     "--data-dir=" + dir_.Sub("store")};
    args.insert(args.end(), extra.begin(), extra.end());
    ASSERT_TRUE(server_.Start(args, dir_.Sub("server.log")));
    stub_ = KnowledgeGraph::NewStub(
        grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials()));
  }

  void Restart(const std::vector<std::string>& extra = {}) {
    ASSERT_EQ(server_.Stop(), 0) << server_.Log();
    StartServer(extra);
  }

  void Add(const std::vector<NamedTriple>& facts) {
    const AddOutcome added = AddChunks(*stub_, {facts});
    ASSERT_TRUE(added.status.ok()) << added.status.error_message();
    stored_.insert(stored_.end(), facts.begin(), facts.end());
  }

  void Remove(const std::vector<NamedTriple>& facts) {
    const RemoveOutcome removed = RemoveChunks(*stub_, {facts});
    ASSERT_TRUE(removed.status.ok()) << removed.status.error_message();
    std::vector<NamedTriple> kept;
    for (const NamedTriple& t : stored_) {
      if (std::find(facts.begin(), facts.end(), t) == facts.end()) kept.push_back(t);
    }
    stored_ = kept;
  }

  // Every entity's score for (source, relation, ?) (inverse: (?, relation, source)) by the
  // offline model over the stored facts.
  std::map<std::string, float> Offline(const std::string& source, const std::string& relation,
                                       bool inverse) {
    IndexedTriples indexed;
    IndexTriples(stored_, &indexed);
    const StaticGraph graph(indexed.entities.size(), indexed.triples);
    const RelationMap identity;
    const PathNeighbourhoodSpec spec = model_->Neighbourhood(&graph, &identity, 0);
    PathBatchBuilder builder;
    PathBatch batch;
    const int32_t r = static_cast<int32_t>(*indexed.relations.Find(relation));
    EXPECT_TRUE(builder
                    .Build(spec,
                           {PathQuery(*indexed.entities.Find(source),
                                      r + (inverse ? spec.num_relations : 0))},
                           &batch)
                    .ok());
    absl::StatusOr<PathScores> scores = model_->Score(batch);
    EXPECT_TRUE(scores.ok()) << scores.status();
    std::map<std::string, float> out;
    for (EntityId e = 0; e < graph.num_entities(); ++e) {
      out[indexed.entities.Name(e)] = scores->Of(batch, 0, e);
    }
    return out;
  }

  kg::v1::RankResponse Rank(const std::string& fixed, const std::string& relation, bool tails,
                            grpc::Status* status_out = nullptr) {
    kg::v1::RankResponse response;
    const grpc::Status status =
        RankCall(*stub_, tails, fixed, relation, kg::v1::RankOptions(), &response);
    if (status_out != nullptr) {
      *status_out = status;
    } else {
      EXPECT_TRUE(status.ok()) << status.error_message();
    }
    return response;
  }

  grpc::Status Reload(const std::string& path) {
    grpc::ClientContext context;
    kg::v1::ReloadModelRequest request;
    request.set_path(path);
    kg::v1::ReloadModelResponse response;
    return stub_->ReloadModel(&context, request, &response);
  }

  float Score(const NamedTriple& t) {
    grpc::ClientContext context;
    kg::v1::ScoreTripletRequest request;
    *request.mutable_triple() = ToProto(t);
    kg::v1::ScoreTripletResponse response;
    const grpc::Status status = stub_->ScoreTriplet(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.score();
  }

  // The served ranking's scores against the offline model's, entity by entity.
  void ExpectOffline(const kg::v1::RankResponse& ranking, const std::string& source,
                     const std::string& relation, bool inverse) {
    const std::map<std::string, float> offline = Offline(source, relation, inverse);
    ASSERT_GT(ranking.ranked_size(), 0);
    for (const kg::v1::RankedEntity& e : ranking.ranked()) {
      EXPECT_NEAR(e.score(), offline.at(e.entity()), 1e-5 * (1 + std::fabs(e.score())))
          << source << " " << relation << " " << e.entity();
    }
  }

  ScopedTempDir dir_;
  ServerProcess server_;
  std::unique_ptr<KnowledgeGraph::Stub> stub_;
  std::unique_ptr<PathModel> model_;
  std::vector<NamedTriple> stored_;
};

TEST_F(UltraServingTest, RelationsNoModelHasSeenScoreAsTheOfflineModelAndStatsNameTheFormat) {
  ExpectOffline(Rank("u4", "cites", true), "u4", "cites", false);
  ExpectOffline(Rank("u9", "funds", false), "u9", "funds", true);
  const std::map<std::string, float> offline = Offline("u7", "mentors", false);
  for (const char* tail : {"u8", "u9", "u20"}) {
    EXPECT_NEAR(Score({"u7", "mentors", tail}), offline.at(tail), 1e-5) << tail;
  }
  grpc::ClientContext context;
  kg::v1::GetStatsResponse stats;
  ASSERT_TRUE(stub_->GetStats(&context, kg::v1::GetStatsRequest(), &stats).ok());
  EXPECT_EQ(stats.model().format(), kUltraModelFormat);
  EXPECT_EQ(stats.model().parameters(), static_cast<uint64_t>(model_->num_parameters()));
}

TEST_F(UltraServingTest, ARelationAddedAtRuntimeIsRankedByTheNextCall) {
  grpc::Status unknown;
  Rank("u3", "advises", true, &unknown);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(unknown.error_message(), HasSubstr("advises"));

  const std::map<std::string, float> before = Offline("u3", "cites", false);
  Add({{"u3", "advises", "u17"}, {"u17", "advises", "u25"}, {"u12", "advises", "u3"}});
  const kg::v1::RankResponse tails = Rank("u3", "advises", true);
  ASSERT_EQ(tails.ranked_size(), 29);  // every entity but u3
  ExpectOffline(tails, "u3", "advises", false);
  ExpectOffline(Rank("u25", "advises", false), "u25", "advises", true);
  // The new relation changed the graph of relations, hence every relation's vectors.
  const kg::v1::RankResponse cites = Rank("u3", "cites", true);
  ExpectOffline(cites, "u3", "cites", false);
  EXPECT_NE(cites.ranked(0).score(), before.at(cites.ranked(0).entity()));
}

TEST_F(UltraServingTest, RemovingARelationsFactsIsFollowedByTheGraphOfRelations) {
  Add({{"u3", "advises", "u17"}, {"u17", "advises", "u25"}});
  const kg::v1::RankResponse with = Rank("u5", "funds", true);
  ExpectOffline(with, "u5", "funds", false);
  Remove({{"u3", "advises", "u17"}, {"u17", "advises", "u25"}});
  const kg::v1::RankResponse without = Rank("u5", "funds", true);
  ExpectOffline(without, "u5", "funds", false);
  // Scores equal the graph's without the relation, which differ from those with it.
  const std::map<std::string, float> offline_with = [&] {
    std::vector<NamedTriple> saved = stored_;
    stored_.push_back({"u3", "advises", "u17"});
    stored_.push_back({"u17", "advises", "u25"});
    std::map<std::string, float> out = Offline("u5", "funds", false);
    stored_ = saved;
    return out;
  }();
  EXPECT_NE(without.ranked(0).score(), offline_with.at(without.ranked(0).entity()));
}

// A relation that lost its last fact is in the state of one never stored: refused by name,
// in both directions and for a single fact, before and after a restart.
TEST_F(UltraServingTest, ARelationWhoseFactsWereAllRemovedIsRefusedLikeOneNeverStored) {
  Add({{"u3", "advises", "u17"}, {"u17", "advises", "u25"}});
  Rank("u3", "advises", true);
  Remove({{"u3", "advises", "u17"}, {"u17", "advises", "u25"}});
  auto expect_refused = [&] {
    for (const bool tails : {true, false}) {
      grpc::Status status;
      Rank("u3", "advises", tails, &status);
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << tails;
      EXPECT_THAT(status.error_message(), HasSubstr("\"advises\" has no fact in the graph"));
    }
    grpc::ClientContext context;
    kg::v1::ScoreTripletRequest request;
    *request.mutable_triple() = ToProto({"u3", "advises", "u17"});
    kg::v1::ScoreTripletResponse response;
    EXPECT_EQ(stub_->ScoreTriplet(&context, request, &response).error_code(),
              grpc::StatusCode::INVALID_ARGUMENT);
  };
  expect_refused();
  ASSERT_NO_FATAL_FAILURE(Restart());
  expect_refused();
  // A fact of it stored again makes it scorable again.
  Add({{"u3", "advises", "u17"}});
  ExpectOffline(Rank("u3", "advises", true), "u3", "advises", false);
}

// ULTRA takes any relation; a reload to a model with a closed vocabulary is checked against
// the stored graph as a start on that store would check it, and from then on the store
// refuses relations outside that vocabulary.
TEST_F(UltraServingTest, AReloadToALearnedModelChecksAndThenEnforcesItsVocabulary) {
  const std::string grail = dir_.Sub("grail.pt");
  ASSERT_TRUE(SaveUntrainedModel(grail, {"mentors", "cites", "funds"}, 3, TwoHopConfig()).ok());
  Add({{"H", "brand_new", "T"}});
  const grpc::Status refused = Reload(grail);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), HasSubstr("\"brand_new\""));
  // The refused reload changed nothing: ULTRA serves and still takes new relations.
  Add({{"H", "newer", "u1"}});
  EXPECT_TRUE(std::isfinite(Score({"H", "newer", "u1"})));

  Remove({{"H", "brand_new", "T"}, {"H", "newer", "u1"}});
  const grpc::Status applied = Reload(grail);
  ASSERT_TRUE(applied.ok()) << applied.error_message();
  const AddOutcome outside = AddChunks(*stub_, {{{"u1", "cites", "u2"}, {"u1", "unheard", "u2"}}});
  EXPECT_EQ(outside.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(outside.status.error_message(), HasSubstr("\"unheard\""));
}

// Only ULTRA reads which relation sides meet: a server serving a learned model does not follow
// them, and a reload back to ULTRA counts them off the graph as it then is (chunks added and
// removed meanwhile included), so that ULTRA ranks as it does offline on that graph.
TEST_F(UltraServingTest, AReloadToUltraCountsTheRelationSidesALearnedModelDidNotFollow) {
  const std::string grail = dir_.Sub("grail.pt");
  ASSERT_TRUE(SaveUntrainedModel(grail, {"mentors", "cites", "funds"}, 3, TwoHopConfig()).ok());
  ASSERT_TRUE(Reload(grail).ok());
  EXPECT_EQ(ScrapedMetric(server_.metrics_port(), "grail_graph_relation_side_pairs"), 0);
  // While the learned model serves, chunks added and removed.
  Add({{"u2", "funds", "u9"}, {"u9", "mentors", "u4"}, {"u4", "cites", "u2"}});
  Remove({stored_.front()});
  const grpc::Status back = Reload(dir_.Sub("ultra.pt"));
  ASSERT_TRUE(back.ok()) << back.error_message();
  EXPECT_THAT(server_.Log(), HasSubstr("\"relation_sides_seconds\""));
  EXPECT_GT(ScrapedMetric(server_.metrics_port(), "grail_graph_relation_side_pairs"), 0);
  ExpectOffline(Rank("u9", "mentors", true), "u9", "mentors", false);
  ExpectOffline(Rank("u2", "funds", false), "u2", "funds", true);
  // And follows them again: a chunk after the reload.
  Add({{"u9", "cites", "u1"}});
  ExpectOffline(Rank("u9", "cites", true), "u9", "cites", false);
}

// The graph of relations grows with the square of the relations meeting at an entity: an
// AddTriples line that would pass --max-relation-pairs is refused naming it, before it can
// exhaust memory at the next forward; and a store past a lowered bound is refused at start
// with ULTRA, naming the flag, instead of a warm-up that could not finish.
TEST_F(UltraServingTest, AFactPastTheRelationPairBoundIsRefusedNamingItsLine) {
  IndexedTriples indexed;
  IndexTriples(stored_, &indexed);
  const uint64_t pairs =
      ComputeRelationSidePairs(StaticGraph(indexed.entities.size(), indexed.triples)).size();
  ASSERT_NO_FATAL_FAILURE(Restart({absl::StrCat("--max-relation-pairs=", pairs + 2)}));
  // Line 1 makes no new pair meet (u0 is the head of mentors already); line 2 gives u0 a
  // relation of its own, whose head side meets each of u0's.
  const AddOutcome refused = AddChunks(*stub_, {{{"u0", "mentors", "u5"}, {"u0", "x0", "u1"}}});
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.status.error_message(), HasSubstr("line 2: relation \"x0\""));
  EXPECT_THAT(refused.status.error_message(), HasSubstr("--max-relation-pairs"));
  // Nothing of the chunk was stored, and the server serves.
  grpc::Status unknown;
  Rank("u0", "x0", true, &unknown);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ExpectOffline(Rank("u4", "cites", true), "u4", "cites", false);

  ASSERT_EQ(server_.Stop(), 0);
  const BinaryRun lowered = RunBinary(
      "grail-server",
      absl::StrCat("--port=0 --metrics-port=-1 --model=", dir_.Sub("ultra.pt"),
                   " --data-dir=", dir_.Sub("store"), " --max-relation-pairs=", pairs - 1));
  EXPECT_EQ(lowered.exit_code, 1) << lowered.all();
  EXPECT_THAT(lowered.all(), HasSubstr(absl::StrCat("pairs of relation sides are over "
                                                    "--max-relation-pairs ",
                                                    pairs - 1)));
}

}  // namespace
}  // namespace grail
