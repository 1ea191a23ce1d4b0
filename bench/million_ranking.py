#!/usr/bin/env python3
"""Ranking every entity of a million-entity graph (docs/BENCHMARKS-log.md, "Ranking every entity
of a million-entity graph").

For each size (grail-tools synth: power-law graphs, 5 facts per entity, seed 1) and each
path-family model, starts grail-server (defaults: pruning on, --max-subgraph-nodes 65,536,
--max-subgraph-edges 262,144) on a fresh data directory, streams the graph in with
AddTriples and measures with grail-client:
  * ingest facts/s and server RSS after ingest (and per fact);
  * RankTails over every entity (top_k 10), one client, for hub queries (the 20 entities of
    highest degree) and for entities drawn uniformly: p50/p99, outcomes, and one call's
    candidates_pruned;
  * ScoreTriplet at 16 clients idle and while 4 clients loop rank-all (uniform entities):
    p50/p99 and the loaded/idle p99 ratio;
  * server RSS at the end.
Models: "path", a path-family model in the default configuration (reach mask, 6 layers of
32) trained for 20 steps on a 20k-entity graph of the same generator (the cost of a pass
does not depend on the weights); "priority", the same with A*Net's learned priority
(--prune-node-ratio 0.1), whose rankings a call's budget prunes layer by layer within the
server's (--client-flags=--max-visited-nodes=N); "ultra", ULTRA's released ultra_3g imported.

    bench/million_ranking.py [--sizes 100000,1000000] [--models path,ultra]
                             [--client-flags=--max-visited-nodes=8192]
                             [--bulk-load [--new-facts 200000] [--chunk 10000]]
                             [--facts-per-entity 5]
With --bulk-load the graph but its last --new-facts lines goes in with grail-tools bulk-load
(its seconds and peak RSS recorded), the server starts on the result (seconds to serving
recorded), and the ingest figure is that of the last lines streamed in on top, --chunk facts
a chunk.
Results: out/million/<size>.<model>.json (a case measured before is skipped; --force).
"""

import argparse
import json
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import result_rows  # noqa: E402
from scale_bench import NEW_BIN, ROOT, Server, load_summary, log, run  # noqa: E402


DATA = ROOT / "out" / "scale" / "data"  # shared with bench/scale_bench.py


def synth(entities, per_entity=5):
    names = {100000: "synth100k", 1000000: "synth1m", 10000000: "synth10m"}
    name = names.get(entities, f"synth{entities}") if per_entity == 5 else \
        f"synth{entities}x{per_entity}"
    path = DATA / name / "triples.txt"
    if not path.exists():
        run([NEW_BIN / "grail-tools", "synth", "--out", path.parent, "--entities", entities,
             "--facts", per_entity * entities, "--seed", 1])
    return path


def bulk_load(graph, new_facts, store, case_dir):
    """grail-tools bulk-load of all of `graph` but its last `new_facts` lines into `store`;
    the load's summary with its peak RSS, and the file of the lines left out."""
    base, new = case_dir / "base.tsv", case_dir / "new.tsv"
    lines = int(subprocess.run(["wc", "-l", str(graph)], capture_output=True, text=True,
                               check=True).stdout.split()[0])
    with open(base, "w") as out:
        subprocess.run(["head", "-n", str(lines - new_facts), str(graph)], stdout=out, check=True)
    with open(new, "w") as out:
        subprocess.run(["tail", "-n", str(new_facts), str(graph)], stdout=out, check=True)
    subprocess.run(["rm", "-rf", str(store)], check=True)
    peak = case_dir / "bulk_load.peak"
    out = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", str(peak),
                          str(NEW_BIN / "grail-tools"), "bulk-load", "--triples", str(base),
                          "--data-dir", str(store)], capture_output=True, text=True, check=True)
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    summary["peak_rss_mb"] = round(int(peak.read_text().split()[-1]) / 1024)
    base.unlink()
    return summary, new


def model(name):
    models = ROOT / "out" / "scale" / "models"
    models.mkdir(parents=True, exist_ok=True)
    if name == "ultra":
        path = models / "ultra_3g.pt"
        if not path.exists():
            run([NEW_BIN / "grail-tools", "import-ultra", "--checkpoint",
                 ROOT.parent / "shared" / "models" / "ultra" / "ultra_3g.pth", "--out", path])
        return path
    priority = name == "priority"
    path = models / ("synth_priority.pt" if priority else "synth_path.pt")
    if not path.exists():
        # The generator's 20k-entity graph of bench/scale_bench.py, its last 2,000 facts for
        # validation.
        small = DATA / "synth20k"
        if not (small / "train.txt").exists():
            run([NEW_BIN / "grail-tools", "synth", "--out", small, "--entities", 20000,
                 "--facts", 60000, "--seed", 2])
            lines = (small / "triples.txt").read_text().splitlines(keepends=True)
            (small / "train.txt").write_text("".join(lines[:-2000]))
            (small / "valid.txt").write_text("".join(lines[-2000:]))
        run([NEW_BIN / "grail-train", "--family", "path", "--train", small / "train.txt",
             "--valid", small / "valid.txt", "--out", path, "--max-steps", 20, "--seed", 0,
             *(["--prune-node-ratio", 0.1] if priority else [])])
    return path


