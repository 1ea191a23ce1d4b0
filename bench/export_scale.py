#!/usr/bin/env python3
"""Time and memory of an export and of a tune cycle on a large graph (docs/BENCHMARKS-log.md,
"Fine-tuning on the live graph").

A `grail-tools synth` power-law graph (--entities, 5 facts per entity, 16 relations, seed 1, as
bench/million_ranking.py's) is streamed into a fresh grail-server serving ARCHIVE. Then:
`grail-client export` of the whole graph, with the server's resident memory sampled every
50 ms from /proc (before, peak during, after) and the client's peak; an incremental export
after one more chunk; and `grail-tune --dry-run` (judge only, nothing promoted) with
--time-budget, under an address-space limit (--tune-memory-gb) so that a step too large for
the machine fails as an error rather than take the machine down. Prints one JSON object.

    bench/export_scale.py --archive out/ultra/ultra_4g.pt [--entities 1000000]
        [--time-budget 5m] [--tune-memory-gb 16] [--out DIR]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from server_process import ServerProcess

ROOT = Path(__file__).resolve().parents[1]


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class RssSampler:
    """The peak of a process's resident memory while it runs, sampled every 50 ms."""

    def __init__(self, pid):
        self.pid, self.peak, self._stop = pid, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
            except OSError:  # it has exited
                return
            time.sleep(0.05)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return self.peak


def run_measured(argv, limit_bytes=None):
    """(exit status, stdout, stderr, seconds, peak RSS of the child in MB, sampled)."""
    def limit():
        if limit_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=limit)
    sampler = RssSampler(proc.pid)
    out, err = proc.communicate()
    peak = sampler.stop()
    return proc.returncode, out, err, time.monotonic() - start, peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", required=True)
    parser.add_argument("--entities", type=int, default=1000000)
    parser.add_argument("--time-budget", default="5m")
    parser.add_argument("--tune-memory-gb", type=float, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    bin_dir = ROOT / "build" / "bin"
    with tempfile.TemporaryDirectory(prefix="export_scale_") as tmp:
        work = Path(args.out) if args.out else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        graph = work / "synth"
        if not (graph / "triples.txt").exists():
            subprocess.run([str(bin_dir / "grail-tools"), "synth", "--out", str(graph),
                            "--entities", str(args.entities), "--facts", str(5 * args.entities),
                            "--relations", "16", "--seed", "1"], check=True,
                           capture_output=True)
        model = work / "model.pt"
        model.write_bytes(Path(args.archive).read_bytes())
        row = {"entities": args.entities, "archive": args.archive}
        with ServerProcess(bin_dir, model, work / "store", log=work / "server.log") as server:
            client = [str(bin_dir / "grail-client"), "--target", server.target]
            start = time.monotonic()
            subprocess.run([*client, "add", str(graph / "triples.txt"), "--chunk", "10000"],
                           check=True, capture_output=True)
            row["ingest_seconds"] = round(time.monotonic() - start, 1)
            row["server_rss_mb_before_export"] = round(rss_mb(server.proc.pid))
            sampler = RssSampler(server.proc.pid)
            code, out, err, seconds, client_peak = run_measured(
                [*client, "--json", "export", str(work / "export.tsv")])
            row["server_rss_mb_peak_during_export"] = round(sampler.stop())
            row["server_rss_mb_after_export"] = round(rss_mb(server.proc.pid))
            if code != 0:
                raise SystemExit(f"export failed: {err}")
            exported = json.loads(out)
            row["export"] = {"facts": exported["facts"], "pages": exported["pages"],
                             "seconds": round(exported["seconds"], 2),
                             "facts_per_second": round(exported["facts_per_second"]),
                             "client_peak_rss_mb": round(client_peak),
                             "file_mb": round(os.path.getsize(work / "export.tsv") / 2**20)}
            # One more chunk, and the export of what it added.
            extra = work / "extra.tsv"
            extra.write_text("".join(f"fresh{i}\tr0\tn{i}\n" for i in range(1000)))
            subprocess.run([*client, "add", str(extra)], check=True, capture_output=True)
            code, out, err, seconds, _ = run_measured(
                [*client, "--json", "export", str(work / "delta.tsv"), "--since-sequence",
                 str(exported["graph_sequence"])])
            delta = json.loads(out)
            row["incremental_export"] = {"facts": delta["facts"],
                                         "seconds": round(delta["seconds"], 3)}

            code, out, err, seconds, tune_peak = run_measured(
                [str(bin_dir / "grail-tune"), "--target", server.target, "--work-dir",
                 str(work / "tune"), "--time-budget", args.time_budget, "--threads",
                 str(args.threads), "--dry-run"],
                limit_bytes=int(args.tune_memory_gb * 2**30))
            report = json.loads(out) if out.strip() else {}
            row["tune"] = {"exit": code, "seconds": round(seconds, 1),
                           "peak_rss_mb": round(tune_peak),
                           "memory_limit_gb": args.tune_memory_gb,
                           "decision": report.get("decision"), "judge": report.get("judge"),
                           "error": report.get("error"), "stderr_tail": err[-600:]}
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
