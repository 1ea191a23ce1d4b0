"""Rows of bench/results/*.jsonl (bench/results/README.md), written by the harnesses'
--record: one place that reads a results file, replaces the rows of the same configuration
and writes it back, and that names the machine and the day."""

import datetime
import json
import os
import socket


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
