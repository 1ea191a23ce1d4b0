// Ingestion into the live triple store, against raw RocksDB writing the same bytes.
//
// Workloads: fb237_v4_ind/train.txt ($GRAIL_DATA_DIR, default ../shared/data beside the
// source tree) and WordNet 3.0's triples (converted from /usr/share/wordnet in-process),
// streamed in chunks of --chunk facts into a fresh store, default and sync mode.
//
// Baseline, same run, interleaved with ours: raw RocksDB with the store's column families
// and options, writing per chunk one WriteBatch with exactly the keys and values the store
// writes for that chunk (computed beforehand, outside the timing), with the same WAL and
// sync settings. The ratio is the cost of everything the store adds: validation,
// interning, duplicate detection, building the batch and updating the in-memory index.
//
// Also: reopen time (RocksDB recovery + index rebuild; first open after ingest replays the
// WAL, the second reads SST files), memory of the in-memory index per fact (from the
// structures' sizes, and as heap bytes in use when the index alone is built, i.e. with
// allocator overhead), and extraction throughput on a snapshot vs. an immutable CSR graph.
#include <malloc.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "bench/data_dir.h"
#include "common/command_line.h"
#include "common/elapsed.h"
#include "datasets/wordnet.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "model/grail/enclosing_subgraph.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/options.h"
#include "rocksdb/slice_transform.h"
#include "rocksdb/table.h"
#include "rocksdb/write_batch.h"
#include "store/live_graph.h"
#include "store/store_layout.h"
#include "store/triple_store.h"

ABSL_FLAG(int, chunk, 1000, "facts per chunk");
ABSL_FLAG(int, repeats, 3, "ingest runs per data set and mode; the median is reported");
ABSL_FLAG(bool, sync, true, "also measure sync mode (an fsync per chunk)");
ABSL_FLAG(std::string, wordnet_dir, grail::kDefaultWordNetDir, "wordnet-base's dict directory");
ABSL_FLAG(std::string, work_dir, "", "where the stores are created (default: a temp dir)");
ABSL_FLAG(uint64_t, max_relation_pairs, 1 << 20,
          "the store's bound on pairs of relation sides (grail-server's --max-relation-pairs "
          "default); 0: no bound, no check");
ABSL_FLAG(bool, track_relation_sides, true,
          "whether the store follows which relation sides meet (a server does while it serves "
          "ULTRA; false: what a learned model's server does)");

