"""bench/benchmarks_page.py: docs/BENCHMARKS.md's current figures are computed from
bench/results/, and CI fails when the page and the results disagree. Also
bench/reproduction_table.py --record, which writes a reproduction's figures there.
"""

import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE_SCRIPT = ROOT / "bench" / "benchmarks_page.py"


def bench_module(name):
    """bench/NAME.py imported (its own imports of bench/ helpers resolved)."""
    if str(ROOT / "bench") not in sys.path:
        sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def page(*args):
    run = subprocess.run([sys.executable, "-B", str(PAGE_SCRIPT), *map(str, args)],
                         capture_output=True, text=True, timeout=60)
    return run.returncode, run.stdout + run.stderr


class BenchmarksPageTest(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp(prefix="benchmarks_page_test_"))
        self.page = self.dir / "BENCHMARKS.md"
        self.results = self.dir / "results"
        shutil.copy(ROOT / "docs" / "BENCHMARKS.md", self.page)
        shutil.copytree(ROOT / "bench" / "results", self.results)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def rows(self):
        path = self.results / "accuracy.jsonl"
        return path, [json.loads(line) for line in path.read_text().splitlines() if line]

    def test_the_page_is_what_the_results_give(self):
        code, output = page("--check")
        self.assertEqual(code, 0, output)

    def test_a_changed_result_fails_the_check_until_the_page_is_written_again(self):
        path, rows = self.rows()
        for row in rows:
            if row["model"] == "path preset" and row["split"] == "WN18RR_v1":
                row["full_mrr"] = 10.0
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        args = ["--page", self.page, "--results", self.results]
        code, output = page("--check", *args)
        self.assertEqual(code, 1, output)
        self.assertIn("--write", output)
        self.assertEqual(page("--write", *args)[0], 0)
        self.assertEqual(page("--check", *args)[0], 0)
        self.assertIn("| WN18RR_v1 | 10.00 / ", self.page.read_text())

    def test_a_result_naming_an_unknown_command_is_refused(self):
        path, rows = self.rows()
        rows[0]["command"] = "no-such-command"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        code, output = page("--check", "--page", self.page, "--results", self.results)
        self.assertNotEqual(code, 0)
        self.assertIn("no-such-command", output)

    def test_a_page_without_its_markers_is_refused(self):
        self.page.write_text("# Benchmarks\n")
        code, output = page("--check", "--page", self.page, "--results", self.results)
        self.assertNotEqual(code, 0)
        self.assertIn("markers", output)

    def test_recording_a_reproduction_replaces_that_models_row_for_the_split_and_seed(self):
        table = bench_module("reproduction_table")
        path, before = self.rows()
        run = {"seed": 0, "full_mrr": 0.5, "full_hits_at_10": 0.75, "kept_epoch": "3",
               "epochs": 20}
        table.record({("WN18RR_v1", "path"): [run]}, "path preset", results=path)
        _, after = self.rows()
        self.assertEqual(len(after), len(before))
        mine = [r for r in after if (r["model"], r["split"], r["seed"]) ==
                ("path preset", "WN18RR_v1", 0)]
        self.assertEqual(len(mine), 1)
        self.assertEqual((mine[0]["full_mrr"], mine[0]["hits_at_10"]), (50.0, 75.0))
        table.record({("WN18RR_v1", "path"): [run]}, "another model", results=path)
        self.assertEqual(len(self.rows()[1]), len(before) + 1)

    def test_recording_a_reproduction_writes_its_seconds_an_epoch_as_the_training_row(self):
        table = bench_module("reproduction_table")
        path, _ = self.rows()
        training = self.results / "training.jsonl"
        before = [json.loads(line) for line in training.read_text().splitlines() if line]
        runs = [{"seed": s, "full_mrr": 0.5, "full_hits_at_10": 0.75, "kept_epoch": "3",
                 "epochs": 20, "threads": 1, "jobs": 2, "epoch_times": times}
                for s, times in ((0, [120.4, 131.0]), (1, [118.2, 140.6]))]
        table.record({("fb237_v1", "path"): runs}, "path preset", results=path)
        after = [json.loads(line) for line in training.read_text().splitlines() if line]
        self.assertEqual(len(after), len(before))  # the preset's fb237_v1 row, replaced
        mine = [r for r in after if (r["family"], r["split"]) == ("path preset", "fb237_v1")]
        self.assertEqual(len(mine), 1)
        self.assertEqual(mine[0]["seconds_per_epoch"], "118–141")
        self.assertEqual(mine[0]["threads"], "1 (2 runs side by side)")
        args = ["--page", self.page, "--results", self.results]
        self.assertEqual(page("--write", *args)[0], 0)
        self.assertIn("| path preset | fb237_v1 | 118–141 | 1 (2 runs side by side) |",
                      self.page.read_text())

    def test_recording_with_a_command_and_accuracy_only_leaves_the_training_rows_alone(self):
        table = bench_module("reproduction_table")
        path, _ = self.rows()
        training = self.results / "training.jsonl"
        before = training.read_text()
        run = {"seed": 1, "full_mrr": 0.6, "full_hits_at_10": 0.7, "kept_epoch": "9",
               "epochs": 50, "threads": 1, "jobs": 1, "epoch_times": [2.0, 2.2]}
        table.record({("WN18RR_v2", "e50"): [run]}, "a model timed beside other work",
                     results=path, command="reproduce-merged", training_rows=False)
        self.assertEqual(training.read_text(), before)
        mine = [r for r in self.rows()[1] if r["model"] == "a model timed beside other work"]
        self.assertEqual([(r["split"], r["seed"], r["command"]) for r in mine],
                         [("WN18RR_v2", 1, "reproduce-merged")])

    def test_recording_grail_evals_lines_replaces_that_models_row_per_split(self):
        rows = bench_module("result_rows")
        path, before = self.rows()
        lines = self.dir / "eval.jsonl"
        lines.write_text(json.dumps({"split": "fb237_v1", "full_mrr": 0.5012,
                                     "full_hits_at_10": 0.66, "n": 411}) + "\n")
        rows.main(["--accuracy", "ultra 3g zero-shot", "--command", "ultra-zero-shot-3g",
                   str(lines)], results=self.results)
        _, after = self.rows()
        self.assertEqual(len(after), len(before))
        mine = [r for r in after if (r["model"], r["split"]) == ("ultra 3g zero-shot", "fb237_v1")]
        self.assertEqual(len(mine), 1)
        self.assertEqual((mine[0]["full_mrr"], mine[0]["hits_at_10"]), (50.12, 66.0))
        rows.main(["--accuracy", "a new model", "--command", "ultra-zero-shot-3g", str(lines)],
                  results=self.results)
        self.assertEqual(len(self.rows()[1]), len(before) + 1)
        with self.assertRaises(SystemExit):
            rows.main(["--accuracy", "x", "--command", "no-such-command", str(lines)],
                      results=self.results)

    def test_the_last_column_is_the_best_measured_model_minus_the_best_published(self):
        rows = bench_module("result_rows")
        lines = self.dir / "eval.jsonl"
        lines.write_text(json.dumps({"split": "WN18RR_v3", "full_mrr": 0.9123,
                                     "full_hits_at_10": 0.95}) + "\n")
        args = ["--page", self.page, "--results", self.results]
        self.assertEqual(page("--write", *args)[0], 0)
        before = self.page.read_text()
        rows.main(["--accuracy", "a new model", "--command", "ultra-zero-shot-3g", str(lines)],
                  results=self.results)
        self.assertEqual(page("--write", *args)[0], 0)
        text = self.page.read_text()
        row = next(line for line in text.splitlines() if line.startswith("| WN18RR_v3 |"))
        published = [json.loads(line) for line in
                     (self.results / "published.jsonl").read_text().splitlines()
                     if line and json.loads(line).get("table") == "published"
                     and json.loads(line)["model"] == "best published"
                     and json.loads(line)["split"] == "WN18RR_v3"][0]["full_mrr"]
        self.assertTrue(row.endswith(f"| {91.23 - published:+.2f} |"), row)
        count = lambda page_text: int(page_text.split("at or above the best published figure on ")
                                      [1].split(" of ")[0])
        self.assertEqual(count(text), count(before) + 1)

    def test_the_convention_table_sets_each_checkpoints_two_conventions_side_by_side(self):
        rows = bench_module("result_rows")
        lines = self.dir / "eval.jsonl"
        lines.write_text("".join(json.dumps(
            {"split": "WN18RR_v2", "checkpoint": "ultra_9g.pth", "head_queries": convention,
             "fine_tuned": 1, "seed": 0, "full_mrr": mrr, "full_hits_at_10": 0.7}) + "\n"
            for convention, mrr in (("forward", 0.6012), ("inverse", 0.6234))))
        rows.main(["--convention", "--command", "ultra-convention-fine-tuned", str(lines)],
                  results=self.results)
        args = ["--page", self.page, "--results", self.results]
        self.assertEqual(page("--write", *args)[0], 0)
        text = self.page.read_text()
        self.assertIn("9g fine-tuned: forward / inverse |", text)
        self.assertIn("60.12 / **62.34** |", text)

    def test_recording_a_throughput_run_replaces_that_configurations_row(self):
        harness = bench_module("score_throughput")
        path = self.results / "serving.jsonl"
        before = [json.loads(line) for line in path.read_text().splitlines() if line]

        class Args:
            writer_rate, warmup = 1000, 32
        run = {"zipf": 1.0, "clients": 16, "cache_bytes": 268435456, "facts_per_second": 99.04,
               "p50_ms": 10.2, "p99_ms": 20.7}
        harness.record("fb_dense", run, Args, None, results=path)
        after = [json.loads(line) for line in path.read_text().splitlines() if line]
        self.assertEqual(len(after), len(before))
        mine = [r for r in after if (r["heads"], r["clients"], r["condition"], r["pass_cache"]) ==
                ("Zipf", 16, "", True)]
        self.assertEqual(len(mine), 1)
        self.assertEqual(mine[0]["facts_per_second"], 99.0)
        args = ["--page", self.page, "--results", self.results]
        self.assertEqual(page("--check", *args)[0], 1)  # the page now lags the results
        self.assertEqual(page("--write", *args)[0], 0)
        self.assertIn("| 24.0, 583 / 1,381 | 99.0, 10 / 21 |", self.page.read_text())

    def test_recording_a_scale_run_replaces_that_configurations_row(self):
        harness = bench_module("million_ranking")
        path = self.results / "scale.jsonl"
        before = [json.loads(line) for line in path.read_text().splitlines() if line]

        class Args:
            server_flags = "--max-subgraph-nodes=8192,--max-subgraph-edges=32768"
            client_flags = ""
        latency = lambda p50, p99: {"latency_ms": {"p50": p50, "p99": p99}}
        result = {"entities": 1000000, "model": "path", "date": "2026-12-06",
                  "ingest": {"facts_per_second": 40000.4}, "rss_after_ingest_mb": 700.2,
                  "rank_all_hub": latency(20, 30), "rank_all_uniform": latency(21, 31),
                  "score_c16_idle": latency(200, 400), "loaded_idle_p99_ratio": 1.1}
        harness.record(result, Args, results=path)
        after = [json.loads(line) for line in path.read_text().splitlines() if line]
        self.assertEqual(len(after), len(before))
        mine = [r for r in after if r["configuration"] == Args.server_flags]
        self.assertEqual(len(mine), 1)
        self.assertEqual((mine[0]["rank_all_hub_ms"], mine[0]["command"]),
                         ([20, 30], "million-ranking-budget"))


if __name__ == "__main__":
    unittest.main()
