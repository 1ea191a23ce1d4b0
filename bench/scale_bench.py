#!/usr/bin/env python3
"""Serving at live-graph scale (docs/BENCHMARKS-log.md, "Serving at scale").

For each graph, starts grail-server (from --bin) on a fresh data directory, streams the graph
in with AddTriples, and measures with grail-client's load generator:
  * ingest facts/s, server RSS after ingest;
  * RankTails over every entity (top_k 10), one client: p50/p99 and outcomes;
  * server RSS after the first such ranking and after --rss-calls of them;
  * ScoreTriplet at 16 clients, idle and while 1 and 4 clients loop rank-all (p50/p99).
Then two hostile cases: one ranking over every entity of a complete bipartite K(140,140)
(peak RSS, time), and 800 concurrent rankings over every entity of WN18RR_v4_ind's graph
(peak RSS and threads while they run, RSS after they end).

Run it once per build to compare, e.g. the build before a change and after:
    bench/scale_bench.py --bin /path/to/old/bin --label before
    bench/scale_bench.py --bin build/bin --label after
    bench/scale_table.py out/scale before after
Results: out/scale/<label>/<case>.json (a case already measured is skipped; --force redoes it).

Graphs: wordnet (WordNet 3.0 via grail-tools wordnet, 112k entities, 218k facts), wn18rr
(../shared/data/WN18RR/train.txt, 41k / 87k), fb_dense (FB15k-237 valid+test,
../shared/data/FB15k-237_validtest/graph.txt, 12k / 38k), synth1m (grail-tools synth, 1M
entities / 5M facts, seed 1). Models (trained once into out/scale/models/, seed 0): WordNet
graphs use a model trained on WN18RR/train.txt (2 epochs); fb_dense one trained on fb237_v1
(4 epochs; the graph's relations it does not know are stored and ignored,
--allow-unknown-relations); synth1m one trained on a 20k-entity synthetic graph of the same
generator (seed 2, 1 epoch) with a per-hop cap of 50, as a graph with 10^5-edge hubs needs.
Queries are the graph's own facts whose relation the model knows. With --family path the
models are path-family models trained for one epoch on WN18RR_v1 and fb237_v1 (the cost of a
pass does not depend on the weights), served with --allow-unknown-relations; --v1-models
gives GraIL the same (one epoch on the v1 splits), to compare the families on equal terms:
    bench/scale_bench.py --family path --label path --graphs wordnet,wn18rr,fb_dense
    bench/scale_bench.py --v1-models --label grail_v1 --graphs wordnet,wn18rr,fb_dense
With --family ultra the model is ULTRA's released ultra_3g imported (grail-tools import-ultra),
every relation of each graph scored.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from server_process import ServerProcess

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GRAIL_DATA_DIR", ROOT.parent / "shared" / "data"))
NEW_BIN = ROOT / "build" / "bin"


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def run(cmd, **kwargs):
    log("  $", " ".join(str(c) for c in cmd))
    return subprocess.run([str(c) for c in cmd], check=True, **kwargs)


def proc_status(pid):
    fields = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    except FileNotFoundError:
        return {}
    kib = lambda k: int(fields[k].split()[0]) if k in fields else 0
    return {"rss_mb": kib("VmRSS") / 1024, "peak_rss_mb": kib("VmHWM") / 1024,
            "threads": int(fields.get("Threads", 0))}


class Sampler:
    """Polls a process's RSS and thread count in the background; keeps the maxima."""

    def __init__(self, pid):
        self.pid, self.max_rss_mb, self.max_threads = pid, 0.0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            s = proc_status(self.pid)
            if s:
                self.max_rss_mb = max(self.max_rss_mb, s["rss_mb"])
                self.max_threads = max(self.max_threads, s["threads"])
            self._stop.wait(0.1)

    def stop(self):
        self._stop.set()
        self._thread.join()
        return {"max_rss_mb": round(self.max_rss_mb, 1), "max_threads": self.max_threads}


