"""scripts/external-torch.sh builds the tools and the server against another LibTorch.

Here the "other" LibTorch is Debian's own (the only one on the project's machines); what is
tested is everything the script does for a machine that reaches no package registry:
`prepare --server` downloads and unpacks the Debian packages, only their .deb files are
kept (the folder is unpacked again by `build`, with ar and tar as on a machine without
dpkg), and `build` compiles against that folder. The binaries it makes must load the
carried Abseil, gRPC, protobuf and RocksDB (not the system's), train and evaluate a model
exactly as the product build does, and serve it. A LibTorch with the pre-C++11 string ABI
is refused at configure time.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "deploy"))
import grail_sources  # noqa: E402  (the real server, shared with deploy/)

BIN_DIR = None
ROOT = grail_sources.ROOT
SCRIPT = ROOT / "scripts" / "external-torch.sh"
DEBIAN_TORCH = "/usr/lib/x86_64-linux-gnu/cmake"
# The libraries that must come from the prepared folder.
CARRIED = ("libabsl_", "libgrpc", "libprotobuf", "librocksdb", "libprometheus", "libz.so")


def run(args, env=None, timeout=1800, cwd=ROOT):
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, env=full_env,
                          timeout=timeout, cwd=cwd)


class ExternalTorchBuildTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory(prefix="external_torch_")
        work = Path(cls.work.name)
        cls.deps = work / "deps"
        cls.build = work / "build"
        prepared = run([SCRIPT, "prepare", "--server", "--deps", cls.deps])
        if prepared.returncode != 0:
            raise AssertionError(f"prepare failed:\n{prepared.stdout}\n{prepared.stderr}")
        # Only the .deb files travel: `build` unpacks them again, without dpkg.
        shutil.rmtree(cls.deps / "root")
        # -O0: this checks what the build links against, not how fast it runs.
        cls.built = run([SCRIPT, "build", "--server", "--torch", DEBIAN_TORCH, "--deps", cls.deps,
                         "--build-dir", cls.build, "--", "-DCMAKE_BUILD_TYPE=None",
                         "-DCMAKE_CXX_FLAGS=-O0"],
                        env={"EXTERNAL_TORCH_UNPACK": "ar"})
        cls.bin = cls.build / "bin"

    @classmethod
    def tearDownClass(cls):
        cls.work.cleanup()

    def setUp(self):
        self.assertEqual(self.built.returncode, 0,
                         f"build failed:\n{self.built.stdout[-4000:]}\n{self.built.stderr[-4000:]}")

    def test_prepare_keeps_the_packages_and_their_runtime_libraries_not_the_c_library(self):
        packages = (self.deps / "packages.txt").read_text().split()
        for wanted in ("libabsl-dev", "libabsl20220623", "libgrpc++-dev", "libgrpc29",
                       "librocksdb7.8", "protobuf-compiler-grpc", "nlohmann-json3-dev"):
            self.assertIn(wanted, packages)
        for base in ("libc6", "libstdc++6", "libgcc-s1"):
            self.assertNotIn(base, packages)
        self.assertEqual(len(list((self.deps / "debs").glob("*.deb"))), len(packages))
        # Unpacked again by `build`, links included, all pointing inside the folder.
        root = self.deps / "root"
        self.assertTrue((root / "usr/bin/protoc").exists())
        libz = root / "usr/lib/x86_64-linux-gnu/libz.so"
        self.assertTrue(libz.is_symlink())
        self.assertTrue(str(libz.resolve()).startswith(str(root.resolve())))

    def test_binaries_load_the_carried_libraries_not_the_systems(self):
        root = str((self.deps / "root").resolve())
        for name in ("grail-train", "grail-kge-train", "grail-fuse", "grail-eval",
                     "grail-server", "grail-client"):
            ldd = run(["ldd", self.bin / name])
            self.assertEqual(ldd.returncode, 0, ldd.stderr)
            self.assertNotIn("not found", ldd.stdout)
            carried = 0
            for line in ldd.stdout.splitlines():
                library, _, resolved = line.strip().partition(" => ")
                if library.startswith(CARRIED):
                    carried += 1
                    # Every one of them, also those only a carried library needs (RPATH, not
                    # RUNPATH, reaches those).
                    self.assertTrue(resolved.startswith(root), f"{name}: {line.strip()}")
            self.assertGreater(carried, 5, name)

    def test_a_model_trained_by_this_build_evaluates_as_in_the_product_build(self):
        work = Path(self.work.name)
        graph = work / "graph.txt"
        test = work / "test.txt"
        facts = [(f"e{i}", f"r{i % 3}", f"e{(i * 7 + 3) % 40}") for i in range(160)]
        facts = [f for f in facts if f[0] != f[2]]
        graph.write_text("".join("\t".join(f) + "\n" for f in facts[20:]))
        test.write_text("".join("\t".join(f) + "\n" for f in facts[:20]))
        model = work / "external.pt"
        train = run([self.bin / "grail-train", "--train", graph, "--valid", test, "--out", model,
                     "--epochs", "1", "--hops", "2", "--threads", "1"])
        self.assertEqual(train.returncode, 0, train.stderr)
        args = ["--model", model, "--graph", graph, "--test", test, "--seed", "5"]
        ours = run([self.bin / "grail-eval", *args])
        product = run([Path(BIN_DIR) / "grail-eval", *args])
        self.assertEqual(ours.returncode, 0, ours.stderr)
        self.assertEqual(product.returncode, 0, product.stderr)
        metrics = json.loads(ours.stdout.strip().splitlines()[-1])
        self.assertIn("auc_pr", metrics)
        self.assertEqual(metrics, json.loads(product.stdout.strip().splitlines()[-1]))

    def test_the_server_of_this_build_serves(self):
        work = tempfile.mkdtemp(dir=self.work.name)
        model = grail_sources.train_tiny_model(self.bin, work)
        env = {"GRAIL_MODEL": str(model), "GRAIL_DATA_DIR": os.path.join(work, "store"),
               "GRAIL_PORT": "0", "GRAIL_METRICS_PORT": "-1", "GRAIL_HOST": "127.0.0.1"}
        server = grail_sources.Server(self.bin, env, work)
        try:
            target = f"127.0.0.1:{server.wait_ready()['port']}"
            added = run([self.bin / "grail-client", "--target", target, "add",
                         Path(work) / "triples.txt"], timeout=60)
            self.assertEqual(added.returncode, 0, added.stderr)
            scored = run([self.bin / "grail-client", "--target", target, "--json", "score", "a",
                          "r1", "c"], timeout=60)
            self.assertEqual(scored.returncode, 0, scored.stderr)
            self.assertIn("probability", json.loads(scored.stdout))
        finally:
            self.assertEqual(server.stop(), 0, server.log_text())


class OldAbiTest(unittest.TestCase):
    def test_a_libtorch_with_the_pre_cxx11_abi_is_refused_at_configure_time(self):
        with tempfile.TemporaryDirectory() as work:
            torch = Path(work) / "Torch"
            torch.mkdir()
            # What a LibTorch built with the old ABI declares.
            (torch / "TorchConfig.cmake").write_text(
                'set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=0")\n'
                'set(TORCH_LIBRARIES "")\nset(Torch_FOUND TRUE)\n')
            configure = run(["cmake", "-S", ROOT, "-B", Path(work) / "build",
                             "-DGRAIL_BUILD_SERVICE=OFF", "-DGRAIL_BUILD_TESTS=OFF",
                             "-DGRAIL_BUILD_BENCHMARKS=OFF", f"-DTorch_DIR={torch}"], timeout=300)
            self.assertNotEqual(configure.returncode, 0)
            self.assertIn("pre-C++11 std::string ABI", configure.stderr)


class WithoutPrepareTest(unittest.TestCase):
    def test_build_without_a_prepared_folder_says_what_to_run(self):
        with tempfile.TemporaryDirectory() as work:
            result = run([SCRIPT, "build", "--torch", DEBIAN_TORCH, "--deps", Path(work) / "none",
                          "--build-dir", Path(work) / "build"], timeout=60)
            self.assertEqual(result.returncode, 1)
            self.assertIn("run 'prepare' first", result.stderr)


if __name__ == "__main__":
    BIN_DIR, argv = grail_sources.split_args(sys.argv)
    unittest.main(argv=argv, verbosity=2)
