// The subcommands of `grail-tools`. Each reads its own flags (already parsed) and returns a
// process exit code.
#ifndef GRAIL_TOOLS_COMMANDS_H_
#define GRAIL_TOOLS_COMMANDS_H_

namespace grail {

// `subgraph --graph FILE --head H --relation R --tail T [--hops K] [--max-nodes-per-hop N]`
int RunSubgraphCommand();
// `wordnet --out DIR [--wordnet-dir DIR]`
int RunWordNetCommand();
// `split --triples FILE --out DIR [--seed S] ...`
int RunSplitCommand();
// `synth --out DIR [--entities N] [--facts M] [--relations R] [--exponent A] [--seed S]`
int RunSynthCommand();
// `import-ultra --checkpoint FILE --out MODEL.pt`
int RunImportUltraCommand();
// `bulk-load --triples FILE[,FILE...] --data-dir DIR [--chunk-lines N] [--threads N] [--check]`
// (built with the service only: it writes the service's store)
int RunBulkLoadCommand();

}  // namespace grail

#endif  // GRAIL_TOOLS_COMMANDS_H_
