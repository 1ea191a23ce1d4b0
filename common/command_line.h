// Command-line parsing shared by every binary.
//
// Every binary defines its flags with ABSL_FLAG and parses them here. Our documented flags are
// dashed (`--max-nodes-per-hop`, `--metrics-port`), which is what users type; Abseil flag
// names cannot contain dashes. ParseCommandLine rewrites dashes in each flag's *name* (never
// in its value) to underscores, then hands over to Abseil, so both spellings work. Binaries that
// run as services also take every flag from the environment (ApplyFlagsFromEnvironment), the way
// containers are configured.
#ifndef GRAIL_COMMON_COMMAND_LINE_H_
#define GRAIL_COMMON_COMMAND_LINE_H_

#include <unistd.h>  // environ

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage_config.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
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

namespace command_line_internal {

// The exit status that replaces Abseil's while it parses (-1: none).
inline std::atomic<int>& ExitStatusOverride() {
  static std::atomic<int> status{-1};
  return status;
}

// Registered with atexit: Abseil's parser ends the process with exit(1) after printing a
// usage error or the --help text, and this turns that into our status. Output is flushed
// first, since _Exit skips the flushing exit() would have done later.
inline void ApplyExitStatusOverride() {
  const int status = ExitStatusOverride().load();
  if (status < 0) return;
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(status);
}

// Abseil's flags that print something and end the process.
inline bool IsUsageFlag(const std::string& name) {
  for (const char* usage : {"help", "helpfull", "helpshort", "helppackage", "helpon", "helpmatch",
                            "version", "only_check_args"}) {
    if (name == usage) return true;
  }
  return false;
}

}  // namespace command_line_internal

// Parses the flags with absl::ParseCommandLine and returns the positional arguments (argv[0]
// first), with these differences, the same in every binary:
// - Flags start with `--`. Any other argument is positional, a single-dash one included
//   (entity names may start with '-'), except `-h`, which is `--help`. `--` ends the flags.
// - Dashes in a flag's name are underscores (NormalizeFlagName).
// - A usage error (unknown flag, bad value) exits with status 2 and the help flags with 0,
//   where Abseil exits with 1 for both; Abseil prints the messages and the help text.
inline std::vector<std::string> ParseCommandLine(int argc, char** argv) {
  std::vector<std::string> flags = {argv[0]};
  std::vector<std::string> positional;
  bool usage_requested = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) positional.push_back(argv[i]);
      break;
    }
    if (arg == "-h") arg = "--help";
    if (arg.size() <= 2 || arg.compare(0, 2, "--") != 0) {
      positional.push_back(arg);
      continue;
    }
    arg = NormalizeFlagName(arg);
    flags.push_back(arg);
    const size_t equals = arg.find('=');
    const std::string name =
        arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    if (command_line_internal::IsUsageFlag(name)) usage_requested = true;
    // `--name value`: the value travels with its flag, even if it starts with a dash.
    if (equals == std::string::npos && i + 1 < argc) {
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
      if (flag != nullptr && !flag->IsOfType<bool>()) flags.push_back(argv[++i]);
    }
  }
  flags.push_back("--");
  flags.insert(flags.end(), positional.begin(), positional.end());

  static const bool configured = [] {
    // --help lists the binary's own flags (Abseil's default looks for a file named after
    // the program, and finds none of ours); --helpfull adds Abseil's.
    absl::FlagsUsageConfig config;
    config.contains_helpshort_flags = [](absl::string_view file) {
      return !absl::StrContains(file, "absl/");
    };
    config.contains_help_flags = config.contains_helpshort_flags;
    absl::SetFlagsUsageConfig(config);
    return std::atexit(command_line_internal::ApplyExitStatusOverride) == 0;
  }();
  (void)configured;
  command_line_internal::ExitStatusOverride().store(usage_requested ? 0 : 2);
  std::vector<char*> pointers;
  for (std::string& s : flags) pointers.push_back(s.data());
  std::vector<char*> parsed =
      absl::ParseCommandLine(static_cast<int>(pointers.size()), pointers.data());
  command_line_internal::ExitStatusOverride().store(-1);
  return std::vector<std::string>(parsed.begin(), parsed.end());
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

// Environment variables named `prefix`... that are no flag's variable (GRAIL_MAX_BATCH_SIZ: a
// misspelt setting, which ApplyFlagsFromEnvironment would silently skip), sorted, except
// those in `also_known` (variables other programs of the project read, e.g. GRAIL_TOKEN).
inline std::vector<std::string> UnknownFlagVariables(const std::string& prefix,
                                                     const std::vector<std::string>& also_known) {
  std::vector<std::string> known = also_known;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    known.push_back(prefix + absl::AsciiStrToUpper(name));
  }
  std::vector<std::string> unknown;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::string name(text.substr(0, text.find('=')));
    if (absl::StartsWith(name, prefix) &&
        std::find(known.begin(), known.end(), name) == known.end()) {
      unknown.push_back(name);
    }
  }
  std::sort(unknown.begin(), unknown.end());
  return unknown;
}

}  // namespace grail

#endif  // GRAIL_COMMON_COMMAND_LINE_H_
