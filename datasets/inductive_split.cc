#include "datasets/inductive_split.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <system_error>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/seeded_random.h"
#include "graph/ids.h"

namespace grail {
namespace {

absl::Status ValidateSampleOptions(const GraphSampleOptions& options, absl::string_view which) {
  if (options.roots <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(which, " graph: roots must be positive, got ", options.roots));
  }
  if (options.hops < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(which, " graph: hops must be at least 1, got ", options.hops));
  }
  if (options.max_new_per_hop < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        which, " graph: max_new_per_hop must be >= 0 (0: no cap), got ", options.max_new_per_hop));
  }
  return absl::OkStatus();
}

absl::Status ValidateOptions(const InductiveSplitOptions& options) {
  absl::Status status = ValidateSampleOptions(options.train, "train");
  if (!status.ok()) return status;
  status = ValidateSampleOptions(options.test, "test");
  if (!status.ok()) return status;
  // Written so that NaN fails too.
  if (!(options.valid_fraction >= 0 && options.valid_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("valid_fraction must be in [0, 1), got ", options.valid_fraction));
  }
  if (!(options.test_fraction >= 0 && options.test_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("test_fraction must be in [0, 1), got ", options.test_fraction));
  }
  if (!(options.valid_fraction + options.test_fraction < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("valid_fraction + test_fraction must be < 1, got ",
                     options.valid_fraction + options.test_fraction));
  }
  return absl::OkStatus();
}

// Undirected adjacency in compressed sparse row form: the neighbours of e are
// neighbors[offsets[e] .. offsets[e + 1]), sorted, without repeats or e itself.
struct Adjacency {
  std::vector<uint64_t> offsets;
  std::vector<EntityId> neighbors;

  absl::Span<const EntityId> Of(EntityId e) const {
    return {neighbors.data() + offsets[e], static_cast<size_t>(offsets[e + 1] - offsets[e])};
  }
};

Adjacency BuildAdjacency(uint32_t num_entities, absl::Span<const Triple> facts) {
  std::vector<std::pair<EntityId, EntityId>> pairs;
  pairs.reserve(2 * facts.size());
  for (const Triple& t : facts) {
    if (t.head == t.tail) continue;
    pairs.emplace_back(t.head, t.tail);
    pairs.emplace_back(t.tail, t.head);
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  Adjacency adjacency;
  adjacency.offsets.assign(static_cast<size_t>(num_entities) + 1, 0);
  adjacency.neighbors.reserve(pairs.size());
  for (const auto& [from, to] : pairs) {
    ++adjacency.offsets[from + 1];
    adjacency.neighbors.push_back(to);
  }
  for (uint32_t e = 0; e < num_entities; ++e) {
    adjacency.offsets[e + 1] += adjacency.offsets[e];
  }
  return adjacency;
}

// Moves a uniform sample of `count` items to the front of `items` (a partial Fisher-Yates
// shuffle) and drops the rest. Requires count <= items.size().
void KeepUniformSample(size_t count, SeededRandom& random, std::vector<EntityId>& items) {
  for (size_t i = 0; i < count; ++i) {
    std::swap(items[i], items[i + random.Uniform(items.size() - i)]);
  }
  items.resize(count);
}

// Samples one graph's entities among those marked `available`: the union of the capped
// k-hop neighbourhoods of uniformly drawn roots, walking only between available entities.
// Roots are drawn among the available entities that have an available neighbour, since an
// isolated root would add an entity without a single fact.
absl::StatusOr<std::vector<char>> SampleEntities(const Adjacency& adjacency,
                                                 const std::vector<char>& available,
                                                 const GraphSampleOptions& options,
                                                 absl::string_view which, SeededRandom& random) {
  const uint32_t num_entities = static_cast<uint32_t>(available.size());
  std::vector<EntityId> candidates;
  for (EntityId e = 0; e < num_entities; ++e) {
    if (!available[e]) continue;
    for (EntityId neighbor : adjacency.Of(e)) {
      if (available[neighbor]) {
        candidates.push_back(e);
        break;
      }
    }
  }
  if (candidates.size() < static_cast<size_t>(options.roots)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "graph too small: the ", which, " graph needs ", options.roots, " roots but only ",
        candidates.size(), " remaining entities have a remaining neighbour"));
  }
  KeepUniformSample(static_cast<size_t>(options.roots), random, candidates);

  std::vector<char> sampled(num_entities, 0);
  // Stamps instead of per-root sets, so no array is cleared between roots or hops:
  // visited[e] == root stamp: e is in this root's neighbourhood already;
  // reached[e] == hop stamp: e is already among this hop's new entities.
  std::vector<uint32_t> visited(num_entities, 0);
  std::vector<uint32_t> reached(num_entities, 0);
  uint32_t hop_stamp = 0;
  std::vector<EntityId> frontier;
  std::vector<EntityId> next;
  for (size_t r = 0; r < candidates.size(); ++r) {
    const uint32_t root_stamp = static_cast<uint32_t>(r) + 1;
    const EntityId root = candidates[r];
    visited[root] = root_stamp;
    sampled[root] = 1;
    frontier.assign(1, root);
    for (int hop = 0; hop < options.hops && !frontier.empty(); ++hop) {
      ++hop_stamp;
      next.clear();
      for (EntityId u : frontier) {
        for (EntityId v : adjacency.Of(u)) {
          if (!available[v] || visited[v] == root_stamp || reached[v] == hop_stamp) continue;
          reached[v] = hop_stamp;
          next.push_back(v);
        }
      }
      // As in GraIL's BFS, entities left out by the cap stay unvisited and may still be
      // reached at a later hop.
      if (options.max_new_per_hop > 0 &&
          next.size() > static_cast<size_t>(options.max_new_per_hop)) {
        KeepUniformSample(static_cast<size_t>(options.max_new_per_hop), random, next);
      }
      for (EntityId v : next) {
        visited[v] = root_stamp;
        sampled[v] = 1;
      }
      frontier.swap(next);
    }
  }
  return sampled;
}

