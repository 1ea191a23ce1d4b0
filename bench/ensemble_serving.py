#!/usr/bin/env python3
"""What serving an ensemble archive costs beside serving each of its members
(docs/BENCHMARKS-log.md, "Ensembles").

For each archive (the members, then the ensemble) starts grail-server on a fresh store, streams
the graph in, and times, one call at a time, --calls RankTails over every entity (top 10) and
--calls ScoreTriplet of a stored fact, each on a head of the graph not asked before (so no call
reads a pass an earlier one cached: the rankings' heads and the scores' are apart), after --warmup calls of each. Prints one JSON line per
archive: the median and 90th percentile milliseconds of each call.

    bench/ensemble_serving.py --graph ../shared/data/fb237_v1_ind/train.txt \\
        --archives A.pt B.pt ENSEMBLE.pt [--calls 100] [--warmup 10]
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from server_process import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "build" / "python"))


def read_graph(path):
    facts = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        parts = line.split("\t") if "\t" in line else line.split()
        if len(parts) == 3:
            facts.append(tuple(parts))
    return facts


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(archive, facts, calls, warmup, bin_dir):
    from grail_kg import Client
    with tempfile.TemporaryDirectory(prefix="ensemble_serving_") as work:
        try:
            server = ServerProcess(bin_dir, archive, Path(work) / "store", log=Path(work) / "log")
        except RuntimeError:
            sys.stderr.write((Path(work) / "log").read_text(encoding="utf-8")[-2000:])
            raise
        try:
            client = Client(server.target)
            for _ in client.add_triples(facts):
                pass
            # One fact per distinct head, in file order: each call a query not asked before.
            by_head = {}
            for f in facts:
                by_head.setdefault(f[0], f)
            heads = list(by_head.values())
            n = warmup + calls
            if len(heads) < 2 * n:
                raise SystemExit(f"{len(heads)} heads: too few for {n} rankings and {n} scores")
            rank, score = [], []
            for i in range(n):
                head, relation, _ = heads[i]
                start = time.perf_counter()
                client.rank_tails(head, relation, top_k=10)
                middle = time.perf_counter()
                client.score(*heads[n + i])
                end = time.perf_counter()
                if i >= warmup:
                    rank.append(1000 * (middle - start))
                    score.append(1000 * (end - middle))
        finally:
            server.stop()
    return {"archive": str(archive), "calls": len(rank),
            "rank_all_p50_ms": round(statistics.median(rank), 2),
            "rank_all_p90_ms": round(percentile(rank, 0.9), 2),
            "score_p50_ms": round(statistics.median(score), 2),
            "score_p90_ms": round(percentile(score, 0.9), 2)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--graph", required=True)
    parser.add_argument("--archives", nargs="+", required=True)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--bin-dir", default=str(ROOT / "build" / "bin"))
    args = parser.parse_args()
    facts = read_graph(args.graph)
    for archive in args.archives:
        print(json.dumps(measure(archive, facts, args.calls, args.warmup, args.bin_dir)),
              flush=True)


if __name__ == "__main__":
    main()
