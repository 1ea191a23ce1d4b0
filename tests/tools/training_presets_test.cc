// grail-train's presets as a command line: the preset's flags come first, so the command
// line's own flags win; unknown names and repeats are refused with the list of presets.
#include "tools/training_presets.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const TrainingPreset& Named(const std::string& name) {
  for (const TrainingPreset& preset : TrainingPresets()) {
    if (preset.name == name) return preset;
  }
  ADD_FAILURE() << "no preset " << name;
  return TrainingPresets().front();
}

TEST(TrainingPresetsTest, APresetsFlagsComeBeforeTheCommandLinesOwn) {
  for (const std::vector<std::string>& spelling :
       {std::vector<std::string>{"grail-train", "--train", "t.txt", "--preset", "path",
                                 "--pna=false"},
        std::vector<std::string>{"grail-train", "--train", "t.txt", "--preset=path",
                                 "--pna=false"}}) {
    absl::StatusOr<std::vector<std::string>> out = ExpandTrainingPreset(spelling);
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<std::string> expected = {"grail-train"};
    const std::vector<std::string>& flags = Named("path").flags;
    expected.insert(expected.end(), flags.begin(), flags.end());
    expected.insert(expected.end(), {"--train", "t.txt", "--pna=false"});
    EXPECT_EQ(*out, expected);
  }
}

TEST(TrainingPresetsTest, WithoutAPresetTheCommandLineIsUnchanged) {
  const std::vector<std::string> args = {"grail-train", "--train", "t.txt", "--", "--preset"};
  absl::StatusOr<std::vector<std::string>> out = ExpandTrainingPreset(args);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, args);
}

TEST(TrainingPresetsTest, UnknownRepeatedOrMissingNamesAreRefusedWithTheList) {
  absl::StatusOr<std::vector<std::string>> unknown =
      ExpandTrainingPreset({"grail-train", "--preset", "fast"});
  EXPECT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown preset 'fast'"));
  for (const TrainingPreset& preset : TrainingPresets()) {
    EXPECT_THAT(unknown.status().message(), HasSubstr(preset.name + ": "));
  }
  // The name `path`'s configuration had until 2026-11-29 points to it.
  EXPECT_THAT(ExpandTrainingPreset({"grail-train", "--preset", "path-dense"}).status().message(),
              HasSubstr("is `path` since"));
  EXPECT_THAT(ExpandTrainingPreset({"grail-train", "--preset", "path", "--preset=grail"})
                  .status()
                  .message(),
              HasSubstr("twice"));
  EXPECT_FALSE(ExpandTrainingPreset({"grail-train", "--preset"}).ok());
  EXPECT_FALSE(ExpandTrainingPreset({"grail-train", "--preset", "--epochs=3"}).ok());
}

TEST(TrainingPresetsTest, EveryPresetNamesItsFamilyFirst) {
  std::vector<std::string> names;
  for (const TrainingPreset& preset : TrainingPresets()) {
    names.push_back(preset.name);
    ASSERT_FALSE(preset.flags.empty());
    EXPECT_THAT(preset.flags.front(), HasSubstr("--family="));
  }
  EXPECT_THAT(names, ElementsAre("path", "best", "path-free", "grail"));
  // `best` trains the path preset's model beside ULTRA: the same flags but the family.
  const std::vector<std::string>& path = Named("path").flags;
  const std::vector<std::string>& best = Named("best").flags;
  for (size_t i = 1; i < path.size(); ++i) {
    EXPECT_NE(std::find(best.begin(), best.end(), path[i]), best.end()) << path[i];
  }
}

}  // namespace
}  // namespace grail
