"""python3 -m grail_kg: the Python client from the shell, printing what grail-client prints.

    python3 -m grail_kg [--target HOST:PORT] [--tls-ca FILE [--tls-cert F --tls-key F]]
                        [--token T] [--json] COMMAND ARGS...

Commands: score H R T | rank-tails H R | rank-heads R T (--top-k K, --filter-known) |
add FILE (--chunk N) | export FILE (--since-sequence S, --page N) | stats | health. Exit status: 0 success, 1 an RPC error (printed as
`error: CODE: message`), 2 a usage error.
"""

import argparse
import json
import struct
import sys

from grail_kg.client import Client, GrailError


def format_float32(value: float) -> str:
    """The shortest decimal that reads back as the same float32 (as grail-client prints)."""
    if value != value or value in (float("inf"), float("-inf")):
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    single = struct.unpack("f", struct.pack("f", value))[0]
    for digits in range(1, 10):
        text = format(single, f".{digits}g")
        if struct.unpack("f", struct.pack("f", float(text)))[0] == single:
            return text
    return repr(single)


def read_triples(path):
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 3:
                raise ValueError(f"{path}:{number}: expected head<TAB>relation<TAB>tail")
            yield tuple(fields)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m grail_kg", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="localhost:50051")
    parser.add_argument("--tls-ca")
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--tls-server-name")
    parser.add_argument("--token", help="bearer token (default: GRAIL_TOKEN)")
    parser.add_argument("--deadline-ms", type=int, default=30000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--filter-known", action="store_true")
    parser.add_argument("--chunk", type=int, default=1000)
    parser.add_argument("--since-sequence", type=int, default=0)
    parser.add_argument("--page", type=int, default=0)
    parser.add_argument("command", choices=["score", "rank-tails", "rank-heads", "add", "export",
                                            "stats", "health"])
    parser.add_argument("args", nargs="*")
    args = parser.parse_args(argv)
    wanted = {"score": 3, "rank-tails": 2, "rank-heads": 2, "add": 1, "export": 1, "stats": 0,
              "health": 0}
    if len(args.args) != wanted[args.command]:
        parser.error(f"{args.command} takes {wanted[args.command]} argument(s)")
    try:
        client = Client(args.target, tls_ca=args.tls_ca, tls_cert=args.tls_cert,
                        tls_key=args.tls_key, tls_server_name=args.tls_server_name,
                        token=args.token,
                        timeout=args.deadline_ms / 1000 if args.deadline_ms > 0 else None)
    except (ValueError, OSError) as e:
        parser.error(str(e))
    try:
        with client:
            return run(client, args)
    except GrailError as e:
        print(f"error: {e.code.name}: {e.message}", file=sys.stderr)
        return 1
    except (ValueError, OSError) as e:
        print(f"error: INVALID_ARGUMENT: {e}", file=sys.stderr)
        return 1


def run(client, args) -> int:
    if args.command == "score":
        s = client.score(*args.args)
        if args.json:
            print(json.dumps({"head": s.head, "relation": s.relation, "tail": s.tail,
                              "score": float(format_float32(s.score)),
                              "probability": float(format_float32(s.probability)),
                              "known_fact": s.known_fact, "subgraph_nodes": s.subgraph_nodes,
                              "subgraph_edges": s.subgraph_edges,
                              "graph_sequence": s.graph_sequence,
                              "scored_by": s.scored_by}))
        else:
            print(format_float32(s.score))
    elif args.command in ("rank-tails", "rank-heads"):
        rank = client.rank_tails if args.command == "rank-tails" else client.rank_heads
        r = rank(*args.args, top_k=args.top_k, filter_known=args.filter_known)
        if args.json:
            print(json.dumps({"ranked": [{"rank": e.rank, "entity": e.entity,
                                          "score": float(format_float32(e.score)),
                                          "known_fact": e.known_fact,
                                          "scored_by": e.scored_by,
                                          "pruned": e.pruned} for e in r.ranked],
                              "candidates_scored": r.candidates_scored,
                              "candidates_filtered": r.candidates_filtered,
                              "candidates_shared_score": r.candidates_shared_score,
                              "candidates_pruned": r.candidates_pruned,
                              "graph_sequence": r.graph_sequence}))
        else:
            for e in r.ranked:
                print(f"{e.rank}\t{e.entity}\t{format_float32(e.score)}")
    elif args.command == "add":
        totals = {"chunks_acknowledged": 0, "facts_added": 0, "duplicate_facts": 0,
                  "entities_created": 0, "relations_created": 0, "last_sequence": 0}
        for ack in client.add_triples(read_triples(args.args[0]), chunk=args.chunk):
            totals["chunks_acknowledged"] += 1
            for key in ("facts_added", "duplicate_facts", "entities_created",
                        "relations_created"):
                totals[key] += getattr(ack, key)
            totals["last_sequence"] = ack.sequence
        print(json.dumps(totals) if args.json else
              " ".join(f"{k}={v}" for k, v in totals.items()))
    elif args.command == "export":
        summary = client.export_to_file(args.args[0], since_sequence=args.since_sequence,
                                        page=args.page)
        summary = {"file": args.args[0], "graph_sequence": summary["graph_sequence"],
                   "since_sequence": args.since_sequence, "facts": summary["facts"],
                   "pages": summary["pages"]}
        print(json.dumps(summary) if args.json else
              " ".join(f"{k}={v}" for k, v in summary.items()))
    elif args.command == "stats":
        print(json.dumps(client.stats()))
    elif args.command == "health":
        status = client.health()
        print(json.dumps({"status": status}) if args.json else status)
        return 0 if status == "SERVING" else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
