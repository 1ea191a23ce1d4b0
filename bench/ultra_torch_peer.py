#!/usr/bin/python3
"""The peer of the served ULTRA pass: the same forward's operators and shapes in plain PyTorch
(Debian's python3-torch), batched queries, index_add message passing, on the same cores
(docs/BENCHMARKS-log.md, "A pass answers many facts").

ULTRA's network as imported here (6 relation-graph and 6 entity layers of 64, sum aggregation,
DistMult messages, layer norm, short-cut, no reach mask; a 2-layer MLP on the entity state and
the query) with random weights: it measures what the forward costs, not what it scores. The
graph of relations is built as ULTRA builds it (head-head, tail-tail, head-tail and tail-head
edges between relations that share an entity); the entity graph carries every fact both ways.

    /usr/bin/python3 bench/ultra_torch_peer.py --graph ../shared/data/FB15k-237_validtest/graph.txt
Prints one JSON line per batch size: seconds per forward and queries (passes) a second.
"""
import argparse
import json
import time

import torch


def load(path):
    entities, relations, facts = {}, {}, []
    for line in open(path):
        h, r, t = line.rstrip("\n").split("\t")
        facts.append((entities.setdefault(h, len(entities)), relations.setdefault(r, len(relations)),
                      entities.setdefault(t, len(entities))))
    return len(entities), len(relations), torch.tensor(facts)


def relation_graph(num_entities, num_relations, facts):
    """ULTRA's graph of relations: relations (and their inverses) joined by the entities they
    share, by which ends (hh, tt, ht, th: 4 edge types)."""
    h, r, t = facts[:, 0], facts[:, 1], facts[:, 2]
    # Every fact both ways: relation r from h to t, r + R from t to h.
    heads = torch.cat([h, t])
    tails = torch.cat([t, h])
    rels = torch.cat([r, r + num_relations])
    r2 = 2 * num_relations
    e_h = torch.zeros(num_entities, r2)
    e_t = torch.zeros(num_entities, r2)
    e_h[heads, rels] = 1
    e_t[tails, rels] = 1
    edges = []
    for kind, (a, b) in enumerate([(e_h, e_h), (e_t, e_t), (e_h, e_t), (e_t, e_h)]):
        nz = (a.t() @ b).nonzero()
        edges.append(torch.stack([nz[:, 0], nz[:, 1], torch.full((len(nz),), kind)], 1))
    return torch.cat(edges), torch.stack([heads, rels, tails], 1)


class Layer(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.linear = torch.nn.Linear(2 * dim, dim)
        self.norm = torch.nn.LayerNorm(dim)

    def forward(self, h, boundary, src, dst, rel_of_edge):
        # h: [N, B, d]; rel_of_edge: [E, B, d] (per query) or [E, 1, d]
        agg = boundary.clone().index_add_(0, dst, h[src] * rel_of_edge)
        out = torch.relu(self.norm(self.linear(torch.cat([h, agg], -1))))
        return out + h


class Peer(torch.nn.Module):
    def __init__(self, dim=64, layers=6, r2=474, edge_types=4):
        super().__init__()
        self.rel_layers = torch.nn.ModuleList(Layer(dim) for _ in range(layers))
        self.rel_edge = torch.nn.Parameter(torch.randn(layers, edge_types, dim))
        self.ent_layers = torch.nn.ModuleList(Layer(dim) for _ in range(layers))
        self.project = torch.nn.ModuleList(torch.nn.Linear(dim, dim) for _ in range(layers))
        self.mlp = torch.nn.Sequential(torch.nn.Linear(2 * dim, 2 * dim), torch.nn.ReLU(),
                                       torch.nn.Linear(2 * dim, 1))
        self.dim = dim

    def forward(self, rgraph, r2, egraph, num_entities, sources, query_rels):
        b, d = len(sources), self.dim
        # The graph of relations, conditioned on each query's relation.
        boundary = torch.zeros(r2, b, d)
        boundary[query_rels, torch.arange(b)] = 1
        h = boundary
        rsrc, rdst, rkind = rgraph[:, 0], rgraph[:, 1], rgraph[:, 2]
        for layer, weights in zip(self.rel_layers, self.rel_edge):
            h = layer(h, boundary, rsrc, rdst, weights[rkind].unsqueeze(1))
        relations = h  # [2R, B, d]
        # The entity graph from each query's source, its relation vectors per query.
        query = relations[query_rels, torch.arange(b)]  # [B, d]
        boundary = torch.zeros(num_entities, b, d)
        boundary[sources, torch.arange(b)] = query
        h = boundary
        esrc, erel, edst = egraph[:, 0], egraph[:, 1], egraph[:, 2]
        for layer, project in zip(self.ent_layers, self.project):
            rel = project(relations)  # [2R, B, d]
            h = layer(h, boundary, esrc, edst, rel[erel])
        return self.mlp(torch.cat([h, query.unsqueeze(0).expand_as(h)], -1)).squeeze(-1)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graph", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batches", default="1,4,16")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    n, r, facts = load(args.graph)
    rgraph, egraph = relation_graph(n, r, facts)
    model = Peer(r2=2 * r).eval()
    print(json.dumps({"entities": n, "relations": r, "message_edges": len(egraph),
                      "relation_graph_edges": len(rgraph), "threads": args.threads}))
    with torch.no_grad():
        for b in [int(x) for x in args.batches.split(",")]:
            sources = torch.randint(0, n, (b,))
            rels = torch.randint(0, 2 * r, (b,))
            model(rgraph, 2 * r, egraph, n, sources, rels)  # warm-up
            start = time.perf_counter()
            for _ in range(args.repeats):
                model(rgraph, 2 * r, egraph, n, sources, rels)
            seconds = (time.perf_counter() - start) / args.repeats
            print(json.dumps({"batch": b, "seconds_per_forward": round(seconds, 4),
                              "passes_per_second": round(b / seconds, 2)}))


if __name__ == "__main__":
    main()
