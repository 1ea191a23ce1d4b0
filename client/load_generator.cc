#include "client/load_generator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "common/grpc_status.h"
#include "common/seeded_random.h"

namespace grail {
namespace {

using Clock = std::chrono::steady_clock;

// The request with this index draws from its own generator, so a seed reproduces the
// requests whatever thread issues them.
SeededRandom RequestRandom(uint64_t seed, int64_t index) {
  return SeededRandom(MixBits(seed) ^ static_cast<uint64_t>(index));
}

struct PhaseResult {
  double seconds = 0;
  std::vector<double> latencies_ms;
  std::map<std::string, int64_t> status_counts;
};

PhaseResult RunPhase(int concurrency, int64_t begin, int64_t end,
                     const std::function<grpc::StatusCode(int64_t)>& call) {
  std::atomic<int64_t> next{begin};
  std::vector<std::vector<double>> latencies(concurrency);
  std::vector<std::map<grpc::StatusCode, int64_t>> codes(concurrency);
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < concurrency; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t i = next.fetch_add(1); i < end; i = next.fetch_add(1)) {
        const Clock::time_point sent = Clock::now();
        const grpc::StatusCode code = call(i);
        latencies[t].push_back(
            std::chrono::duration<double, std::milli>(Clock::now() - sent).count());
        ++codes[t][code];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  PhaseResult result;
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (int t = 0; t < concurrency; ++t) {
    result.latencies_ms.insert(result.latencies_ms.end(), latencies[t].begin(), latencies[t].end());
    for (const auto& [code, count] : codes[t]) result.status_counts[StatusCodeName(code)] += count;
  }
  return result;
}

}  // namespace

LoadResult RunLoad(const LoadOptions& options,
                   const std::function<grpc::StatusCode(int64_t index)>& call) {
  const int concurrency = std::max(options.concurrency, 1);
  const int64_t warmup = std::max<int64_t>(options.warmup, 0);
  const int64_t requests = std::max<int64_t>(options.requests, 0);
  if (warmup > 0) RunPhase(concurrency, 0, warmup, call);
  PhaseResult measured = RunPhase(concurrency, warmup, warmup + requests, call);

  LoadResult result;
  result.requests = static_cast<int64_t>(measured.latencies_ms.size());
  result.seconds = measured.seconds;
  result.requests_per_second = measured.seconds > 0 ? result.requests / measured.seconds : 0;
  for (const auto& [name, count] : measured.status_counts) {
    if (name != "OK") result.errors += count;
  }
  result.status_counts = std::move(measured.status_counts);
  result.latency_ms = SummarizeLatencies(std::move(measured.latencies_ms));
  return result;
}

LoadWorkload::LoadWorkload(std::vector<SourceTriple> triples, uint64_t seed,
                           int candidates_per_request, double zipf_heads)
    : triples_(std::move(triples)),
      seed_(seed),
      candidates_per_request_(std::max(candidates_per_request, 0)) {
  absl::flat_hash_set<std::string> seen;
  for (const SourceTriple& t : triples_) {
    for (const std::string* name : {&t.head, &t.tail}) {
      if (seen.insert(*name).second) entities_.push_back(*name);
    }
  }
  if (zipf_heads <= 0) return;
  absl::flat_hash_map<std::string, size_t> head_index;
  for (uint32_t i = 0; i < triples_.size(); ++i) {
    auto [it, added] = head_index.try_emplace(triples_[i].head, head_facts_.size());
    if (added) head_facts_.emplace_back();
    head_facts_[it->second].push_back(i);
  }
  std::stable_sort(head_facts_.begin(), head_facts_.end(),
                   [](const auto& a, const auto& b) { return a.size() > b.size(); });
  double total = 0;
  for (size_t k = 0; k < head_facts_.size(); ++k) {
    total += std::pow(static_cast<double>(k + 1), -zipf_heads);
    head_cumulative_.push_back(total);
  }
  for (double& c : head_cumulative_) c /= total;
}

const SourceTriple& LoadWorkload::Fact(SeededRandom& random) const {
  if (head_facts_.empty()) return triples_[random.Uniform(triples_.size())];
  const double u = random.UniformDouble();
  const size_t k =
      std::min<size_t>(std::upper_bound(head_cumulative_.begin(), head_cumulative_.end(), u) -
                           head_cumulative_.begin(),
                       head_facts_.size() - 1);
  const std::vector<uint32_t>& facts = head_facts_[k];
  return triples_[facts[random.Uniform(facts.size())]];
}

void LoadWorkload::ScoreRequest(int64_t index, kg::v1::ScoreTripletRequest* request) const {
  SeededRandom random = RequestRandom(seed_, index);
  const SourceTriple& fact = Fact(random);
  kg::v1::Triple* triple = request->mutable_triple();
  triple->set_head(fact.head);
  triple->set_relation(fact.relation);
  triple->set_tail(fact.tail);
}

void LoadWorkload::RankTailsRequest(int64_t index, int top_k,
                                    kg::v1::RankTailsRequest* request) const {
  SeededRandom random = RequestRandom(seed_, index);
  const SourceTriple& fact = Fact(random);
  request->set_head(fact.head);
  request->set_relation(fact.relation);
  kg::v1::RankOptions* options = request->mutable_options();
  options->set_top_k(static_cast<uint32_t>(std::max(top_k, 0)));
  if (candidates_per_request_ == 0) return;
  // Every entity but the head is eligible; the true tail is always one of them.
  const size_t eligible = entities_.size() - (fact.head == fact.tail ? 1 : 2) + 1;
  const size_t wanted = std::min<size_t>(candidates_per_request_, eligible);
  // Inserted, not brace-initialised: `= {fact.tail}` builds a temporary std::string and keeps
  // a view of it (AddressSanitizer: stack-use-after-scope).
  absl::flat_hash_set<std::string_view> chosen;
  chosen.insert(fact.tail);
  options->add_candidates(fact.tail);
  while (chosen.size() < wanted) {
    const std::string& entity = entities_[random.Uniform(entities_.size())];
    if (entity == fact.head || !chosen.insert(entity).second) continue;
    options->add_candidates(entity);
  }
}

}  // namespace grail
