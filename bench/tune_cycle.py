#!/usr/bin/env python3
"""One grail-tune cycle on each inductive split's _ind graph, with the served model's online
accuracy before and after it (docs/BENCHMARKS-log.md, "Fine-tuning on the live graph").

For each split: grail-server serving a copy of ARCHIVE (ULTRA zero-shot) loads the split's _ind
graph; restarted with --online-eval-rate 1, it takes the split's valid and test facts through
AddTriples, each chunk removed again once ranked (bench/online_accuracy.py --remove-after), so
every fact is ranked against every entity on the _ind graph alone: the zero-shot online MRR.
Then grail-tune runs one cycle against it (the graph exported holds no valid or test fact;
the newest facts of the _ind graph judge) while `grail-client load` scores facts on it, and
the valid and test facts go through again, ranked by whatever the server serves then: the
online MRR after the cycle. grail-eval gives the served archive's offline full MRR on the same
facts, before and after. With --worse, a second cycle runs with a learning rate that wrecks
the challenger (--worse-lr), and must be refused.

Prints one JSON line per split: both online figures, both offline ones, the cycle's report
(decision, judge MRRs, split, seconds), the load's requests and errors during the cycle, and
the wrecked cycle's decision.

    bench/tune_cycle.py --archive out/ultra/ultra_4g.pt [--splits "fb237_v1 WN18RR_v1"]
        [--time-budget 20m] [--threads 2] [--tune-flags "--epochs 5"] [--worse] [--out DIR]
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from online_accuracy import offline_ranking, read_facts, scrape, stream_ranked
from server_process import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "build" / "python"))


def online_mrr(server, version):
    metrics = scrape(server.metrics_port)
    label = f'{{model_version="{version}"}}'
    return (metrics.get(f"grail_online_mrr{label}"), metrics.get(f"grail_online_hits_at_10{label}"),
            int(metrics.get(f"grail_online_window_ranks{label}", 0)))


def offline(bin_dir, archive, graph, facts_file, threads):
    result = offline_ranking(bin_dir, archive, graph, facts_file, threads)
    return {"full_mrr": result["full_mrr"], "full_hits_at_10": result["full_hits_at_10"]}


def tune(bin_dir, target, work, flags, log):
    run = subprocess.run([str(bin_dir / "grail-tune"), "--target", target, "--work-dir",
                          str(work), *flags], capture_output=True, text=True)
    Path(log).write_text(run.stderr)
    report = json.loads(run.stdout) if run.stdout.strip() else {}
    return run.returncode, report


def measure(split, archive, data, args, bin_dir, work):
    ind = data / f"{split}_ind"
    graph = read_facts(ind / "train.txt")
    test = read_facts(ind / "valid.txt", ind / "test.txt")
    test_file = work / f"{split}.test.txt"
    test_file.write_text("".join("\t".join(f) + "\n" for f in test), encoding="utf-8")
    from grail_kg import Client, GrailError
    model = work / f"{split}.model.pt"
    shutil.copyfile(archive, model)
    store = work / f"{split}.store"
    with ServerProcess(bin_dir, model, store, log=work / f"{split}.load.log") as server:
        for _ in Client(server.target).add_triples(graph):
            pass
    row = {"split": split, "archive": str(archive), "graph_facts": len(graph),
           "facts": len(test), "chunk": args.chunk, "time_budget": args.time_budget,
           "tune_flags": args.tune_flags}
    with ServerProcess(bin_dir, model, store, "--online-eval-rate", "1",
                       "--online-eval-cpu-share", "1", "--online-eval-window", "10000000",
                       log=work / f"{split}.online.log") as server:
        client = Client(server.target)
        version_before = scrape_version(server)
        seconds = stream_ranked(client, server, test, args.chunk, remove_after=True)
        row["stream_seconds_before"] = round(seconds, 1)
        mrr, hits, n = online_mrr(server, version_before)
        row["online_before"] = {"mrr": mrr, "hits_at_10": hits, "ranks": n}
        row["offline_before"] = offline(bin_dir, model, ind / "train.txt", test_file, args.threads)

        # The cycle, while a caller scores facts of the graph, about 50 a second.
        stop = threading.Event()
        counts = {"ok": 0, "failed": 0, "errors": {}}

        def score_loop():
            caller = Client(server.target, timeout=60)
            i = 0
            while not stop.is_set():
                h, r, t = graph[i % len(graph)]
                i += 1
                try:
                    caller.score(h, r, t)
                    counts["ok"] += 1
                except GrailError as e:
                    counts["failed"] += 1
                    counts["errors"][e.code.name] = counts["errors"].get(e.code.name, 0) + 1
                time.sleep(0.02)  # a steady load, not one that starves the cycle of its cores

        caller = threading.Thread(target=score_loop)
        caller.start()
        code, report = tune(bin_dir, server.target, work / f"{split}.tune",
                            ["--time-budget", args.time_budget, "--threads", str(args.threads),
                             "--report", str(work / f"{split}.tune.json"),
                             *args.tune_flags.split()],
                            work / f"{split}.tune.log")
        stop.set()
        caller.join()
        row["tune_exit"] = code
        row["tune"] = {k: report.get(k) for k in ("decision", "export", "judge", "recipe",
                                                   "reloaded", "error")}
        row["scores_during_tune"] = counts

        version_after = scrape_version(server)
        row["served_after"] = version_after
        seconds = stream_ranked(client, server, test, args.chunk, remove_after=True)
        row["stream_seconds_after"] = round(seconds, 1)
        mrr, hits, n = online_mrr(server, version_after)
        row["online_after"] = {"mrr": mrr, "hits_at_10": hits, "ranks": n}
        row["offline_after"] = offline(bin_dir, model, ind / "train.txt", test_file, args.threads)

        if args.worse:
            code, report = tune(bin_dir, server.target, work / f"{split}.worse",
                                ["--time-budget", args.time_budget, "--threads",
                                 str(args.threads), "--lr", str(args.worse_lr)],
                                work / f"{split}.worse.log")
            row["worse"] = {"lr": args.worse_lr, "exit": code, "decision": report.get("decision"),
                            "judge": report.get("judge")}
            row["served_after_worse"] = scrape_version(server)
    return row


def scrape_version(server):
    from grail_kg import Client
    return Client(server.target).stats()["model"]["version"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", required=True)
    parser.add_argument("--splits", default="fb237_v1 WN18RR_v1")
    parser.add_argument("--chunk", type=int, default=16)
    parser.add_argument("--time-budget", default="20m")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tune-flags", default="", help="more grail-tune flags, e.g. --epochs 5")
    parser.add_argument("--worse", action="store_true")
    parser.add_argument("--worse-lr", type=float, default=1.0)
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    bin_dir = ROOT / "build" / "bin"
    with tempfile.TemporaryDirectory(prefix="tune_cycle_") as tmp:
        work = Path(args.out) if args.out else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for split in args.splits.split():
            print(json.dumps(measure(split, Path(args.archive).resolve(), Path(args.data), args,
                                     bin_dir, work)), flush=True)


if __name__ == "__main__":
    main()