struct HeldOut {
  std::vector<Triple> train;
  std::vector<Triple> valid;
  std::vector<Triple> test;
};

// Holds out valid_fraction and test_fraction of `facts` (in seeded random order), taking a
// fact only if both its entities and its relation keep a fact in the train part, so that
// nothing a valid or test fact names is unseen in training. `relation_train_count` counts,
// per relation, the facts of the train graph's train part: the train graph's hold-out
// (`consumes_relations`) draws it down; the test graph's only reads it, because its
// relations must be learnt from the train graph.
HeldOut HoldOut(const std::vector<Triple>& facts, uint32_t num_entities, double valid_fraction,
                double test_fraction, bool consumes_relations,
                std::vector<uint32_t>& relation_train_count, SeededRandom& random) {
  // Fact ends per entity; a self-loop counts twice, so "count minus this fact's ends >= 1"
  // means "the entity keeps a fact" for self-loops and ordinary facts alike.
  std::vector<uint32_t> entity_ends(num_entities, 0);
  for (const Triple& t : facts) {
    ++entity_ends[t.head];
    ++entity_ends[t.tail];
  }
  const size_t valid_target = static_cast<size_t>(std::floor(valid_fraction * facts.size()));
  const size_t test_target = static_cast<size_t>(std::floor(test_fraction * facts.size()));

  std::vector<uint32_t> order(facts.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  random.Shuffle(order);

  HeldOut parts;
  std::vector<char> held(facts.size(), 0);
  for (uint32_t i : order) {
    if (parts.valid.size() == valid_target && parts.test.size() == test_target) break;
    const Triple& t = facts[i];
    const uint32_t needed_relation_facts = consumes_relations ? 2 : 1;
    if (relation_train_count[t.relation] < needed_relation_facts) continue;
    if (t.head == t.tail ? entity_ends[t.head] < 3
                         : entity_ends[t.head] < 2 || entity_ends[t.tail] < 2) {
      continue;
    }
    --entity_ends[t.head];
    --entity_ends[t.tail];
    if (consumes_relations) --relation_train_count[t.relation];
    held[i] = 1;
    (parts.valid.size() < valid_target ? parts.valid : parts.test).push_back(t);
  }
  for (size_t i = 0; i < facts.size(); ++i) {
    if (!held[i]) parts.train.push_back(facts[i]);
  }
  return parts;
}

std::vector<NamedTriple> SortedNames(absl::Span<const Triple> triples,
                                     const IndexedTriples& indexed) {
  std::vector<NamedTriple> named = NameTriples(triples, indexed.entities, indexed.relations);
  std::sort(named.begin(), named.end(), [](const NamedTriple& a, const NamedTriple& b) {
    return std::tie(a.head, a.relation, a.tail) < std::tie(b.head, b.relation, b.tail);
  });
  return named;
}

SplitGraph NameSplitGraph(const HeldOut& parts, const IndexedTriples& indexed) {
  return {SortedNames(parts.train, indexed), SortedNames(parts.valid, indexed),
          SortedNames(parts.test, indexed)};
}

}  // namespace