namespace grail {
namespace {

namespace layout = store_layout;
using Clock = std::chrono::steady_clock;

struct Dataset {
  std::string name;
  std::vector<NamedTriple> facts;
};

// Heap bytes in use (small and mmapped allocations), for memory deltas.
uint64_t HeapInUse() {
  malloc_trim(0);
  const struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

// The store's column families and options (mirrors FamilyOptions in triple_store.cc), so
// the baseline pays for the same filters, prefix extractor and number of memtables.
std::vector<rocksdb::ColumnFamilyDescriptor> StoreFamilies() {
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const char* name : {"default", layout::kMeta, layout::kEntityByName, layout::kEntityNames,
                           layout::kRelationByName, layout::kRelationNames, layout::kFactsOut,
                           layout::kFactsIn, layout::kRemovedEntities, layout::kFactsBySequence}) {
    rocksdb::ColumnFamilyOptions options;
    rocksdb::BlockBasedTableOptions table;
    table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
    if (std::string(name) == layout::kFactsOut || std::string(name) == layout::kFactsIn) {
      options.prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(layout::kIdBytes));
      options.memtable_prefix_bloom_size_ratio = 0.05;
    }
    options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
    families.emplace_back(name, options);
  }
  return families;
}

// What the store writes for each chunk, derived independently (first-appearance ids).
struct ChunkContent {
  std::vector<std::pair<std::string, uint32_t>> new_entities, new_relations;
  std::vector<Triple> new_facts;
  uint64_t entities = 0, relations = 0, facts = 0, sequence = 0;  // counters after the chunk
};

std::vector<ChunkContent> PlanChunks(const Dataset& data, size_t chunk) {
  std::vector<ChunkContent> plan;
  Vocabulary entities, relations;
  absl::flat_hash_set<Triple> facts;
  for (size_t begin = 0; begin < data.facts.size(); begin += chunk) {
    ChunkContent c;
    const size_t end = std::min(data.facts.size(), begin + chunk);
    for (size_t i = begin; i < end; ++i) {
      const NamedTriple& f = data.facts[i];
      auto intern = [](Vocabulary* v, const std::string& name,
                       std::vector<std::pair<std::string, uint32_t>>* created) {
        const uint32_t before = v->size();
        const uint32_t id = v->Intern(name);
        if (v->size() > before) created->emplace_back(name, id);
        return id;
      };
      const Triple t{intern(&entities, f.head, &c.new_entities),
                     intern(&relations, f.relation, &c.new_relations),
                     intern(&entities, f.tail, &c.new_entities)};
      if (facts.insert(t).second) c.new_facts.push_back(t);
    }
    c.entities = entities.size();
    c.relations = relations.size();
    c.facts = facts.size();
    c.sequence = plan.size() + 1;
    plan.push_back(std::move(c));
  }
  return plan;
}

struct IngestRun {
  double seconds = 0;
  uint64_t keys = 0;
};

IngestRun IngestBaseline(const std::vector<ChunkContent>& plan, bool sync, const std::string& dir) {
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyHandle*> h;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, StoreFamilies(), &h, &db);
  if (!s.ok()) {
    std::fprintf(stderr, "baseline open: %s\n", s.ToString().c_str());
    std::exit(1);
  }
  // Families by index: 1 meta, 2 entity_by_name, 3 entity_names, 4 relation_by_name,
  // 5 relation_names, 6 facts_out, 7 facts_in, 8 removed_entities, 9 facts_by_sequence.
  IngestRun run;
  std::vector<rocksdb::WriteBatch> batches(plan.size());
  for (size_t i = 0; i < plan.size(); ++i) {
    rocksdb::WriteBatch& b = batches[i];
    const ChunkContent& c = plan[i];
    for (const auto& [name, id] : c.new_entities) {
      b.Put(h[2], name, layout::EncodeId(id)).PermitUncheckedError();
      b.Put(h[3], layout::EncodeId(id), name).PermitUncheckedError();
    }
    for (const auto& [name, id] : c.new_relations) {
      b.Put(h[4], name, layout::EncodeId(id)).PermitUncheckedError();
      b.Put(h[5], layout::EncodeId(id), name).PermitUncheckedError();
    }
    const std::string added_at = layout::EncodeCounter(c.sequence);
    for (const Triple& t : c.new_facts) {
      b.Put(h[6], layout::OutFactKey(t), added_at).PermitUncheckedError();
      b.Put(h[7], layout::InFactKey(t), rocksdb::Slice()).PermitUncheckedError();
      b.Put(h[9], layout::SequencedFactKey(c.sequence, t), rocksdb::Slice()).PermitUncheckedError();
    }
    b.Put(h[1], layout::kEntityCountKey, layout::EncodeCounter(c.entities)).PermitUncheckedError();
    b.Put(h[1], layout::kRelationCountKey, layout::EncodeCounter(c.relations))
        .PermitUncheckedError();
    b.Put(h[1], layout::kFactCountKey, layout::EncodeCounter(c.facts)).PermitUncheckedError();
    b.Put(h[1], layout::kSequenceKey, layout::EncodeCounter(c.sequence)).PermitUncheckedError();
    run.keys += b.Count();
  }
  rocksdb::WriteOptions write;
  write.sync = sync;
  const Clock::time_point start = Clock::now();
  for (rocksdb::WriteBatch& b : batches) {
    s = db->Write(write, &b);
    if (!s.ok()) {
      std::fprintf(stderr, "baseline write: %s\n", s.ToString().c_str());
      std::exit(1);
    }
  }
  run.seconds = SecondsSince(start);
  for (rocksdb::ColumnFamilyHandle* handle : h)
    db->DestroyColumnFamilyHandle(handle).PermitUncheckedError();
  db->Close().PermitUncheckedError();
  delete db;
  return run;
}

