#!/usr/bin/env python3
"""The served model's online accuracy (grail-server --online-eval-rate) beside its offline
figure, on the inductive splits (docs/BENCHMARKS-log.md, "Online accuracy").

For each split: grail-server serving ARCHIVE loads the split's _ind graph (online evaluation
off), then restarts on that store with --online-eval-rate 1 and takes the split's valid and test
facts through AddTriples, --chunk facts a chunk, each chunk sent once the previous one's
rankings are counted; each fact is ranked against every entity, filtered, both directions, on
the graph as it arrives (earlier valid and test facts included: prequential). Prints one JSON
line per split: the online MRR and Hits@10 from /metrics, the ranks and skips counted, and
grail-eval's offline full MRR and Hits@10 of the same archive on the same facts (the
benchmarks' protocol: none of them in the graph, all of them filtered). With --remove-after,
each chunk is removed again once ranked, so every fact is ranked on the _ind graph alone, as
offline; what still differs is the filter (offline leaves out every valid and test answer of a
query, online only those stored).

    bench/online_accuracy.py --archive out/ultra/ultra_4g.pt [--splits "fb237_v1 WN18RR_v1"]
        [--chunk 16] [--remove-after] [--out DIR]
"""

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from server_process import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "build" / "python"))


def read_facts(*paths):
    facts = []
    for path in paths:
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            parts = line.split("\t") if "\t" in line else line.split()
            if len(parts) == 3:
                facts.append(tuple(parts))
    return facts


def scrape(port):
    """{series with labels: value} of the server's /metrics."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            out[series] = float(value)
    return out


def online_counts(metrics):
    """(queries ranked, queries skipped by reason) so far."""
    ranked = sum(v for k, v in metrics.items() if k.startswith("grail_online_rank_count"))
    skipped = {re.search(r'reason="([^"]+)"', k).group(1): v for k, v in metrics.items()
               if k.startswith("grail_online_eval_skipped_total")}
    return ranked, skipped


def stream_ranked(client, server, facts, chunk, remove_after):
    """Adds `facts` through `client`, `chunk` a chunk, each sent once the previous one's
    rankings are counted in `server`'s /metrics (removed again then, with `remove_after`);
    returns the seconds it took."""
    start = time.monotonic()
    ranked, skipped = online_counts(scrape(server.metrics_port))
    done_before = ranked + sum(skipped.values())
    sent = 0
    for i in range(0, len(facts), chunk):
        part = facts[i:i + chunk]
        for _ in client.add_triples(part, chunk=chunk):
            pass
        sent += len(part)
        while True:  # the chunk's rankings end after its acknowledgement
            ranked, skipped = online_counts(scrape(server.metrics_port))
            if ranked + sum(skipped.values()) - done_before >= 2 * sent:
                break
            time.sleep(0.01)
        if remove_after:
            for _ in client.remove_triples(part, chunk=chunk):
                pass
    return time.monotonic() - start


def offline_ranking(bin_dir, archive, graph, facts_file, threads=2):
    """grail-eval's full ranking of `archive` on `facts_file` over `graph`, the facts filtered:
    its JSON result."""
    out = subprocess.run(
        [str(bin_dir / "grail-eval"), "--model", str(archive), "--graph", str(graph), "--test",
         str(facts_file), "--filter", str(facts_file), "--threads", str(threads)],
        capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    return json.loads(out)


def measure(split, archive, data, chunk, bin_dir, work, remove_after):
    ind = data / f"{split}_ind"
    graph = read_facts(ind / "train.txt")
    test = read_facts(ind / "valid.txt", ind / "test.txt")
    from grail_kg import Client
    store = work / f"{split}.store"
    with ServerProcess(bin_dir, archive, store, log=work / f"{split}.load.log") as server:
        for _ in Client(server.target).add_triples(graph):
            pass
    with ServerProcess(bin_dir, archive, store, "--online-eval-rate", "1",
                       "--online-eval-cpu-share", "1", "--online-eval-window", "10000000",
                       log=work / f"{split}.online.log") as server:
        seconds = stream_ranked(Client(server.target), server, test, chunk, remove_after)
        metrics = scrape(server.metrics_port)
    ranked, skipped = online_counts(metrics)
    mrr = [v for k, v in metrics.items() if k.startswith("grail_online_mrr")]
    hits = [v for k, v in metrics.items() if k.startswith("grail_online_hits_at_10")]
    merged = work / f"{split}.test.txt"
    merged.write_text("".join("\t".join(f) + "\n" for f in test), encoding="utf-8")
    offline = offline_ranking(bin_dir, archive, ind / "train.txt", merged)
    return {"split": split, "archive": str(archive), "facts": len(test), "chunk": chunk,
            "remove_after": remove_after,
            "online_mrr": round(mrr[0], 6) if mrr else None,
            "online_hits_at_10": round(hits[0], 6) if hits else None,
            "ranked": int(ranked), "skipped": {k: int(v) for k, v in skipped.items() if v},
            "seconds": round(seconds, 1),
            "offline_full_mrr": offline["full_mrr"],
            "offline_full_hits_at_10": offline["full_hits_at_10"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", required=True)
    parser.add_argument("--splits", default="fb237_v1 WN18RR_v1")
    parser.add_argument("--chunk", type=int, default=16)
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--remove-after", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    bin_dir = ROOT / "build" / "bin"
    with tempfile.TemporaryDirectory(prefix="online_accuracy_") as tmp:
        work = Path(args.out) if args.out else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for split in args.splits.split():
            print(json.dumps(measure(split, Path(args.archive).resolve(), Path(args.data),
                                     args.chunk, bin_dir, work, args.remove_after)),
                  flush=True)


if __name__ == "__main__":
    main()
