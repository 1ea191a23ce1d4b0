// Runs one of our built binaries (build/bin/NAME) through the shell, for tests that check a
// command-line contract: exit code, stdout and stderr kept apart.
#ifndef GRAIL_TESTS_TESTING_RUN_BINARY_H_
#define GRAIL_TESTS_TESTING_RUN_BINARY_H_

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace grail {

struct BinaryRun {
  int exit_code = -1;  // -1 if it did not exit normally
  std::string out;     // stdout
  std::string err;     // stderr
  std::string all() const { return out + err; }
};

// `args` is appended to the binary's path as shell words (quote what needs quoting).
// `wrapper`, if any, is put before the binary's path: a command that runs it (strace).
inline BinaryRun RunBinary(const std::string& name, const std::string& args,
                           const std::string& wrapper = "") {
  // A file of this process and call: ctest runs test processes in parallel, and one
  // process may run binaries from several threads.
  static std::atomic<int> calls{0};
  const std::string err_path =
      (std::filesystem::path(::testing::TempDir()) /
       ("stderr_" + name + "_" + std::to_string(getpid()) + "_" + std::to_string(calls++) + ".txt"))
          .string();
  const std::string command = (wrapper.empty() ? "" : wrapper + " ") +
                              std::string(GRAIL_BINARY_DIR) + "/bin/" + name + " " + args + " 2>" +
                              err_path;
  BinaryRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) run.out.append(buffer.data(), n);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path, std::ios::binary);
  std::ostringstream text;
  text << err.rdbuf();
  run.err = text.str();
  std::filesystem::remove(err_path);
  return run;
}

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_RUN_BINARY_H_
