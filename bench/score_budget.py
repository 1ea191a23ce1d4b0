#!/usr/bin/env python3
"""What a score budget below the rankings' costs in score accuracy (docs/BENCHMARKS-log.md,
"A pass answers many facts": --score-max-subgraph-nodes).

For each visible inductive split, serves its `_ind` graph with ULTRA (the released ultra_3g,
imported; no training) and scores each test fact and one negative per fact (its tail replaced
by an entity of the graph drawn at random, never a known fact) one ScoreTriplet call each, as
an application checking single facts would. Once with the server's budget (the graphs fit it:
exact) and once per score budget, given as shares of the graph's entities. Per split and
budget it reports AUC-PR of positives against negatives (GraIL's classification metric), the
share of (positive, negative) pairs ordered as the exact scores order them, the mean absolute
change of a score, the share of scores that changed, and the mean entities a pass visited.

    bench/score_budget.py --budgets 0.05,0.1,0.25
Results: out/score_budget/results.jsonl, one object per split and budget.
"""

import argparse
import concurrent.futures
import json
import random
import subprocess
import sys
import threading
from pathlib import Path

from score_throughput import BIN, ROOT, SHARED, log, ultra_archive
from server_process import ServerProcess

sys.path.insert(0, str(ROOT / "build" / "python"))
from grail_kg import Client  # noqa: E402  (generated at build time)

SPLITS = [f"{family}_v{v}" for family in ("WN18RR", "fb237") for v in range(1, 5)]


def read(path):
    return [tuple(line.rstrip("\n").split("\t")) for line in open(path) if line.strip()]


def auc_pr(positives, negatives):
    """Average precision of positives ranked above negatives by score (ties: pessimistic)."""
    scored = sorted([(s, 1) for s in positives] + [(s, 0) for s in negatives],
                    key=lambda x: (-x[0], x[1]))
    hits, total = 0, 0.0
    for i, (_, label) in enumerate(scored, 1):
        if label:
            hits += 1
            total += hits / i
    return total / max(1, len(positives))


def score_all(target, facts, threads):
    """Each fact on its own ScoreTriplet call, `threads` at a time: (score, pruned, nodes)."""
    local = threading.local()

    def one(fact):
        if not hasattr(local, "client"):
            local.client = Client(target)
        s = local.client.score(*fact)
        return s.score, s.pruned, s.subgraph_nodes

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, facts))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--splits", default=",".join(SPLITS))
    parser.add_argument("--budgets", default="0.05,0.1,0.25",
                        help="score budgets as shares of the graph's entities")
    parser.add_argument("--threads", type=int, default=8, help="concurrent ScoreTriplet calls")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "score_budget")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    model = ultra_archive(args.out)
    results = open(args.out / "results.jsonl", "a")
    for split in args.splits.split(","):
        data = SHARED / "data" / f"{split}_ind"
        graph = read(data / "train.txt")
        entities = sorted({x for h, _, t in graph for x in (h, t)})
        known = set(graph) | set(read(data / "valid.txt")) | set(read(data / "test.txt"))
        present = set(entities)
        tests = [f for f in read(data / "test.txt") if f[0] in present and f[2] in present
                 and f[0] != f[2]]
        rng = random.Random(args.seed)
        negatives = []
        for h, r, t in tests:
            while True:
                c = rng.choice(entities)
                if c != h and (h, r, c) not in known:
                    negatives.append((h, r, c))
                    break
        exact = None
        for share in [0.0] + [float(b) for b in args.budgets.split(",")]:
            nodes = max(2, round(share * len(entities))) if share else 0
            store = args.out / f"{split}.store"
            subprocess.run(["rm", "-rf", str(store)], check=True)
            flags = ["--score-max-subgraph-nodes", nodes] if nodes else []
            server = ServerProcess(BIN, model, store, *flags, log=f"{store}.log")
            try:
                subprocess.run([str(BIN / "grail-client"), "--target", server.target, "add",
                                str(data / "train.txt")], check=True, capture_output=True)
                scored = score_all(server.target, tests + negatives, args.threads)
            finally:
                server.stop()
                subprocess.run(["rm", "-rf", str(store)], check=True)
            scores = [s for s, _, _ in scored]
            pos, neg = scores[:len(tests)], scores[len(tests):]
            row = {"split": split, "entities": len(entities), "facts": len(tests),
                   "budget_share": share, "score_max_subgraph_nodes": nodes,
                   "auc_pr": round(auc_pr(pos, neg), 4),
                   "pruned_share": round(sum(p for _, p, _ in scored) / len(scored), 4),
                   "mean_nodes": round(sum(n for _, _, n in scored) / len(scored), 1)}
            if exact is None:
                exact = scores
            else:
                n = len(tests)
                row["pairs_ordered_as_exact"] = round(sum(
                    (pos[i] > neg[i]) == (exact[i] > exact[n + i]) for i in range(n)) / n, 4)
                row["mean_abs_change"] = round(
                    sum(abs(a - b) for a, b in zip(scores, exact)) / len(scores), 4)
                row["changed_share"] = round(
                    sum(abs(a - b) > 1e-4 for a, b in zip(scores, exact)) / len(scores), 4)
            log(json.dumps(row))
            results.write(json.dumps(row) + "\n")
            results.flush()


if __name__ == "__main__":
    main()
