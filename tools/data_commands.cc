// `grail-tools wordnet` and `grail-tools split`: build the embedded default data set and cut
// an inductive train/test graph pair from a triple file.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "datasets/inductive_split.h"
#include "datasets/synthetic_graph.h"
#include "datasets/wordnet.h"
#include "graph/triple_file.h"
#include "tools/commands.h"

ABSL_FLAG(std::string, out, "", "output directory (import-ultra: the model file)");
ABSL_FLAG(std::string, wordnet_dir, grail::kDefaultWordNetDir,
          "wordnet: directory holding WordNet 3.0's data.* and index.* files");
ABSL_FLAG(std::string, triples, "",
          "split: triple file holding the whole graph; bulk-load: triple files, comma-separated");
ABSL_FLAG(std::string, name, "",
          "split: name of the pair, written as OUT/NAME and OUT/NAME_ind (default: the name of "
          "the directory holding --triples, or \"split\")");
ABSL_FLAG(uint64_t, seed, 0,
          "split, synth: random seed; the same seed and input give the same files");
// Defaults come from InductiveSplitOptions, which documents why they are what they are.
ABSL_FLAG(int, train_roots, grail::InductiveSplitOptions{}.train.roots,
          "split: root entities drawn for the train graph");
ABSL_FLAG(int, test_roots, grail::InductiveSplitOptions{}.test.roots,
          "split: root entities drawn for the test graph");
ABSL_FLAG(int, sample_hops, grail::GraphSampleOptions{}.hops,
          "split: k of the k-hop neighbourhood of each root");
ABSL_FLAG(int, max_new_per_hop, grail::GraphSampleOptions{}.max_new_per_hop,
          "split: cap on entities newly reached per root per hop (0: no cap)");
ABSL_FLAG(double, valid_fraction, grail::InductiveSplitOptions{}.valid_fraction,
          "split: fraction of each graph's facts held out as valid");
ABSL_FLAG(double, test_fraction, grail::InductiveSplitOptions{}.test_fraction,
          "split: fraction of each graph's facts held out as test");

ABSL_FLAG(uint32_t, entities, grail::SyntheticGraphOptions{}.entities,
          "synth: entities (each has at least one fact)");
ABSL_FLAG(uint64_t, facts, grail::SyntheticGraphOptions{}.facts, "synth: distinct facts");
ABSL_FLAG(uint32_t, relations, grail::SyntheticGraphOptions{}.relations, "synth: relations");
ABSL_FLAG(double, exponent, grail::SyntheticGraphOptions{}.exponent,
          "synth: entity i's weight is (i+1)^-exponent; degrees then have a power-law tail of "
          "exponent 1 + 1/exponent");

namespace grail {
namespace {

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return 1;
}

// Writes `triples` to OUT_DIR/triples.txt, creating the directory; returns the file's path.
absl::StatusOr<std::string> WriteTriplesInto(const std::string& out_dir,
                                             const std::vector<NamedTriple>& triples) {
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create directory ", out_dir, ": ", error.message()));
  }
  const std::string path = absl::StrCat(out_dir, "/triples.txt");
  absl::Status status = WriteTripleFile(path, triples);
  if (!status.ok()) return status;
  return path;
}

// One line per graph: distinct entities and relations over all three parts, and facts.
void PrintSplitGraphSummary(const std::string& name, const SplitGraph& graph) {
  absl::flat_hash_set<absl::string_view> entities;
  absl::flat_hash_set<absl::string_view> relations;
  for (const std::vector<NamedTriple>* part : {&graph.train, &graph.valid, &graph.test}) {
    for (const NamedTriple& t : *part) {
      entities.insert(t.head);
      entities.insert(t.tail);
      relations.insert(t.relation);
    }
  }
  const size_t facts = graph.train.size() + graph.valid.size() + graph.test.size();
  std::fprintf(stderr,
               "%s: %zu entities, %zu relations, %zu facts (train %zu, valid %zu, test %zu)\n",
               name.c_str(), entities.size(), relations.size(), facts, graph.train.size(),
               graph.valid.size(), graph.test.size());
}

}  // namespace