IngestRun IngestStore(const Dataset& data, size_t chunk, bool sync, const std::string& dir) {
  StoreOptions options;
  options.sync = sync;
  options.max_relation_side_pairs = absl::GetFlag(FLAGS_max_relation_pairs);
  options.track_relation_sides = absl::GetFlag(FLAGS_track_relation_sides);
  absl::StatusOr<std::unique_ptr<TripleStore>> store = TripleStore::Open(dir, options);
  if (!store.ok()) {
    std::fprintf(stderr, "open: %s\n", std::string(store.status().message()).c_str());
    std::exit(1);
  }
  IngestRun run;
  const Clock::time_point start = Clock::now();
  for (size_t begin = 0; begin < data.facts.size(); begin += chunk) {
    const size_t size = std::min(chunk, data.facts.size() - begin);
    absl::StatusOr<ChunkResult> r =
        (*store)->AddChunk(absl::MakeConstSpan(data.facts).subspan(begin, size));
    if (!r.ok()) {
      std::fprintf(stderr, "chunk: %s\n", std::string(r.status().message()).c_str());
      std::exit(1);
    }
    // A fact: facts_out, facts_in, facts_by_sequence; a name: both ways; 4 counters.
    run.keys += 3 * r->facts_added + 2 * (r->entities_created + r->relations_created) + 4;
  }
  run.seconds = SecondsSince(start);
  return run;  // closing (and its final WAL sync) is outside the timing
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void BenchIngest(const Dataset& data, const std::string& work) {
  const size_t chunk = absl::GetFlag(FLAGS_chunk);
  const std::vector<ChunkContent> plan = PlanChunks(data, chunk);
  std::vector<bool> modes = {false};
  if (absl::GetFlag(FLAGS_sync)) modes.push_back(true);
  for (bool sync : modes) {
    std::vector<double> ours, baseline;
    uint64_t keys = 0, baseline_keys = 0;
    for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
      const std::string ours_dir = work + "/ours", base_dir = work + "/baseline";
      std::filesystem::remove_all(ours_dir);
      std::filesystem::remove_all(base_dir);
      IngestRun a = IngestStore(data, chunk, sync, ours_dir);
      IngestRun b = IngestBaseline(plan, sync, base_dir);
      ours.push_back(a.seconds);
      baseline.push_back(b.seconds);
      keys = a.keys;
      baseline_keys = b.keys;
    }
    const double t_ours = Median(ours), t_base = Median(baseline);
    std::printf("| %s | %s | %zu | %zu | %llu | %.0f k | %.0f k | %.2f |\n", data.name.c_str(),
                sync ? "sync" : "default", data.facts.size(), plan.size(),
                static_cast<unsigned long long>(keys), data.facts.size() / t_ours / 1e3,
                data.facts.size() / t_base / 1e3, t_base / t_ours);
    if (keys != baseline_keys) {
      std::printf("  (key counts differ: store %llu, baseline %llu)\n",
                  static_cast<unsigned long long>(keys),
                  static_cast<unsigned long long>(baseline_keys));
    }
    std::fflush(stdout);
  }
}

// Reopens the store left by the last default-mode ingest (in work/ours; sync mode ran
// last, so re-ingest in default mode first), twice.
void BenchReopen(const Dataset& data, const std::string& work) {
  const std::string dir = work + "/ours";
  std::filesystem::remove_all(dir);
  IngestStore(data, absl::GetFlag(FLAGS_chunk), false, dir);
  double first = 0, second = 0;
  LiveGraph::MemoryUsage usage;
  uint64_t entities = 0, facts = 0;
  for (double* t : {&first, &second}) {
    const Clock::time_point start = Clock::now();
    absl::StatusOr<std::unique_ptr<TripleStore>> store = TripleStore::Open(dir, {});
    *t = SecondsSince(start);
    if (!store.ok()) std::exit(1);
    usage = (*store)->IndexMemoryUsage();
    entities = (*store)->Snapshot()->num_entities();
    facts = (*store)->Snapshot()->num_facts();
  }

  // The index alone, built from the same facts without RocksDB, measured as heap in use.
  IndexedTriples indexed;
  IndexTriples(data.facts, &indexed);
  GraphDelta delta;
  delta.new_entities = indexed.entities.names();
  delta.new_relations = indexed.relations.names();
  delta.facts = indexed.triples;
  delta.sequence = 1;
  const uint64_t heap_before = HeapInUse();
  const Clock::time_point build_start = Clock::now();
  auto graph = std::make_unique<LiveGraph>();
  graph->Apply(delta);
  const double build = SecondsSince(build_start);
  const uint64_t heap_index = HeapInUse() - heap_before;
  graph.reset();
  const uint64_t heap_before_csr = HeapInUse();
  auto csr = std::make_unique<StaticGraph>(indexed.entities.size(), indexed.triples);
  const uint64_t heap_csr = HeapInUse() - heap_before_csr;

  std::printf(
      "| %s | %llu | %llu | %.0f ms | %.0f ms | %.0f ms | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
      data.name.c_str(), static_cast<unsigned long long>(entities),
      static_cast<unsigned long long>(facts), first * 1e3, second * 1e3, build * 1e3,
      static_cast<double>(usage.adjacency_bytes) / facts,
      static_cast<double>(usage.entity_name_bytes + usage.relation_name_bytes) / facts,
      static_cast<double>(usage.total()) / facts, static_cast<double>(heap_index) / facts,
      static_cast<double>(heap_csr) / facts);
  std::fflush(stdout);
}

