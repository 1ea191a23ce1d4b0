#!/usr/bin/env python3
"""ScoreTriplet throughput of the path family: one pass per query, kept and shared
(docs/BENCHMARKS-log.md, "A pass answers many facts").

For each graph and configuration, starts grail-server on the graph twice, without the pass
cache (--pass-cache-bytes 0: every fact pays for its query's pass, as before) and with it (the
default), each time fresh (a cold cache; the same requests both times), and measures grail-client's load generator, ScoreTriplet at each --clients count with
facts drawn two ways: heads uniform (every fact of the graph equally likely) and heads
Zipf-distributed (s = 1: the head of popularity rank k asked with probability ~ 1/k). With
--writer it measures Zipf heads again while a writer adds --writer-rate facts a second between
entities of the graph (chunks of 100, each removed again a second later, so the graph keeps its
size), exact and with --max-staleness-ms (1000). It prints the machine's float32 matrix-product rate (grail-tools
has none; numpy's BLAS on 2 threads) and the pass limit it implies for ULTRA on the graph.

    bench/score_throughput.py --graphs fb_dense --clients 1,16,64 --requests 600
With --probe, single-call latencies in sequence instead (a pass, the same fact again, other
tails of its query, a ranking of it, new queries).
Results: out/score_throughput/<graph>.ultra<label>.json, one object per configuration. A
steady state (the cache warm, as on a server up for a while): --warmup 4000 --zipf 1.

Graphs: fb_dense (FB15k-237 valid+test, 12k entities), wn18rr (WN18RR train, 41k), synth1m
(grail-tools synth, 10^6 entities and 5*10^6 facts, made on first use). Family: ultra (ULTRA's
released ultra_3g, imported; every relation scored). --server-flags adds grail-server flags,
e.g. a score budget below the rankings' (--score-max-subgraph-nodes=8192).
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import result_rows
from server_process import ServerProcess

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "build" / "python"))

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("GRAIL_SHARED_DIR", ROOT.parent / "shared"))
BIN = ROOT / "build" / "bin"
GRAPHS = {
    "fb_dense": SHARED / "data" / "FB15k-237_validtest" / "graph.txt",
    "wn18rr": SHARED / "data" / "WN18RR" / "train.txt",
    # grail-tools synth's 10^6-entity / 5*10^6-fact graph, shared with bench/million_ranking.py.
    "synth1m": ROOT / "out" / "scale" / "data" / "synth1m" / "triples.txt",
}


def ultra_archive(out):
    """ULTRA's released ultra_3g imported into `out` (once; reused after)."""
    model = Path(out) / "ultra_3g.pt"
    if not model.exists():
        subprocess.run([str(BIN / "grail-tools"), "import-ultra", "--checkpoint",
                        str(SHARED / "models" / "ultra" / "ultra_3g.pth"), "--out", str(model)],
                       check=True)
    return model


def score_queries(graph, path):
    """The graph's facts a ScoreTriplet can ask (two different entities), written to `path`."""
    with open(graph) as src, open(path, "w") as dst:
        for line in src:
            head, _, tail = line.rstrip("\n").split("\t")
            if head != tail:
                dst.write(line)
    return path


def graph_file(name):
    path = GRAPHS[name]
    if name == "synth1m" and not path.exists():
        subprocess.run([str(BIN / "grail-tools"), "synth", "--out", str(path.parent), "--entities",
                        "1000000", "--facts", "5000000", "--seed", "1"], check=True)
    return path


def log(*args):
    print(*args, file=sys.stderr, flush=True)


