"""bench/step_trace.py on a small Chrome trace written here: operators' self time (nested
operators subtracted), the GPU's busy time (overlapping kernels and copies counted once), the
host's waits, all per step."""
import gzip
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "step_trace.py")

# Two steps. Host thread 1: forward (0-100 us) holding mm (10-40) and add (50-70), and a wait
# (80-95); thread 2: backward (110-200). GPU: gemm 20-60 and add 50-80 overlap (60 us busy), a
# copy 150-170.
EVENTS = [
    {"ph": "X", "cat": "cpu_op", "name": "forward", "ts": 0, "dur": 100, "pid": 1, "tid": 1},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10, "dur": 30, "pid": 1, "tid": 1},
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 50, "dur": 20, "pid": 1, "tid": 1},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 12, "dur": 5,
     "pid": 1, "tid": 1},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": 80, "dur": 15,
     "pid": 1, "tid": 1},
    {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 20, "dur": 40, "pid": 0, "tid": 7},
    {"ph": "X", "cat": "kernel", "name": "add", "ts": 50, "dur": 30, "pid": 0, "tid": 7},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 150, "dur": 20, "pid": 0,
     "tid": 8},
    {"ph": "X", "cat": "cpu_op", "name": "backward", "ts": 110, "dur": 90, "pid": 1, "tid": 2},
    {"ph": "s", "cat": "ac2g", "name": "flow", "ts": 12, "pid": 1, "tid": 1},
]


class StepTraceTest(unittest.TestCase):
    def summarise(self, compress):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "trace.json" + (".gz" if compress else ""))
            with (gzip.open if compress else open)(path, "wt") as f:
                json.dump({"traceEvents": EVENTS}, f)
            out = os.path.join(folder, "summary.json")
            subprocess.run([sys.executable, SCRIPT, path, "--steps", "2", "--top", "3",
                            "--json", out], check=True, capture_output=True)
            with open(out) as f:
                return json.load(f)

    def test_per_step_figures(self):
        s = self.summarise(compress=False)
        self.assertAlmostEqual(s["window_ms_per_step"], 0.200 / 2)
        self.assertAlmostEqual(s["gpu_busy_ms_per_step"], 0.080 / 2)  # 60 + 20 us
        self.assertAlmostEqual(s["gpu_busy_share"], 0.4)
        self.assertEqual(s["kernels_per_step"], 1.0)
        self.assertAlmostEqual(s["host_waiting_ms_per_step"], 0.015 / 2)
        self.assertEqual(s["launch_calls_per_step"], 0.5)
        main = dict(s["threads"]["1"]["top_self_ms_per_step"])
        self.assertAlmostEqual(main["forward"], 0.050 / 2)  # 100 - 30 - 20
        self.assertAlmostEqual(main["aten::mm"], 0.030 / 2)
        self.assertAlmostEqual(s["threads"]["2"]["busy_ms_per_step"], 0.090 / 2)

    def test_a_gzipped_trace_reads_the_same(self):
        self.assertEqual(self.summarise(compress=True), self.summarise(compress=False))


if __name__ == "__main__":
    unittest.main()
