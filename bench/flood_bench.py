#!/usr/bin/env python3
"""One caller floods, another scores: what per-caller admission shares buy the other caller.

Starts grail-server on a graph, then for each --max-caller-share: a victim (its own
connection) sends ScoreTriplet calls one after another for --seconds while a flooder (one
connection, --flood-threads threads) sends the worst ranking the API allows, RankTails of the
graph's largest hub over every entity with top_k 67,108,000. Prints one JSON line per run:
the victim's calls, refusals, p50/p99 latency, and the flood's answered/refused counts; a
first run without flood gives the victim's baseline. docs/BENCHMARKS-log.md, "Admission under a
flood".

  /usr/bin/python3 bench/flood_bench.py --model MODEL.pt --graph TRIPLES [--bin build/bin]
      [--seconds 10] [--flood-threads 32] [--max-calls-in-flight 16]
"""
import argparse
import collections
import json
import signal
import os
import shutil
import subprocess
import sys
import threading
import time

parser = argparse.ArgumentParser()
parser.add_argument("--bin", default="build/bin")
parser.add_argument("--model", required=True)
parser.add_argument("--graph", required=True)
parser.add_argument("--out", default="out/flood_bench")
parser.add_argument("--seconds", type=float, default=10)
parser.add_argument("--flood-threads", type=int, default=32)
parser.add_argument("--max-calls-in-flight", type=int, default=16)
# Internal: the flood's own process.
parser.add_argument("--flood-target")
parser.add_argument("--flood-hub")
parser.add_argument("--flood-relation")
args = parser.parse_args()
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.abspath(args.bin), "..", "python"))
import grpc  # noqa: E402
from kg.v1 import knowledge_graph_pb2 as pb  # noqa: E402
from kg.v1 import knowledge_graph_pb2_grpc as pbg  # noqa: E402
from server_process import ServerProcess  # noqa: E402

out = os.path.abspath(args.out)
if not args.flood_target:
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
facts = [line.split("\t") for line in open(args.graph).read().splitlines() if line.strip()]
degree = collections.Counter()
relation_of = {}
for h, r, t in facts:
    degree[h] += 1
    degree[t] += 1
    relation_of.setdefault(h, r)
hub = max((e for e in degree if e in relation_of), key=degree.get)
probe = pb.ScoreTripletRequest(triple=pb.Triple(head=facts[0][0], relation=facts[0][1],
                                                tail=facts[0][2]))


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else None


def flood(target, hub, relation):
    """The flood's own process (--flood-target): --flood-threads threads on one connection,
    each sending the worst ranking in a loop until SIGTERM; then prints its counts."""
    stub = pbg.KnowledgeGraphStub(grpc.insecure_channel(target))
    stop = threading.Event()
    codes = collections.Counter()
    lock = threading.Lock()

    def flooder():
        while not stop.is_set():
            try:
                stub.RankTails(pb.RankTailsRequest(head=hub, relation=relation,
                                                   options=pb.RankOptions(top_k=67108000)),
                               timeout=60)
                code = "OK"
            except grpc.RpcError as e:
                code = e.code().name
            with lock:
                codes[code] += 1

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threads = [threading.Thread(target=flooder) for _ in range(args.flood_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"answered": codes["OK"], "refused": sum(codes.values()) - codes["OK"]}),
          flush=True)


if args.flood_target:
    flood(args.flood_target, args.flood_hub, args.flood_relation)
    sys.exit(0)


def run(share, flood_on):
    store = os.path.join(out, f"store_{share}_{flood_on}")
    server = ServerProcess(args.bin, os.path.abspath(args.model), store,
                           f"--max-calls-in-flight={args.max_calls_in_flight}",
                           f"--max-caller-share={share}", "--max-request-triples=100000",
                           log=os.path.join(out, f"server_{share}_{flood_on}.log"))
    subprocess.run([os.path.join(args.bin, "grail-client"), "--target", server.target, "add",
                    args.graph], check=True, capture_output=True)
    # The flood runs in its own process: in this one, its threads would take the victim's
    # client turns (one interpreter lock) and the victim's latency would be Python's.
    flooder = None
    if flood_on:
        flooder = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--model", args.model, "--graph",
             args.graph, "--bin", args.bin, "--flood-threads", str(args.flood_threads),
             "--flood-target", server.target, "--flood-hub", hub, "--flood-relation",
             relation_of[hub]], stdout=subprocess.PIPE, text=True)
        time.sleep(2)
    victim = pbg.KnowledgeGraphStub(grpc.insecure_channel(
        server.target, options=[("grpc.use_local_subchannel_pool", 1)]))
    latencies, refused = [], 0
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        began = time.monotonic()
        try:
            victim.ScoreTriplet(probe, timeout=30)
            latencies.append(1000 * (time.monotonic() - began))
        except grpc.RpcError:
            refused += 1
    counts = {"answered": 0, "refused": 0}
    if flooder is not None:
        flooder.send_signal(signal.SIGTERM)
        counts = json.loads(flooder.communicate(timeout=120)[0].strip().splitlines()[-1])
    server.stop()
    print(json.dumps({
        "max_caller_share": share, "flood_threads": args.flood_threads if flood_on else 0,
        "hub": hub,
        "hub_degree": degree[hub], "victim_calls": len(latencies) + refused,
        "victim_refused": refused, "victim_p50_ms": round(percentile(latencies, 0.5) or 0, 2),
        "victim_p99_ms": round(percentile(latencies, 0.99) or 0, 2),
        "flood_answered": counts["answered"], "flood_refused": counts["refused"]}), flush=True)


run(0.5, flood_on=False)
for share in (1.0, 0.5):
    run(share, flood_on=True)
