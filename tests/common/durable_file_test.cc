#include "common/durable_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// The names in `dir`, sorted.
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(DurableFileTest, ReplaceFileMakesTheTemporaryTheFileAndRemovesIt) {
  ScopedTempDir dir;
  const std::string path = dir.Sub("model.pt");
  WriteText(path, "old");
  const std::string temporary = path + ".tmp";
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
  const std::string temporary = path + ".tmp";
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
  const std::string temporary = path + ".tmp";
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
  WriteText(target + ".tmp", "new");
  ASSERT_TRUE(ReplaceFile(target + ".tmp", target).ok());
  EXPECT_TRUE(std::filesystem::is_symlink(dir.Sub("model.pt")));
  EXPECT_EQ(ReadTextFile(dir.Sub("model.pt")), "new");
  // A plain file, or a path not there yet, is itself.
  EXPECT_EQ(ReplacedPath(dir.Sub("v2/model.pt")), dir.Sub("v2/model.pt"));
  EXPECT_EQ(ReplacedPath(dir.Sub("new.pt")), dir.Sub("new.pt"));
}

TEST(PendingFileTest, TheTemporaryIsBesideThePathNamesThisProcessAndIsNeverShared) {
  ScopedTempDir dir;
  const std::string path = dir.Sub("model.pt");
  absl::StatusOr<PendingFile> first = PendingFile::Create(path);
  absl::StatusOr<PendingFile> second = PendingFile::Create(path);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_THAT(first->path(), StartsWith(absl::StrCat(path, ".tmp-", ::getpid(), "-")));
  EXPECT_NE(first->path(), second->path());
  // Each writer's file is its own, and a second writer's sweep leaves the first's alone.
  EXPECT_TRUE(std::filesystem::exists(first->path()));
  EXPECT_TRUE(std::filesystem::exists(second->path()));
  WriteText(first->path(), "first");
  WriteText(second->path(), "second");
  ASSERT_TRUE(second->Replace(path).ok());
  ASSERT_TRUE(first->Replace(path).ok());
  EXPECT_EQ(ReadTextFile(path), "first");
  EXPECT_THAT(Entries(dir.path()), ElementsAre("model.pt"));
}

TEST(PendingFileTest, ATemporaryNeverReplacedIsRemoved) {
  ScopedTempDir dir;
  std::string temporary;
  {
    absl::StatusOr<PendingFile> pending = PendingFile::Create(dir.Sub("model.pt"));
    ASSERT_TRUE(pending.ok());
    temporary = pending->path();
    WriteText(temporary, "half");
    PendingFile moved = *std::move(pending);
    EXPECT_TRUE(std::filesystem::exists(temporary));
  }
  EXPECT_FALSE(std::filesystem::exists(temporary));
  EXPECT_THAT(Entries(dir.path()), IsEmpty());
}

// A writer killed in the middle of a save leaves its temporary; the next writer of the same
// path removes it, and only once the killed writer's lock died with it. A live writer's, a
// locked one's and another path's temporaries stay, and so do an operator's own files whose
// names only begin like a temporary's.
TEST(PendingFileTest, TheNextWriterRemovesTheTemporaryOfAWriterKilledMidWrite) {
  ScopedTempDir dir;
  const std::string path = dir.Sub("model.pt");
  WriteText(path, "old");
  // An earlier build's writers took no lock: one killed long ago, and one mid-save now.
  WriteText(path + ".tmp-4242", "left by a writer of an earlier build");
  const struct timespec long_ago[2] = {{0, UTIME_OMIT}, {::time(nullptr) - 3601, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (path + ".tmp-4242").c_str(), long_ago, 0), 0);
  WriteText(path + ".tmp-4243", "being written by a writer of an earlier build");
  WriteText(dir.Sub("other.pt.tmp-7"), "another path's");
  const std::string locked = path + ".tmp-99-00000000deadbeef";
  WriteText(locked, "held");
  WriteText(path + ".tmp-backup", "an operator's");
  WriteText(path + ".tmp-12-notanonce", "an operator's too");
  const int held = ::open(locked.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX), 0);

  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t writer = ::fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    absl::StatusOr<PendingFile> pending = PendingFile::Create(path);
    if (!pending.ok()) ::_exit(1);
    WriteText(pending->path(), "half an archive");
    const char name_length = static_cast<char>(pending->path().size());
    if (::write(ready[1], &name_length, 1) != 1) ::_exit(1);
    if (::write(ready[1], pending->path().data(), pending->path().size()) < 0) ::_exit(1);
    for (;;) ::pause();  // killed mid-write
  }
  ::close(ready[1]);
  char name_length = 0;
  ASSERT_EQ(::read(ready[0], &name_length, 1), 1);
  std::string child_temporary(static_cast<unsigned char>(name_length), '\0');
  ASSERT_EQ(::read(ready[0], child_temporary.data(), child_temporary.size()),
            static_cast<ssize_t>(child_temporary.size()));
  ::close(ready[0]);

  // The writer's own start removed the earlier build's leftover, and kept the one still being
  // written; while the writer lives, its temporary is kept.
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp-4242"));
  EXPECT_TRUE(std::filesystem::exists(path + ".tmp-4243"));
  EXPECT_EQ(RemoveAbandonedTemporaries(path), 0);
  EXPECT_TRUE(std::filesystem::exists(child_temporary));

  ASSERT_EQ(::kill(writer, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(writer, &status, 0), writer);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(std::filesystem::exists(child_temporary));

  ASSERT_TRUE(WriteAndReplaceFile(path, "new").ok());
  EXPECT_EQ(ReadTextFile(path), "new");
  EXPECT_FALSE(std::filesystem::exists(child_temporary));
  EXPECT_THAT(
      Entries(dir.path()),
      UnorderedElementsAre("model.pt", "model.pt.tmp-99-00000000deadbeef", "model.pt.tmp-4243",
                           "model.pt.tmp-backup", "model.pt.tmp-12-notanonce", "other.pt.tmp-7"));
  ::close(held);
  EXPECT_EQ(RemoveAbandonedTemporaries(path), 1);
  EXPECT_THAT(Entries(dir.path()),
              UnorderedElementsAre("model.pt", "model.pt.tmp-4243", "model.pt.tmp-backup",
                                   "model.pt.tmp-12-notanonce", "other.pt.tmp-7"));
}

