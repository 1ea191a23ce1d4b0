// ULTRA's models: the path model running ULTRA's network (model/ultra/ultra_model.h), made and
// loaded through model/ultra and LoadAnyModel, never through the path family's own calls.
#include "model/ultra/ultra_model.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/families.h"
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

}  // namespace
}  // namespace grail
