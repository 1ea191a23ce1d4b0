// libFuzzer target: an AddTriples or RemoveTriples chunk as the server receives it (raw bytes,
// server/wire/chunk_parsing.h), then applied to a real store (RocksDB in a temporary
// directory). A chunk either fails to parse with INVALID_ARGUMENT, or is rejected whole with
// INVALID_ARGUMENT naming a fact inside it and changing nothing, or is stored whole: every
// fact of an applied AddTriples chunk is then in the graph, and none of an applied
// RemoveTriples chunk is.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "grpcpp/support/byte_buffer.h"
#include "kg/v1/knowledge_graph.pb.h"
#include "server/wire/chunk_parsing.h"
#include "store/triple_store.h"

namespace {

constexpr size_t kMaxChunkFacts = 64;
constexpr size_t kMaxNameBytes = 48;
// A fresh store every so many inputs keeps each run's store small.
constexpr int kInputsPerStore = 5000;

class Store {
 public:
  grail::TripleStore& Get() {
    if (store_ == nullptr || ++uses_ > kInputsPerStore) Reset();
    return *store_;
  }

 private:
  void Reset() {
    store_.reset();
    std::filesystem::remove_all(dir_);
    grail::StoreOptions options;
    options.max_chunk_facts = kMaxChunkFacts;
    options.max_name_bytes = kMaxNameBytes;
    options.log = [](absl::string_view, absl::string_view) {};
    absl::StatusOr<std::unique_ptr<grail::TripleStore>> opened =
        grail::TripleStore::Open(dir_, options);
    FUZZ_CHECK(opened.ok());
    store_ = *std::move(opened);
    uses_ = 0;
  }

  // In the temporary directory ($TMPDIR): the store is never closed (below), so bench/fuzz.sh
  // gives each run its own and removes it.
  const std::string dir_ =
      (std::filesystem::temp_directory_path() / ("grail_chunk_fuzzer." + std::to_string(getpid())))
          .string();
  std::unique_ptr<grail::TripleStore> store_;
  int uses_ = 0;
};

// Parses `buffer` as the server does into `chunk` and returns its facts; nullopt (after
// checking the refusal) if it does not parse.
template <typename Request>
std::optional<std::vector<grail::NamedTriple>> ParsedFacts(const grpc::ByteBuffer& buffer,
                                                           Request* chunk) {
  const absl::Status parsed = grail::ParseChunk(buffer, chunk);
  if (!parsed.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(parsed));
    return std::nullopt;
  }
  std::vector<grail::NamedTriple> facts;
  for (const kg::v1::Triple& t : chunk->triples()) {
    facts.push_back({t.head(), t.relation(), t.tail()});
  }
  return facts;
}

bool Stored(const grail::GraphSnapshot& graph, const grail::NamedTriple& fact) {
  const auto head = graph.FindEntity(fact.head);
  const auto relation = graph.FindRelation(fact.relation);
  const auto tail = graph.FindEntity(fact.tail);
  return head && relation && tail && graph.HasFact(*head, *relation, *tail);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Never destroyed: at exit, RocksDB's own statics may already be gone (closing the store
  // from a static destructor aborted in rocksdb::PeriodicTaskScheduler).
  static Store& store = *new Store;
  if (size == 0) return 0;
  const bool removal = data[0] & 1;
  grpc::Slice slice(data + 1, size - 1);
  const grpc::ByteBuffer buffer(&slice, 1);
  grail::TripleStore& triples = store.Get();
  const uint64_t sequence = triples.Snapshot()->sequence();

  if (!removal) {
    kg::v1::AddTriplesRequest chunk;
    const std::optional<std::vector<grail::NamedTriple>> parsed = ParsedFacts(buffer, &chunk);
    if (!parsed) return 0;
    const std::vector<grail::NamedTriple>& facts = *parsed;
    absl::StatusOr<grail::ChunkResult> added = triples.AddChunk(facts);
    const auto graph = triples.Snapshot();
    if (!added.ok()) {
      FUZZ_CHECK(absl::IsInvalidArgument(added.status()));
      const std::optional<size_t> position = grail::RejectedFactIndex(added.status());
      FUZZ_CHECK(position.has_value());
      FUZZ_CHECK(*position < facts.size() || *position == kMaxChunkFacts);
      FUZZ_CHECK(graph->sequence() == sequence);
      return 0;
    }
    FUZZ_CHECK(added->sequence == sequence + 1 && graph->sequence() == sequence + 1);
    FUZZ_CHECK(added->facts_added + added->duplicate_facts == facts.size());
    for (const grail::NamedTriple& fact : facts) FUZZ_CHECK(Stored(*graph, fact));
    return 0;
  }

  kg::v1::RemoveTriplesRequest chunk;
  const std::optional<std::vector<grail::NamedTriple>> parsed = ParsedFacts(buffer, &chunk);
  if (!parsed) return 0;
  const std::vector<grail::NamedTriple>& facts = *parsed;
  const std::vector<std::string> entities(chunk.entities().begin(), chunk.entities().end());
  absl::StatusOr<grail::ChunkResult> removed = triples.RemoveChunk(facts, entities);
  const auto graph = triples.Snapshot();
  if (!removed.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(removed.status()));
    FUZZ_CHECK(graph->sequence() == sequence);
    return 0;
  }
  FUZZ_CHECK(removed->sequence == sequence + 1);
  for (const grail::NamedTriple& fact : facts) FUZZ_CHECK(!Stored(*graph, fact));
  for (const std::string& name : entities) FUZZ_CHECK(!graph->FindEntity(name).has_value());
  return 0;
}