def query_files(graph, out_dir):
    """Hub queries (the 20 entities of highest degree, each with a relation of its own
    facts) and uniform ones (200 entities drawn uniformly among the heads)."""
    hubs, uniform = out_dir / "hub.queries.txt", out_dir / "uniform.queries.txt"
    if hubs.exists() and uniform.exists():
        return hubs, uniform
    degree, first = Counter(), {}
    with open(graph) as f:
        for line in f:
            h, r, t = line.rstrip("\n").split("\t")
            degree[h] += 1
            degree[t] += 1
            first.setdefault(h, line)
    top = [e for e, _ in degree.most_common() if e in first][:20]
    hubs.write_text("".join(first[e] for e in top))
    heads = sorted(first)
    rng = random.Random(0)
    uniform.write_text("".join(first[e] for e in rng.sample(heads, min(200, len(heads)))))
    log(f"  hubs: {[(e, degree[e]) for e in top[:5]]} ...")
    return hubs, uniform


CLIENT_FLAGS = []  # --client-flags, before each ranking's command


def rank_args(queries, requests, deadline_ms, concurrency=1, seed=1):
    return [*CLIENT_FLAGS, "--deadline-ms", deadline_ms, "load", "--triples", queries, "--method",
            "rank-tails", "--candidates-per-request", 0, "--top-k", 10, "--concurrency",
            concurrency, "--requests", requests, "--seed", seed]


def measure(args, size, model_name, out):
    graph = synth(size, args.facts_per_entity)
    archive = model(model_name)
    case_dir = out / f"{size}.{model_name}"
    case_dir.mkdir(parents=True, exist_ok=True)
    hubs, uniform = query_files(graph, case_dir)
    result = {"entities": size, "facts": size * args.facts_per_entity, "model": model_name,
              "date": time.strftime("%Y-%m-%d")}
    streamed = graph
    if args.bulk_load:
        result["bulk_load"], streamed = bulk_load(graph, args.new_facts, case_dir / "store",
                                                  case_dir)
        log(f"  bulk load: {json.dumps(result['bulk_load'])}")
    server = Server(NEW_BIN, archive, case_dir / "store",
                    [f for f in args.server_flags.split(",") if f], fresh=not args.bulk_load)
    result["startup_seconds"] = round(server.seconds_to_ready, 1)
    result["rss_after_start_mb"] = round(server.status()["rss_mb"], 1)
    try:
        added = server.client("add", streamed, "--chunk", args.chunk, timeout=7200)
        result["ingest"] = {k: added.get(k) for k in
                            ("facts_added", "entities_created", "seconds", "facts_per_second")}
        rss = server.status()["rss_mb"]
        result["rss_after_ingest_mb"] = round(rss, 1)
        result["rss_bytes_per_fact"] = round(
            rss * 2**20 / max(1, result["facts"] if args.bulk_load else added.get("facts_added", 1)))
        deadline = args.deadline_ms
        for name, queries in (("hub", hubs), ("uniform", uniform)):
            head, relation = queries.read_text().splitlines()[0].split("\t")[:2]
            one = server.client(*CLIENT_FLAGS, "--deadline-ms", deadline, "rank-tails", head,
                                relation,
                                "--top-k", 10, timeout=600, check=False)
            result[f"{name}_example"] = {
                "head": head, "candidates_scored": one.get("candidates_scored"),
                "candidates_pruned": one.get("candidates_pruned"),
                "top": [e["entity"] for e in one.get("ranked", [])[:3]]}
            server.client(*rank_args(queries, 2, deadline), timeout=3600, check=False)  # warm
            ranked = server.client(*rank_args(queries, args.rank_requests, deadline),
                                   timeout=7200, check=False)
            result[f"rank_all_{name}"] = load_summary(ranked)
        result["rss_after_rank_all_mb"] = round(server.status()["rss_mb"], 1)
        score = ["load", "--triples", uniform, "--method", "score", "--concurrency", 16,
                 "--seed", 2]
        idle = server.client(*score, "--requests", args.score_requests, "--warmup", 100,
                             timeout=3600, check=False)
        result["score_c16_idle"] = load_summary(idle)
        looper = subprocess.Popen(
            [str(NEW_BIN / "grail-client"), "--target", f"127.0.0.1:{server.port}", "--json",
             *[str(a) for a in rank_args(uniform, 1000000, deadline, 4, seed=3)]],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3)
        loaded = server.client(*score, "--requests", args.score_requests, "--warmup", 50,
                               timeout=3600, check=False)
        looper.kill()
        looper.wait()
        result["score_c16_with_4_rank_all"] = load_summary(loaded)
        if idle and loaded:
            result["loaded_idle_p99_ratio"] = round(
                loaded["latency_ms"]["p99"] / max(1e-9, idle["latency_ms"]["p99"]), 2)
        result["final"] = server.status()
    finally:
        server.stop()
    return result


