#!/usr/bin/env python3
"""Markdown tables from bench/scale_bench.py's results, labels side by side.

    bench/scale_table.py out/scale before after
"""

import json
import sys
from pathlib import Path

GRAPHS = ["wordnet", "wn18rr", "fb_dense", "synth1m"]


def load(out, label, name):
    path = Path(out) / label / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def latency(summary):
    if not summary:
        return "–"
    text = f"{summary['p50_ms']:.0f} / {summary['p99_ms']:.0f}"
    bad = {k: v for k, v in summary.get("status_counts", {}).items() if k != "OK"}
    if bad:
        text += " (" + ", ".join(f"{v} {k}" for k, v in bad.items()) + ")"
    return text


def ratio(loaded, idle):
    if not loaded or not idle or not idle["p99_ms"]:
        return "–"
    return f"{loaded['p99_ms'] / idle['p99_ms']:.1f}"


def main():
    out, labels = sys.argv[1], sys.argv[2:]
    print("| graph | build | ingest facts/s | RSS after ingest MB | RankTails all, 1 client: "
          "p50 / p99 ms | RSS after 1st / Nth rank-all MB (N) | ScoreTriplet 16 clients, idle: "
          "p50 / p99 ms | … while 1 client loops rank-all | p99 ratio | … while 4 loop | p99 "
          "ratio |")
    print("|---|---|---:|---:|---|---|---|---|---:|---|---:|")
    for name in GRAPHS:
        for label in labels:
            r = load(out, label, name)
            if r is None:
                continue
            idle = r.get("score_c16_idle")
            one, four = r.get("score_c16_with_1_rank_all"), r.get("score_c16_with_4_rank_all")
            print(f"| {name} | {label} | {r['ingest']['facts_per_second']:,.0f} | "
                  f"{r['rss_after_ingest_mb']:.0f} | {latency(r.get('rank_all_c1'))} | "
                  f"{r['rss_after_first_rank_all_mb']:.0f} / {r['rss_after_rank_all_calls_mb']:.0f}"
                  f" ({r['rank_all_calls_for_rss']}) | {latency(idle)} | {latency(one)} | "
                  f"{ratio(one, idle)} | {latency(four)} | {ratio(four, idle)} |")
    print()
    print("| case | build | time s | RSS before MB | peak RSS MB while it ran | threads (max) | "
          "RSS 3 s after MB | outcome |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for label in labels:
        r = load(out, label, "hostile")
        if r is None:
            continue
        k = r["k140_one_rank_all"]
        print(f"| one rank-all on K(140,140) | {label} | {k['seconds']:.1f} | "
              f"{k['rss_before_mb']:.0f} | {k['max_rss_mb']:.0f} | {k['max_threads']} | – | "
              f"{'OK' if k['ok'] else 'failed'} |")
        c = r["wn_v4_ind_800_concurrent_rank_all"]
        counts = ", ".join(f"{v} {s}" for s, v in c.get("status_counts", {}).items())
        print(f"| 800 concurrent rank-all, WN18RR_v4_ind | {label} | {c.get('seconds', 0):.1f} | "
              f"{c['rss_before_mb']:.0f} | {c['max_rss_mb']:.0f} | {c['max_threads']} | "
              f"{c['rss_3s_after_mb']:.0f} | {counts} |")


if __name__ == "__main__":
    main()
