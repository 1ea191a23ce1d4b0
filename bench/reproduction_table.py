#!/usr/bin/env python3
"""Summarises bench/reproduce.sh results (out/repro/*.json) as a Markdown table beside the
paper's GraIL and RuleN numbers: mean ± std over seeds, in percent; the full-ranking MRR and
Hits@10 (grail-eval's full_*) last.

    bench/reproduction_table.py [OUT_DIR] [--transductive | --merged [--record MODEL
                                [--command NAME] [--accuracy-only]]]

--transductive: the results of `reproduce.sh --transductive`, beside the appendix's
transductive tables instead. --merged: those of `reproduce.sh --merged` (the `_ind` split's
valid and test facts as the test set), as a table of the full ranking beside the full MRR
published for NBFNet on the same test sets. --record MODEL: with --merged, also writes each
run's full MRR and Hits@10 into bench/results/accuracy.jsonl as MODEL's (a row of the same
model, split and seed replaced), and each split's seconds an epoch (the least and the most of
its runs' epochs) into bench/results/training.jsonl, which docs/BENCHMARKS.md's accuracy and
training tables are computed from (bench/benchmarks_page.py --write); GRAIL_MACHINE names the
machine (default: the host's name). --command NAME: the rows' command in
bench/results/commands.json (default reproduce-merged); --accuracy-only: no training rows (runs
timed beside other work)."""
import glob, json, statistics, sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import result_rows  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "accuracy.jsonl"
TRAINING = "training.jsonl"  # beside RESULTS

PAPER = {  # split: (GraIL AUC-PR, GraIL Hits@10, RuleN AUC-PR, RuleN Hits@10)
    "WN18RR_v1": (94.32, 82.45, 90.26, 80.85), "WN18RR_v2": (94.18, 78.68, 89.01, 78.23),
    "WN18RR_v3": (85.80, 58.43, 76.46, 53.39), "WN18RR_v4": (92.72, 73.41, 85.75, 71.59),
    "fb237_v1": (84.69, 64.15, 75.24, 49.76), "fb237_v2": (90.57, 81.80, 88.70, 77.82),
    "fb237_v3": (91.68, 82.83, 91.24, 87.69), "fb237_v4": (94.46, 89.29, 91.79, 85.60),
}

TRANSDUCTIVE = {  # the appendix's "Transductive results" tables, same columns
    "WN18RR_v1": (89.00, 65.59, 81.79, 63.42), "WN18RR_v2": (90.66, 69.36, 83.97, 68.09),
    "WN18RR_v3": (88.61, 64.63, 81.51, 63.05), "WN18RR_v4": (90.11, 67.28, 82.63, 65.55),
    "fb237_v1": (88.97, 71.93, 87.07, 67.53), "fb237_v2": (93.78, 86.30, 92.49, 88.00),
    "fb237_v3": (95.04, 88.95, 94.26, 91.47), "fb237_v4": (95.68, 91.55, 95.18, 92.35),
}

NBFNET_FULL_MRR = {  # A*Net's paper (Zhu et al. 2023), NBFNet on the inductive splits, full ranking
    "fb237_v1": 42.2, "fb237_v2": 51.4, "fb237_v3": 47.6, "fb237_v4": 45.3,
    "WN18RR_v1": 74.1, "WN18RR_v2": 70.4, "WN18RR_v3": 43.2, "WN18RR_v4": 64.1,
}

def cell(values):
    values = [100 * v for v in values]
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f}"

def full(key, rs):
    """A full-ranking metric (every entity a candidate), when every result has it."""
    return cell([r[key] for r in rs]) if all(key in r for r in rs) else "—"

def epoch_lines(json_path, result):
    """The per-epoch progress lines of the run's training log (none if it is missing); for a
    result of `reproduce.sh --so-far`, those of the epochs its model saw."""
    try:
        stem = json_path[: -len(".json")]
        for protocol in (".transductive", ".merged"):  # the model is the inductive run's
            if stem.endswith(protocol):
                stem = stem[: -len(protocol)]
        if result.get("so_far"):  # <name>.so-far-eE: the log is the run's, <name>.train.log
            stem = stem[: stem.rindex(".so-far-e")]
        with open(stem + ".train.log") as log:
            lines = [line.rstrip() for line in log if line.startswith("epoch ")]
        return [line for line in lines if int(line.split()[1].split("/")[0]) <= result["epochs"]]
    except OSError:
        return []

