#!/usr/bin/env python3
"""Fairness between scorers and a ranking loop, with the scorers as one caller and as many
(docs/BENCHMARKS-log.md, "A pass answers many facts").

Starts grail-server on a graph, then measures ScoreTriplet at --clients concurrent callers
(grail-client load; facts of the graph, heads uniform), idle and while one more client loops
RankTails over every entity, twice each: all scorers on one connection (one caller, one share
of the engine against the ranking loop's one) and each scorer on its own connection
(--connections: as many callers). Prints, and writes to out/fairness/<graph>.<model>.json, the
p50/p99 of each and the loaded/idle p99 ratio for both.

    bench/fairness_bench.py --graph wn18rr --model ultra --rounds 3
--model ultra imports ULTRA's released ultra_3g; any other value is an archive to serve.
"""

import argparse
import json
import subprocess
import time
from pathlib import Path

from score_throughput import (BIN, GRAPHS, ROOT, Server, graph_file, log, score_queries, summary,
                              ultra_archive)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graph", default="wn18rr", choices=sorted(GRAPHS))
    parser.add_argument("--model", default="ultra")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=1600)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "fairness")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    model = ultra_archive(args.out) if args.model == "ultra" else Path(args.model)
    graph = graph_file(args.graph)
    queries = score_queries(graph, args.out / f"{args.graph}.queries.txt")
    # The pass cache off: every score pays for its pass, as a first call does, so the loaded
    # and idle runs cost the same whichever facts they draw.
    server = Server(model, args.out / f"{args.graph}.store", ["--pass-cache-bytes", 0])
    result = {"graph": args.graph, "model": str(args.model), "clients": args.clients,
              "rounds": []}
    try:
        server.client("add", graph, "--chunk", 1000, timeout=3600)
        for round_index in range(args.rounds):
            row = {}
            for connections in (1, args.clients):
                score = ["load", "--triples", queries, "--method", "score", "--concurrency",
                         args.clients, "--connections", connections, "--requests",
                         args.requests, "--warmup", 100, "--seed", 2 + round_index]
                idle = summary(server.client(*score, timeout=3600))
                looper = subprocess.Popen(
                    [str(BIN / "grail-client"), "--target", f"127.0.0.1:{server.port}", "load",
                     "--triples", str(queries), "--method", "rank-tails",
                     "--candidates-per-request", "0", "--top-k", "10", "--concurrency", "1",
                     "--requests", "1000000"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(2)
                loaded = summary(server.client(*score, timeout=3600))
                looper.kill()
                looper.wait()
                row[f"connections_{connections}"] = {
                    "idle": idle, "loaded": loaded,
                    "p99_ratio": round(loaded["p99_ms"] / idle["p99_ms"], 2)}
            log(json.dumps(row))
            result["rounds"].append(row)
    finally:
        server.stop()
    (args.out / f"{args.graph}.{Path(args.model).stem}.json").write_text(
        json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
