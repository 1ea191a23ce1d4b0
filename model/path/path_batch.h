// The input of the path-based scorer (model/path/path_model.h): for each query (source entity,
// query relation), the source's neighbourhood within a radius; the forward runs either on
// the disjoint union of those neighbourhoods or on one graph shared by the whole batch, each
// query a column of every node's state (PathBatch says which; PathBatchBuilder::Build picks).
//
// The path model propagates from the source only: after layer l every entity farther than l
// hops from the source still has state 0 (the semiring's zero), so after L layers an
// entity's state depends only on the graph within L hops of the source, and an entity
// beyond L hops has state 0 and the query's "far" score. A query's neighbourhood within L
// hops (L + 1 with PNA aggregation, whose degree scalers need every edge of the nodes at
// distance L) therefore gives exactly the scores the whole graph would.
//
// Edges are message-passing edges: every fact h -r-> t of the neighbourhood gives h -> t with
// relation r and t -> h with the inverse relation r + R (R: the model's relation count), as
// the path model's paper adds inverse edges. Plain arrays, no LibTorch.
#ifndef GRAIL_MODEL_PATH_PATH_BATCH_H_
#define GRAIL_MODEL_PATH_PATH_BATCH_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "graph/graph_view.h"
#include "graph/ids.h"
#include "graph/relation_map.h"

namespace grail {

// One query (source, relation, ?). `relation` is a model relation id in [0, 2R): r asks
// for tails of r, r + R for heads of r (the inverse query).
struct PathQuery {
  PathQuery() = default;
  PathQuery(EntityId source, int32_t relation, std::vector<EntityId> unlinked = {},
            std::optional<Triple> hidden_fact = std::nullopt, std::vector<EntityId> targets = {})
      : source(source),
        relation(relation),
        unlinked(std::move(unlinked)),
        hidden_fact(hidden_fact),
        targets(std::move(targets)) {}

  EntityId source = 0;
  int32_t relation = 0;
  // Edges left out of this query's graph (training: the fact being predicted must not be a
  // message edge). Every fact between the source and one of `unlinked`, any relation and
  // either direction (the path model's paper's "remove one hop"); and `hidden_fact`, a fact
  // of the graph (graph ids) touching the source.
  std::vector<EntityId> unlinked;
  std::optional<Triple> hidden_fact;
  // The entities whose scores are wanted; empty: every entity (a ranking). With targets the
  // neighbourhood keeps only what their scores depend on (see PathNeighbourhoodSpec), and
  // only the targets' scores are exact.
  std::vector<EntityId> targets;
};

struct PathBatch {
  // Per query node: each query's neighbourhood, contiguous, the source first, then in
  // breadth-first order. Scores (PathScores::node) are per query node in this order.
  std::vector<int64_t> node_entity;  // graph entity id
  std::vector<int64_t> node_query;   // index of the query
  std::vector<int64_t> node_dist;    // hops from the query's source
  // The graph the forward runs on, in one of two layouts:
  //   disjoint (columns == 1): the disjoint union of the queries' neighbourhoods, a forward
  //     node per query node; edge_src/edge_dst index query nodes, and edge_begin delimits
  //     each query's edges;
  //   shared (columns == B > 1): one graph for the whole batch, a forward node per distinct
  //     entity of the neighbourhoods (shared_entity), every query a column of each node's
  //     state; edge_src/edge_dst index those nodes, node_shared maps each query node to its
  //     forward node, and edge_begin is empty. A query's columns are its own: an entity
  //     outside its neighbourhood has state 0 there (distance kUnreached).
  // Both give the same scores (PathBatchBuilder::Build picks the cheaper).
  std::vector<int64_t> edge_src, edge_dst;
  std::vector<int64_t> edge_relation;  // model relation id in [0, 2R)
  int64_t columns = 1;
  std::vector<int64_t> shared_entity;
  std::vector<int64_t> node_shared;
  // Per query.
  std::vector<int64_t> source_index;    // query node index of the source
  std::vector<int64_t> query_relation;  // in [0, 2R)
  std::vector<int64_t> node_begin;      // nodes of query q: [node_begin[q], node_begin[q + 1])
  std::vector<int64_t> edge_begin;      // disjoint: edges of query q
  // 1 where the query's neighbourhood passed the spec's budget and was pruned to it
  // (PathBudget), or holds more entities than its layers may propagate from (layer_nodes): its
  // scores are approximate, every entity it did not visit sharing the far score.
  std::vector<int64_t> query_pruned;
  // For a model with a learned priority: per query, the entities each of its layers may
  // propagate from (PathBudget::layer_nodes; 0: all). A batch with any is disjoint.
  std::vector<int64_t> layer_nodes;
  // For a model whose relation vectors come from the graph of relations (ULTRA,
  // model/ultra/relation_graph.h): the graph's relation count R and which of its relation sides
  // meet, set from the spec's graph when the spec asks (PathNeighbourhoodSpec).
  int64_t graph_relations = 0;
  std::shared_ptr<const RelationSidePairs> side_pairs;