def epoch_times(lines):
    """Seconds of each epoch the log reports."""
    return [float(line.split()[-2]) for line in lines if line.endswith(" s")]

def epoch_seconds(lines, fallback):
    """Median seconds per epoch: robust to a few epochs slowed by other work on the machine
    (the mean in the JSON is not)."""
    times = epoch_times(lines)
    return statistics.median(times) if times else fallback

def seconds_range(times):
    """"1.9", "112–139": the least and the most, to a tenth under ten seconds."""
    low, high = min(times), max(times)
    shown = (lambda t: f"{t:.1f}") if high < 10 else (lambda t: f"{t:,.0f}")
    return shown(low) if shown(low) == shown(high) else f"{shown(low)}–{shown(high)}"

def kept_epoch(lines):
    """The epoch whose checkpoint grail-train kept (the last one marked best on valid)."""
    best = [line.split()[1].split("/")[0] for line in lines if "(best)" in line]
    return best[-1] if best else "?"

def record(runs, model, results=RESULTS, command="reproduce-merged", training_rows=True):
    """Writes each run of `runs` as an accuracy row of `model` (see the docstring)."""
    rows = [{"table": "accuracy", "split": split, "model": model, "seed": r["seed"],
             "full_mrr": round(100 * r["full_mrr"], 2),
             "hits_at_10": round(100 * r["full_hits_at_10"], 2),
             "epoch_kept": f"{r['kept_epoch']} of {r['epochs']}",
             "command": command, "date": result_rows.today(),
             "machine": result_rows.machine()}
            for (split, _), rs in runs.items() for r in rs if "full_mrr" in r]
    result_rows.replace_rows(results, rows,
                             lambda x: (x.get("model"), x.get("split"), x.get("seed")))
    if not training_rows:
        return
    training = []
    for (split, _), rs in runs.items():
        times = [t for r in rs for t in r.get("epoch_times", [])]
        if not times:
            continue
        threads, jobs = rs[0].get("threads", 1), rs[0].get("jobs", 1)
        training.append({"table": "training", "family": model, "split": split,
                         "seconds_per_epoch": seconds_range(times),
                         "threads": f"{threads} ({jobs} runs side by side)" if jobs > 1
                         else str(threads),
                         "command": command, "date": result_rows.today(),
                         "machine": result_rows.machine()})
    result_rows.replace_rows(results.parent / TRAINING, training,
                             lambda x: (x.get("family"), x.get("split")))

