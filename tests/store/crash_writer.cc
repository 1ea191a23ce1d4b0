// storage_crash_writer DIR SEED [sync]
//
// The process the crash-recovery test kills: opens the store in DIR and appends the
// crash workload's chunks (additions and removals) after whatever the store already holds, forever.
// After each AddChunk returns it writes one line straight to fd 1 (no stdio buffer to lose):
//   ACK <sequence> <facts_added> <duplicate_facts> <entities_created> <relations_created>
//       <facts_removed> <facts_not_present> <entities_removed> <entities_not_present>
// A line on the pipe is an acknowledgement: the test may rely on that chunk being stored.
// Exits non-zero, with the reason on stderr, if the store misbehaves.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "store/triple_store.h"
#include "tests/store/crash_workload.h"

namespace {

bool WriteAll(const std::string& line) {
  size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = write(STDOUT_FILENO, line.data() + written, line.size() - written);
    if (n <= 0) return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 0;
  if ((argc != 3 && argc != 4) || !absl::SimpleAtoi(argv[2], &seed) ||
      (argc == 4 && std::string(argv[3]) != "sync")) {
    std::fprintf(stderr, "usage: %s DIR SEED [sync]\n", argv[0]);
    return 64;
  }
  grail::StoreOptions options;
  options.sync = argc == 4;
  absl::StatusOr<std::unique_ptr<grail::TripleStore>> store =
      grail::TripleStore::Open(argv[1], options);
  if (!store.ok()) {
    std::fprintf(stderr, "crash_writer: %s\n", std::string(store.status().message()).c_str());
    return 1;
  }
  // Bounded only as a safety net; the test kills the writer long before.
  for (uint64_t sequence = (*store)->Snapshot()->sequence() + 1; sequence < 1000000; ++sequence) {
    const std::vector<grail::NamedTriple> chunk = grail::CrashWorkloadChunk(seed, sequence);
    const std::vector<std::string> entities = grail::CrashWorkloadRemovedEntities(seed, sequence);
    absl::StatusOr<grail::ChunkResult> result = grail::CrashWorkloadRemoves(sequence)
                                                    ? (*store)->RemoveChunk(chunk, entities)
                                                    : (*store)->AddChunk(chunk);
    if (!result.ok()) {
      std::fprintf(stderr, "crash_writer: chunk %llu: %s\n",
                   static_cast<unsigned long long>(sequence),
                   std::string(result.status().message()).c_str());
      return 2;
    }
    if (!WriteAll(absl::StrCat("ACK ", result->sequence, " ", result->facts_added, " ",
                               result->duplicate_facts, " ", result->entities_created, " ",
                               result->relations_created, " ", result->facts_removed, " ",
                               result->facts_not_present, " ", result->entities_removed, " ",
                               result->entities_not_present, "\n"))) {
      return 3;
    }
  }
  return 0;
}
