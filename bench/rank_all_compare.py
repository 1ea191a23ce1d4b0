#!/usr/bin/python3
"""RankTails over every entity, two grail-server builds on the same stores, one run.

For each store (a graph bulk-loaded or streamed into a data directory) and each of the two
binaries in turn: start the server on the store (the pass cache off, so that every call pays
its own pass), then `grail-client load` rank-tails, top_k 10, one client, --requests calls
drawn from the hub queries (the 20 entities of highest degree among the graph's first 20
facts' ends: the generator's largest hubs) and from 200 uniform ones (facts spread evenly
through the file), p50 / p99 / mean ms. The stores are only read.

    bench/rank_all_compare.py --model M.pt --bins OLD_BIN_DIR,NEW_BIN_DIR \\
        --case 1e6=STORE_DIR,TRIPLES [--case ...] [--requests 40] [--out out/rank_all_compare]

Prints a table and writes OUT/results.json. Each --bins entry is a directory holding a
grail-server (bench/server_process.py starts it): an older commit's, e.g. `git stash; ninja -C
build grail-server; mkdir /tmp/old; cp build/bin/grail-server /tmp/old/`.
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server_process import ServerProcess  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def query_files(triples, out_dir, name):
    hubs, uniform = out_dir / f"{name}.hub.tsv", out_dir / f"{name}.uniform.tsv"
    if hubs.exists() and uniform.exists():
        return hubs, uniform
    with open(triples) as f:
        first = [next(f).rstrip("\n").split("\t") for _ in range(20)]
    candidates = {e for h, _, t in first for e in (h, t)}
    degree = dict.fromkeys(candidates, 0)
    lines = 0
    with open(triples) as f:
        for line in f:
            lines += 1
            h, _, t = line.rstrip("\n").split("\t")
            if h in degree:
                degree[h] += 1
            if t in degree:
                degree[t] += 1
    top = sorted(degree, key=lambda e: (-degree[e], e))[:20]
    hubs.write_text("".join(f"{e}\tr{(i + 1) % 16}\tx\n" for i, e in enumerate(top)))
    step, written = max(1, lines // 200), 0
    with open(triples) as f, open(uniform, "w") as out:
        for i, line in enumerate(f):
            if (i + 1) % step == 7 % step and written < 200:
                out.write(line)
                written += 1
    return hubs, uniform


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--bins", required=True,
                        help="two directories holding a grail-server, comma-separated")
    parser.add_argument("--case", action="append", required=True, help="NAME=STORE_DIR,TRIPLES")
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--client", default=str(ROOT / "build" / "bin" / "grail-client"))
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "rank_all_compare")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    bins = args.bins.split(",")
    results = []
    for case in args.case:
        name, paths = case.split("=", 1)
        store, triples = paths.split(",")
        hubs, uniform = query_files(triples, args.out, name)
        for b, bin_dir in enumerate(bins):
            # The pass cache off: every call pays its own pass. The store is only read.
            with ServerProcess(bin_dir, args.model, store, "--pass-cache-bytes=0",
                               log=args.out / f"{name}.{b}.log", metrics=False) as server:
                for kind, queries in (("hub", hubs), ("uniform", uniform)):
                    out = subprocess.run(
                        [args.client, "--target", server.target, "--json", "--deadline-ms",
                         "60000", "load", "--triples", queries, "--method", "rank-tails",
                         "--candidates-per-request", "0", "--top-k", "10", "--concurrency", "1",
                         "--requests", str(args.requests), "--warmup", "2", "--seed", "1"],
                        capture_output=True, text=True, check=True)
                    latency = json.loads(out.stdout)["latency_ms"]
                    results.append({"case": name, "binary": bin_dir, "queries": kind,
                                    **{k: latency[k] for k in ("p50", "p99", "mean")}})
                    print(json.dumps(results[-1]), flush=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    print("\n| case | queries | " + " | ".join(f"{b} p50 / p99 ms" for b in bins)
          + " |")
    print("|---|---|" + "---:|" * len(bins))
    for case in dict.fromkeys(r["case"] for r in results):
        for kind in ("hub", "uniform"):
            cells = [f"{r['p50']:.0f} / {r['p99']:.0f}" for r in results
                     if r["case"] == case and r["queries"] == kind]
            print(f"| {case} | {kind} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