RESULTS = ROOT / "bench" / "results" / "scale.jsonl"


def record(result, args, results=RESULTS):
    """Writes `result` as a row of the scale table, replacing the row of the same graph size,
    model and configuration (bench/results/README.md)."""
    # load_summary's p50_ms / p99_ms (older results: latency_ms's p50 / p99)
    p = lambda run: [round((run or {}).get(f"{q}_ms", (run or {}).get("latency_ms", {}).get(q, 0)))
                     for q in ("p50", "p99")]
    bulk = getattr(args, "bulk_load", False)
    configuration = ", ".join(f for f in (
        args.server_flags, args.client_flags,
        f"bulk-load, then {args.new_facts} facts in chunks of {args.chunk}" if bulk else "")
        if f)
    name = ("million-ranking-bulk" if bulk else
            "million-ranking-1e7" if result["entities"] >= 10**7 else
            "million-ranking-priority" if args.client_flags else
            "million-ranking-budget" if args.server_flags else "million-ranking")
    row = {"table": "scale", "entities": result["entities"],
           "facts": result.get("facts", 5 * result["entities"]),
           "model": result["model"], "configuration": configuration,
           "ingest_facts_per_second": round(result["ingest"].get("facts_per_second") or 0),
           "rss_after_ingest_mb": round(result["rss_after_ingest_mb"]),
           "rank_all_hub_ms": p(result.get("rank_all_hub")),
           "rank_all_uniform_ms": p(result.get("rank_all_uniform")),
           "score_c16_idle_ms": p(result.get("score_c16_idle")),
           "loaded_idle_p99_ratio": result.get("loaded_idle_p99_ratio", 0),
           "command": name, "date": result["date"], "machine": result_rows.machine()}
    if bulk:
        row.update({"bulk_load_seconds": round(result["bulk_load"]["seconds"]["total"]),
                    "bulk_load_peak_rss_mb": result["bulk_load"]["peak_rss_mb"],
                    "startup_seconds": result["startup_seconds"]})
    result_rows.replace_rows(results, [row], lambda r: (
        r.get("table"), r.get("entities"), r.get("model"), r.get("configuration")))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(ROOT / "out" / "million"))
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--models", default="path,ultra")
    parser.add_argument("--rank-requests", type=int, default=20)
    parser.add_argument("--score-requests", type=int, default=1000)
    parser.add_argument("--deadline-ms", type=int, default=60000)
    parser.add_argument("--server-flags", default="",
                        help="more grail-server flags, comma-separated, e.g. "
                             "--server-flags=--max-subgraph-nodes=8192,--max-subgraph-edges=32768")
    parser.add_argument("--client-flags", default="",
                        help="more grail-client flags for the rankings, comma-separated, e.g. "
                             "--client-flags=--max-visited-nodes=8192")
    parser.add_argument("--facts-per-entity", type=int, default=5)
    parser.add_argument("--bulk-load", action="store_true",
                        help="load the graph but its last --new-facts lines with grail-tools "
                        "bulk-load, and stream only those in")
    parser.add_argument("--new-facts", type=int, default=200000)
    parser.add_argument("--chunk", type=int, default=1000, help="facts per AddTriples chunk")
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--record", action="store_true",
                        help="also write each result into bench/results/scale.jsonl, from which "
                        "docs/BENCHMARKS.md's scale table is computed (bench/benchmarks_page.py "
                        "--write); GRAIL_MACHINE names the machine")
    args = parser.parse_args()
    CLIENT_FLAGS.extend(f for f in args.client_flags.split(",") if f)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for size in (int(s) for s in args.sizes.split(",")):
        for model_name in args.models.split(","):
            path = out / f"{size}.{model_name}.json"
            if path.exists() and not args.force:
                log(f"== {size} {model_name}: done before ({path})")
                continue
            log(f"== {size} {model_name}")
            result = measure(args, size, model_name, out)
            path.write_text(json.dumps(result, indent=1) + "\n")
            log(json.dumps(result))
            if args.record:
                record(result, args)


if __name__ == "__main__":
    main()