class Server(ServerProcess):
    """grail-server on a fresh store (removed again by stop), logging to STORE.log."""

    def __init__(self, bin_dir, model, store, extra_flags=(), fresh=True):
        """fresh: remove what `store` holds first (False: serve it, e.g. a bulk load)."""
        self.store = Path(store)
        if fresh:
            subprocess.run(["rm", "-rf", str(self.store)], check=True)
        super().__init__(bin_dir, model, self.store, *extra_flags, log=f"{self.store}.log")

    def client(self, *args, timeout=None, check=True):
        cmd = [str(NEW_BIN / "grail-client"), "--target", f"127.0.0.1:{self.port}", "--json",
               *[str(a) for a in args]]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if check and out.returncode != 0 and not out.stdout.strip():
            raise RuntimeError(f"{' '.join(cmd)}: {out.stderr}")
        return json.loads(out.stdout.strip().splitlines()[-1]) if out.stdout.strip() else {}

    def status(self):
        return proc_status(self.proc.pid)

    def stop(self):
        code = super().stop()
        subprocess.run(["rm", "-rf", str(self.store)], check=True)
        return code


def load_summary(result):
    if not result:
        return {}
    return {"requests": result.get("requests"), "errors": result.get("errors"),
            "seconds": round(result.get("seconds", 0), 2),
            "p50_ms": result["latency_ms"]["p50"], "p99_ms": result["latency_ms"]["p99"],
            "status_counts": result.get("status_counts", {})}


def rank_all_args(queries, requests, deadline_ms, concurrency=1):
    return ["--deadline-ms", deadline_ms, "load", "--triples", queries, "--method",
            "rank-tails", "--candidates-per-request", 0, "--top-k", 10, "--concurrency",
            concurrency, "--requests", requests, "--seed", 1]


def prepare(out, family="grail", v1_models=False):
    """Data and models shared by every label, made with this tree's build."""
    data, models = out / "data", out / "models"
    data.mkdir(parents=True, exist_ok=True)
    models.mkdir(parents=True, exist_ok=True)
    tools, train = NEW_BIN / "grail-tools", NEW_BIN / "grail-train"
    if not (data / "wordnet" / "triples.txt").exists():
        run([tools, "wordnet", "--out", data / "wordnet"])
    if not (data / "synth1m" / "triples.txt").exists():
        run([tools, "synth", "--out", data / "synth1m", "--entities", 1000000, "--facts",
             5000000, "--seed", 1])
    if not (data / "synth20k" / "triples.txt").exists():
        run([tools, "synth", "--out", data / "synth20k", "--entities", 20000, "--facts",
             60000, "--seed", 2])
        lines = (data / "synth20k" / "triples.txt").read_text().splitlines(keepends=True)
        (data / "synth20k" / "train.txt").write_text("".join(lines[:-2000]))
        (data / "synth20k" / "valid.txt").write_text("".join(lines[-2000:]))
    specs = {
        "wn.pt": [DATA / "WN18RR" / "train.txt", DATA / "WN18RR" / "valid.txt", 2, []],
        "fb.pt": [DATA / "fb237_v1" / "train.txt", DATA / "fb237_v1" / "valid.txt", 4, []],
        "synth.pt": [data / "synth20k" / "train.txt", data / "synth20k" / "valid.txt", 1,
                     ["--max-nodes-per-hop", 50]],
    }
    if family == "path":
        # The path-based scorer: trained on the inductive v1 splits (one epoch: the cost of a
        # pass does not depend on the weights); WordNet graphs have relations WN18RR_v1 lacks.
        specs = {
            "wn_path.pt": [DATA / "WN18RR_v1" / "train.txt", DATA / "WN18RR_v1" / "valid.txt", 1,
                           ["--family", "path", "--free-relations", "--remove-one-hop=false"]],
            "fb_path.pt": [DATA / "fb237_v1" / "train.txt", DATA / "fb237_v1" / "valid.txt", 1,
                           ["--family", "path"]],
        }
    elif family == "ultra":
        specs = {}  # imported below, not trained
    elif v1_models:
        specs = {
            "wn_v1.pt": [DATA / "WN18RR_v1" / "train.txt", DATA / "WN18RR_v1" / "valid.txt", 1, []],
            "fb_v1.pt": [DATA / "fb237_v1" / "train.txt", DATA / "fb237_v1" / "valid.txt", 1, []],
        }
    for name, (train_file, valid_file, epochs, extra) in specs.items():
        if not (models / name).exists():
            with open(models / (name + ".train.log"), "w") as f:
                run([train, "--train", train_file, "--valid", valid_file, "--out", models / name,
                     "--epochs", epochs, "--seed", 0, *extra], stderr=f)
    bipartite = data / "k140" / "triples.txt"
    if not bipartite.exists():
        bipartite.parent.mkdir(exist_ok=True)
        bipartite.write_text("".join(f"left{i}\t_hypernym\tright{j}\n"
                                     for i in range(140) for j in range(140)))
    if family == "ultra":
        # ULTRA's released weights (no training; any relation of the graph is scored).
        ultra = models / "ultra_3g.pt"
        if not ultra.exists():
            run([tools, "import-ultra", "--checkpoint",
                 ROOT.parent / "shared" / "models" / "ultra" / "ultra_3g.pth", "--out", ultra])
        return {
            "wordnet": (data / "wordnet" / "triples.txt", ultra, []),
            "wn18rr": (DATA / "WN18RR" / "train.txt", ultra, []),
            "fb_dense": (DATA / "FB15k-237_validtest" / "graph.txt", ultra, []),
        }
    if family == "path":
        unknown = ["--allow-unknown-relations"]
        return {
            "wordnet": (data / "wordnet" / "triples.txt", models / "wn_path.pt", unknown),
            "wn18rr": (DATA / "WN18RR" / "train.txt", models / "wn_path.pt", unknown),
            "fb_dense": (DATA / "FB15k-237_validtest" / "graph.txt", models / "fb_path.pt", unknown),
        }
    if v1_models:
        unknown = ["--allow-unknown-relations"]
        return {
            "wordnet": (data / "wordnet" / "triples.txt", models / "wn_v1.pt", unknown),
            "wn18rr": (DATA / "WN18RR" / "train.txt", models / "wn_v1.pt", unknown),
            "fb_dense": (DATA / "FB15k-237_validtest" / "graph.txt", models / "fb_v1.pt", unknown),
        }
    return {
        "wordnet": (data / "wordnet" / "triples.txt", models / "wn.pt", []),
        "wn18rr": (DATA / "WN18RR" / "train.txt", models / "wn.pt", []),
        "fb_dense": (DATA / "FB15k-237_validtest" / "graph.txt", models / "fb.pt",
                     ["--allow-unknown-relations"]),
        "synth1m": (data / "synth1m" / "triples.txt", models / "synth.pt", []),
        "k140": (bipartite, models / "wn.pt", []),
        "wn_v4_ind": (DATA / "WN18RR_v4_ind" / "train.txt", models / "wn.pt", []),
    }