  int64_t num_queries() const { return static_cast<int64_t>(source_index.size()); }
  // Query q's layer_nodes (0 where a batch made by hand has none).
  int64_t LayerNodes(int64_t q) const {
    return q < static_cast<int64_t>(layer_nodes.size()) ? layer_nodes[q] : 0;
  }
  int64_t num_nodes() const { return static_cast<int64_t>(node_entity.size()); }
  int64_t num_edges() const { return static_cast<int64_t>(edge_src.size()); }
  bool shared() const { return columns > 1; }
  // Nodes of the graph the forward runs on.
  int64_t num_forward_nodes() const {
    return shared() ? static_cast<int64_t>(shared_entity.size()) : num_nodes();
  }

  // Query node index of `entity` in query q's neighbourhood, or -1 if it lies beyond it.
  int64_t NodeOf(int64_t q, EntityId entity) const;

  void Clear();
  // Appends every query of `other` (its indices shifted past this batch's). Both batches
  // must be disjoint (a batch of one query always is).
  void Append(const PathBatch& other);
  // Appends `one` (a batch of one query) unless this batch already holds the same query
  // over the same neighbourhood (same source, relation, entities, distances and edges: then
  // its scores are the same), and returns the index of the query that answers it. Disjoint
  // batches only.
  int64_t AppendOrShare(const PathBatch& one);
  // Heap bytes held, for admission control.
  size_t MemoryBytes() const;

