#!/usr/bin/env python3
"""A live graph from Python: add facts, score one, rank the tails of another. Against a
server whose model knows WordNet's `_hypernym` (scripts/demo.sh starts one).

    PYTHONPATH=build/python python3 client/python/examples/rank_example.py \
        --target localhost:50051 [--tls-ca ca.crt] [--token T]
"""

import argparse

from grail_kg import Client, GrailError


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="localhost:50051")
    parser.add_argument("--tls-ca")
    parser.add_argument("--token")
    args = parser.parse_args()
    with Client(args.target, tls_ca=args.tls_ca, token=args.token) as kg:
        facts = [("dog", "_hypernym", "canine"), ("wolf", "_hypernym", "canine"),
                 ("canine", "_hypernym", "carnivore"), ("cat", "_hypernym", "feline"),
                 ("feline", "_hypernym", "carnivore")]
        for ack in kg.add_triples(facts):
            print(f"stored chunk {ack.chunk_index}: {ack.facts_added} new facts, "
                  f"{ack.entities_created} new entities (sequence {ack.sequence})")
        print("score(wolf, _hypernym, canine) =", kg.score("wolf", "_hypernym", "canine").score)
        ranking = kg.rank_tails("dog", "_hypernym", top_k=3)
        for entry in ranking.ranked:
            print(f"{entry.rank}\t{entry.entity}\t{entry.score:.4f}")
        try:
            kg.score("no-such-entity", "_hypernym", "canine")
        except GrailError as e:
            print("as expected:", e.code.name, "-", e.message)


if __name__ == "__main__":
    main()
