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
ABSL_FLAG(std::string, head_queries, "forward",
          "import-ultra: where a head query (?, r, t) starts the graph of relations: forward (at "
          "r, as ULTRA's code does) or inverse (at r's inverse, the query relation itself); "
          "written into the archive");

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
  const std::string head_queries = absl::GetFlag(FLAGS_head_queries);
  if (head_queries != "forward" && head_queries != "inverse") {
    std::fprintf(stderr, "import-ultra: --head-queries must be forward or inverse, got '%s'\n",
                 head_queries.c_str());
    return 2;
  }
  const absl::Status status =
      ImportUltraCheckpoint(checkpoint, out, /*inverse_head_queries=*/head_queries == "inverse");
  if (!status.ok()) {
    std::fprintf(stderr, "import-ultra: %s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("wrote %s (ULTRA, from %s; head queries start at %s)\n", out.c_str(),
              checkpoint.c_str(), head_queries == "inverse" ? "the inverse" : "the relation");
  return 0;
}

}  // namespace grail
