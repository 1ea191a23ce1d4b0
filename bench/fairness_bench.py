#!/usr/bin/env python3
"""Fairness between scorers and a ranking loop, with the scorers as one caller and as many
(docs/BENCHMARKS.md, "A pass answers many facts").

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
import os
import subprocess
import sys
import time
from pathlib import Path

from server_process import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GRAIL_SHARED_DIR", ROOT.parent / "shared"))
BIN = ROOT / "build" / "bin"
GRAPHS = {
    "fb_dense": SHARED / "data" / "FB15k-237_validtest" / "graph.txt",
    "wn18rr": SHARED / "data" / "WN18RR" / "train.txt",
}


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def client(target, *args, timeout=3600):
    out = subprocess.run([str(BIN / "grail-client"), "--target", target, "--json",
                          *[str(a) for a in args]], capture_output=True, text=True,
                         timeout=timeout)
    lines = out.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError(out.stderr)
    return json.loads(lines[-1])


def summary(result):
    latency = result["latency_ms"]
    return {"requests": result["requests"], "errors": result["errors"],
            "requests_per_second": round(result["requests_per_second"], 1),
            "p50_ms": round(latency["p50"], 1), "p99_ms": round(latency["p99"], 1)}


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
    model = Path(args.model)
    if args.model == "ultra":
        model = args.out / "ultra_3g.pt"
        if not model.exists():
            subprocess.run([str(BIN / "grail-tools"), "import-ultra", "--checkpoint",
                            str(SHARED / "models" / "ultra" / "ultra_3g.pth"), "--out",
                            str(model)], check=True)
    graph = GRAPHS[args.graph]
    queries = args.out / f"{args.graph}.queries.txt"
    with open(graph) as src, open(queries, "w") as dst:
        for line in src:
            head, _, tail = line.rstrip("\n").split("\t")
            if head != tail:  # a score needs two entities
                dst.write(line)
    store = args.out / f"{args.graph}.store"
    subprocess.run(["rm", "-rf", str(store)], check=True)
    # The pass cache off: every score pays for its pass, as a first call does, so the loaded
    # and idle runs cost the same whichever facts they draw.
    server = ServerProcess(BIN, model, store, "--pass-cache-bytes", 0, log=f"{store}.log")
    result = {"graph": args.graph, "model": str(args.model), "clients": args.clients,
              "rounds": []}
    try:
        client(server.target, "add", graph, "--chunk", 1000)
        for round_index in range(args.rounds):
            row = {}
            for connections in (1, args.clients):
                score = ["load", "--triples", queries, "--method", "score", "--concurrency",
                         args.clients, "--connections", connections, "--requests",
                         args.requests, "--warmup", 100, "--seed", 2 + round_index]
                idle = summary(client(server.target, *score))
                looper = subprocess.Popen(
                    [str(BIN / "grail-client"), "--target", server.target, "load", "--triples",
                     str(queries), "--method", "rank-tails", "--candidates-per-request", "0",
                     "--top-k", "10", "--concurrency", "1", "--requests", "1000000"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(2)
                loaded = summary(client(server.target, *score))
                looper.kill()
                looper.wait()
                row[f"connections_{connections}"] = {
                    "idle": idle, "loaded": loaded,
                    "p99_ratio": round(loaded["p99_ms"] / idle["p99_ms"], 2)}
            log(json.dumps(row))
            result["rounds"].append(row)
    finally:
        server.stop()
        subprocess.run(["rm", "-rf", str(store)], check=True)
    (args.out / f"{args.graph}.{Path(args.model).stem}.json").write_text(
        json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
