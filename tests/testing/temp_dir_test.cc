// The tests' temporary files: a test process leaves nothing of its own behind.
#include "tests/testing/temp_dir.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>

#include "gtest/gtest.h"

namespace grail {
namespace {

// Runs `body` in a forked child that exits normally (static destructors run) with its result;
// returns the child's pid and exit status (-1 if it did not exit normally).
std::pair<pid_t, int> RunInChild(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) std::exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return {pid, WIFEXITED(status) ? WEXITSTATUS(status) : -1};
}

bool WriteFile(const std::string& path) {
  std::ofstream(path) << "x";
  return std::filesystem::exists(path);
}

TEST(ProcessTempDirTest, AProcessesFilesAreRemovedWhenItExits) {
  const auto [child, status] = RunInChild([] {
    const std::string path = ProcessTempPath("written.txt");
    return WriteFile(path) && path.find(std::to_string(getpid())) != std::string::npos ? 0 : 1;
  });
  ASSERT_EQ(status, 0) << "the child could not write its file";
  const std::filesystem::path dir =
      std::filesystem::path(testing::TempDir()) / ("grail_test." + std::to_string(child));
  EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
}

TEST(ProcessTempDirTest, AForkedChildLeavesItsParentsFilesInPlace) {
  const std::string path = ProcessTempPath("parents.txt");
  ASSERT_TRUE(WriteFile(path));
  const auto [child, status] =
      RunInChild([] { return WriteFile(ProcessTempPath("childs.txt")) ? 0 : 1; });
  ASSERT_EQ(status, 0);
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::exists(ProcessTempPath("childs.txt")));
}

}  // namespace
}  // namespace grail
