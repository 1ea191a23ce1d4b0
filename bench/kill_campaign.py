#!/usr/bin/env python3
"""kill -9 campaign against the real server (docs/RELIABILITY.md).

Each round starts grail-server on the same store, streams a fresh file of facts into it
(grail-client add, small chunks, a window of unacknowledged chunks) while two clients score
facts, and SIGKILLs the server at a random moment. The next round's server must then hold
every fact of every chunk the client saw acknowledged, in every round so far (checked with
ScoreTriplets' known_fact on the round's acknowledged lines after each restart, and on all
of them at the end).

  bench/kill_campaign.py [--rounds 500] [--bin build/bin] [--out out/kill] [--seed 1]
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

from server_process import ServerProcess

parser = argparse.ArgumentParser()
parser.add_argument("--rounds", type=int, default=500)
parser.add_argument("--bin", default="build/bin")
parser.add_argument("--out", default="out/kill")
parser.add_argument("--seed", type=int, default=1)
parser.add_argument("--facts", type=int, default=3000, help="facts streamed per round")
args = parser.parse_args()
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
data = os.environ.get("GRAIL_DATA_DIR", "../shared/data")
out = os.path.abspath(args.out)
os.makedirs(out, exist_ok=True)
rng = random.Random(args.seed)
binary = lambda name: os.path.join(args.bin, name)

model = os.path.join(out, "wn_v1.e1.pt")
if not os.path.exists(model):
    subprocess.run([binary("grail-train"), "--train", f"{data}/WN18RR_v1/train.txt",
                    "--valid", f"{data}/WN18RR_v1/valid.txt", "--out", model,
                    "--epochs", "1", "--seed", "0"], check=True, stderr=subprocess.DEVNULL)
base = f"{data}/WN18RR_v1_ind/train.txt"
relations = sorted({line.split("\t")[1] for line in open(base) if line.strip()})
base_entities = sorted({line.split("\t")[0] for line in open(base) if line.strip()})
store = os.path.join(out, "store")
shutil.rmtree(store, ignore_errors=True)


def start():
    try:
        server = ServerProcess(args.bin, model, store, "--warmup-batches", "0",
                               log=os.path.join(out, "server.log"), append=True, metrics=False)
    except RuntimeError as e:
        sys.exit(str(e))
    return server, server.port


def missing(port, path):
    """Facts of the triple file `path` that the server does not hold."""
    if os.path.getsize(path) == 0:
        return 0
    run = subprocess.run([binary("grail-client"), "--target", f"127.0.0.1:{port}", "--json",
                          "score-file", path, "--batch", "1000"], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"score-file failed: {run.stderr}\nthe round's client said:\n{output}")
    return sum(1 for line in run.stdout.splitlines() if not json.loads(line)["known_fact"])


server, port = start()
subprocess.run([binary("grail-client"), "--target", f"127.0.0.1:{port}", "add", base],
               check=True, stdout=subprocess.DEVNULL)
acked_all = os.path.join(out, "acknowledged.txt")
open(acked_all, "w").close()
totals = {"rounds": 0, "acknowledged_facts": 0, "lost": 0, "kills_before_any_ack": 0,
          "rounds_fully_acknowledged": 0}
previous = None
output = ""
for round_ in range(args.rounds):
    if previous is not None:  # the last round's acknowledged facts, after a restart
        lost = missing(port, previous)
        totals["lost"] += lost
        if lost:
            print(f"round {round_ - 1}: {lost} acknowledged facts missing", flush=True)
    facts = os.path.join(out, "round.txt")
    with open(facts, "w") as f:
        for i in range(args.facts):
            f.write(f"k{round_}_{i}\t{rng.choice(relations)}\t{rng.choice(base_entities)}\n")
    target = ["--target", f"127.0.0.1:{port}"]
    ingest = subprocess.Popen([binary("grail-client"), *target, "add", facts, "--chunk", "5",
                               "--window", "4"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    readers = [subprocess.Popen([binary("grail-client"), *target, "load", "--triples", base,
                                 "--concurrency", "2", "--requests", "1000000", "--seed",
                                 str(round_ * 2 + k)], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL) for k in range(2)]
    time.sleep(rng.uniform(0.05, 0.6))
    server.kill()
    output = ingest.communicate()[0]
    for reader in readers:  # they only made load; without a server they would retry on
        reader.kill()
        reader.wait()
    # Acknowledged: the client's count (acks come in order, so the file's first lines); when
    # it stopped early it also names the first unacknowledged line, which must agree.
    counted = re.search(r"facts_acknowledged=(\d+)", output)
    if not counted:
        sys.exit(f"round {round_}: unexpected client output:\n{output}")
    acked = int(counted.group(1))
    unacked = re.search(r"first unacknowledged chunk: .* lines (\d+)-", output)
    if unacked and int(unacked.group(1)) - 1 != acked:
        sys.exit(f"round {round_}: the client's counts disagree:\n{output}")
    lines = open(facts).readlines()[:acked]
    previous = os.path.join(out, "previous.txt")
    with open(previous, "w") as f:
        f.writelines(lines)
    with open(acked_all, "a") as f:
        f.writelines(lines)
    totals["rounds"] += 1
    totals["acknowledged_facts"] += acked
    totals["kills_before_any_ack"] += acked == 0
    totals["rounds_fully_acknowledged"] += acked == args.facts
    server, port = start()
    if round_ % 50 == 49:
        print(json.dumps(totals), flush=True)

totals["lost"] += missing(port, previous)
totals["lost_in_final_check_of_all_rounds"] = missing(port, acked_all)
server.stop()
print(json.dumps(totals))
sys.exit(1 if totals["lost"] or totals["lost_in_final_check_of_all_rounds"] else 0)
