// `grail-tools subgraph`: extract one enclosing subgraph from a triple file, print JSON.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "model/grail/enclosing_subgraph.h"
#include "model/grail/subgraph_json.h"
#include "tools/commands.h"

ABSL_FLAG(std::string, graph, "", "triple file holding the graph");
ABSL_FLAG(std::string, head, "", "head entity name (u)");
ABSL_FLAG(std::string, relation, "", "target relation name");
ABSL_FLAG(std::string, tail, "", "tail entity name (v)");
ABSL_FLAG(int, hops, 3, "k: neighbourhood radius and largest kept distance");
ABSL_FLAG(int, max_nodes_per_hop, 0, "cap on newly reached nodes per BFS hop (0: none)");
ABSL_FLAG(bool, no_enclosing, false, "ablation: keep the k-hop union, not the enclosing subgraph");
ABSL_FLAG(bool, hide_target_fact, false, "treat the target fact as absent during extraction");

namespace grail {

int RunSubgraphCommand() {
  const std::string path = absl::GetFlag(FLAGS_graph);
  const std::string head = absl::GetFlag(FLAGS_head);
  const std::string relation = absl::GetFlag(FLAGS_relation);
  const std::string tail = absl::GetFlag(FLAGS_tail);
  if (path.empty() || head.empty() || relation.empty() || tail.empty()) {
    std::fprintf(stderr, "subgraph needs --graph, --head, --relation and --tail\n");
    return 2;
  }
  absl::StatusOr<std::vector<NamedTriple>> named = ReadTripleFile(path);
  if (!named.ok()) {
    std::fprintf(stderr, "%s\n", named.status().ToString().c_str());
    return 1;
  }
  IndexedTriples indexed;
  IndexTriples(*named, &indexed);
  const StaticGraph graph(indexed.entities.size(), indexed.triples);

  std::optional<uint32_t> head_id = indexed.entities.Find(head);
  std::optional<uint32_t> tail_id = indexed.entities.Find(tail);
  for (const auto& [name, id] : {std::pair{head, head_id}, std::pair{tail, tail_id}}) {
    if (!id) {
      std::fprintf(stderr, "unknown entity '%s': it occurs in no fact of %s\n", name.c_str(),
                   path.c_str());
      return 1;
    }
  }
  // A relation the graph never uses is still a valid target: it only labels the target edge.
  const RelationId relation_id = indexed.relations.Intern(relation);

  ExtractionConfig config;
  config.hops = absl::GetFlag(FLAGS_hops);
  config.max_nodes_per_hop = absl::GetFlag(FLAGS_max_nodes_per_hop);
  config.enclosing = !absl::GetFlag(FLAGS_no_enclosing);
  SubgraphExtractor extractor(config);
  EnclosingSubgraph subgraph;
  absl::Status status = extractor.Extract(graph, *head_id, relation_id, *tail_id,
                                          absl::GetFlag(FLAGS_hide_target_fact), &subgraph);
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("%s\n", SubgraphToJson(subgraph, indexed.entities, indexed.relations).c_str());
  return 0;
}

}  // namespace grail
