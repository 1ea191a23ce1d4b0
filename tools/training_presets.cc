#include "tools/training_presets.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace grail {

const std::vector<TrainingPreset>& TrainingPresets() {
  // Each configuration is one docs/BENCHMARKS-log.md measured ("Retrained over the operator",
  // "Reproducing the paper"); change a preset only with the measurement that moves it.
  static const auto* presets = [] {
    const std::vector<std::string> path = {"--family=path",      "--pna",
                                           "--reach-mask=false", "--remove-one-hop=false",
                                           "--batch-size=64",    "--adversarial-temperature=0.5",
                                           "--epochs=20"};
    // Its own, then the path preset's for its path model.
    std::vector<std::string> best = {"--family=best", "--time-budget=2h"};
    best.insert(best.end(), path.begin() + 1, path.end());
    return new std::vector<TrainingPreset>{
        {"path",
         "the recommendation for a graph nobody has measured when no ULTRA archive is at hand: "
         "ranks every entity in one pass; NBFNet's published configuration (docs/training.md: "
         "its accuracy per split)",
         path},
        {"best",
         "the recommendation for a graph nobody has measured, with --init ULTRA.pt "
         "(grail-tools import-ultra): within --time-budget, ULTRA fine-tuned by its recipe, "
         "the path preset's model, and their ensemble; keeps the best of the three on held-out "
         "validation facts (docs/training.md, \"The best preset\")",
         best},
        {"path-free",
         "the path family where memory is tight: half of `path`'s peak memory at the same time "
         "an epoch, about 5 points lower on FB-like graphs",
         {"--family=path", "--pna", "--reach-mask=false", "--free-relations",
          "--remove-one-hop=false", "--batch-size=32", "--accumulate=4",
          "--adversarial-temperature=1", "--epochs=20"}},
        {"grail",
         "GraIL as the paper trains it: scores given facts and explains each by its subgraph's "
         "paths",
         {"--family=grail", "--hops=3", "--epochs=50"}},
    };
  }();
  return *presets;
}

namespace {

// Names presets had before, with where their configurations went: a command written then is
// refused with the way to today's name rather than only "unknown".
const std::vector<std::pair<std::string, std::string>>& FormerPresetNames() {
  static const auto* names = new std::vector<std::pair<std::string, std::string>>{
      {"path-dense",
       "its configuration is `path` since 2026-11-29; the `path` before is `path-free`"},
  };
  return *names;
}

}  // namespace

std::string DescribeTrainingPresets() {
  std::string out;
  for (const TrainingPreset& preset : TrainingPresets()) {
    absl::StrAppend(&out, "  ", preset.name, ": ", preset.summary, "\n      ",
                    absl::StrJoin(preset.flags, " "), "\n");
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ExpandTrainingPreset(std::vector<std::string> args) {
  std::string name;
  bool given = false;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (i > 0 && arg == "--") {  // everything after a bare -- is positional
      rest.insert(rest.end(), args.begin() + i, args.end());
      break;
    }
    const bool spaced = arg == "--preset" || arg == "-preset";
    const bool joined = absl::StartsWith(arg, "--preset=") || absl::StartsWith(arg, "-preset=");
    if (i == 0 || (!spaced && !joined)) {
      rest.push_back(arg);
      continue;
    }
    if (given) return absl::InvalidArgumentError("--preset is given twice");
    given = true;
    if (joined) {
      name = arg.substr(arg.find('=') + 1);
    } else if (i + 1 < args.size()) {
      name = args[++i];
    }
    if (name.empty() || absl::StartsWith(name, "-")) {
      return absl::InvalidArgumentError(
          absl::StrCat("--preset needs a name; the presets:\n", DescribeTrainingPresets()));
    }
  }
  if (!given) return rest;
  for (const TrainingPreset& preset : TrainingPresets()) {
    if (preset.name != name) continue;
    std::vector<std::string> out;
    if (!rest.empty()) out.push_back(rest[0]);
    out.insert(out.end(), preset.flags.begin(), preset.flags.end());
    if (rest.size() > 1) out.insert(out.end(), rest.begin() + 1, rest.end());
    return out;
  }
  std::string renamed;
  for (const auto& [former, where] : FormerPresetNames()) {
    if (former == name) renamed = absl::StrCat(" (", where, ")");
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown preset '", name, "'", renamed,
                                                 "; the presets:\n", DescribeTrainingPresets()));
}

}  // namespace grail
