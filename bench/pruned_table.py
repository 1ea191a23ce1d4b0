#!/usr/bin/env python3
"""The pruned-against-exact table of docs/BENCHMARKS.md from out/pruned/results.jsonl
(bench/pruned_ranking.sh, bench/priority_pruning.sh): per case, the exact filtered MRR and
Hits@10, then per budget the change in points, the top-10 overlap and the entities a query
visited (with --messages, also the messages its layers passed, exact and pruned).
  bench/pruned_table.py [RESULTS] [--messages] [--only SUBSTRING]"""

import json
import sys
from collections import defaultdict
from pathlib import Path

args = [a for a in sys.argv[1:]]
messages = "--messages" in args
only = ""
if "--only" in args:
    only = args[args.index("--only") + 1]
    args.remove("--only")
    args.remove(only)
args = [a for a in args if a != "--messages"]
path = Path(args[0] if args else "out/pruned/results.jsonl")
rows = defaultdict(dict)
for line in path.read_text().splitlines():
    r = json.loads(line)
    if only in r["case"]:
        rows[r["case"]][r["ratio"]] = r
ratios = sorted({ratio for case in rows.values() for ratio in case if ratio > 0})
head = "| model / graph (entities, queries) | exact MRR / H@10" + (", messages" if messages else "") + " |"
for ratio in ratios:
    head += f" {ratio:.0%} of nodes: ΔMRR / ΔH@10, top-10 overlap, visited" + (
        ", messages" if messages else "") + " |"
print(head)
print("|---|---|" + "---|" * len(ratios))
for case, by_ratio in rows.items():
    exact = by_ratio[0]
    line = (f"| {case} ({exact['entities']:,}, {exact['queries']}) | "
            f"{100 * exact['mrr']:.1f} / {100 * exact['hits_at_10']:.1f}"
            + (f", {exact.get('mean_messages', 0):,.0f}" if messages else "") + " |")
    for ratio in ratios:
        r = by_ratio.get(ratio)
        if r is None:
            line += " – |"
            continue
        d_mrr = 100 * (r["mrr"] - exact["mrr"])
        d_hits = 100 * (r["hits_at_10"] - exact["hits_at_10"])
        line += (f" {d_mrr:+.1f} / {d_hits:+.1f}, {r['top10_overlap']:.2f}, "
                 f"{r['mean_visited']:,.0f}"
                 + (f", {r.get('mean_messages', 0):,.0f}" if messages else "") + " |")
    print(line)