 private:
  friend class PathBatchBuilder;
  // Per query, its (entity, node) pairs sorted by entity, for NodeOf.
  std::vector<std::pair<EntityId, int64_t>> sorted_nodes_;
};

// What a neighbourhood is built from. `relations` maps graph relation ids to the model's
// (empty: identity); facts of unknown relations are not message edges. `num_relations` is
// the model's R. `radius` is the neighbourhood's hop count, -1 for the whole graph (every
// entity: those the source reaches in breadth-first order, then the others in id order at
// distance kUnreached); `max_nodes` bounds one query's neighbourhood (0: none).
//
// A query with targets T (scoring facts, not ranking) needs less. With the reach mask, node
// v's state after layer l is 0 unless d(h, v) <= l, and the target's state after layer L
// reads v's state after layer l only if d(v, T) <= L - l. So only the entities on a path of
// at most L = `path_length` facts from the source to a target take part: S = {v : d(h, v) +
// d(v, T) <= L}, with every message edge between them (a shortest path from h to v in S lies
// in S, so the distances within S are the graph's). Any other in-neighbour u of such a v has
// state 0 whenever v's state matters (d(h, u) >= l there); sum aggregation ignores it, but PNA
// (`every_in_edge`) counts it in v's degree, mean, max, min and deviation, so it joins as a
// node at distance kUnreached (state 0 at every layer) with its edges into S. This is the
// enclosing subgraph of the path model, as GraIL's is of its own: it gives the targets'
// scores exactly, and on WN18RR it is a few dozen entities where the ball is thousands. When
// d(h, T) > L the query is the source alone (every target has the far score). If the search
// from the targets passes `max_nodes` (a hub among them), the query falls back to the ball.
//
// Without the reach mask (radius -1) every entity is updated at every layer, so the target's
// state after L layers reads every entity within L hops of it, whatever its distance from the
// source: S = {v : d(v, T) <= L}, every message edge between them, and the source (alone, its
// boundary reaching no target, when it lies beyond). PNA needs nothing more: a node whose
// state after layer l >= 1 matters lies within L - 1 hops of T, so its in-neighbours are in S.
// That bounds ScoreTriplet by the targets' L-hop ball instead of the whole graph.
inline constexpr int64_t kUnreached = int64_t{1} << 40;

// Without the reach mask, a query whose targets' S holds at least this share of the graph's
// entities takes the whole graph instead: the pass costs at most twice as much, and it is the
// query's own, so every fact of the query, in any call, is answered by it to the bit.
inline constexpr double kWholeGraphShare = 0.5;

// Pruned propagation, after A*Net (Zhu et al., NeurIPS 2023): a query whose neighbourhood
// passes `nodes` entities or `edges` message edges (0: no bound on edges) is not refused but
// propagates over a part of it of at most that size, grown from the source hop by hop and
// chosen by a priority. The priority is parameter-free, so it serves every model as trained:
// the probability that a random walk from the source, stepping to a uniformly drawn neighbour,
// stands on the entity after as many steps as the hop (summed over the hops an entity stays a
// candidate), the estimate that personalised PageRank's push computes (Andersen, Chung and
// Lang, FOCS 2006). Each hop may take an even share of the nodes left (what a hop leaves
// passes to the next), the candidates reached so far competing for it, a target of the query
// first; the edges are those among the chosen entities, the entities taken in the order they
// were chosen until the edges would pass the budget. Distances are the chosen graph's own.
// The work of one query is bounded by the budget: the adjacency read while growing is at most
// twice the edge budget (or 16 per node without one); then each entity chosen reads its facts
// to the others chosen, a hub's by a binary search of its lists per entity chosen rather than
// the whole lists, so a hub of millions of facts costs what a node of the budget's does.
// An entity the pruned propagation does not visit gets the far score, as one beyond the
// model's reach does. nodes == 0: no pruning (a neighbourhood past max_nodes is refused).
//
// A model with a learned priority (PathConfig::priority; A*Net's own) prunes inside the
// forward instead: `layer_nodes` > 0 lets each layer of a query propagate from at most that
// many of the entities it has reached, those its priority ranks first, along the best of their
// edges (model/path/path_model.h). A query whose neighbourhood holds no more entities than
// that is exact. Both prunings can apply to one query: the neighbourhood statically to
// nodes/edges (what is materialised), then each layer within it.
struct PathBudget {
  int64_t nodes = 0;
  int64_t edges = 0;
  int64_t layer_nodes = 0;
  bool enabled() const { return nodes > 0; }
};

// Which layout PathBatchBuilder::Build gives a batch of several queries.
enum class PathLayout { kDisjoint, kCheaper, kShared };

struct PathNeighbourhoodSpec {
  const GraphView* graph = nullptr;
  const RelationMap* relations = nullptr;
  int32_t num_relations = 0;
  int radius = 0;
  int64_t max_nodes = 0;
  // For queries with targets (above): the model's layer count, and whether its aggregation
  // reads every in-edge of a node (PNA).
  int path_length = 0;
  bool every_in_edge = false;
  // The layouts the model's forward takes (PathBatch): kDisjoint only, or both, the cheaper
  // chosen (kCheaper, or kShared to force it).
  PathLayout layout = PathLayout::kDisjoint;
  // Whether batches carry the graph's relation side pairs (PathBatch::side_pairs).
  bool relation_graph = false;
  // With pruning enabled, a neighbourhood past the budget is pruned to it (PathBudget), and
  // one within it is exact as without.
  PathBudget prune;
  // How much cheaper than the cost rule says a shared batch runs on the device of the pass:
  // kCheaper shares while the shared layout costs at most this many times the disjoint one.
  // 1 on the CPU; kPathGpuSharedAdvantage on a GPU (PathModel::Neighbourhood sets it).
  double shared_advantage = 1;
};

// The cost rule of PathBatchBuilder::Build, in units of one node's update (the combine step
// and the layer norm of d values): a message costs kPathEdgeCost of it. A layout costs, per
// layer, nodes + kPathEdgeCost * edges, times the columns. Measured with bench/path_layout:
// see docs/BENCHMARKS-log.md ("One graph per batch").
inline constexpr double kPathEdgeCost = 0.25;
// On a GPU the shared layout runs faster than its cost by the rule: its rows of B x d values
// are contiguous where the disjoint batch's are d wide, and the host builds and copies one
// graph instead of one per query. An fb237_v4 step at batch 64 on an H200, the two layouts
// within 0.5% of each other by the rule: 52.7 ms shared against 69.2 ms disjoint (1.31x);
// docs/BENCHMARKS-log.md ("On a GPU", the fourth session). The layout never changes a score.
inline constexpr double kPathGpuSharedAdvantage = 1.3;

// Builds batches. Holds scratch sized to the largest graph it has seen, so keep one per
// thread and reuse it.
class PathBatchBuilder {
 public:
  // A builder for any graph (the spec comes with each call).
  PathBatchBuilder() = default;
  // A builder bound to one graph and model.
  PathBatchBuilder(const GraphView& graph, const RelationMap& relations, int32_t num_relations,
                   int radius, int64_t max_nodes = 0);