def main(out_dir, protocol, model=None, command="reproduce-merged", training_rows=True):
    paper = TRANSDUCTIVE if protocol == "transductive" else PAPER
    runs = defaultdict(list)
    for path in sorted(glob.glob(f"{out_dir}/*.json")):
        r = json.load(open(path))
        if r.get("protocol", "inductive") != protocol:
            continue
        lines = epoch_lines(path, r)
        r["epoch_seconds"] = epoch_seconds(lines, r["seconds_per_epoch"])
        r["epoch_times"] = epoch_times(lines)
        r["kept_epoch"] = kept_epoch(lines)
        # An unfinished run's result (--so-far) is its own row, never averaged with finished ones.
        tag = r["tag"] + (f" (so far, of {r['epochs_planned']})" if r.get("so_far") else "")
        runs[(r["split"], tag)].append(r)
    if protocol == "inductive-merged":
        print_merged(runs)
        if model:
            record(runs, model, command=command, training_rows=training_rows)
        return
    print("| split | variant | seeds | epochs | kept epoch | s/epoch | eval draws | AUC-PR | paper | Hits@10 | paper | MRR | Hits@1 | RuleN AUC-PR / Hits@10 | full MRR | full Hits@10 |")
    print("|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    order = list(paper)
    for (split, tag), rs in sorted(runs.items(), key=lambda kv: (order.index(kv[0][0]) if kv[0][0] in order else 99, kv[0][1])):
        p = paper.get(split, ("-",) * 4)
        rs = sorted(rs, key=lambda r: r["seed"])
        seeds = ",".join(str(r["seed"]) for r in rs)
        kept = ",".join(r["kept_epoch"] for r in rs)
        epochs = ",".join(sorted({str(r["epochs"]) for r in rs}, key=int))
        print(f"| {split} | {tag} | {seeds} | {epochs} | {kept} | "
              f"{statistics.mean(r['epoch_seconds'] for r in rs):.1f} | {rs[0].get('runs', 1)} | "
              f"{cell([r['auc_pr'] for r in rs])} | {p[0]} | {cell([r['hits_at_10'] for r in rs])} | {p[1]} | "
              f"{cell([r['mrr'] for r in rs])} | {cell([r['hits_at_1'] for r in rs])} | {p[2]} / {p[3]} | "
              f"{full('full_mrr', rs)} | {full('full_hits_at_10', rs)} |")

def print_merged(runs):
    """The full ranking over the merged test set: each seed's MRR, their mean, Hits@1/10, and
    the strict ranking's (ties against the answer, the source a candidate: grail-eval's
    full_strict_*, as the published figures count)."""
    print("| split | variant | seeds | epochs | kept epoch | test facts | full MRR (each seed) | full MRR | full Hits@1 | full Hits@10 | strict: MRR / Hits@10 | NBFNet published full MRR |")
    print("|---|---|---|---:|---|---:|---|---:|---:|---:|---|---:|")
    order = list(NBFNET_FULL_MRR)
    for (split, tag), rs in sorted(runs.items(), key=lambda kv: (order.index(kv[0][0]) if kv[0][0] in order else 99, kv[0][1])):
        rs = sorted(rs, key=lambda r: r["seed"])
        each = ", ".join(f"{100 * r['full_mrr']:.2f}" for r in rs) if all("full_mrr" in r for r in rs) else "—"
        print(f"| {split} | {tag} | {','.join(str(r['seed']) for r in rs)} | "
              f"{','.join(sorted({str(r['epochs']) for r in rs}, key=int))} | "
              f"{','.join(r['kept_epoch'] for r in rs)} | {rs[0].get('n', '?')} | {each} | "
              f"{full('full_mrr', rs)} | {full('full_hits_at_1', rs)} | {full('full_hits_at_10', rs)} | "
              f"{full('full_strict_mrr', rs)} / {full('full_strict_hits_at_10', rs)} | "
              f"{NBFNET_FULL_MRR.get(split, '—')} |")

def take_value(argv, flag, what, default=None):
    """The value after `flag` in `argv` (both removed), or `default` without the flag."""
    if flag not in argv:
        return default
    at = argv.index(flag)
    if at + 1 >= len(argv):
        sys.exit(f"reproduction_table.py: {flag} takes {what}")
    value = argv[at + 1]
    del argv[at:at + 2]
    return value

if __name__ == "__main__":
    flags = {"--transductive": "transductive", "--merged": "inductive-merged"}
    argv = sys.argv[1:]
    model = take_value(argv, "--record", "the model's name")
    command = take_value(argv, "--command", "a name from bench/results/commands.json",
                         "reproduce-merged")
    training_rows = "--accuracy-only" not in argv
    argv = [a for a in argv if a != "--accuracy-only"]
    args = [a for a in argv if a not in flags]
    chosen = [flags[a] for a in argv if a in flags]
    if len(chosen) > 1:
        sys.exit("reproduction_table.py: --transductive and --merged are two protocols: pick one")
    if model and chosen != ["inductive-merged"]:
        sys.exit("reproduction_table.py: --record writes the merged test set's figures: add --merged")
    main(args[0] if args else "out/repro", chosen[0] if chosen else "inductive", model, command,
         training_rows)
