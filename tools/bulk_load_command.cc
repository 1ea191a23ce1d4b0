// `grail-tools bulk-load`: triple files into a store directory offline, through RocksDB's table
// files (TripleStore::BulkAdd), into a new store or one whose server is stopped.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/elapsed.h"
#include "common/json.h"
#include "store/triple_store.h"
#include "tools/commands.h"

ABSL_DECLARE_FLAG(std::string, triples);  // data_commands.cc
ABSL_FLAG(std::string, data_dir, "",
          "bulk-load: the store's directory (grail-server's --data-dir); created if absent");
ABSL_FLAG(uint64_t, chunk_lines, grail::BulkLoadOptions{}.chunk_lines,
          "bulk-load: the load's facts take one sequence per this many lines, as AddTriples "
          "chunks of this many lines would");
ABSL_FLAG(int, threads, grail::BulkLoadOptions{}.threads,
          "bulk-load: threads that check the files and sort the facts");
ABSL_FLAG(int, max_name_bytes, 1024,
          "bulk-load: longest entity or relation name, in bytes (grail-server's "
          "--max-name-bytes)");
ABSL_FLAG(bool, check, false,
          "bulk-load: check the whole store against itself afterwards (reads it all once)");

namespace grail {

int RunBulkLoadCommand() {
  const std::string triples = absl::GetFlag(FLAGS_triples);
  const std::string dir = absl::GetFlag(FLAGS_data_dir);
  std::vector<std::string> files = absl::StrSplit(triples, ',', absl::SkipEmpty());
  if (dir.empty() || files.empty()) {
    std::fprintf(stderr, "bulk-load needs --triples FILE[,FILE...] and --data-dir DIR\n");
    return 2;
  }
  if (absl::GetFlag(FLAGS_chunk_lines) == 0 || absl::GetFlag(FLAGS_threads) < 1 ||
      absl::GetFlag(FLAGS_max_name_bytes) < 1) {
    std::fprintf(stderr,
                 "bulk-load: --chunk-lines, --threads and --max-name-bytes must be at "
                 "least 1\n");
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  StoreOptions store_options;
  store_options.max_name_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_max_name_bytes));
  store_options.track_relation_sides = false;  // a server serving ULTRA counts them at start
  absl::StatusOr<std::unique_ptr<TripleStore>> store = TripleStore::Open(dir, store_options);
  if (!store.ok()) {
    std::fprintf(stderr, "bulk-load: %s\n", store.status().ToString().c_str());
    if (absl::IsFailedPrecondition(store.status()) &&
        absl::StrContains(store.status().message(), "already open")) {
      std::fprintf(stderr,
                   "bulk-load: the store in %s is in use (a grail-server serving it?): stop it "
                   "and load again. Nothing was changed.\n",
                   dir.c_str());
    }
    return 1;
  }
  const double open_seconds = SecondsSince(start);
  BulkLoadOptions options;
  options.chunk_lines = absl::GetFlag(FLAGS_chunk_lines);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.progress = [&](absl::string_view step) {
    std::fprintf(stderr, "bulk-load: %s (%.1f s)\n", std::string(step).c_str(),
                 SecondsSince(start));
  };
  absl::StatusOr<BulkLoadResult> result = (*store)->BulkAdd(files, options);
  if (!result.ok()) {
    std::fprintf(stderr, "bulk-load: %s\nNothing was loaded.\n",
                 result.status().ToString().c_str());
    return 1;
  }
  double check_seconds = 0;
  if (absl::GetFlag(FLAGS_check)) {
    const auto check_start = std::chrono::steady_clock::now();
    if (absl::Status consistent = (*store)->CheckConsistency(); !consistent.ok()) {
      std::fprintf(stderr, "bulk-load: the loaded store fails its check: %s\n",
                   consistent.ToString().c_str());
      return 1;
    }
    check_seconds = SecondsSince(check_start);
  }
  const std::shared_ptr<const GraphSnapshot> graph = (*store)->Snapshot();
  const auto close_start = std::chrono::steady_clock::now();
  store->reset();  // closes the database: what a server started next opens
  Json report = {
      {"data_dir", dir},
      {"lines", result->lines},
      {"facts_added", result->facts_added},
      {"duplicate_facts", result->duplicate_facts},
      {"entities_created", result->entities_created},
      {"relations_created", result->relations_created},
      {"first_sequence", result->first_sequence},
      {"last_sequence", result->last_sequence},
      {"store",
       {{"entities", graph->num_entities()},
        {"relations", graph->num_relations()},
        {"facts", graph->num_facts()},
        {"sequence", graph->sequence()}}},
      {"seconds",
       {{"open", open_seconds},
        {"validate", result->validate_seconds},
        {"number", result->number_seconds},
        {"sort", result->sort_seconds},
        {"write", result->write_seconds},
        {"ingest", result->ingest_seconds},
        {"check", check_seconds},
        {"close", SecondsSince(close_start)},
        {"total", SecondsSince(start)}}},
  };
  std::printf("%s\n", report.dump().c_str());
  return 0;
}

}  // namespace grail
