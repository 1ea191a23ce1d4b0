// Files and directories under the test's temporary directory that a test leaves nothing of:
// a process's own directory removed when it exits, and a fresh directory removed when the
// object goes out of scope.
#ifndef GRAIL_TESTS_TESTING_TEMP_DIR_H_
#define GRAIL_TESTS_TESTING_TEMP_DIR_H_

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

#include "gtest/gtest.h"

namespace grail {

// A file's whole content ("" if it cannot be read).
inline std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The directory of this process's ProcessTempPath files under the tests' temporary directory:
// created on first use, removed with everything in it when the process exits normally (a
// failed assertion included; not a crash). A child forked from the process leaves it in place.
class ProcessTempDir {
 public:
  static const std::filesystem::path& Get() {
    static ProcessTempDir dir;
    return dir.path_;
  }
  ~ProcessTempDir() {
    std::error_code ignored;
    if (getpid() == owner_) std::filesystem::remove_all(path_, ignored);
  }
  ProcessTempDir(const ProcessTempDir&) = delete;
  ProcessTempDir& operator=(const ProcessTempDir&) = delete;

 private:
  ProcessTempDir()
      : owner_(getpid()),
        path_(std::filesystem::path(testing::TempDir()) /
              ("grail_test." + std::to_string(owner_))) {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);  // a crashed process's, its pid reused
    std::filesystem::create_directories(path_, ignored);
  }

  pid_t owner_;
  std::filesystem::path path_;
};

// A path that no other test process uses (ctest runs every test case as its own process, in
// parallel), in ProcessTempDir, so removed when the process exits. Not created.
inline std::string ProcessTempPath(const std::string& name) {
  return (ProcessTempDir::Get() / name).string();
}

class ScopedTempDir {
 public:
  ScopedTempDir() {
    std::string pattern = (std::filesystem::path(testing::TempDir()) / "grail_store_XXXXXX");
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
    EXPECT_FALSE(path_.empty()) << "mkdtemp failed for " << pattern;
  }
  ~ScopedTempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }
  // A path inside the directory (not created).
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_TEMP_DIR_H_