  // Appends query's neighbourhood to `batch` (disjoint), leaving out the facts the query
  // leaves out; pruned to spec.prune when it passes it. Errors: INVALID_ARGUMENT for a source
  // outside the graph or a relation outside [0, 2R); RESOURCE_EXHAUSTED when the neighbourhood
  // exceeds max_nodes and pruning is off (the batch is left as it was).
  absl::Status Add(const PathQuery& query, PathBatch* batch);
  absl::Status Add(const PathNeighbourhoodSpec& spec, const PathQuery& query, PathBatch* batch);
  // Whether the last query added (Add) got the neighbourhood it would have had without
  // targets, its pass scoring every entity as a ranking's does: no targets, a targets' search
  // that passed max_nodes, or one whose S would hold half the graph or more without the reach
  // mask (then the whole graph costs little more, and the pass is the query's, whatever its
  // targets: kWholeGraphShare). False where S, or a pruned pass that keeps the targets, answers
  // only the targets.
  bool last_query_whole() const { return !targeted_; }
  // Whether Add would give `query` (with targets) the neighbourhood it has without them, as
  // far as its targets decide: their search passes the spec's node bound (or budget), or
  // holds half the graph without the reach mask. The whole neighbourhood may still be pruned
  // to the budget, and then the targets decide again; a caller holding the query's unpruned
  // whole pass of the same spec and graph knows that it is not. Costs the targets' search
  // only (no neighbourhood is built).
  bool TargetsKeepWholeQuery(const PathNeighbourhoodSpec& spec, const PathQuery& query);

  // Builds a batch of `queries` into `batch` (cleared first). A fact that any query of the
  // batch leaves out is left out of every query's graph, as the path model's paper does for a
  // training batch: with one graph shared by the batch that is the only consistent rule, and
  // it costs each query at most the batch's few predicted facts. The layout is the cheaper by
  // the cost rule (kPathEdgeCost, and spec.shared_advantage on a GPU): shared where the
  // queries' neighbourhoods overlap (a whole graph per query without the reach mask),
  // disjoint where they are far smaller than their union (a few dozen entities per query
  // with targets); or as spec.layout forces it.
  // `step`: the queries of a whole training step this batch is one pass of (gradient
  // accumulation); what any of them leaves out is left out here too, so the passes see the
  // graph one batch of them all would. Empty: the batch's own queries only.
  // Errors as Add's, naming the query; the batch is cleared on error.
  absl::Status Build(const PathNeighbourhoodSpec& spec, absl::Span<const PathQuery> queries,
                     PathBatch* batch, absl::Span<const PathQuery> step = {});
  absl::Status Build(absl::Span<const PathQuery> queries, PathBatch* batch);

 private:
  // The facts a batch leaves out (PathQuery::unlinked and hidden_fact of each query), looked
  // up only for facts that touch a query's source.
  class LeftOut {
   public:
    void Clear(std::vector<uint8_t>& marks);
    void Add(const PathQuery& q, std::vector<uint8_t>& marks);
    bool Contains(const std::vector<uint8_t>& marks, EntityId a, RelationId r, EntityId b) const {
      return (marks[a] || marks[b]) && Lookup(a, r, b);
    }

   private:
    bool Lookup(EntityId a, RelationId r, EntityId b) const;
    std::vector<EntityId> sources_;
    absl::flat_hash_set<std::pair<EntityId, EntityId>> pairs_;  // (min, max)
    absl::flat_hash_set<Triple> facts_;
  };