absl::StatusOr<InductiveSplit> GenerateInductiveSplit(absl::Span<const NamedTriple> facts,
                                                      const InductiveSplitOptions& options) {
  absl::Status status = ValidateOptions(options);
  if (!status.ok()) return status;
  if (facts.empty()) return absl::InvalidArgumentError("graph too small: no facts to split");

  IndexedTriples indexed;
  IndexTriples(facts, &indexed);
  std::vector<Triple>& all = indexed.triples;
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  const uint32_t num_entities = indexed.entities.size();
  const Adjacency adjacency = BuildAdjacency(num_entities, all);
  SeededRandom random(options.seed);

  std::vector<char> available(num_entities, 1);
  absl::StatusOr<std::vector<char>> train_entities =
      SampleEntities(adjacency, available, options.train, "train", random);
  if (!train_entities.ok()) return train_entities.status();
  std::vector<Triple> train_facts;
  std::vector<uint32_t> relation_count(indexed.relations.size(), 0);
  for (const Triple& t : all) {
    if ((*train_entities)[t.head] && (*train_entities)[t.tail]) {
      train_facts.push_back(t);
      ++relation_count[t.relation];
    }
  }

  for (EntityId e = 0; e < num_entities; ++e) available[e] = !(*train_entities)[e];
  absl::StatusOr<std::vector<char>> test_entities =
      SampleEntities(adjacency, available, options.test, "test", random);
  if (!test_entities.ok()) return test_entities.status();
  std::vector<Triple> test_facts;
  for (const Triple& t : all) {
    if ((*test_entities)[t.head] && (*test_entities)[t.tail] && relation_count[t.relation] > 0) {
      test_facts.push_back(t);
    }
  }
  if (test_facts.empty()) {
    return absl::InvalidArgumentError(
        "graph too small: no test-graph fact has a relation that occurs in the train graph");
  }

  // The train graph goes first: its hold-out settles which relations its train part keeps,
  // and the test graph's hold-out must respect that.
  const HeldOut train_parts =
      HoldOut(train_facts, num_entities, options.valid_fraction, options.test_fraction,
              /*consumes_relations=*/true, relation_count, random);
  const HeldOut test_parts =
      HoldOut(test_facts, num_entities, options.valid_fraction, options.test_fraction,
              /*consumes_relations=*/false, relation_count, random);

  InductiveSplit split;
  split.train_graph = NameSplitGraph(train_parts, indexed);
  split.test_graph = NameSplitGraph(test_parts, indexed);
  return split;
}

absl::Status WriteInductiveSplit(const InductiveSplit& split, const std::string& out_dir,
                                 const std::string& name) {
  if (name.empty()) return absl::InvalidArgumentError("split name must not be empty");
  const std::pair<const SplitGraph*, std::string> graphs[] = {
      {&split.train_graph, absl::StrCat(out_dir, "/", name)},
      {&split.test_graph, absl::StrCat(out_dir, "/", name, "_ind")},
  };
  for (const auto& [graph, dir] : graphs) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create directory ", dir, ": ", error.message()));
    }
    const std::pair<const std::vector<NamedTriple>*, const char*> files[] = {
        {&graph->train, "train.txt"}, {&graph->valid, "valid.txt"}, {&graph->test, "test.txt"}};
    for (const auto& [triples, file] : files) {
      absl::Status status = WriteTripleFile(absl::StrCat(dir, "/", file), *triples);
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

}  // namespace grail
