"""bench/reproduce.sh with the real grail-train and grail-eval on a small split.

--so-far: a run stopped after its first epoch is archived at that epoch's best model (the very
archive the run would keep), evaluated into its own result, and left resumable; the plain
command then finishes it. --merged: a finished run's model evaluated again on the `_ind`
split's valid and test facts together, without training. bench/reproduction_table.py keeps
each kind of result apart."""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
REPRODUCE = os.path.join(ROOT, "bench", "reproduce.sh")
TABLE = os.path.join(ROOT, "bench", "reproduction_table.py")
BIN_DIR = None  # --bin-dir
MODEL_FLAGS = ["--family", "path", "--layers", "2", "--dim", "8", "--negatives", "8"]
TAG = "e3_family_path_layers_2_dim_8_negatives_8"  # reproduce.sh's name for --epochs 3 + flags
NAME = f"tiny.{TAG}.seed0"


def write_split(folder, prefix, seed):
    """A random graph over three relations; 30 of its facts held out, split valid/test."""
    rng = random.Random(seed)
    facts = set()
    while len(facts) < 300:
        h, t = rng.randrange(80), rng.randrange(80)
        if h != t:
            facts.add((f"{prefix}{h}", f"r{rng.randrange(3)}", f"{prefix}{t}"))
    facts = sorted(facts)
    rng.shuffle(facts)
    os.makedirs(folder)
    for file, rows in (("train.txt", facts[30:]), ("valid.txt", facts[:15]),
                       ("test.txt", facts[15:30])):
        with open(os.path.join(folder, file), "w") as f:
            f.writelines("\t".join(row) + "\n" for row in rows)


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def snapshot(folder):
    return {name: read(os.path.join(folder, name)) for name in os.listdir(folder)}


def archive_members(path):
    """A TorchScript archive's files by name within it (the zip's top folder is named after the
    file, so two copies of one model differ only there)."""
    with zipfile.ZipFile(path) as archive:
        return {name.split("/", 1)[1]: archive.read(name) for name in archive.namelist()}


class ReproduceTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="reproduce")
        self.data, self.out = os.path.join(self.dir, "data"), os.path.join(self.dir, "out")
        write_split(os.path.join(self.data, "tiny"), "a", 1)
        write_split(os.path.join(self.data, "tiny_ind"), "b", 2)
        os.makedirs(self.out)
        self.env = dict(os.environ, GRAIL_BIN_DIR=BIN_DIR, GRAIL_DATA_DIR=self.data)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def reproduce(self, *extra):
        run = subprocess.run(
            ["bash", REPRODUCE, "--splits", "tiny", "--seeds", "0", "--epochs", "3", "--threads",
             "1", "--runs", "1", "--out", self.out, *extra, "--", *MODEL_FLAGS],
            env=self.env, capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        return run.stdout

    def path(self, suffix):
        return os.path.join(self.out, NAME + suffix)

    def test_a_stopped_run_is_evaluated_at_its_best_epoch_and_then_finishes(self):
        # What a run of --epochs 3 stopped after its first epoch leaves: the checkpoint of
        # epoch 1 and a log without "saved". The archive of that one epoch is the reference.
        checkpoint = self.path(".checkpoint")
        with open(self.path(".train.log"), "w") as log:
            subprocess.run(
                [os.path.join(BIN_DIR, "grail-train"), "--train",
                 os.path.join(self.data, "tiny", "train.txt"), "--valid",
                 os.path.join(self.data, "tiny", "valid.txt"), "--out",
                 os.path.join(self.dir, "reference.pt"), "--epochs", "1", "--seed", "0",
                 "--threads", "1", "--checkpoint-dir", checkpoint, "--resume", *MODEL_FLAGS],
                stderr=log, check=True)
        lines = read(self.path(".train.log"), "r").splitlines(keepends=True)
        with open(self.path(".train.log"), "w") as log:
            log.writelines(line for line in lines if not line.startswith("saved "))
        before = snapshot(checkpoint)

        printed = self.reproduce("--so-far")
        self.assertIn(f"== {NAME}.so-far-e1", printed)
        result = json.loads(read(self.path(".so-far-e1.json"), "r"))
        self.assertEqual((result["split"], result["seed"], result["epochs"]), ("tiny", 0, 1))
        self.assertTrue(result["so_far"])
        self.assertEqual(result["epochs_planned"], 3)
        self.assertIn("mrr", result)
        self.assertEqual(archive_members(self.path(".so-far-e1.pt")),
                         archive_members(os.path.join(self.dir, "reference.pt")))
        self.assertEqual(snapshot(checkpoint), before)  # the run's own checkpoint untouched
        self.assertIn("nothing to train", read(self.path(".so-far-e1.archive.log"), "r"))
        self.assertFalse(os.path.exists(self.path(".json")))  # not mistaken for the finished run
        self.assertIn("(done)", self.reproduce("--so-far"))  # evaluated once per epoch count

        # The plain command resumes the run from epoch 2, finishes it and evaluates it.
        self.reproduce()
        log = read(self.path(".train.log"), "r").splitlines()
        epochs = [line.split()[1] for line in log if line.startswith("epoch ")]
        self.assertEqual(epochs, ["1/1", "2/3", "3/3"])
        final = json.loads(read(self.path(".json"), "r"))
        self.assertEqual(final["epochs"], 3)
        self.assertNotIn("so_far", final)
        self.assertIn("finished", self.reproduce("--so-far"))

        table = subprocess.run([sys.executable, TABLE, self.out], capture_output=True, text=True,
                               check=True).stdout
        rows = [row for row in table.splitlines() if row.startswith("| tiny ")]
        self.assertEqual(len(rows), 2, table)
        for row in rows:  # the full-ranking MRR and Hits@10 last
            self.assertRegex(row, r"\| \d+\.\d\d \| \d+\.\d\d \|$")
        so_far = [row.split(" | ") for row in rows if "(so far, of 3)" in row]
        self.assertEqual(len(so_far), 1, table)
        self.assertEqual(so_far[0][3], "1")  # epochs: the ones its model saw

    def test_merged_evaluates_the_trained_model_on_valid_and_test_together(self):
        self.reproduce()
        epoch_lines = [line for line in read(self.path(".train.log"), "r").splitlines()
                       if line.startswith("epoch ")]
        self.assertIn("== " + NAME, self.reproduce("--merged"))
        # The model is the run's: nothing trained again, one more result beside the first.
        self.assertEqual([line for line in read(self.path(".train.log"), "r").splitlines()
                          if line.startswith("epoch ")], epoch_lines)
        alone = json.loads(read(self.path(".json"), "r"))
        merged = json.loads(read(self.path(".merged.json"), "r"))
        self.assertEqual((alone["protocol"], alone["n"]), ("inductive", 15))
        self.assertEqual((merged["protocol"], merged["n"]), ("inductive-merged", 30))
        self.assertIn("full_mrr", merged)
        self.assertIn("(done)", self.reproduce("--merged"))

        def rows(*flags):
            table = subprocess.run([sys.executable, TABLE, self.out, *flags],
                                   capture_output=True, text=True, check=True).stdout
            return [row.split(" | ") for row in table.splitlines() if row.startswith("| tiny ")]

        self.assertEqual(len(rows()), 1)
        merged_rows = rows("--merged")
        self.assertEqual(len(merged_rows), 1)
        self.assertEqual(merged_rows[0][5], "30")  # test facts
        self.assertEqual(merged_rows[0][6], f"{100 * merged['full_mrr']:.2f}")
        run = subprocess.run(["bash", REPRODUCE, "--transductive", "--merged", "--out", self.out],
                             env=self.env, capture_output=True, text=True)
        self.assertEqual(run.returncode, 2, run.stdout + run.stderr)

    def test_a_run_is_evaluated_on_the_device_it_trains_on_and_named_without_it(self):
        # The binaries behind wrappers that note their arguments: --device reaches grail-eval
        # as well as grail-train, and the run's name (its checkpoint and result) leaves it and
        # --input-threads out, so a run begun on one device resumes on another.
        wrappers, calls = os.path.join(self.dir, "bin"), os.path.join(self.dir, "calls")
        os.makedirs(wrappers)
        for tool in ("grail-train", "grail-eval"):
            with open(os.path.join(wrappers, tool), "w") as f:
                f.write(f'#!/bin/sh\necho "{tool} $*" >> {calls}\n'
                        f'exec {os.path.join(BIN_DIR, tool)} "$@"\n')
            os.chmod(os.path.join(wrappers, tool), 0o755)
        self.env["GRAIL_BIN_DIR"] = wrappers
        run = subprocess.run(
            ["bash", REPRODUCE, "--splits", "tiny", "--seeds", "0", "--epochs", "3", "--threads",
             "1", "--runs", "1", "--out", self.out, "--", *MODEL_FLAGS, "--device", "cpu",
             "--input-threads", "2"], env=self.env, capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn(f"== {NAME}\n", run.stdout)
        self.assertTrue(os.path.isdir(self.path(".checkpoint")))
        self.assertEqual(json.loads(read(self.path(".json"), "r"))["tag"], TAG)
        lines = read(calls, "r").splitlines()
        self.assertEqual([line.split()[0] for line in lines], ["grail-train", "grail-eval"])
        for line in lines:
            self.assertIn(" --device cpu", line)
        self.assertIn(" --input-threads 2", lines[0])
        self.assertNotIn("--input-threads", lines[1])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    args, rest = parser.parse_known_args()
    BIN_DIR = os.path.abspath(args.bin_dir)
    unittest.main(argv=[sys.argv[0]] + rest)
