// The load generator: many concurrent callers issue a fixed number of requests, and the
// run is summarised as throughput, latency percentiles and outcomes by status code.
//
// Requests are a pure function of (seed, request index), so a run issues the same requests
// whatever the thread interleaving, and two runs with one seed are comparable.
#ifndef GRAIL_CLIENT_LOAD_GENERATOR_H_
#define GRAIL_CLIENT_LOAD_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "client/latency_stats.h"
#include "client/triple_source.h"
#include "common/seeded_random.h"
#include "grpcpp/support/status_code_enum.h"
#include "kg/v1/knowledge_graph.pb.h"

namespace grail {

struct LoadOptions {
  int concurrency = 4;      // threads issuing requests, each one call at a time
  int64_t requests = 1000;  // measured requests, in total
  int64_t warmup = 0;       // requests issued (and not measured) before them
};

struct LoadResult {
  int64_t requests = 0;  // measured requests issued
  int64_t errors = 0;    // of which did not return OK
  double seconds = 0;    // wall time of the measured requests
  double requests_per_second = 0;
  // Latency of every measured request, whatever its outcome, in milliseconds.
  LatencySummary latency_ms;
  // Measured requests by outcome ("OK", "NOT_FOUND", ...).
  std::map<std::string, int64_t> status_counts;
};

// Issues requests 0 .. warmup-1 and then, once they are all done, the measured requests
// warmup .. warmup+requests-1, from `concurrency` threads. `call(i)` issues request i,
// waits for it and returns its outcome; it is called concurrently and must be thread-safe.
LoadResult RunLoad(const LoadOptions& options,
                   const std::function<grpc::StatusCode(int64_t index)>& call);

// Requests drawn from the facts of a triple file.
class LoadWorkload {
 public:
  // `triples` is non-empty. For RankTails, `candidates_per_request` >= 1 ranks the query's
  // true tail among candidates_per_request - 1 other entities of the file (distinct, never
  // the head, as many as the file has); 0 ranks every entity of the graph.
  // `zipf_heads` > 0 draws facts by head instead: the head of popularity rank k (heads ranked
  // by their facts in the file, most first, ties in order of appearance) with probability
  // proportional to 1 / k^zipf_heads, then one of its facts uniformly (s = 1: popular
  // entities are asked about often, as real traffic is). 0: every fact equally likely.
  LoadWorkload(std::vector<SourceTriple> triples, uint64_t seed, int candidates_per_request,
               double zipf_heads = 0);

  // Scores a fact of the file chosen as above.
  void ScoreRequest(int64_t index, kg::v1::ScoreTripletRequest* request) const;
  // Ranks tails for the head and relation of a fact chosen as above.
  void RankTailsRequest(int64_t index, int top_k, kg::v1::RankTailsRequest* request) const;

  size_t num_entities() const { return entities_.size(); }

 private:
  // The fact request `index` asks about.
  const SourceTriple& Fact(SeededRandom& random) const;

  std::vector<SourceTriple> triples_;
  std::vector<std::string> entities_;  // distinct heads and tails, in order of appearance
  uint64_t seed_;
  int candidates_per_request_;
  // With zipf_heads: per head in popularity order, the cumulative probability and its facts
  // (indices into triples_).
  std::vector<double> head_cumulative_;
  std::vector<std::vector<uint32_t>> head_facts_;
};

}  // namespace grail

#endif  // GRAIL_CLIENT_LOAD_GENERATOR_H_