// On a shared file system the server stamps mtimes by its own clock: an earlier build's
// temporary is judged quiet against that clock, never against this host's, which may run ahead.
TEST(PendingFileTest, AnEarlierBuildsTemporaryIsJudgedQuietByTheFileSystemsClock) {
  ScopedTempDir dir;
  const std::string path = dir.Sub("model.pt");
  const std::string earlier = path + ".tmp-4242";
  WriteText(earlier, "being written by a writer of an earlier build");
  // Two hours behind this host: as the file server stamps a file it has just written when this
  // host's clock runs two hours ahead of the server's.
  const int64_t written = static_cast<int64_t>(::time(nullptr)) - 7200;
  const struct timespec stamped[2] = {{0, UTIME_OMIT}, {static_cast<time_t>(written), 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, earlier.c_str(), stamped, 0), 0);

  // A minute after it was written, by the server's clock: kept.
  EXPECT_EQ(RemoveAbandonedTemporaries(path, written + 60), 0);
  EXPECT_TRUE(std::filesystem::exists(earlier));
  // An hour after, by the server's clock: removed.
  EXPECT_EQ(RemoveAbandonedTemporaries(path, written + 3600), 1);
  EXPECT_FALSE(std::filesystem::exists(earlier));
}

// A write replaces its target by a rename: over a FIFO or a device it would leave a regular
// file in its place. Refused before anything is created, and the target stays what it was.
TEST(PendingFileTest, ATargetThatIsNotARegularFileIsRefusedAndKept) {
  ScopedTempDir dir;
  const std::string fifo = dir.Sub("model.pt");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const absl::StatusOr<PendingFile> pending = PendingFile::Create(fifo);
  ASSERT_FALSE(pending.ok());
  EXPECT_EQ(pending.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(pending.status().message()), HasSubstr("it is a FIFO"));
  EXPECT_EQ(WriteAndReplaceFile(fifo, "bytes").code(), absl::StatusCode::kFailedPrecondition);
  struct stat info;
  ASSERT_EQ(::stat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));
  EXPECT_THAT(Entries(dir.path()), ElementsAre("model.pt"));  // no temporary was left

  EXPECT_EQ(PendingFile::Create("/dev/null").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PendingFile::Create(dir.path()).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CheckOutputPathTest, RefusesWhatIsNotAFileAndWhatAToolReads) {
  ScopedTempDir dir;
  const std::string input = dir.Sub("ultra.pth");
  WriteText(input, "released weights");
  ASSERT_EQ(::symlink(input.c_str(), dir.Sub("link.pth").c_str()), 0);

  EXPECT_TRUE(CheckOutputPath("out", dir.Sub("new.pt"), {{"checkpoint", input}}).ok());
  EXPECT_TRUE(CheckOutputPath("out", dir.Sub("new.pt"), {{"checkpoint", ""}}).ok());
  const absl::Status same = CheckOutputPath("out", input, {{"checkpoint", input}});
  EXPECT_EQ(same.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(same.message()), HasSubstr("is the file --checkpoint reads"));
  // The same file by another name is the same file.
  EXPECT_FALSE(CheckOutputPath("out", dir.Sub("link.pth"), {{"checkpoint", input}}).ok());
  EXPECT_FALSE(CheckOutputPath("out", dir.Sub("./ultra.pth"), {{"checkpoint", input}}).ok());

  const absl::Status device = CheckOutputPath("out", "/dev/full");
  EXPECT_EQ(device.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(device.message()), HasSubstr("--out /dev/full is a device"));
  EXPECT_THAT(std::string(CheckOutputPath("out", dir.path()).message()),
              HasSubstr("is a directory"));
  EXPECT_EQ(ReadTextFile(input), "released weights");
}

}  // namespace
}  // namespace grail
