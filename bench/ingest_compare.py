#!/usr/bin/env python3
"""Streaming ingest over gRPC, two server builds on the same store, in one run.

For each build in turn (interleaved, --runs times): copies the base store (a bulk-loaded
graph), starts that build's grail-server on the copy with the model, streams the triple file
with `grail-client add --chunk N --window W`, and records the client's facts per second and
the server's resident memory once serving and after the stream. The
stream is new facts, so every run adds the same facts to the same graph.

    bench/ingest_compare.py --bins /tmp/old/bin,build/bin --model out/scale/models/synth_path.pt \\
        --base-store /tmp/scale/store7 --stream /tmp/scale/tail7.txt --chunk 10000 --window 4

Prints one JSON line per run and a summary line (median facts/s per build and the ratio).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_process import ServerProcess  # noqa: E402


def rss_megabytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024)
    return None


def ingest(bin_dir, model, base_store, stream, chunk, window, work, flags, env=None):
    store = os.path.join(work, "store")
    shutil.rmtree(store, ignore_errors=True)
    shutil.copytree(base_store, store)
    log = os.path.join(work, "server.log")
    with ServerProcess(bin_dir, model, store, *flags, log=log, metrics=False, env=env) as server:
        rss_start_mb = rss_megabytes(server.proc.pid)
        started = time.monotonic()
        out = subprocess.run(
            [os.path.join(bin_dir, "grail-client"), "--target", server.target, "--json", "add",
             stream, "--chunk", str(chunk), "--window", str(window)],
            check=True, capture_output=True, text=True)
        wall = time.monotonic() - started
        summary = json.loads(out.stdout.strip().splitlines()[-1])
        start_s = server.seconds_to_ready
        rss_mb = rss_megabytes(server.proc.pid)
    shutil.rmtree(store, ignore_errors=True)
    return {"bin": bin_dir, "facts_added": summary.get("facts_added"),
            "facts_per_second": round(summary.get("facts_per_second", 0)),
            "wall_s": round(wall, 1), "start_s": round(start_s, 1), "rss_start_mb": rss_start_mb,
            "rss_mb": rss_mb}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bins", required=True, help="two bin directories, old,new")
    parser.add_argument("--model", required=True)
    parser.add_argument("--base-store", required=True)
    parser.add_argument("--stream", required=True)
    parser.add_argument("--chunk", type=int, default=10000)
    parser.add_argument("--window", type=int, default=4)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--server-flags", default="", help="comma-separated, for both builds")
    parser.add_argument("--work", default="", help="where the copies go (default: a temp dir)")
    args = parser.parse_args()
    bins = args.bins.split(",")
    flags = [f for f in args.server_flags.split(",") if f]
    work = args.work or tempfile.mkdtemp(prefix="ingest_compare.")
    rates = {b: [] for b in bins}
    for run in range(args.runs):
        for b in bins:
            row = ingest(b, args.model, args.base_store, args.stream, args.chunk, args.window,
                         work, flags)
            row["run"] = run
            rates[b].append(row["facts_per_second"])
            print(json.dumps(row), flush=True)
    medians = {b: statistics.median(r) for b, r in rates.items()}
    print(json.dumps({"chunk": args.chunk, "window": args.window, "median_facts_per_second":
                      medians, "ratio": round(medians[bins[-1]] / max(1, medians[bins[0]]), 2)}),
          flush=True)


if __name__ == "__main__":
    main()
