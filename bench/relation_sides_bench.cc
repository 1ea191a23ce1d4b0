// What keeping the relation sides' pairs (graph/relation_sides.h: what ULTRA's graph of
// relations is built from) costs a write, against the graph's size.
//
// For power-law graphs of `grail-tools synth`'s generator (N entities, 5N facts, hubs of up to
// ~N/10 facts), loads all but the last 100,000 facts (half, on a small graph) into two
// LiveGraphs, one keeping the pairs and one not, then applies those facts to both as chunks of
// 1,000 and times each Apply. One JSON line per graph: microseconds per chunk (p50, max) with
// and without the pairs.
//   build/bin/relation_sides_bench [--sizes 10000,100000,1000000] [--relations 16]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/timing.h"
#include "datasets/synthetic_graph.h"
#include "graph/triple_file.h"
#include "store/live_graph.h"

namespace {

using Clock = std::chrono::steady_clock;

using grail::bench::Micros;
using grail::bench::Quantile;

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint32_t> sizes = {10000, 100000, 1000000};
  uint32_t relations = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--sizes") {
      sizes.clear();
      for (absl::string_view s : absl::StrSplit(argv[i + 1], ',')) {
        uint32_t n = 0;
        if (absl::SimpleAtoi(s, &n)) sizes.push_back(n);
      }
    } else if (flag == "--relations") {
      absl::SimpleAtoi(argv[i + 1], &relations);
    }
  }
  constexpr size_t kChunk = 1000;
  for (uint32_t n : sizes) {
    grail::SyntheticGraphOptions options;
    options.entities = n;
    options.facts = 5ull * n;
    options.relations = relations;
    options.seed = 1;
    auto named = grail::GenerateSyntheticGraph(options);
    if (!named.ok()) {
      std::fprintf(stderr, "%s\n", named.status().ToString().c_str());
      return 1;
    }
    grail::IndexedTriples indexed;
    grail::IndexTriples(*named, &indexed);
    // 100 chunks, or as many as half the facts make on a small graph.
    const size_t kChunks = std::min<size_t>(100, indexed.triples.size() / 2 / kChunk);
    const size_t tail = kChunks * kChunk;
    grail::GraphDelta base;
    base.new_entities = indexed.entities.names();
    base.new_relations = indexed.relations.names();
    base.facts.assign(indexed.triples.begin(), indexed.triples.end() - tail);
    base.sequence = 1;
    grail::LiveGraph graph(/*relation_sides=*/true), plain(/*relation_sides=*/false);
    Clock::time_point start = Clock::now();
    graph.Apply(base);
    const double load_us = Micros(Clock::now() - start);
    start = Clock::now();
    plain.Apply(base);
    const double plain_load_us = Micros(Clock::now() - start);
    std::vector<double> with_us, without_us;
    for (size_t c = 0; c < kChunks; ++c) {
      grail::GraphDelta delta;
      delta.sequence = 2 + c;
      const auto first = indexed.triples.end() - tail + c * kChunk;
      delta.facts.assign(first, first + kChunk);
      start = Clock::now();
      graph.Apply(delta);
      with_us.push_back(Micros(Clock::now() - start));
      start = Clock::now();
      plain.Apply(delta);
      without_us.push_back(Micros(Clock::now() - start));
    }
    std::printf(
        "{\"entities\":%u,\"facts\":%zu,\"relations\":%u,\"side_pairs\":%zu,"
        "\"load_s\":%.2f,\"load_s_without\":%.2f,\"chunk_facts\":%zu,\"chunks\":%zu,"
        "\"apply_us_p50\":%.0f,\"apply_us_max\":%.0f,\"apply_us_p50_without\":%.0f,"
        "\"apply_us_max_without\":%.0f}\n",
        n, indexed.triples.size(), relations, graph.Snapshot()->SidePairs()->size(), load_us / 1e6,
        plain_load_us / 1e6, kChunk, kChunks, Quantile(with_us, 0.5), Quantile(with_us, 1.0),
        Quantile(without_us, 0.5), Quantile(without_us, 1.0));
    std::fflush(stdout);
  }
  return 0;
}
