#!/usr/bin/env python3
"""One caller floods, another scores: what per-caller admission shares buy the other caller.

Starts grail-server on a graph, then for each --max-caller-share: a victim (its own
connection) sends ScoreTriplet calls one after another for --seconds while a flooder (one
connection, --flood-threads threads) sends the worst ranking the API allows, RankTails of the
graph's largest hub over every entity with top_k 67,108,000. Prints one JSON line per run:
the victim's calls, refusals, p50/p99 latency, and the flood's answered/refused counts; a
first run without flood gives the victim's baseline. docs/BENCHMARKS.md, "Admission under a
flood".

  /usr/bin/python3 bench/flood_bench.py --model MODEL.pt --graph TRIPLES [--bin build/bin]
      [--seconds 10] [--flood-threads 32] [--max-calls-in-flight 16]
"""
import argparse
import collections
import json
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
args = parser.parse_args()
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(os.path.abspath(args.bin), "..", "python"))
import grpc  # noqa: E402
from kg.v1 import knowledge_graph_pb2 as pb  # noqa: E402
from kg.v1 import knowledge_graph_pb2_grpc as pbg  # noqa: E402
from server_process import ServerProcess  # noqa: E402

out = os.path.abspath(args.out)
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


def run(share, flood):
    store = os.path.join(out, f"store_{share}_{flood}")
    server = ServerProcess(args.bin, os.path.abspath(args.model), store,
                           f"--max-calls-in-flight={args.max_calls_in_flight}",
                           f"--max-caller-share={share}", "--max-request-triples=100000",
                           log=os.path.join(out, f"server_{share}_{flood}.log"))
    subprocess.run([os.path.join(args.bin, "grail-client"), "--target", server.target, "add",
                    args.graph], check=True, capture_output=True)
    stop = threading.Event()
    flood_codes = collections.Counter()

    def flooder(stub):
        while not stop.is_set():
            try:
                stub.RankTails(pb.RankTailsRequest(head=hub, relation=relation_of[hub],
                                                   options=pb.RankOptions(top_k=67108000)),
                               timeout=60)
                flood_codes["OK"] += 1
            except grpc.RpcError as e:
                flood_codes[e.code().name] += 1

    flood_channel = grpc.insecure_channel(server.target)
    threads = [threading.Thread(target=flooder, args=(pbg.KnowledgeGraphStub(flood_channel),))
               for _ in range(args.flood_threads if flood else 0)]
    for t in threads:
        t.start()
    time.sleep(1 if flood else 0)
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
    stop.set()
    for t in threads:
        t.join()
    server.stop()
    print(json.dumps({
        "max_caller_share": share, "flood_threads": len(threads), "hub": hub,
        "hub_degree": degree[hub], "victim_calls": len(latencies) + refused,
        "victim_refused": refused, "victim_p50_ms": round(percentile(latencies, 0.5) or 0, 2),
        "victim_p99_ms": round(percentile(latencies, 0.99) or 0, 2),
        "flood_answered": flood_codes["OK"],
        "flood_refused": sum(flood_codes.values()) - flood_codes["OK"]}), flush=True)


run(0.5, flood=False)
for share in (1.0, 0.5):
    run(share, flood=True)