// Extraction of the test facts' subgraphs (k = 3) on a snapshot vs. on a StaticGraph.
void BenchExtraction(const Dataset& data, const std::string& test_file, const std::string& work) {
  absl::StatusOr<std::vector<NamedTriple>> test = ReadTripleFile(test_file);
  if (!test.ok()) return;
  const std::string dir = work + "/extraction";
  std::filesystem::remove_all(dir);
  IngestStore(data, absl::GetFlag(FLAGS_chunk), false, dir);
  absl::StatusOr<std::unique_ptr<TripleStore>> store = TripleStore::Open(dir, {});
  if (!store.ok()) std::exit(1);
  const std::shared_ptr<const GraphSnapshot> snapshot = (*store)->Snapshot();
  IndexedTriples indexed;
  IndexTriples(data.facts, &indexed);
  const StaticGraph csr(indexed.entities.size(), indexed.triples);
  std::vector<Triple> queries;
  for (const NamedTriple& t : *test) {
    auto h = snapshot->FindEntity(t.head), v = snapshot->FindEntity(t.tail);
    auto r = snapshot->FindRelation(t.relation);
    if (h && v && r && *h != *v) queries.push_back({*h, *r, *v});
  }
  auto run = [&](const GraphView& graph) {
    SubgraphExtractor extractor(ExtractionConfig{});
    EnclosingSubgraph out;
    const Clock::time_point start = Clock::now();
    int64_t n = 0;
    for (int pass = 0; pass < 3; ++pass) {
      for (const Triple& q : queries) {
        if (extractor.Extract(graph, q.head, q.relation, q.tail, false, &out).ok()) ++n;
      }
    }
    return n / SecondsSince(start);
  };
  run(*snapshot);  // warm-up
  std::vector<double> live, fixed;
  for (int r = 0; r < 3; ++r) {
    live.push_back(run(*snapshot));
    fixed.push_back(run(csr));
  }
  std::printf("| %s | %zu | %.1f k | %.1f k | %.2f |\n", data.name.c_str(), queries.size(),
              Median(live) / 1e3, Median(fixed) / 1e3, Median(live) / Median(fixed));
  std::fflush(stdout);
}

