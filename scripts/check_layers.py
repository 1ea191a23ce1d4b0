#!/usr/bin/env python3
"""Checks every project #include against the layer table in docs/ARCHITECTURE.md.

The table ("Layout") has a row per folder: its name, what it owns, and the folders it
includes directly. A folder may include its own headers, those of the folders its row names
and, through them, anything lower (the arrows are followed transitively); an include up or
sideways fails, naming the file and line. A source folder missing from the table fails too,
and so does a table whose arrows form a loop. The third-party headers in THIRD_PARTY may be
included only by the folders named there (RocksDB by the store, LibTorch by the models and
the trainers).

    scripts/check_layers.py [--root DIR]     exit 0 when every include keeps to the table
"""

import argparse
import re
import sys
from pathlib import Path

SOURCE_SUFFIXES = (".h", ".cc", ".cu")
# Folders whose sources are checked; tests/, bench/ and fuzz/ may include anything.
SOURCE_ROOTS = ("common", "graph", "store", "model", "eval", "train", "datasets", "tools",
                "proto", "server", "client")
# Generated headers and where they come from.
GENERATED = {"kg/": "proto/"}
# Third-party header prefixes and the folders (prefixes) that may include them.
THIRD_PARTY = {
    "rocksdb/": ("store/",),
    "torch/": ("model/", "train/"),
    "ATen/": ("model/", "train/"),
    "c10/": ("model/",),
    "nats/": ("server/replication/",),
    "prometheus/": ("server/metrics/",),
    "microhttpd": ("server/metrics/",),
}
INCLUDE = re.compile(r'^\s*#\s*include\s+([<"])([^>"]+)[>"]')
ROW = re.compile(r"^\|\s*`([^`]+/)`[^|]*\|[^|]*\|([^|]*)\|\s*$")


def read_table(architecture):
    """{folder: set of folders it includes directly}, from the Layout table's rows."""
    table = {}
    for line in architecture.read_text(encoding="utf-8").splitlines():
        match = ROW.match(line)
        if match:
            folder, uses = match.groups()
            table[folder] = set(re.findall(r"`([^`]+/)`", uses))
            if "anything" in uses:
                table[folder] = None
    return table


def closure(table):
    """{folder: every folder below it}; raises ValueError on a loop or an unknown folder."""
    below, visiting = {}, set()

    def visit(folder):
        if folder in below:
            return below[folder]
        if folder in visiting:
            raise ValueError(f"the layer table has a loop through {folder}")
        if folder not in table:
            raise ValueError(f"the layer table names {folder}, which has no row")
        visiting.add(folder)
        reach = set()
        for used in table[folder] or ():
            reach.add(used)
            reach |= visit(used)
        visiting.discard(folder)
        below[folder] = reach
        return reach

    for folder in table:
        if table[folder] is not None:
            visit(folder)
    return below


def folder_of(path, folders):
    """The table's folder holding `path`: the longest row that is a prefix of its directory,
    unless that row has rows of its own below it (`model/` holds only the files directly in
    model/: a file of a new model/x/ has no row); None when there is none."""
    directory = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
    best = max((f for f in folders if directory.startswith(f)), key=len, default=None)
    if best is None or best == directory:
        return best
    nested = any(f != best and f.startswith(best) for f in folders)
    return None if nested else best


def check(root):
    errors = []
    table = read_table(root / "docs" / "ARCHITECTURE.md")
    if not table:
        return ["docs/ARCHITECTURE.md has no Layout table with an `includes` column"]
    try:
        below = closure(table)
    except ValueError as error:
        return [f"docs/ARCHITECTURE.md: {error}"]
    for top in SOURCE_ROOTS:
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
                continue
            relative = path.relative_to(root).as_posix()
            home = folder_of(relative, table)
            if home is None:
                errors.append(f"{relative}: its folder has no row in docs/ARCHITECTURE.md's "
                              "layer table")
                continue
            if table[home] is None:
                continue
            allowed = below[home] | {home}
            for number, line in enumerate(path.read_text(encoding="utf-8",
                                                         errors="replace").splitlines(), 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                header = match.group(2)
                for prefix, owners in THIRD_PARTY.items():
                    if header.startswith(prefix) and not relative.startswith(owners):
                        errors.append(f"{relative}:{number}: includes {header}; only "
                                      f"{', '.join(owners)} may include {prefix}")
                if match.group(1) != '"':
                    continue
                target = next((f for g, f in GENERATED.items() if header.startswith(g)), None)
                if target is None:
                    if header.split("/")[0] not in SOURCE_ROOTS:
                        continue  # a third-party header
                    target = folder_of(header, table)
                    if target is None:
                        errors.append(f"{relative}:{number}: includes {header}, whose folder "
                                      "has no row in the layer table")
                        continue
                if target not in allowed:
                    errors.append(f"{relative}:{number}: includes {header}: {home} -> {target} "
                                  "is not an arrow of docs/ARCHITECTURE.md's layer table "
                                  "(up or sideways)")
    return errors


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args()
    errors = check(args.root.resolve())
    for error in errors:
        print(error, file=sys.stderr)
    if errors:
        print(f"{len(errors)} include(s) break the layers", file=sys.stderr)
        return 1
    print("every include keeps to docs/ARCHITECTURE.md's layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
