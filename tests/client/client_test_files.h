// Input files for the client's tests, written in the test process's temporary directory.
#ifndef GRAIL_TESTS_CLIENT_CLIENT_TEST_FILES_H_
#define GRAIL_TESTS_CLIENT_CLIENT_TEST_FILES_H_

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace grail {

// Writes `contents` to a file named `name` in ProcessTempDir (replacing it), removed when the
// process exits, and returns its path. `name` must be unique within the test binary.
inline std::string WriteTestFile(const std::string& name, const std::string& contents) {
  const std::string path = ProcessTempPath(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  out.close();
  EXPECT_TRUE(out.good()) << "cannot write " << path;
  return path;
}

}  // namespace grail

#endif  // GRAIL_TESTS_CLIENT_CLIENT_TEST_FILES_H_