// Time to apply one chunk of random facts to the index alone (no RocksDB) on graphs of
// very different sizes: with one new list per touched entity it must not grow with the graph.
void BenchIndexUpdateScaling(size_t chunk) {
  std::printf("\nIndex update per chunk of %zu random facts vs. graph size (no RocksDB)\n\n",
              chunk);
  std::printf(
      "| graph entities | graph facts | entities touched per chunk | µs per chunk | µs to rebuild "
      "a CSR of the graph |\n|---:|---:|---:|---:|---:|\n");
  for (uint32_t entities : {10000u, 1000000u}) {
    std::mt19937_64 rng(entities);
    auto random_facts = [&](size_t n) {
      std::vector<Triple> facts(n);
      for (Triple& t : facts) {
        t = {static_cast<EntityId>(rng() % entities), static_cast<RelationId>(rng() % 200),
             static_cast<EntityId>(rng() % entities)};
      }
      return facts;
    };
    LiveGraph graph;
    GraphDelta base;
    for (uint32_t e = 0; e < entities; ++e) base.new_entities.push_back(absl::StrCat("e", e));
    for (int r = 0; r < 200; ++r) base.new_relations.push_back(absl::StrCat("r", r));
    base.facts = random_facts(2 * size_t{entities});
    base.sequence = 1;
    graph.Apply(base);
    const uint64_t facts_before = graph.Snapshot()->num_facts();
    constexpr int kChunks = 200;
    std::vector<GraphDelta> chunks(kChunks);
    for (int i = 0; i < kChunks; ++i) {
      chunks[i].facts = random_facts(chunk);
      chunks[i].sequence = 2 + i;
    }
    uint64_t touched = 0;
    for (const GraphDelta& delta : chunks) {
      absl::flat_hash_set<EntityId> entities_touched;
      for (const Triple& t : delta.facts) {
        entities_touched.insert(t.head);
        entities_touched.insert(t.tail);
      }
      touched += entities_touched.size();
    }
    const Clock::time_point start = Clock::now();
    for (const GraphDelta& delta : chunks) graph.Apply(delta);
    const double seconds = SecondsSince(start);
    // What a design that rebuilds the whole index per chunk would pay instead.
    const Clock::time_point rebuild_start = Clock::now();
    const StaticGraph rebuilt(entities, base.facts);
    const double rebuild = SecondsSince(rebuild_start);
    std::printf("| %u | %llu | %.0f | %.0f | %.0f |\n", entities,
                static_cast<unsigned long long>(facts_before),
                static_cast<double>(touched) / kChunks, seconds / kChunks * 1e6, rebuild * 1e6);
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace grail

int main(int argc, char** argv) {
  grail::ParseCommandLine(argc, argv);
  using grail::Dataset;
  std::string work = absl::GetFlag(FLAGS_work_dir);
  const bool own_work_dir = work.empty();
  if (own_work_dir) {
    std::string pattern = (std::filesystem::temp_directory_path() / "ingest_bench_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) return 1;
    work = pattern;
  }
  std::vector<Dataset> datasets;
  const std::string fb = grail::BenchmarkDataDir() + "/fb237_v4_ind";
  absl::StatusOr<std::vector<grail::NamedTriple>> fb_facts =
      grail::ReadTripleFile(fb + "/train.txt");
  if (fb_facts.ok()) {
    datasets.push_back({"fb237_v4_ind", std::move(*fb_facts)});
  } else {
    std::fprintf(stderr, "skipping fb237_v4_ind: %s\n",
                 std::string(fb_facts.status().message()).c_str());
  }
  absl::StatusOr<std::vector<grail::NamedTriple>> wn =
      grail::ConvertWordNet(absl::GetFlag(FLAGS_wordnet_dir));
  if (wn.ok()) {
    datasets.push_back({"wordnet", std::move(*wn)});
  } else {
    std::fprintf(stderr, "skipping WordNet: %s\n", std::string(wn.status().message()).c_str());
  }

  std::printf("Ingestion, chunks of %d facts (median of %d runs; ratio = baseline time / ours)\n\n",
              absl::GetFlag(FLAGS_chunk), absl::GetFlag(FLAGS_repeats));
  std::printf(
      "| data | mode | facts | chunks | keys written | store facts/s | raw RocksDB facts/s | store "
      "/ raw |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (const Dataset& d : datasets) grail::BenchIngest(d, work);

  std::printf("\nReopen and index memory (bytes per fact)\n\n");
  std::printf(
      "| data | entities | facts | 1st reopen (WAL replay) | 2nd reopen (SST) | index build alone "
      "| adjacency | names | index total | index heap in use | CSR heap in use |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Dataset& d : datasets) grail::BenchReopen(d, work);

  std::printf("\nExtraction of test-fact subgraphs, k = 3: snapshot vs. StaticGraph (CSR)\n\n");
  std::printf("| data | queries | snapshot subgraphs/s | CSR subgraphs/s | snapshot / CSR |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  for (const Dataset& d : datasets) {
    if (d.name == "fb237_v4_ind") grail::BenchExtraction(d, fb + "/test.txt", work);
  }
  grail::BenchIndexUpdateScaling(absl::GetFlag(FLAGS_chunk));
  if (own_work_dir) std::filesystem::remove_all(work);
  return 0;
}