def queries_for(server, graph, out, name):
    """The graph's facts whose relation the model knows and whose ends differ (so every
    query is valid)."""
    path = out / "data" / f"{name}.queries.txt"
    if not path.exists():
        relations = set(server.client("stats")["model"]["relations"])  # none: any (ULTRA)
        with open(graph) as src, open(path, "w") as dst:
            for line in src:
                head, relation, tail = line.rstrip("\n").split("\t")
                if (not relations or relation in relations) and head != tail:  # a pair
                    dst.write(line)
    return path


def measure_graph(args, name, graph, model, flags, out):
    sizes = {"wordnet": (args.rank_requests, args.rss_calls),
             "wn18rr": (args.rank_requests, args.rss_calls),
             "fb_dense": (args.slow_rank_requests, args.slow_rank_requests),
             "synth1m": (args.slow_rank_requests, args.slow_rank_requests)}
    rank_requests, rss_calls = sizes[name]
    if args.label == "before" and name != "synth1m":
        rss_calls = rank_requests  # the old server is too slow for 100 rankings here
    result = {"graph": name, "label": args.label}
    server = Server(args.bin, model, out / args.label / f"{name}.store", flags)
    try:
        added = server.client("add", graph, "--chunk", 1000, timeout=3600)
        result["ingest"] = {k: added.get(k) for k in
                            ("ok", "facts_added", "entities_created", "seconds",
                             "facts_per_second")}
        result["rss_after_ingest_mb"] = round(server.status()["rss_mb"], 1)
        queries = queries_for(server, graph, out, f"{name}.{Path(model).stem}")
        deadline = args.rank_deadline_ms
        first = server.client(*rank_all_args(queries, 1, deadline), timeout=3600)
        result["first_rank_all"] = load_summary(first)
        result["rss_after_first_rank_all_mb"] = round(server.status()["rss_mb"], 1)
        ranked = server.client(*rank_all_args(queries, rank_requests, deadline), timeout=7200)
        result["rank_all_c1"] = load_summary(ranked)
        if rss_calls > 1 + rank_requests:
            server.client(*rank_all_args(queries, rss_calls - 1 - rank_requests, deadline),
                          timeout=7200)
        result["rank_all_calls_for_rss"] = max(rss_calls, 1 + rank_requests)
        time.sleep(2)  # the engine returns freed memory a second after a burst
        result["rss_after_rank_all_calls_mb"] = round(server.status()["rss_mb"], 1)
        score = ["load", "--triples", queries, "--method", "score", "--concurrency", 16,
                 "--seed", 2]
        idle = server.client(*score, "--requests", args.score_requests, "--warmup", 200,
                             timeout=3600)
        result["score_c16_idle"] = load_summary(idle)
        for loops in (1, 4):
            looper = subprocess.Popen(
                [str(NEW_BIN / "grail-client"), "--target", f"127.0.0.1:{server.port}",
                 "--json", *[str(a) for a in rank_all_args(queries, 1000000, deadline, loops)]],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(2)
            loaded = server.client(*score, "--requests", args.loaded_score_requests,
                                   "--warmup", 50, timeout=3600, check=False)
            looper.kill()
            looper.wait()
            result[f"score_c16_with_{loops}_rank_all"] = load_summary(loaded)
        result["final"] = server.status()
    finally:
        server.stop()
    return result


def measure_hostile(args, cases, out):
    result = {"label": args.label}
    graph, model, _ = cases["k140"]
    server = Server(args.bin, model, out / args.label / "k140.store")
    try:
        server.client("add", graph, "--chunk", 1000)
        before = server.status()
        sampler = Sampler(server.proc.pid)
        start = time.time()
        ranked = server.client("--deadline-ms", 900000, "--top-k", 10, "rank-tails", "left0",
                               "_hypernym", timeout=1000, check=False)
        seconds = time.time() - start
        sampled = sampler.stop()
        result["k140_one_rank_all"] = {
            "seconds": round(seconds, 2), "ok": "ranked" in ranked,
            "rss_before_mb": round(before["rss_mb"], 1), **sampled,
            "peak_rss_mb": round(server.status()["peak_rss_mb"], 1)}
    finally:
        server.stop()
    graph, model, _ = cases["wn_v4_ind"]
    server = Server(args.bin, model, out / args.label / "wn_v4_ind.store")
    try:
        server.client("add", graph, "--chunk", 1000)
        queries = queries_for(server, graph, out, "wn_v4_ind")
        before = server.status()
        sampler = Sampler(server.proc.pid)
        loaded = server.client(*rank_all_args(queries, 800, 900000, concurrency=800),
                               timeout=1000, check=False)
        sampled = sampler.stop()
        time.sleep(3)
        result["wn_v4_ind_800_concurrent_rank_all"] = {
            **load_summary(loaded), "rss_before_mb": round(before["rss_mb"], 1),
            "threads_before": before["threads"], **sampled,
            "rss_3s_after_mb": round(server.status()["rss_mb"], 1)}
    finally:
        server.stop()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=str(NEW_BIN), help="directory of grail-server")
    parser.add_argument("--label", default="after")
    parser.add_argument("--out", default=str(ROOT / "out" / "scale"))
    parser.add_argument("--graphs", default="wordnet,wn18rr,fb_dense,synth1m,hostile")
    parser.add_argument("--rank-requests", type=int, default=30)
    parser.add_argument("--slow-rank-requests", type=int, default=5,
                        help="rankings measured on fb_dense and synth1m")
    parser.add_argument("--rss-calls", type=int, default=100)
    parser.add_argument("--score-requests", type=int, default=3000)
    parser.add_argument("--loaded-score-requests", type=int, default=1500)
    parser.add_argument("--rank-deadline-ms", type=int, default=120000)
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--family", choices=["grail", "path", "ultra"], default="grail",
                        help="the model family served (path, ultra: wordnet, wn18rr, fb_dense "
                             "only)")
    parser.add_argument("--v1-models", action="store_true",
                        help="GraIL models trained one epoch on WN18RR_v1 / fb237_v1, as the "
                             "path family's (wordnet, wn18rr, fb_dense only)")
    args = parser.parse_args()
    out = Path(args.out)
    (out / args.label).mkdir(parents=True, exist_ok=True)
    cases = prepare(out, args.family, args.v1_models)
    for name in args.graphs.split(","):
        path = out / args.label / f"{name}.json"
        if path.exists() and not args.force:
            log(f"== {args.label} {name}: done before ({path})")
            continue
        log(f"== {args.label} {name}")
        if name == "hostile":
            result = measure_hostile(args, cases, out)
        else:
            graph, model, flags = cases[name]
            result = measure_graph(args, name, graph, model, flags, out)
        result["date"] = time.strftime("%Y-%m-%d")
        path.write_text(json.dumps(result, indent=1) + "\n")
        log(json.dumps(result))


if __name__ == "__main__":
    main()
