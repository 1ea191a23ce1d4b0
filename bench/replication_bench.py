#!/usr/bin/python3
"""Replication through NATS JetStream (docs/BENCHMARKS-log.md, "Replication").

On this machine, with a real nats-server (JetStream on disk) and real grail-server replicas:
  1. ingest: facts/s of `grail-client add` into one server without replication, and into
     replica A of a replicated graph with 1 and with 2 replicas (every replica applies every
     chunk), at two chunk sizes;
  2. replication lag while ingesting: A takes chunks as fast as it acknowledges them; for each
     ack (stream sequence S) a reader asks replica B for GetStats with min_graph_sequence S,
     which returns once B has applied S. The lag is the time from A's ack to B's answer
     (one loopback round trip included);
  3. catch-up: a new replica C on an empty directory, until it serves (the whole stream);
  4. reads: `grail-client load` ScoreTriplet with --concurrency callers in all, split evenly
     over 1, 2 and 3 replicas (one load process per replica), total requests/s. Every
     replica runs on the same cores: on a 2-core machine more replicas cannot add CPU, so
     this shows what spreading the same load over replicas costs or gains on one machine,
     not the scaling across machines that replicas are for.

    bench/replication_bench.py [--bin build/bin] [--model M.pt] [--out out/replication]
Facts: ../shared/data/WN18RR/train.txt (86,835); lag chunks from its valid+test facts. Model:
--model, else one trained here on WN18RR_v1 for 1 epoch (the cost of a forward does not
depend on the weights), served with --allow-unknown-relations (WN18RR_v1 has 9 of the 11
relations; reads ask only for those 9). Results: OUT/results.json and a table on stdout.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("GRAIL_DATA_DIR", ROOT.parent / "shared" / "data"))
sys.path.insert(0, str(ROOT / "build" / "python"))

import grpc  # noqa: E402
from kg.v1 import knowledge_graph_pb2 as pb  # noqa: E402
from kg.v1 import knowledge_graph_pb2_grpc as pb_grpc  # noqa: E402
from server_process import ServerProcess  # noqa: E402


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


class Nats:
    def __init__(self, work):
        self.port = free_port()
        self.log = open(work / "nats.log", "w")
        self.process = subprocess.Popen(
            ["nats-server", "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd",
             str(work / "js")], stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(self.port)
        self.url = f"nats://127.0.0.1:{self.port}"

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait()
        self.log.close()


def server(args, work, name, nats=None):
    """A replica `name` (with NATS) or a lone server, in its own directory under `work`."""
    home = work / name
    home.mkdir(parents=True, exist_ok=True)
    flags = []
    if nats is not None:
        flags = ["--nats-url", nats.url, "--nats-stream", "graph", "--replica-name", name]
    return ServerProcess(args.bin, args.model, home / "store", *flags, *args.server_flags,
                         log=home / "server.log", metrics=False)


def client(args, *cmd):
    result = subprocess.run([str(args.bin / "grail-client"), "--json", *cmd],
                            capture_output=True, text=True, check=True)
    return json.loads(result.stdout.splitlines()[-1])


def ingest(args, work, replicas, chunk):
    """facts/s of `grail-client add` into a fresh graph: replicas 0 = no replication."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    nats = Nats(work) if replicas else None
    servers = [server(args, work, f"r{i}", nats) for i in range(max(1, replicas))]
    try:
        report = client(args, "--target", servers[0].target, "add", str(args.facts),
                        "--chunk", str(chunk))
    finally:
        for s in servers:
            s.stop()
        if nats:
            nats.stop()
    return report["facts_per_second"]


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def lag_and_reads(args, work):
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    nats = Nats(work)
    a = server(args, work, "a", nats)
    b = server(args, work, "b", nats)
    servers = [a, b]
    results = {}
    try:
        client(args, "--target", a.target, "add", str(args.facts), "--chunk", "1000")
        # Lag: new facts (valid + test) in chunks, one stream, acks read as they come.
        lines = [l.split("\t") for f in ("valid.txt", "test.txt")
                 for l in (DATA / "WN18RR" / f).read_text().splitlines() if l.strip()]
        chunks = [lines[i:i + args.lag_chunk] for i in range(0, len(lines), args.lag_chunk)]
        chunks = chunks[:args.lag_chunks]
        reader = pb_grpc.KnowledgeGraphStub(grpc.insecure_channel(b.target))
        writer = pb_grpc.KnowledgeGraphStub(grpc.insecure_channel(a.target))
        lags = []
        lock = threading.Lock()

        def wait_on_b(sequence, acked):
            reader.GetStats(pb.GetStatsRequest(min_graph_sequence=sequence), timeout=60)
            with lock:
                lags.append((time.perf_counter() - acked) * 1000)

        def requests():
            for c in chunks:
                yield pb.AddTriplesRequest(
                    triples=[pb.Triple(head=h, relation=r, tail=t) for h, r, t in c])

        started = time.perf_counter()
        with ThreadPoolExecutor(32) as pool:
            futures = []
            for ack in writer.AddTriples(requests(), timeout=600):
                futures.append(pool.submit(wait_on_b, ack.sequence, time.perf_counter()))
            for f in futures:
                f.result()
        seconds = time.perf_counter() - started
        facts = sum(len(c) for c in chunks)
        results["lag"] = {"chunks": len(chunks), "chunk_facts": args.lag_chunk,
                          "facts_per_second": facts / seconds,
                          "p50_ms": percentile(lags, 0.50), "p99_ms": percentile(lags, 0.99),
                          "max_ms": max(lags), "mean_ms": statistics.mean(lags)}
        log("lag", results["lag"])

        # Catch-up: a new replica from an empty directory through the whole stream.
        c = server(args, work, "c", nats)
        servers.append(c)
        stats = client(args, "--target", c.target, "stats")
        results["catch_up"] = {"seconds_to_serving": c.seconds_to_ready,
                               "chunks": stats["graph_sequence"], "facts": stats["facts"]}
        log("catch_up", results["catch_up"])

        # Reads: the same load against 1, 2 and 3 replicas at once.
        # Only facts of relations the served model knows: a fallback model lacks two (main()).
        known = set(stats["model"]["relations"])
        queries = work / "queries.txt"
        queries.write_text("".join(
            [l for l in (DATA / "WN18RR" / "test.txt").read_text().splitlines(True)
             if l.split("\t")[1] in known][:2000]))
        results["reads"] = {}
        for n in (1, 2, 3):
            procs = [subprocess.Popen(
                [str(args.bin / "grail-client"), "--json", "--target", s.target, "load",
                 "--triples", str(queries), "--method", "score", "--concurrency",
                 str(args.concurrency // n), "--requests", str(args.reads // n),
                 "--warmup", "100"],
                stdout=subprocess.PIPE, text=True) for s in servers[:n]]
            reports = [json.loads(p.communicate()[0].splitlines()[-1]) for p in procs]
            results["reads"][n] = {
                "requests_per_second": sum(r["requests_per_second"] for r in reports),
                "p50_ms": statistics.mean(r["latency_ms"]["p50"] for r in reports),
                "p99_ms": max(r["latency_ms"]["p99"] for r in reports),
                "errors": sum(r["errors"] for r in reports)}
            log("reads", n, results["reads"][n])
    finally:
        for s in servers:
            s.stop()
        nats.stop()
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", type=Path, default=ROOT / "build" / "bin")
    parser.add_argument("--model", type=Path)
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "replication")
    parser.add_argument("--facts", type=Path, default=DATA / "WN18RR" / "train.txt")
    parser.add_argument("--chunks", default="100,1000", help="ingest chunk sizes")
    parser.add_argument("--lag-chunk", type=int, default=10, help="facts per lag chunk")
    parser.add_argument("--lag-chunks", type=int, default=600)
    parser.add_argument("--reads", type=int, default=12000, help="read requests in all")
    parser.add_argument("--concurrency", type=int, default=12, help="read callers in all")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    args.server_flags = []
    if args.model is None:
        # WN18RR_v1 holds 9 of WN18RR's 11 relations: the facts of the other two are stored
        # (and replicated) but not scored, and the reads ask only for the 9.
        train = DATA / "WN18RR_v1" / "train.txt"
        args.server_flags = ["--allow-unknown-relations"]
        args.model = args.out / "model.pt"
        if not args.model.exists():
            subprocess.run([str(args.bin / "grail-train"), "--train", str(train), "--valid",
                            str(DATA / "WN18RR_v1" / "valid.txt"), "--out", str(args.model),
                            "--epochs", "1", "--seed", "0"], check=True,
                           stderr=subprocess.DEVNULL)
    results = {"facts": str(args.facts), "model": str(args.model), "cores": os.cpu_count(),
               "ingest": {}}
    for chunk in [int(c) for c in args.chunks.split(",")]:
        row = {}
        for replicas in (0, 1, 2):
            row[replicas] = ingest(args, args.out / "ingest", replicas, chunk)
            log("ingest chunk", chunk, "replicas", replicas, row[replicas])
        results["ingest"][chunk] = row
    results.update(lag_and_reads(args, args.out / "replicas"))
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")

    print("| chunk | local facts/s | JetStream, 1 replica | JetStream, 2 replicas |")
    print("|---:|---:|---:|---:|")
    for chunk, row in results["ingest"].items():
        print(f"| {chunk} | {row[0]:,.0f} | {row[1]:,.0f} ({row[1] / row[0]:.2f}x) | "
              f"{row[2]:,.0f} ({row[2] / row[0]:.2f}x) |")
    lag = results["lag"]
    print(f"\nlag (A's ack to B serving it), {lag['chunks']} chunks of {lag['chunk_facts']} facts "
          f"at {lag['facts_per_second']:,.0f} facts/s: p50 {lag['p50_ms']:.2f} ms, "
          f"p99 {lag['p99_ms']:.2f} ms, max {lag['max_ms']:.2f} ms")
    cu = results["catch_up"]
    print(f"catch-up of a new replica: {cu['chunks']} chunks ({cu['facts']} facts) in "
          f"{cu['seconds_to_serving']:.1f} s to serving")
    print(f"\n{args.concurrency} callers in all, split over the replicas:")
    print("\n| replicas | ScoreTriplet requests/s | p50 ms | p99 ms | errors |")
    print("|---:|---:|---:|---:|---:|")
    for n, r in results["reads"].items():
        print(f"| {n} | {r['requests_per_second']:,.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
              f"{r['errors']} |")


if __name__ == "__main__":
    main()
