#!/usr/bin/env python3
"""Ranks held-out facts over gRPC with grail-client and reports MRR and Hits@k.

For each fact (h, r, t) of FILE: rank-tails h r over every entity of the served graph with
known facts filtered out (the "filtered" setting of link prediction; the held-out fact is not
in the graph), and likewise rank-heads r t. The fact's rank is where t (or h) lands; ties count as the mean of the optimistic and the
pessimistic rank.

  scripts/rank_over_rpc.py --client build/bin/grail-client --target HOST:PORT FILE \
      [--limit N] [--examples K]

Prints K example rankings with entity names, then one JSON line with mrr, hits_at_1/3/10
and n (ranks counted, two per fact).
"""
import argparse
import json
import subprocess
import sys


def rank(client, target, command, args):
    out = subprocess.run([client, "--target", target, "--json", command, *args],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def position(result, entity):
    """The entity's rank, ties counted as the paper's protocol does: the mean of the
    optimistic rank (the server's, ties share the better one) and the pessimistic one (after
    every candidate with the same score). Distant candidates share one exact score, so ties
    are common."""
    for r in result["ranked"]:
        if r["entity"] == entity:
            pessimistic = sum(1 for other in result["ranked"] if other["score"] >= r["score"])
            return (r["rank"] + pessimistic) / 2
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--client", default="build/bin/grail-client")
    parser.add_argument("--target", required=True)
    parser.add_argument("--limit", type=int, default=0, help="facts to rank (0: all)")
    parser.add_argument("--examples", type=int, default=3)
    args = parser.parse_args()

    facts = []
    with open(args.file, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\r\n").split("\t")
            if len(parts) == 3:
                facts.append(parts)
    if args.limit:
        facts = facts[: args.limit]

    ranks = []
    for i, (h, r, t) in enumerate(facts):
        tails = rank(args.client, args.target, "rank-tails", [h, r, "--filter-known"])
        heads = rank(args.client, args.target, "rank-heads", [r, t, "--filter-known"])
        tail_rank, head_rank = position(tails, t), position(heads, h)
        # An entity missing from a ranking (e.g. not in the served graph) counts as last.
        ranks.append(tail_rank or tails["candidates_scored"] + 1)
        ranks.append(head_rank or heads["candidates_scored"] + 1)
        if i < args.examples:
            print(f"({h}, {r}, ?)  true tail {t} ranked {tail_rank} of "
                  f"{tails['candidates_scored']}; top 5:")
            for e in tails["ranked"][:5]:
                mark = "  <- held-out fact" if e["entity"] == t else ""
                print(f"    {e['rank']:>4}  {e['entity']:<40} {e['score']:+.3f}{mark}")
    if not ranks:
        sys.exit("no facts to rank")
    n = len(ranks)
    result = {
        "mrr": sum(1.0 / k for k in ranks) / n,
        "hits_at_1": sum(k <= 1 for k in ranks) / n,
        "hits_at_3": sum(k <= 3 for k in ranks) / n,
        "hits_at_10": sum(k <= 10 for k in ranks) / n,
        "n": n,
        "facts": len(facts),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
