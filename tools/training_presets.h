// grail-train's named presets: one measured configuration per use, so that a newcomer picks a
// name instead of a dozen flags (docs/training.md). A preset is a list of flags put before
// the command line's own, so any flag given on the command line wins over the preset's.
#ifndef GRAIL_TOOLS_TRAINING_PRESETS_H_
#define GRAIL_TOOLS_TRAINING_PRESETS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace grail {

struct TrainingPreset {
  std::string name;
  std::string summary;             // one line: what it is, and when to pick it
  std::vector<std::string> flags;  // --flag=value, as typed on the command line
};

// Every preset, the recommended one first.
const std::vector<TrainingPreset>& TrainingPresets();

// Returns `args` (a command line, program name first) with `--preset NAME` (or
// `--preset=NAME`) replaced by the preset's flags, put right after the program name so that
// every flag of the command line comes later and wins. Unchanged without --preset. Errors:
// an unknown name (the message lists the presets), --preset given twice or without a name.
absl::StatusOr<std::vector<std::string>> ExpandTrainingPreset(std::vector<std::string> args);

// "  NAME  summary\n      flags\n" for each preset: the text of --help and of errors.
std::string DescribeTrainingPresets();

}  // namespace grail

#endif  // GRAIL_TOOLS_TRAINING_PRESETS_H_
