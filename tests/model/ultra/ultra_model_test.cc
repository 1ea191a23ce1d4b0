// ULTRA's models: the path model running ULTRA's network (model/ultra/ultra_model.h), made and
// loaded through model/ultra and LoadAnyModel, never through the path family's own calls.
#include "model/ultra/ultra_model.h"

#include <cmath>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "graph/relation_map.h"
#include "gtest/gtest.h"
#include "model/families.h"
#include "tests/testing/path_test_graph.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::HasSubstr;

PathConfig SmallUltra() {
  PathConfig c = UltraConfig();
  c.num_layers = 2;
  c.relation_layers = 3;
  c.dim = 8;
  return c;
}

TEST(UltraModelTest, AnArchiveLoadsAsAPathModelRunningUltrasNetwork) {
  ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<PathModel>> created = CreateUltraModel(SmallUltra(), 7);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ((*created)->format(), kUltraModelFormat);
  EXPECT_TRUE((*created)->open_vocabulary());
  ASSERT_TRUE((*created)->Save(dir.Sub("ultra.pt")).ok());

  absl::StatusOr<AnyModel> loaded = LoadAnyModel(dir.Sub("ultra.pt"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_NE(loaded->path, nullptr);
  EXPECT_EQ(loaded->path->format(), kUltraModelFormat);
  EXPECT_TRUE(loaded->path->open_vocabulary());
  EXPECT_EQ(loaded->path->config().relation_layers, 3);
  EXPECT_EQ(loaded->path->num_parameters(), (*created)->num_parameters());
}

TEST(UltraModelTest, ThePathFamilysOwnCallsRefuseUltrasNetworkSayingWhereItIs) {
  absl::StatusOr<std::unique_ptr<PathModel>> created = PathModel::Create(SmallUltra(), {}, 7);
  ASSERT_FALSE(created.ok());
  EXPECT_THAT(created.status().message(), HasSubstr("model/ultra"));

  ScopedTempDir dir;
  ASSERT_TRUE((*CreateUltraModel(SmallUltra(), 7))->Save(dir.Sub("ultra.pt")).ok());
  absl::StatusOr<std::unique_ptr<PathModel>> loaded = PathModel::Load(dir.Sub("ultra.pt"));
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(), HasSubstr(kUltraModelFormat));
  EXPECT_THAT(loaded.status().message(), HasSubstr("LoadAnyModel"));

  // And ULTRA's refuses a path model's config.
  absl::StatusOr<std::unique_ptr<PathModel>> path = CreateUltraModel(PathConfig{}, 7);
  ASSERT_FALSE(path.ok());
  EXPECT_THAT(path.status().message(), HasSubstr("graph of relations"));
}

// ULTRA's code starts a head query (t, r^-1, ?)'s graph of relations at r; the archive can say
// to start it at r^-1. Tail queries are the same either way.
TEST(UltraModelTest, HeadQueriesStartAtTheInverseOnlyWhereTheArchiveSaysSo) {
  PathConfig inverse = SmallUltra();
  inverse.inverse_head_queries = true;
  ScopedTempDir dir;
  ASSERT_TRUE((*CreateUltraModel(inverse, 7))->Save(dir.Sub("inverse.pt")).ok());
  absl::StatusOr<AnyModel> loaded = LoadAnyModel(dir.Sub("inverse.pt"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->path->config().inverse_head_queries);
  absl::StatusOr<std::unique_ptr<PathModel>> forward = CreateUltraModel(SmallUltra(), 7);
  ASSERT_TRUE(forward.ok()) << forward.status();
  EXPECT_FALSE((*forward)->config().inverse_head_queries);

  const StaticGraph graph = PathTestGraph();
  const int32_t r = static_cast<int32_t>(graph.num_relations());
  const RelationMap identity;
  PathBatchBuilder builder;
  PathBatch batch;
  ASSERT_TRUE(builder
                  .Build((*forward)->Neighbourhood(&graph, &identity, 0),
                         {PathQuery(12, 1), PathQuery(12, 1 + r)}, &batch)
                  .ok());
  absl::StatusOr<PathScores> a = (*forward)->Score(batch);
  absl::StatusOr<PathScores> b = loaded->path->Score(batch);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  int tail_differ = 0, head_differ = 0;
  for (EntityId e = 0; e < graph.num_entities(); ++e) {
    tail_differ += a->Of(batch, 0, e) != b->Of(batch, 0, e);
    head_differ += std::abs(a->Of(batch, 1, e) - b->Of(batch, 1, e)) > 1e-4f;
  }
  EXPECT_EQ(tail_differ, 0);
  EXPECT_GT(head_differ, 0);

  // The path family's networks have no graph of relations to start.
  PathConfig path;
  path.inverse_head_queries = true;
  EXPECT_FALSE(PathModel::Create(path, {"r0"}, 7).ok());
}

}  // namespace
}  // namespace grail
