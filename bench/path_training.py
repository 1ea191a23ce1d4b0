#!/usr/bin/env python3
"""Training step time and peak RSS of the path family: this build against another (the
product before the fused operator), interleaved in one run (docs/BENCHMARKS-log.md, "The fused
operator").

For each split, batch size and build: grail-train in the README's configuration for the
split's family (FB: NBFNet's FB configuration, PNA without the reach mask; WN: the
recommended WordNet one), with a checkpoint after every step. The trainer writes the epoch's
elapsed seconds into each checkpoint's state.json; the step time is the mean over the steps
after the first (each includes one checkpoint write, ~40 MB, for both builds alike). Peak RSS
is the process's VmHWM. A run stops after --steps steps, at --seconds, or when its RSS passes
--rss-cap-gb (reported as over the cap, so a 24 GB machine survives a configuration that does
not fit).

  bench/path_training.py --after build/bin --before /path/to/old/bin \\
      [--splits "fb237_v1 WN18RR_v1"] [--batches "16 32 64"] [--steps 4] [--out out/path-training]

Prints one JSON line per run and a Markdown table at the end.
"""
import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CONFIGS = {
    "fb": ["--pna", "--reach-mask=false", "--adversarial-temperature", "0.5"],
    "wn": ["--free-relations", "--remove-one-hop=false", "--reach-mask=false", "--reach-feature",
           "--detached-walks", "8", "--adversarial-temperature", "1"],
}


def peak_rss_kb(pid):
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run(bin_dir, split, batch, args, work):
    data = Path(args.data) / split
    family = "fb" if split.startswith("fb") else "wn"
    checkpoints = Path(work) / "checkpoints"
    shutil.rmtree(checkpoints, ignore_errors=True)
    command = [str(Path(bin_dir) / "grail-train"), "--family", "path",
               "--train", str(data / "train.txt"), "--valid", str(data / "valid.txt"),
               "--out", str(Path(work) / "model.pt"), "--batch-size", str(batch), "--epochs", "1",
               "--seed", "0", "--threads", "2", "--noprogress", "--checkpoint-dir",
               str(checkpoints), "--checkpoint-every-steps", "1", *CONFIGS[family]]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    start = time.monotonic()
    seen = []  # (steps, seconds) of each checkpoint
    rss = 0
    outcome = "ok"
    while True:
        rss = max(rss, peak_rss_kb(process.pid))
        try:
            state = json.loads((checkpoints / "state.json").read_text())
            within = state.get("within", {})
            point = (within.get("steps", 0), within.get("seconds", 0.0))
            if point[0] and (not seen or point[0] > seen[-1][0]):
                seen.append(point)
        except (OSError, ValueError):
            pass
        if len(seen) > args.steps:
            break
        if process.poll() is not None:
            outcome = "exited" if seen else f"failed: {process.stderr.read().decode()[-300:]}"
            break
        if rss > args.rss_cap_gb * 1024 * 1024:
            outcome = "over the RSS cap"
            break
        if time.monotonic() - start > args.seconds:
            outcome = "over the time limit"
            break
        time.sleep(0.05)
    if process.poll() is None:
        process.kill()
        process.wait()
    result = {"split": split, "batch": batch, "build": bin_dir, "outcome": outcome,
              "peak_rss_gb": round(rss / 1024 / 1024, 2), "steps_timed": max(0, len(seen) - 1)}
    if len(seen) >= 2:
        (s0, t0), (s1, t1) = seen[0], seen[-1]
        result["seconds_per_step"] = round((t1 - t0) / (s1 - s0), 3)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--after", default="build/bin")
    parser.add_argument("--before", default="")
    parser.add_argument("--data", default=os.environ.get("GRAIL_DATA_DIR", "../shared/data"))
    parser.add_argument("--splits", default="fb237_v1 fb237_v2 fb237_v3 fb237_v4 "
                        "WN18RR_v1 WN18RR_v2 WN18RR_v3 WN18RR_v4")
    parser.add_argument("--batches", default="16 32 64")
    parser.add_argument("--before-batches", default="",
                        help="batches to run the old build at (default: all of --batches)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=900)
    parser.add_argument("--rss-cap-gb", type=float, default=20)
    parser.add_argument("--out", default="out/path-training")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    before_batches = set((args.before_batches or args.batches).split())
    results = []
    with tempfile.TemporaryDirectory() as work:
        for split in args.splits.split():
            for batch in args.batches.split():
                builds = [args.after] + ([args.before] if args.before and batch in
                                         before_batches else [])
                for bin_dir in builds:
                    result = run(bin_dir, split, int(batch), args, work)
                    results.append(result)
                    print(json.dumps(result), flush=True)
    with open(Path(args.out) / "results.jsonl", "w") as out:
        for r in results:
            out.write(json.dumps(r) + "\n")
    print("\n| split | batch | build | s/step | peak RSS GB | steps timed | outcome |")
    print("|---|---:|---|---:|---:|---:|---|")
    for r in results:
        print(f"| {r['split']} | {r['batch']} | {r['build']} | {r.get('seconds_per_step', '—')} | "
              f"{r['peak_rss_gb']} | {r['steps_timed']} | {r['outcome']} |")


if __name__ == "__main__":
    main()
