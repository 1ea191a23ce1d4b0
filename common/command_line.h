// Command-line parsing shared by every binary.
//
// Our documented flags are dashed (`--max-nodes-per-hop`, `--metrics-port`), which is what
// users type; Abseil flag names cannot contain dashes. ParseCommandLine rewrites dashes in
// each flag's *name* (never in its value) to underscores, then hands over to Abseil, so
// both spellings work. Binaries that run as services also take every flag from the
// environment (ApplyFlagsFromEnvironment), the way containers are configured.
#ifndef GRAIL_COMMON_COMMAND_LINE_H_
#define GRAIL_COMMON_COMMAND_LINE_H_

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace grail {

// Returns `arg` with dashes in a `--flag-name[=value]` name replaced by underscores; other
// arguments (positional ones, a bare `--`, values) come back unchanged.
inline std::string NormalizeFlagName(const std::string& arg) {
  if (arg.size() <= 2 || arg.compare(0, 2, "--") != 0) return arg;
  std::string out = arg;
  const size_t end = std::min(out.find('='), out.size());
  for (size_t i = 2; i < end; ++i) {
    if (out[i] == '-') out[i] = '_';
  }
  return out;
}

// Parses flags like absl::ParseCommandLine and returns the positional arguments (argv[0]
// first). Values that follow a flag as a separate argument are left untouched because
// they do not start with `--`.
inline std::vector<std::string> ParseCommandLine(int argc, char** argv) {
  std::vector<std::string> storage;
  storage.reserve(argc);
  bool after_terminator = false;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") after_terminator = true;
    storage.push_back(after_terminator || i == 0 ? arg : NormalizeFlagName(arg));
  }
  std::vector<char*> pointers;
  for (std::string& s : storage) pointers.push_back(s.data());
  std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(pointers.size()), pointers.data());
  return std::vector<std::string>(positional.begin(), positional.end());
}

// Sets each flag `name` whose environment variable `prefix` + NAME is set (uppercase, e.g.
// GRAIL_METRICS_PORT for --metrics-port), so the command line, parsed afterwards, overrides
// the environment. Errors name the variable and the flag's complaint.
inline absl::Status ApplyFlagsFromEnvironment(const std::string& prefix) {
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    const std::string variable = prefix + absl::AsciiStrToUpper(name);
    const char* value = std::getenv(variable.c_str());
    if (value == nullptr) continue;
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(absl::StrCat(variable, "=", value, ": ", error));
    }
  }
  return absl::OkStatus();
}

}  // namespace grail

#endif  // GRAIL_COMMON_COMMAND_LINE_H_
