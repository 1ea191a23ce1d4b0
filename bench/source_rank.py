#!/usr/bin/env python3
"""Where a path model puts each query's own source, and what that costs under each rank rule.

Scores every entity of GRAPH for both queries of each fact of TEST ((h, r, ?) and
(t, r^-1, ?)) through the archive's own forward in Python (python3-torch and the operator
library, as docs/training.md loads archives), whole graph, no reach mask needed, and prints
the filtered full MRR and Hits@1 three ways:
  - ours (grail-eval's full_mrr): ties at the mean rank, the source never a candidate;
  - ties against the answer, the source still left out;
  - strict (grail-eval's full_strict_mrr; NBFNet's, A*Net's and ULTRA's code): ties against,
    the source a candidate unless it answers;
with the share of queries whose source outscores the answer. Several TEST files are merged
into one test set, as `bench/reproduce.sh --merged` merges valid and test.

  /usr/bin/python3 bench/source_rank.py --model M.pt --graph ../shared/data/WN18RR_v1_ind/train.txt \
      --test ../shared/data/WN18RR_v1_ind/valid.txt ../shared/data/WN18RR_v1_ind/test.txt
"""
import argparse
import collections
import json

import torch

parser = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--model", required=True)
parser.add_argument("--graph", required=True)
parser.add_argument("--test", required=True, nargs="+")
parser.add_argument("--ops-library", default="build/lib/libgrail_ops.so")
parser.add_argument("--threads", type=int, default=1)
args = parser.parse_args()
torch.ops.load_library(args.ops_library)
torch.set_num_threads(args.threads)


def read(path):
    with open(path) as f:
        return [tuple(line.split("\t")[:3]) for line in f.read().splitlines() if line]


graph = read(args.graph)
test = [fact for path in args.test for fact in read(path)]
module = torch.jit.load(args.model)
if module.reach_mask:
    raise SystemExit("source_rank.py: a model with the reach mask needs per-query distances; "
                     "this script scores unmasked models over the whole graph")
relations = list(module.relations)
R = len(relations)
entities = sorted({e for h, _, t in graph + test for e in (h, t)})
index = {e: i for i, e in enumerate(entities)}
V = len(entities)
src, dst, rel = [], [], []
for h, r, t in graph:
    a, b, k = index[h], index[t], relations.index(r)
    src += [a, b]
    dst += [b, a]
    rel += [k, k + R]
edges = [torch.tensor(x) for x in (src, dst, rel)]
known = collections.defaultdict(set)  # (source, query relation) -> its answers, filtered
for h, r, t in graph + test:
    known[(index[h], relations.index(r))].add(index[t])
    known[(index[t], relations.index(r) + R)].add(index[h])
# Without the reach mask a distance enters only the reach feature: the true ones, breadth first.
neighbours = collections.defaultdict(list)
for a, b in zip(src, dst):
    neighbours[a].append(b)


def distances(source):
    if not module.reach_feature:  # read by nothing else: skip the search
        return torch.zeros(V, 1, dtype=torch.long)
    dist = [1 << 40] * V
    dist[source], frontier = 0, [source]
    while frontier:
        following = []
        for u in frontier:
            for v in neighbours[u]:
                if dist[v] > dist[u] + 1:
                    dist[v] = dist[u] + 1
                    following.append(v)
        frontier = following
    return torch.tensor(dist).view(-1, 1)


totals = collections.Counter()
queries = 0
for h, r, t in test:
    for source, q, answer in ((index[h], relations.index(r), index[t]),
                              (index[t], relations.index(r) + R, index[h])):
        with torch.no_grad():
            node, _ = module.forward(*edges, distances(source), torch.zeros(V, 1, dtype=torch.long),
                                     torch.tensor([source]), torch.tensor([q]))
        scores = node.view(-1)
        positive = scores[answer].item()
        candidate = torch.ones(V, dtype=torch.bool)
        for e in known[(source, q)]:
            candidate[e] = False
        source_answers = not candidate[source].item()
        candidate[answer] = candidate[source] = False
        greater = int((scores[candidate] > positive).sum())
        equal = int((scores[candidate] == positive).sum())
        source_counts = not source_answers and scores[source].item() >= positive
        ranks = {"ours": 1 + greater + equal / 2, "ties_against": 1 + greater + equal,
                 "strict": 1 + greater + equal + source_counts}
        for rule, rank in ranks.items():
            totals[rule + "_mrr"] += 1 / rank
            totals[rule + "_hits_at_1"] += rank <= 1
        totals["source_above_answer"] += not source_answers and scores[source].item() > positive
        queries += 1
print(json.dumps({**{k: round(v / queries, 6) for k, v in sorted(totals.items())},
                  "queries": queries}))