  RelationMap bound_relations_;  // a copy: callers pass temporaries ({} for identity)
  PathNeighbourhoodSpec bound_;
  std::vector<int32_t> local_;         // entity -> index within the current node list, or -1
  std::vector<uint8_t> source_marks_;  // entity -> whether a query of the batch starts there
  std::vector<EntityId> nodes_;
  std::vector<int64_t> dist_;
  // Queries with targets: entity -> hops from the nearest target (-1: farther than the path
  // length), and the entities set there.
  std::vector<int32_t> target_dist_;
  std::vector<EntityId> target_reached_;
  LeftOut left_out_;
  // Pruned propagation: whether the current query was pruned; each chosen node's priority;
  // the candidates (not chosen yet) and their priorities.
  bool pruned_ = false;
  // Whether the current query's neighbourhood depends on its targets (last_query_whole).
  bool targeted_ = false;
  std::vector<double> node_priority_;
  absl::flat_hash_map<EntityId, double> candidates_;
  // A hub's facts among the chosen entities (ForEachFactAmong's scratch).
  std::vector<Neighbor> found_;

 public:
  // The entities of a node list as a bit per hashed entity (128 KB, in cache where local_'s
  // entries for a graph of millions are not): most neighbours of a node are ruled out without
  // reading local_. Cleared by removing what was added (a whole clear would cost every query
  // 128 KB).
  class EntityFilter {
   public:
    void Add(EntityId e) { bits_[Hash(e) >> 6] |= uint64_t{1} << (Hash(e) & 63); }
    void Remove(EntityId e) { bits_[Hash(e) >> 6] = 0; }  // clears its word's others too
    bool MayContain(EntityId e) const { return (bits_[Hash(e) >> 6] >> (Hash(e) & 63)) & 1; }

   private:
    static constexpr int kBits = 20;
    static uint32_t Hash(EntityId e) { return (e * 0x9E3779B1u) >> (32 - kBits); }
    std::vector<uint64_t> bits_ = std::vector<uint64_t>(size_t{1} << (kBits - 6));
  };

 private:
  EntityFilter filter_;

  // d(v, T) into target_dist_/target_reached_ for every v within the path length of q's
  // targets; false where the search passed spec.max_nodes or (without the reach mask) holds
  // kWholeGraphShare of the graph: then the neighbourhood is the query's whole one. The
  // caller resets target_dist_.
  bool SearchFromTargets(const PathNeighbourhoodSpec& spec, const PathQuery& q);
  // Checks the query against the spec and sizes the scratch to the graph.
  absl::Status Prepare(const PathNeighbourhoodSpec& spec, const PathQuery& q);
  // Fills nodes_/dist_ (local_ set for them) with the query's neighbourhood, pruned to
  // spec.prune where it passes it; sets *others_begin to the first node not in S of a query
  // with targets (SIZE_MAX otherwise).
  absl::Status SelectNodes(const PathNeighbourhoodSpec& spec, const PathQuery& q,
                           size_t* others_begin);
  // SelectNodes without pruning: RESOURCE_EXHAUSTED past spec.max_nodes.
  absl::Status SelectExact(const PathNeighbourhoodSpec& spec, const PathQuery& q,
                           size_t* others_begin);
  // Fills nodes_/dist_ (local_ set for them, none set on entry) with the pruned
  // neighbourhood of q (PathBudget) and sets pruned_.
  void SelectPruned(const PathNeighbourhoodSpec& spec, const PathQuery& q);
  // Message edges AppendEdges would give nodes_ (local_ set), counting stopped past `limit`.
  int64_t CountEdges(const PathNeighbourhoodSpec& spec, size_t others_begin, int64_t limit) const;
  // Fills nodes_/dist_ (local_ set for them) with S and, for PNA, its other in-neighbours;
  // returns the index of the first of those, or nullopt when the targets' search passes
  // max_nodes (nothing set then).
  std::optional<size_t> SelectForTargets(const PathNeighbourhoodSpec& spec, const PathQuery& q);
  // Appends nodes_ as query `q`'s nodes.
  void AppendNodes(const PathNeighbourhoodSpec& spec, const PathQuery& q, PathBatch* batch);
  // Appends the message edges among nodes_ (local_ set), query `query`'s nodes, as its edges
  // (disjoint; every earlier query's edges are appended already).
  void AppendEdges(const PathNeighbourhoodSpec& spec, int64_t query, size_t others_begin,
                   PathBatch* batch);
  // Turns `batch` (its nodes appended, no edges) into the shared layout with every message
  // edge among the union of its queries' nodes.
  void Share(const PathNeighbourhoodSpec& spec, PathBatch* batch);
  void ResetLocal();
  // Sets the batch's relation graph inputs when the spec asks for them.
  static void SetRelationGraph(const PathNeighbourhoodSpec& spec, PathBatch* batch);
};

}  // namespace grail

#endif  // GRAIL_MODEL_PATH_PATH_BATCH_H_
