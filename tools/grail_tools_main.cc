// grail-tools: data preparation and inspection (subgraph, wordnet, split, synth), model import
// (import-ultra), and the offline load of a store (bulk-load).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/usage.h"
#include "common/command_line.h"
#include "model/core/archive_probe.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
  if (const int probe = grail::RunArchiveProbeIfAsked(argc, argv); probe >= 0) return probe;
  grail::IsolateArchiveLoads({});  // import-ultra reads a checkpoint from anywhere
  absl::SetProgramUsageMessage(
      "grail-tools COMMAND [flags]\n"
      "  subgraph --graph FILE --head H --relation R --tail T [--hops K]\n"
      "           [--max-nodes-per-hop N] [--no-enclosing]   print an enclosing subgraph as JSON\n"
      "  wordnet  --out DIR [--wordnet-dir DIR]              WordNet 3.0 -> DIR/triples.txt\n"
      "  split    --triples FILE --out DIR [--seed S] ...    inductive train/test graph pair\n"
      "  synth    --out DIR [--entities N] [--facts M] [--relations R] [--exponent A] [--seed S]\n"
      "                                                      power-law graph -> DIR/triples.txt\n"
      "  import-ultra --checkpoint FILE --out MODEL.pt       a released ULTRA checkpoint -> our\n"
      "           [--head-queries forward|inverse]           archive (any graph, no training)\n"
      "  bulk-load --triples FILE[,FILE...] --data-dir DIR   triple files -> a store, offline "
      "(the\n"
      "           [--chunk-lines N] [--threads N] [--check]  server stopped), via table files");
  const std::vector<std::string> positional = grail::ParseCommandLine(argc, argv);
  if (positional.size() != 2) {
    std::fprintf(stderr, "%s\n", absl::ProgramUsageMessage().data());
    return 2;
  }
  const std::string& command = positional[1];
  if (command == "subgraph") return grail::RunSubgraphCommand();
  if (command == "wordnet") return grail::RunWordNetCommand();
  if (command == "split") return grail::RunSplitCommand();
  if (command == "synth") return grail::RunSynthCommand();
  if (command == "import-ultra") return grail::RunImportUltraCommand();
#ifdef GRAIL_TOOLS_BULK_LOAD
  if (command == "bulk-load") return grail::RunBulkLoadCommand();
#endif
  std::fprintf(stderr, "unknown command '%s'\n%s\n", command.c_str(),
               absl::ProgramUsageMessage().data());
  return 2;
}