int RunWordNetCommand() {
  const std::string out_dir = absl::GetFlag(FLAGS_out);
  if (out_dir.empty()) {
    std::fprintf(stderr, "wordnet needs --out DIR\n");
    return 2;
  }
  const std::string dict_dir = absl::GetFlag(FLAGS_wordnet_dir);
  absl::StatusOr<std::vector<NamedTriple>> triples = ConvertWordNet(dict_dir);
  if (!triples.ok()) return Fail(triples.status());

  absl::StatusOr<std::string> path = WriteTriplesInto(out_dir, *triples);
  if (!path.ok()) return Fail(path.status());

  absl::flat_hash_set<absl::string_view> entities;
  absl::flat_hash_set<absl::string_view> relations;
  for (const NamedTriple& t : *triples) {
    entities.insert(t.head);
    entities.insert(t.tail);
    relations.insert(t.relation);
  }
  std::fprintf(stderr, "wordnet: %zu entities, %zu relations, %zu facts -> %s\n", entities.size(),
               relations.size(), triples->size(), path->c_str());
  return 0;
}

int RunSplitCommand() {
  const std::string triples_path = absl::GetFlag(FLAGS_triples);
  const std::string out_dir = absl::GetFlag(FLAGS_out);
  if (triples_path.empty() || out_dir.empty()) {
    std::fprintf(stderr, "split needs --triples FILE and --out DIR\n");
    return 2;
  }
  std::string name = absl::GetFlag(FLAGS_name);
  if (name.empty()) {
    name = std::filesystem::path(triples_path).parent_path().filename().string();
    if (name.empty() || name == "." || name == "..") name = "split";
  }

  InductiveSplitOptions options;
  options.seed = absl::GetFlag(FLAGS_seed);
  options.train.roots = absl::GetFlag(FLAGS_train_roots);
  options.test.roots = absl::GetFlag(FLAGS_test_roots);
  options.train.hops = options.test.hops = absl::GetFlag(FLAGS_sample_hops);
  options.train.max_new_per_hop = options.test.max_new_per_hop =
      absl::GetFlag(FLAGS_max_new_per_hop);
  options.valid_fraction = absl::GetFlag(FLAGS_valid_fraction);
  options.test_fraction = absl::GetFlag(FLAGS_test_fraction);

  absl::StatusOr<std::vector<NamedTriple>> facts = ReadTripleFile(triples_path);
  if (!facts.ok()) return Fail(facts.status());
  absl::StatusOr<InductiveSplit> split = GenerateInductiveSplit(*facts, options);
  if (!split.ok()) return Fail(split.status());
  absl::Status status = WriteInductiveSplit(*split, out_dir, name);
  if (!status.ok()) return Fail(status);

  PrintSplitGraphSummary(name, split->train_graph);
  PrintSplitGraphSummary(absl::StrCat(name, "_ind"), split->test_graph);
  return 0;
}

int RunSynthCommand() {
  const std::string out_dir = absl::GetFlag(FLAGS_out);
  if (out_dir.empty()) {
    std::fprintf(stderr, "synth needs --out DIR\n");
    return 2;
  }
  SyntheticGraphOptions options;
  options.entities = absl::GetFlag(FLAGS_entities);
  options.facts = absl::GetFlag(FLAGS_facts);
  options.relations = absl::GetFlag(FLAGS_relations);
  options.exponent = absl::GetFlag(FLAGS_exponent);
  options.seed = absl::GetFlag(FLAGS_seed);
  // Written as generated: a graph of 10^8 facts never holds its names in memory.
  std::error_code error;
  std::filesystem::create_directories(out_dir, error);
  if (error) {
    return Fail(absl::PermissionDeniedError(
        absl::StrCat("cannot create directory ", out_dir, ": ", error.message())));
  }
  const std::string path = absl::StrCat(out_dir, "/triples.txt");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Fail(absl::PermissionDeniedError(absl::StrCat("cannot write ", path)));
  uint64_t written = 0;
  absl::Status generated = GenerateSyntheticGraph(options, [&](const NamedTriple& t) {
    out << t.head << '\t' << t.relation << '\t' << t.tail << '\n';
    ++written;
    return out ? absl::OkStatus() : absl::DataLossError(absl::StrCat("error writing ", path));
  });
  out.close();
  if (generated.ok() && !out) generated = absl::DataLossError(absl::StrCat("error writing ", path));
  if (!generated.ok()) return Fail(generated);
  std::fprintf(stderr, "synth: %u entities, %u relations, %llu facts (seed %llu) -> %s\n",
               options.entities, options.relations, static_cast<unsigned long long>(written),
               static_cast<unsigned long long>(options.seed), path.c_str());
  return 0;
}

}  // namespace grail
