// Input files for the client's tests, written under the test's temporary directory.
#ifndef GRAIL_TESTS_CLIENT_CLIENT_TEST_FILES_H_
#define GRAIL_TESTS_CLIENT_CLIENT_TEST_FILES_H_

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace grail {

// Writes `contents` to a file named after `name` and this process in the test's temporary
// directory (replacing it) and returns its path. `name` must be unique within the test binary.
inline std::string WriteTestFile(const std::string& name, const std::string& contents) {
  const std::string path = (std::filesystem::path(::testing::TempDir()) /
                            ("grail_client_" + std::to_string(getpid()) + "_" + name))
                               .string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  out.close();
  EXPECT_TRUE(out.good()) << "cannot write " << path;
  return path;
}

}  // namespace grail

#endif  // GRAIL_TESTS_CLIENT_CLIENT_TEST_FILES_H_
