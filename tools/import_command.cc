// `grail-tools import-ultra`: a released ULTRA checkpoint into our archive format.
#include <cstdio>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "common/durable_file.h"
#include "model/ultra/ultra_model.h"
#include "tools/commands.h"

ABSL_DECLARE_FLAG(std::string, out);
ABSL_FLAG(std::string, checkpoint, "",
          "import-ultra: a released ULTRA checkpoint (torch.save file, e.g. ultra_3g.pth)");

namespace grail {

int RunImportUltraCommand() {
  const std::string checkpoint = absl::GetFlag(FLAGS_checkpoint);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (checkpoint.empty() || out.empty()) {
    std::fprintf(stderr, "import-ultra needs --checkpoint FILE and --out MODEL.pt\n");
    return 2;
  }
  if (absl::Status usable = CheckOutputPath("out", out, {{"checkpoint", checkpoint}});
      !usable.ok()) {
    std::fprintf(stderr, "import-ultra: %s\n", std::string(usable.message()).c_str());
    return 2;
  }
  const absl::Status status = ImportUltraCheckpoint(checkpoint, out);
  if (!status.ok()) {
    std::fprintf(stderr, "import-ultra: %s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("wrote %s (ULTRA, from %s)\n", out.c_str(), checkpoint.c_str());
  return 0;
}

}  // namespace grail