class Server(ServerProcess):
    def __init__(self, model, store, flags):
        subprocess.run(["rm", "-rf", str(store)], check=True)
        self.store = Path(store)
        super().__init__(BIN, model, self.store, *flags, log=f"{self.store}.log")

    def client(self, *args, timeout=None):
        cmd = [str(BIN / "grail-client"), "--target", f"127.0.0.1:{self.port}", "--json",
               *[str(a) for a in args]]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if not out.stdout.strip():
            raise RuntimeError(f"{' '.join(cmd)}: {out.stderr}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    def metrics(self):
        import urllib.request
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics").read()
        values = {}
        for line in text.decode().splitlines():
            if line.startswith("grail_pass_cache_"):
                name, value = line.split()[:2]
                values[name] = float(value)
        return values

    def stop(self):
        code = super().stop()
        subprocess.run(["rm", "-rf", str(self.store)], check=True)
        return code


class Writer:
    """Adds `rate` facts a second between entities of the graph, in chunks of 100, and removes
    each chunk again a second later, so the graph keeps its size (a growing graph would make
    every pass dearer and measure that instead); one stream a chunk, the Python client."""

    def __init__(self, server, facts, rate):
        from grail_kg import Client
        self.client = Client(server.target, timeout=600)
        self.entities = sorted({f[0] for f in facts} | {f[2] for f in facts})
        self.relations = sorted({f[1] for f in facts})
        self.rate = rate
        self.stopped = threading.Event()
        self.added = 0
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def chunk(self, k):
        n = len(self.entities)
        return [(self.entities[(k * 7919 + i * 104729) % n],
                 self.relations[(k + i) % len(self.relations)],
                 self.entities[(k * 15485863 + i * 32452843 + 1) % n]) for i in range(100)]

    def run(self):
        period = 100 / self.rate
        keep = max(1, int(self.rate / 100))  # chunks stored at once: a second's worth
        next_at = time.monotonic()
        k = 0
        while not self.stopped.is_set():
            for ack in self.client.add_triples(self.chunk(k), chunk=100):
                self.added += ack.facts_added
            if k >= keep:
                list(self.client.remove_triples(self.chunk(k - keep), chunk=100))
            k += 1
            next_at += period
            time.sleep(max(0.0, next_at - time.monotonic()))

    def stop(self):
        self.stopped.set()
        self.thread.join()
        self.client.close()
        return self.added


def matmul_rate(threads=2):
    """float32 GFLOP/s of a [12k*B, 128] x [128, 64] product (numpy's BLAS), `threads` cores."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    code = ("import numpy, time\n"
            "a = numpy.random.rand(49152, 128).astype(numpy.float32)\n"
            "b = numpy.random.rand(128, 64).astype(numpy.float32)\n"
            "a @ b\nt = time.perf_counter()\n"
            "for _ in range(20): a @ b\n"
            "print(20 * 2 * 49152 * 128 * 64 / (time.perf_counter() - t) / 1e9)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    return round(float(out.stdout.strip()), 1) if out.returncode == 0 else None


def probe(model, graph, out):
    """Single-call latencies, one client in sequence: a pass, the same fact again, other tails
    of its query, a ranking of its query, and new queries."""
    from grail_kg import Client
    server = Server(model, out / "probe.store", [])
    try:
        server.client("add", graph, "--chunk", 1000, timeout=3600)
        facts = [tuple(line.rstrip("\n").split("\t")) for line in open(graph)]
        facts = [f for f in facts if f[0] != f[2]]
        head, relation = facts[0][0], facts[0][1]
        tails = [f[2] for f in facts if f[2] != head][:8]
        client = Client(server.target, timeout=600)

        def ms(call):
            start = time.perf_counter()
            call()
            return round((time.perf_counter() - start) * 1000, 1)

        result = {
            "first": ms(lambda: client.score(head, relation, tails[0])),
            "same_fact_again": [ms(lambda: client.score(head, relation, tails[0]))
                                for _ in range(5)],
            "other_tails": [ms(lambda t=t: client.score(head, relation, t)) for t in tails[1:]],
            "rank_all_after": [ms(lambda: client.rank_tails(head, relation, top_k=10))
                               for _ in range(2)],
            "new_queries": [ms(lambda f=f: client.score(*f)) for f in facts[1000:1006]],
        }
        client.close()
        log(json.dumps(result))
        return result
    finally:
        server.stop()


def summary(result):
    return {"requests": result.get("requests"), "errors": result.get("errors"),
            "facts_per_second": round(result.get("requests_per_second", 0), 2),
            "p50_ms": result["latency_ms"]["p50"], "p99_ms": result["latency_ms"]["p99"]}


RESULTS = ROOT / "bench" / "results" / "serving.jsonl"


def record(graph_name, run, args, staleness, results=RESULTS):
    """Writes `run` as a row of the throughput table, replacing the row of the same
    configuration (bench/results/README.md)."""
    heads = "uniform" if run["zipf"] == 0 else ("Zipf" if run["zipf"] == 1 else f"Zipf s={run['zipf']:g}")
    condition, command = "", "score-throughput"
    if staleness is not None:
        command = "score-throughput-writer"
        condition = (f"writer {args.writer_rate:,} facts/s, "
                     + ("exact" if staleness == 0 else f"{staleness / 1000:g} s staleness"))
    elif args.warmup > 32:
        command = "score-throughput-warm"
        condition = f"after {args.warmup:,} requests (a warm cache)"
    row = {"table": "score_throughput", "graph": graph_name, "model": "ULTRA 3g", "heads": heads,
           "clients": run["clients"], "condition": condition,
           "pass_cache": run["cache_bytes"] > 0, "facts_per_second": round(run["facts_per_second"], 1),
           "p50_ms": round(run["p50_ms"]), "p99_ms": round(run["p99_ms"]), "command": command,
           "date": result_rows.today(), "machine": result_rows.machine()}
    result_rows.replace_rows(results, [row], lambda r: (
        r.get("table"), r.get("graph"), r.get("model"), r.get("heads"), r.get("clients"),
        r.get("condition"), r.get("pass_cache")))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graphs", default="fb_dense")
    parser.add_argument("--clients", default="1,16,64")
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--warmup", type=int, default=32)
    parser.add_argument("--zipf", default="0,1", help="Zipf exponents of the heads (0: uniform)")
    parser.add_argument("--probe", action="store_true",
                        help="single-call latencies of a pass and of the lookups instead")
    parser.add_argument("--writer", action="store_true")
    parser.add_argument("--writer-only", action="store_true", help="only the writer's runs")
    parser.add_argument("--writer-rate", type=int, default=1000)
    parser.add_argument("--staleness-ms", type=int, default=1000)
    parser.add_argument("--cache-bytes", default="0,268435456")
    parser.add_argument("--deadline-ms", type=int, default=120000)
    parser.add_argument("--label", default="", help="suffix of the result file's name")
    parser.add_argument("--server-flags", default="",
                        help="further grail-server flags, comma-separated (e.g. "
                        "--score-max-subgraph-nodes=8192)")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "score_throughput")
    parser.add_argument("--record", action="store_true",
                        help="also write each run into bench/results/serving.jsonl, from which "
                        "docs/BENCHMARKS.md's throughput table is computed "
                        "(bench/benchmarks_page.py --write); GRAIL_MACHINE names the machine")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    model = ultra_archive(args.out)
    if args.probe:
        for graph_name in args.graphs.split(","):
            probe(model, graph_file(graph_name), args.out)
        return
    rate = matmul_rate()
    log(f"float32 matrix products: {rate} GFLOP/s on 2 threads")
    for graph_name in args.graphs.split(","):
        graph = graph_file(graph_name)
        entities = len({x for line in open(graph) for x in line.rstrip("\n").split("\t")[::2]})
        # An exact ULTRA pass: 6 layers of a [V, 128] x [128, 64] product, the messages aside.
        pass_gflop = 6 * 2 * entities * 128 * 64 / 1e9
        results = {"graph": graph_name, "entities": entities, "matmul_gflops": rate,
                   "server_flags": args.server_flags,
                   "pass_gflop": round(pass_gflop, 3),
                   "limit_passes_per_second": round(rate / pass_gflop, 1) if rate else None,
                   "runs": []}
        queries = score_queries(graph, args.out / f"{graph_name}.queries.txt")
        facts = [tuple(line.rstrip("\n").split("\t")) for line in open(queries)]
        configs = [(zipf, clients, None) for zipf in [float(z) for z in args.zipf.split(",")]
                   for clients in [int(c) for c in args.clients.split(",")]]
        if args.writer_only:
            configs = []
        if args.writer or args.writer_only:
            configs += [(1, 16, 0), (1, 16, args.staleness_ms)]
        for zipf, clients, staleness in configs:
            for cache in [int(c) for c in args.cache_bytes.split(",")]:
                # A fresh server (the graph streams in in under a second): every configuration
                # starts with a cold cache, and both cache settings see the same requests.
                server = Server(model, args.out / f"{graph_name}.store",
                                ["--pass-cache-bytes", cache,
                                 *[f for f in args.server_flags.split(",") if f]])
                try:
                    server.client("add", graph, "--chunk", 1000, timeout=3600)
                    writer = None
                    if staleness is not None:
                        writer = Writer(server, facts, args.writer_rate)
                    load = ["--deadline-ms", args.deadline_ms, "load", "--triples", queries,
                            "--method", "score", "--concurrency", clients, "--requests",
                            args.requests, "--warmup", args.warmup, "--zipf-heads", zipf,
                            "--seed", 7, "--max-staleness-ms", staleness or 0]
                    started = time.monotonic()
                    before = server.metrics()
                    run = {"cache_bytes": cache, "zipf": zipf, "clients": clients,
                           **summary(server.client(*load, timeout=7200))}
                    after = server.metrics()
                    if writer is not None:
                        added = writer.stop()
                        run["writer_facts_per_second"] = round(
                            added / (time.monotonic() - started), 1)
                        run["max_staleness_ms"] = staleness
                    run["cache"] = {k[len("grail_pass_cache_"):]: after.get(k, 0) - before.get(k, 0)
                                    for k in ("grail_pass_cache_hits_total",
                                              "grail_pass_cache_misses_total")}
                    run["cache_bytes_held"] = after.get("grail_pass_cache_bytes")
                    log(json.dumps(run))
                    results["runs"].append(run)
                    if args.record:
                        record(graph_name, run, args, staleness)
                finally:
                    server.stop()
        (args.out / f"{graph_name}.ultra{args.label}.json").write_text(
            json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
