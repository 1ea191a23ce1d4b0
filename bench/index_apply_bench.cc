// What a chunk costs the live graph's in-memory index (store/live_graph.h) at a graph's size:
// the part of streaming ingest that grows with the graph, apart from RocksDB and the RPC.
//
// Generates `grail-tools synth`'s power-law graph of N entities and 5N facts, applies all but
// the last --tail facts as one delta (a store's open), then applies the tail as chunks of
// --chunk facts, the relation sides off (a learned model's server) unless --sides. The tail's
// facts draw both ends by weight, so chunks touch hubs as often as the graph's facts do.
// A chunk's time includes releasing the version it replaces (nothing else holds it), as in
// the server. One JSON line per size: the load, then microseconds per chunk (p50, p90, max),
// the facts per second the index alone would take, and its bytes (the structures' sizes).
//   build/bin/index_apply_bench [--sizes 1000000,10000000] [--chunk 10000] [--tail 500000]
//                               [--sides]
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/timing.h"
#include "datasets/synthetic_graph.h"
#include "graph/vocabulary.h"
#include "store/live_graph.h"

namespace {

using Clock = std::chrono::steady_clock;

using grail::bench::Micros;
using grail::bench::Quantile;

// The process's resident set, MB (/proc/self/status), and the heap bytes in use.
double ResidentMb() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  double kb = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::sscanf(line, "VmRSS: %lf kB", &kb) == 1) break;
  }
  std::fclose(f);
  return kb / 1024;
}
double HeapMb() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<double>(info.uordblks + info.hblkhd) / (1 << 20);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint32_t> sizes = {1000000};
  size_t chunk = 10000, tail = 500000;
  bool sides = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : "";
    if (flag == "--sides") {
      sides = true;
    } else if (flag == "--sizes") {
      sizes.clear();
      for (absl::string_view s : absl::StrSplit(value, ',')) {
        uint32_t n = 0;
        if (absl::SimpleAtoi(s, &n)) sizes.push_back(n);
      }
      ++i;
    } else if (flag == "--chunk") {
      absl::SimpleAtoi(value, &chunk);
      ++i;
    } else if (flag == "--tail") {
      absl::SimpleAtoi(value, &tail);
      ++i;
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  for (uint32_t n : sizes) {
    grail::SyntheticGraphOptions options;
    options.entities = n;
    options.facts = 5ull * n;
    options.seed = 1;
    // Names are interned as they come, so the facts cost 12 bytes each, not their strings.
    grail::Vocabulary entities, relations;
    std::vector<grail::Triple> facts;
    facts.reserve(options.facts);
    const absl::Status generated =
        grail::GenerateSyntheticGraph(options, [&](const grail::NamedTriple& t) {
          facts.push_back(
              {entities.Intern(t.head), relations.Intern(t.relation), entities.Intern(t.tail)});
          return absl::OkStatus();
        });
    if (!generated.ok()) {
      std::fprintf(stderr, "%s\n", generated.ToString().c_str());
      return 1;
    }
    const size_t tail_facts = std::min(tail, facts.size() / 2) / chunk * chunk;
    grail::GraphDelta base;
    base.new_entities = entities.names();
    base.new_relations = relations.names();
    base.facts.assign(facts.begin(), facts.end() - tail_facts);
    base.sequence = 1;
    grail::LiveGraph graph(sides);
    Clock::time_point start = Clock::now();
    graph.Apply(base);
    const double load_s = Micros(Clock::now() - start) / 1e6;
    base = grail::GraphDelta();
    std::fprintf(stderr, "loaded %u entities in %.1f s; applying chunks\n", n, load_s);
    facts.shrink_to_fit();
    malloc_trim(0);
    const double loaded_rss_mb = ResidentMb(), loaded_heap_mb = HeapMb();
    std::vector<double> chunk_us, release_us;
    // What the chunks' touched entities held before them: what copying their lists reads.
    uint64_t copied_bytes = 0, touched_entities = 0;
    double total_us = 0;
    for (size_t c = 0; c * chunk < tail_facts; ++c) {
      grail::GraphDelta delta;
      delta.sequence = 2 + c;
      const auto first = facts.end() - tail_facts + c * chunk;
      delta.facts.assign(first, first + chunk);
      std::shared_ptr<const grail::GraphSnapshot> held = graph.Snapshot();
      std::vector<grail::EntityId> touched;
      for (const grail::Triple& t : delta.facts) {
        touched.push_back(t.head);
        touched.push_back(t.tail);
      }
      std::sort(touched.begin(), touched.end());
      touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
      for (grail::EntityId e : touched) {
        copied_bytes +=
            (held->OutEdges(e).size() + held->InEdges(e).size()) * sizeof(grail::Neighbor);
      }
      touched_entities += touched.size();
      start = Clock::now();
      graph.Apply(delta);
      const Clock::time_point applied = Clock::now();
      held.reset();
      chunk_us.push_back(Micros(Clock::now() - start));
      release_us.push_back(Micros(Clock::now() - applied));
      total_us += chunk_us.back();
    }
    const uint64_t index_bytes = graph.ApproximateMemoryUsage().adjacency_bytes;
    std::printf(
        "{\"entities\":%u,\"facts\":%zu,\"sides\":%s,\"load_s\":%.2f,\"chunk_facts\":%zu,"
        "\"chunks\":%zu,\"apply_us_p50\":%.0f,\"apply_us_p90\":%.0f,\"apply_us_max\":%.0f,"
        "\"release_us_p50\":%.0f,\"touched_per_chunk\":%.0f,\"copied_mb_per_chunk\":%.1f,"
        "\"facts_per_s\":%.0f,\"index_bytes_per_fact\":%.1f,\"index_bytes_per_entity\":%.1f,"
        "\"loaded_rss_mb\":%.0f,\"loaded_heap_mb\":%.0f}\n",
        n, facts.size(), sides ? "true" : "false", load_s, chunk, chunk_us.size(),
        Quantile(chunk_us, 0.5), Quantile(chunk_us, 0.9), Quantile(chunk_us, 1.0),
        Quantile(release_us, 0.5), static_cast<double>(touched_entities) / chunk_us.size(),
        copied_bytes / 1e6 / chunk_us.size(), tail_facts / (total_us / 1e6),
        static_cast<double>(index_bytes) / graph.Snapshot()->num_facts(),
        static_cast<double>(index_bytes) / graph.Snapshot()->num_entities(), loaded_rss_mb,
        loaded_heap_mb);
    std::fflush(stdout);
  }
  return 0;
}
