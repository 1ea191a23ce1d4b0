"""Rows of bench/results/*.jsonl (bench/results/README.md), written by the harnesses'
--record: one place that reads a results file, replaces the rows of the same configuration
and writes it back, and that names the machine and the day.

As a command, it records grail-eval's JSON lines (one a split, with "split", as
bench/ultra_zero_shot.sh prints them) measured by COMMAND (a name in commands.json): as
accuracy rows of MODEL, or with --convention as rows of ULTRA's head-query convention table
(the checkpoint, the convention and whether it was fine-tuned read off each line):

    bench/result_rows.py (--accuracy MODEL | --convention) --command COMMAND [FILE.jsonl ...]
    (or stdin)"""

import argparse
import datetime
import json
import os
import socket
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine():
    """GRAIL_MACHINE, or the host's name."""
    return os.environ.get("GRAIL_MACHINE", socket.gethostname())


def today():
    return datetime.date.today().isoformat()


def replace_rows(results, new_rows, key):
    """Writes `new_rows` into the JSON-lines file `results`, each in place of the rows whose
    key(row) is its own (appended after the others)."""
    rows = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()
            if line.strip()] if results.exists() else []
    for row in new_rows:
        rows = [r for r in rows if key(r) != key(row)] + [row]
    results.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def eval_rows(lines, command):
    """Per grail-eval JSON line (bench/ultra_zero_shot.sh's): the line, and what a row of any
    table records of it (its training seed: "train_seed", or "seed" when fine-tuned; full MRR
    and Hits@10, the command, the day and the machine)."""
    for line in lines:
        if not line.strip():
            continue
        r = json.loads(line)
        seed = r.get("train_seed", r.get("seed") if r.get("fine_tuned") else None)
        yield r, {"seed": seed,
                  "full_mrr": round(100 * r["full_mrr"], 2),
                  "hits_at_10": round(100 * r["full_hits_at_10"], 2), "command": command,
                  "date": today(), "machine": machine()}


def accuracy_rows(lines, model, command):
    """Accuracy rows of `model` from grail-eval's JSON lines (full_mrr, full_hits_at_10, split)."""
    return [{"table": "accuracy", "split": r["split"], "model": model, **measured}
            for r, measured in eval_rows(lines, command)]


def convention_rows(lines, command):
    """Rows of ULTRA's head-query convention table from bench/ultra_zero_shot.sh's lines."""
    return [{"table": "convention", "split": r["split"],
             "checkpoint": r["checkpoint"].replace("ultra_", "").replace(".pth", ""),
             "head_queries": r["head_queries"],
             "setting": "fine-tuned" if r.get("fine_tuned") else "zero-shot", **measured}
            for r, measured in eval_rows(lines, command)]


def main(argv, results=RESULTS):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    kind = parser.add_mutually_exclusive_group(required=True)
    kind.add_argument("--accuracy", metavar="MODEL")
    kind.add_argument("--convention", action="store_true")
    parser.add_argument("--command", required=True)
    parser.add_argument("files", nargs="*")
    args = parser.parse_args(argv)
    known = {c["name"] for c in json.loads((results / "commands.json").read_text())["commands"]}
    if args.command not in known:
        sys.exit(f"result_rows.py: no command '{args.command}' in commands.json")
    lines = [line for f in args.files for line in Path(f).read_text().splitlines()] \
        if args.files else sys.stdin.read().splitlines()
    if args.convention:
        rows = convention_rows(lines, args.command)
        replace_rows(results / "convention.jsonl", rows,
                     lambda x: (x.get("split"), x.get("checkpoint"), x.get("head_queries"),
                                x.get("setting"), x.get("seed")))
        print(f"recorded {len(rows)} rows of the head-query convention")
        return
    rows = accuracy_rows(lines, args.accuracy, args.command)
    replace_rows(results / "accuracy.jsonl", rows,
                 lambda x: (x.get("model"), x.get("split"), x.get("seed")))
    print(f"recorded {len(rows)} rows of {args.accuracy}")


if __name__ == "__main__":
    main(sys.argv[1:])
