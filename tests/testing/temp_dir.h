// A fresh directory under the test's temporary directory, removed with everything in it
// when the object goes out of scope.
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

// A path under the tests' temporary directory that no other test process uses: ctest runs
// every test case as its own process, in parallel. Not created.
inline std::string ProcessTempPath(const std::string& name) {
  return (std::filesystem::path(testing::TempDir()) / (name + "." + std::to_string(getpid())))
      .string();
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
