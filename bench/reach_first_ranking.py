#!/usr/bin/env python3
"""What the full ranking of an unmasked path model loses to entities its query never reaches.

Starts grail-server with MODEL on a fresh store, loads GRAPH (a triple file) through
AddTriples, asks RankTails (h, r) over every entity for each fact (h, r, t) of TEST, and
compares two orders of the same scores, filtered as grail-eval filters (the head and the
known tails of (h, r) in GRAPH and TEST left out):
  - by score (what the model serves);
  - reachable first: entities within `--hops` facts of h (either direction) before the others,
    each group by score.
Prints, per order, tail Hits@1/10 and NBFNet's 50-sample Hits@10 estimate, how many answers lie
beyond the hops, and the unreachable entities that outrank the answer most often (an unmasked
model gives an entity its query never reaches a score from its own surroundings alone, the
same for every query of the relation).

  /usr/bin/python3 bench/reach_first_ranking.py --model M.pt \
      --graph ../shared/data/WN18RR_v2_ind/train.txt --test ../shared/data/WN18RR_v2_ind/test.txt
"""
import argparse
import collections
import math
import os
import shutil
import sys
import tempfile

parser = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--model", required=True)
parser.add_argument("--graph", required=True)
parser.add_argument("--test", required=True)
parser.add_argument("--hops", type=int, default=6, help="the model's layers")
parser.add_argument("--bin", default="build/bin")
args = parser.parse_args()
sys.path.insert(0, os.path.join(os.path.abspath(args.bin), "..", "python"))
from grail_kg import Client  # noqa: E402
from server_process import ServerProcess  # noqa: E402


def read(path):
    with open(path) as f:
        return [tuple(line.split()) for line in f if line.strip()]


def expected_hits_of_50(rank, candidates, k=10, samples=50):
    """NBFNet's estimator: P(fewer than k of `samples` uniform draws outrank the answer); the
    same as grail-eval's ExpectedHitsAmongSamples (eval/ranking_metrics.cc)."""
    if candidates <= 0:
        return float(rank <= k)
    p = min(max((rank - 1) / candidates, 0.0), 1.0)
    if p == 0:
        return 1.0
    if p == 1:
        return float(samples < k)
    return min(1.0, sum(math.comb(samples, i) * p**i * (1 - p)**(samples - i) for i in range(k)))


graph, test = read(args.graph), read(args.test)
known = collections.defaultdict(set)
for h, r, t in graph + test:
    known[(h, r)].add(t)
neighbours = collections.defaultdict(set)
for h, _, t in graph:
    neighbours[h].add(t)
    neighbours[t].add(h)


def ball(source):
    seen, frontier = {source}, [source]
    for _ in range(args.hops):
        frontier = [v for u in frontier for v in neighbours[u] if v not in seen and not seen.add(v)]
    return seen


workdir = tempfile.mkdtemp(prefix="reach_first_")
server = ServerProcess(args.bin, args.model, os.path.join(workdir, "db"),
                       "--max-subgraph-nodes", "10000000", "--max-subgraph-edges", "100000000",
                       "--max-rank-subgraphs", "10000000", "--max-rank-results", "10000000",
                       log=os.path.join(workdir, "server.log"), metrics=False)
try:
    orders = ("by score", "reachable first")
    hits1, hits10, est50 = ([0, 0] for _ in range(3))
    beyond, beaters = 0, collections.Counter()
    with Client(server.target, timeout=600) as kg:
        for _ in kg.add_triples(graph, chunk=10000):
            pass
        for h, r, t in test:
            scores = {e.entity: e.score for e in kg.rank_tails(h, r).ranked}
            reached = ball(h)
            beyond += t not in reached
            candidates = [e for e in scores if e != h and e not in known[(h, r)]]
            for i, key in enumerate((lambda e: scores[e], lambda e: (e in reached, scores[e]))):
                answer = key(t)
                rank = 1 + sum(key(e) > answer for e in candidates)
                rank += sum(key(e) == answer for e in candidates) / 2
                hits1[i] += rank <= 1
                hits10[i] += rank <= 10
                est50[i] += expected_hits_of_50(rank, len(candidates))
            beaters.update(e for e in candidates if e not in reached and scores[e] > scores[t])
    n = len(test)
    print(f"{n} tail queries, {beyond} answers beyond {args.hops} hops of the head")
    for i, name in enumerate(orders):
        print(f"{name:16s} Hits@1 {100 * hits1[i] / n:.2f}  Hits@10 {100 * hits10[i] / n:.2f}  "
              f"Hits@10 (50, NBFNet's estimator) {100 * est50[i] / n:.2f}")
    print("unreachable entities that outrank the answer most often (entity, queries):",
          beaters.most_common(5))
finally:
    server.stop()
    shutil.rmtree(workdir, ignore_errors=True)
