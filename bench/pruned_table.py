#!/usr/bin/env python3
"""The pruned-against-exact table of docs/BENCHMARKS-log.md from out/pruned/results.jsonl
(bench/pruned_ranking.sh, bench/priority_pruning.sh): per case, the exact filtered MRR and
Hits@10, then per budget the change in points, the top-10 overlap and the entities a query
visited (with --messages, also the messages its layers passed, exact and pruned).
  bench/pruned_table.py [RESULTS] [--messages] [--only SUBSTRING]"""

import argparse
import json
from collections import defaultdict
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("results", nargs="?", default="out/pruned/results.jsonl")
parser.add_argument("--messages", action="store_true")
parser.add_argument("--only", default="", help="the cases whose label has this substring")
args = parser.parse_args()
messages = args.messages
rows = defaultdict(dict)
for line in Path(args.results).read_text().splitlines():
    r = json.loads(line)
    if args.only in r["case"]:
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
