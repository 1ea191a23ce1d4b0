// The small graph, queries and forward-backward pass the path model's tests compare
// formulations on (the fused operator against the per-edge one, the learned priority's pass
// against the archive's forward). LibTorch inside: path-model tests only.
#ifndef GRAIL_TESTS_TESTING_PATH_TEST_GRAPH_H_
#define GRAIL_TESTS_TESTING_PATH_TEST_GRAPH_H_

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "common/seeded_random.h"
#include "graph/static_graph.h"
#include "model/path/path_batch.h"
#include "model/path/path_model.h"
#include "model/path/path_module.h"

namespace grail {

// 50 entities: a hub (entity 0) with a fact to or from every fifth entity, random facts
// among 1..44, self-loops on 3 and 7, entities 45..49 isolated, and relation 3 of 4 unused.
inline StaticGraph PathTestGraph() {
  SeededRandom random(13);
  std::vector<Triple> facts;
  for (uint32_t e = 5; e < 45; e += 5) {
    facts.push_back(e % 2 ? Triple{0, 0, e} : Triple{e, 1, 0});
  }
  for (int i = 0; i < 90; ++i) {
    const uint32_t h = 1 + static_cast<uint32_t>(random.Uniform(44));
    const uint32_t t = 1 + static_cast<uint32_t>(random.Uniform(44));
    facts.push_back({h, static_cast<uint32_t>(random.Uniform(3)), t});
  }
  facts.push_back({3, 2, 3});
  facts.push_back({7, 0, 7});
  return StaticGraph(50, facts);
}

// Queries from every kind of source: the hub, ordinary entities, a self-loop's and an
// isolated one, both directions.
inline std::vector<PathQuery> PathTestQueries(int n) {
  const std::vector<EntityId> sources = {0, 3, 12, 47, 21, 7, 33, 1};
  std::vector<PathQuery> queries;
  for (int i = 0; i < n; ++i) queries.emplace_back(sources[i % sources.size()], i % 8);
  return queries;
}

inline double RelativeDifference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(1e-12, b.abs().max().item<double>());
}

struct ForwardOutcome {
  torch::Tensor node, far;
  std::vector<torch::Tensor> gradients;  // of every parameter, in the module's order
};

// One forward (`forward`) and backward of a fixed loss (a weighted sum of the scores).
inline ForwardOutcome ForwardBackward(
    PathModel& model,
    const std::function<std::pair<torch::Tensor, torch::Tensor>(PathModule&)>& forward) {
  PathModule& module = model.module();
  for (const torch::Tensor& p : module.module.parameters()) {
    if (p.grad().defined()) p.grad().zero_();
  }
  auto [node, far] = forward(module);
  torch::manual_seed(99);
  const torch::Tensor loss = (node * torch::randn_like(node)).sum() + (far * 0.5).sum();
  loss.backward();
  ForwardOutcome out{node.detach().clone(), far.detach().clone(), {}};
  for (const torch::Tensor& p : module.module.parameters()) {
    out.gradients.push_back(p.grad().clone());
  }
  return out;
}

// The same over `batch` with the model's forward (PathForward).
inline ForwardOutcome ForwardBackward(PathModel& model, const PathBatch& batch) {
  return ForwardBackward(model, [&batch](PathModule& m) { return PathForward(m, batch); });
}

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_PATH_TEST_GRAPH_H_
