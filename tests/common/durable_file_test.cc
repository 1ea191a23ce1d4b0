#include "common/durable_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::HasSubstr;

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

TEST(DurableFileTest, ReplaceFileMakesTheTemporaryTheFileAndRemovesIt) {
  ScopedTempDir dir;
  const std::string path = dir.Sub("model.pt");
  WriteText(path, "old");
  const std::string temporary = TemporaryPathFor(path);
  WriteText(temporary, "new");
  ASSERT_TRUE(ReplaceFile(temporary, path).ok());
  EXPECT_EQ(ReadTextFile(path), "new");
  EXPECT_FALSE(std::filesystem::exists(temporary));
}

TEST(DurableFileTest, AReplaceThatFailsLeavesTheFileAndRemovesTheTemporary) {
  ScopedTempDir dir;
  // A directory with an entry cannot be renamed over.
  const std::string path = dir.Sub("taken");
  std::filesystem::create_directory(path);
  WriteText(dir.Sub("taken/inside"), "kept");
  const std::string temporary = TemporaryPathFor(path);
  WriteText(temporary, "new");
  const absl::Status replaced = ReplaceFile(temporary, path);
  EXPECT_EQ(replaced.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(replaced.message(), HasSubstr(path));
  EXPECT_EQ(ReadTextFile(dir.Sub("taken/inside")), "kept");
  EXPECT_FALSE(std::filesystem::exists(temporary));

  // A temporary that is not there: nothing is renamed.
  WriteText(dir.Sub("file"), "kept");
  EXPECT_FALSE(ReplaceFile(dir.Sub("missing"), dir.Sub("file")).ok());
  EXPECT_EQ(ReadTextFile(dir.Sub("file")), "kept");
}

TEST(DurableFileTest, WriteAndReplaceFileWritesTheContentsAsideThenReplaces) {
  ScopedTempDir dir;
  const std::string path = dir.Sub("state.json");
  WriteText(path, "old");
  const std::string temporary = TemporaryPathFor(path);
  ASSERT_TRUE(WriteAndReplaceFile(temporary, path, std::string("new\0line\n", 9)).ok());
  EXPECT_EQ(ReadTextFile(path), std::string("new\0line\n", 9));
  EXPECT_FALSE(std::filesystem::exists(temporary));

  // A temporary that cannot be written: the file is left as it was.
  const absl::Status unwritten = WriteAndReplaceFile(dir.Sub("missing/state.json.tmp"), path, "x");
  EXPECT_EQ(unwritten.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(unwritten.message(), HasSubstr(dir.Sub("missing/state.json.tmp")));
  EXPECT_EQ(ReadTextFile(path), std::string("new\0line\n", 9));
}

TEST(DurableFileTest, SyncPathSyncsFilesAndDirectoriesAndNamesWhatIsMissing) {
  ScopedTempDir dir;
  WriteText(dir.Sub("file"), "x");
  EXPECT_TRUE(SyncPath(dir.Sub("file")).ok());
  EXPECT_TRUE(SyncPath(dir.path()).ok());
  const absl::Status missing = SyncPath(dir.Sub("missing"));
  EXPECT_EQ(missing.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(missing.message(), HasSubstr(dir.Sub("missing")));
}

TEST(DurableFileTest, ALinkIsReplacedThroughAndStaysALink) {
  ScopedTempDir dir;
  std::filesystem::create_directory(dir.Sub("v2"));
  WriteText(dir.Sub("v2/model.pt"), "old");
  std::filesystem::create_symlink("v2/model.pt", dir.Sub("model.pt"));
  const std::string target = ReplacedPath(dir.Sub("model.pt"));
  EXPECT_EQ(target, std::filesystem::canonical(dir.Sub("v2/model.pt")).string());
  WriteText(TemporaryPathFor(target), "new");
  ASSERT_TRUE(ReplaceFile(TemporaryPathFor(target), target).ok());
  EXPECT_TRUE(std::filesystem::is_symlink(dir.Sub("model.pt")));
  EXPECT_EQ(ReadTextFile(dir.Sub("model.pt")), "new");
  // A plain file, or a path not there yet, is itself.
  EXPECT_EQ(ReplacedPath(dir.Sub("v2/model.pt")), dir.Sub("v2/model.pt"));
  EXPECT_EQ(ReplacedPath(dir.Sub("new.pt")), dir.Sub("new.pt"));
}

TEST(DurableFileTest, TheTemporaryIsBesideThePathAndNamesThisProcess) {
  const std::string temporary = TemporaryPathFor("/data/models/model.pt");
  EXPECT_EQ(std::filesystem::path(temporary).parent_path(), "/data/models");
  EXPECT_EQ(temporary, absl::StrCat("/data/models/model.pt.tmp-", ::getpid()));
}

}  // namespace
}  // namespace grail
