"""The Dockerfiles reuse the tested scripts and produce a runnable, non-root grail-server image.

scripts/image.sh builds the images and runs them (deploy/README.md, "Building and checking
the image here"): a release check, about 10 minutes from source, which CI has no room for.
What this suite checks in every run, without building, is: the build stages run
scripts/setup.sh and scripts/build.sh (no package list of their own); the run stages install
scripts/setup.sh --runtime, whose packages (with their dependencies) hold every shared
library the built binaries load; the image's user, ports, volumes, environment and entry
point agree with grail-server's flags; and the HEALTHCHECK command, run as Docker would run
it, passes against the real grail-server and fails once it is gone.
"""

import http.server
import json
import os
import posixpath
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest
from pathlib import Path

import grail_sources

BIN_DIR = None
DOCKERFILES = [grail_sources.ROOT / "Dockerfile",
               grail_sources.DEPLOY / "docker" / "Dockerfile.cuda"]
BINARIES = ["grail-server", "grail-client", "grail-train", "grail-kge-train", "grail-fuse",
            "grail-eval", "grail-tools", "grail-tune"]


def instructions(path):
    """[(KEYWORD, arguments)] with continuation lines joined and comments dropped."""
    lines, current = [], ""
    for raw in path.read_text().splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if current and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    result = []
    for line in lines:
        keyword, _, arguments = line.partition(" ")
        result.append((keyword.upper(), arguments.strip()))
    return result


def stages(path):
    """{stage name: [(KEYWORD, arguments)]}, in order; unnamed stages by index."""
    named, current = {}, None
    for keyword, arguments in instructions(path):
        if keyword == "FROM":
            m = re.search(r"\bAS\s+(\S+)", arguments, flags=re.I)
            current = m.group(1) if m else str(len(named))
            named[current] = []
        if current is not None:
            named[current].append((keyword, arguments))
    return named


def values(stage, keyword):
    return [a for k, a in stage if k == keyword]


def env_of(stage):
    env = {}
    for arguments in values(stage, "ENV"):
        for item in shlex.split(arguments):
            name, _, value = item.partition("=")
            env[name] = value
    return env


def exec_form(arguments):
    return json.loads(arguments) if arguments.startswith("[") else None


class DockerfileTest(unittest.TestCase):
    def check_file(self, path):
        flags = grail_sources.server_flags()
        text = path.read_text()
        self.assertIsNone(re.search(r"apt(-get)?\s+install", text),
                          "install packages through scripts/setup.sh, not here")
        all_stages = stages(path)
        self.assertIn("build", all_stages)
        build = " ".join(values(all_stages["build"], "RUN"))
        self.assertRegex(build, r"scripts/setup\.sh(?!\s+--runtime)")
        self.assertRegex(build, r"scripts/build\.sh[^&;]*-DGRAIL_BUILD_TESTS=OFF")
        self.assertRegex(build, r"scripts/build\.sh[^&;]*-DGRAIL_BUILD_BENCHMARKS=OFF")

        run = list(all_stages.values())[-1]
        self.assertTrue(values(run, "FROM")[0].startswith("debian:12"))
        self.assertRegex(" ".join(values(run, "RUN")), r"setup\.sh --runtime")
        copied = " ".join(a for a in values(run, "COPY") if "--from=build" in a)
        for binary in BINARIES:
            self.assertIn(f"bin/{binary}", copied, f"{binary} is not in the image")

        # A non-root user, numeric so Kubernetes' runAsNonRoot can verify it.
        user = values(run, "USER")[-1]
        uid = user.split(":")[0]
        self.assertRegex(uid, r"^\d+$")
        self.assertNotEqual(int(uid), 0)
        self.assertRegex(" ".join(values(run, "RUN")), rf"useradd[^&]*--uid {uid}\b")

        self.assertEqual(exec_form(values(run, "ENTRYPOINT")[-1])[0], "grail-server")
        env = env_of(run)
        for name in env:
            if name.startswith("GRAIL_"):
                self.assertIsNotNone(grail_sources.flag_of_env(name, flags),
                                     f"{name} names no grail-server flag")
        data_dir, model = env["GRAIL_DATA_DIR"], env["GRAIL_MODEL"]
        self.assertEqual(model, "/models/model.pt")
        self.assertEqual(data_dir, "/data")
        volumes = set()
        for arguments in values(run, "VOLUME"):
            volumes |= set(exec_form(arguments) or arguments.split())
        self.assertEqual(volumes, {data_dir, posixpath.dirname(model)})
        exposed = {int(p.split("/")[0]) for a in values(run, "EXPOSE") for p in a.split()}
        self.assertEqual(exposed, {flags["port"][1], flags["metrics_port"][1]})
        self.assertEqual(int(env.get("GRAIL_METRICS_PORT", flags["metrics_port"][1])),
                         flags["metrics_port"][1])

        self.assertRegex(values(run, "HEALTHCHECK")[-1], r"/(readyz|healthz)\b")

    def test_dockerfile(self):
        self.check_file(DOCKERFILES[0])

    def test_cuda_dockerfile(self):
        self.check_file(DOCKERFILES[1])
        text = DOCKERFILES[1].read_text()
        self.assertIn("CMAKE_PREFIX_PATH", text)
        self.assertEqual(env_of(list(stages(DOCKERFILES[1]).values())[-1])["GRAIL_DEVICE"], "cuda")

    def test_dockerignore_keeps_local_builds_out(self):
        ignored = (grail_sources.ROOT / ".dockerignore").read_text().split()
        self.assertIn("build*/", ignored)

    def test_runtime_packages_hold_every_library_the_binaries_load(self):
        if BIN_DIR is None:
            self.skipTest("no --bin-dir")
        if shutil.which("dpkg-query") is None:
            self.skipTest("not a Debian machine")
        runtime = grail_sources.setup_packages("runtime")
        self.assertIn("libopenblas0-openmp", runtime, "LibTorch without OpenBLAS is ~20x slower")
        # What a package from the list brings along: apt installs its Depends, and theirs
        # (an instrumented build links some of those directly, e.g. gRPC's libcares).
        for package in runtime:
            result = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package],
                                    capture_output=True, text=True)
            self.assertEqual(result.returncode, 0, f"{package} is not installed here")
        provided = set()
        pending = list(runtime)
        while pending:
            package = pending.pop()
            if package in provided:
                continue
            provided.add(package)
            result = subprocess.run(["dpkg-query", "-W", "-f=${Depends}", package],
                                    capture_output=True, text=True)
            if result.returncode != 0:
                continue  # an alternative that is not installed here
            for alternative in re.split(r"[,|]", result.stdout):
                if alternative.strip():
                    pending.append(alternative.split()[0].split(":")[0])
        needs = []  # (binary, library, [paths it may be registered under])
        for binary in BINARIES:
            path = Path(BIN_DIR) / binary
            ldd = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=True)
            resolved = dict(re.findall(r"^\s*(\S+) => (/\S+)", ldd.stdout, flags=re.M))
            needed = re.findall(r"NEEDED\s+(\S+)",
                                subprocess.run(["objdump", "-p", str(path)], capture_output=True,
                                               text=True, check=True).stdout)
            self.assertTrue(needed, binary)
            for library in needed:
                # A sanitizer build (scripts/test.sh) links the sanitizer runtimes; the image
                # is built without them.
                if re.match(r"lib(asan|ubsan|tsan|lsan)\.so", library):
                    continue
                self.assertIn(library, resolved, f"{binary}: {library} does not resolve")
                paths = {resolved[library], os.path.realpath(resolved[library])}
                paths |= {p.replace("/usr/lib/", "/lib/", 1) for p in set(paths)}  # usrmerge
                needs.append((binary, library, sorted(paths)))
        # One dpkg-query for all paths (it is slow per call); unknown paths are just absent.
        everything = sorted({p for _, _, paths in needs for p in paths})
        listing = subprocess.run(["dpkg-query", "-S"] + everything, capture_output=True,
                                 text=True).stdout
        owners = {}
        for line in listing.splitlines():
            packages, _, path = line.rpartition(": ")
            owners[path] = [p.strip().split(":")[0] for p in packages.split(",")]
        for binary, library, paths in needs:
            with self.subTest(binary=binary, library=library):
                owner = next((owners[p] for p in paths if p in owners), None)
                self.assertIsNotNone(owner, f"{paths[0]} belongs to no package")
                self.assertTrue(set(owner) & provided,
                                f"{library} comes from {owner}, which setup.sh --runtime "
                                "does not install")

    def test_healthcheck_passes_only_on_a_ready_server(self):
        if BIN_DIR is None:
            self.skipTest("no --bin-dir")
        bash = grail_sources.tool_or_skip(self, "bash")
        run = list(stages(DOCKERFILES[0]).values())[-1]
        healthcheck, image_env = values(run, "HEALTHCHECK")[-1], env_of(run)
        m = re.search(r"\bCMD\s+(\[.*\])\s*$", healthcheck)
        self.assertIsNotNone(m, "HEALTHCHECK CMD in exec form expected")
        command = json.loads(m.group(1))
        self.assertEqual(command[0], "bash")
        command[0] = bash
        timeout = re.search(r"--timeout=(\d+)s", healthcheck)
        limit = int(timeout.group(1)) if timeout else 30

        def check(metrics_port):
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
            env.update(image_env)
            env["GRAIL_METRICS_PORT"] = str(metrics_port)
            return subprocess.run(command, env=env, capture_output=True, timeout=limit).returncode

        with tempfile.TemporaryDirectory() as work:
            model = grail_sources.train_tiny_model(BIN_DIR, work)
            env = dict(image_env)
            env.update({"GRAIL_MODEL": str(model), "GRAIL_DATA_DIR": os.path.join(work, "store"),
                        "GRAIL_PORT": "0", "GRAIL_METRICS_PORT": "0", "GRAIL_HOST": "127.0.0.1"})
            server = grail_sources.Server(BIN_DIR, env, work)
            try:
                port = server.wait_ready()["metrics_port"]
                self.assertEqual(check(port), 0, "healthy server reported unhealthy")
            finally:
                self.assertEqual(server.stop(), 0, server.log_text())
            self.assertNotEqual(check(port), 0, "stopped server reported healthy")

        # A server that answers but is not ready (loading, or draining) answers /readyz with
        # 503; a stand-in does here, since the real one is in that state only briefly.
        class NotReady(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(503)
                self.end_headers()
                self.wfile.write(b"not ready")

            def log_message(self, *args):
                pass

        with http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotReady) as stand_in:
            threading.Thread(target=stand_in.serve_forever, daemon=True).start()
            try:
                self.assertNotEqual(check(stand_in.server_address[1]), 0,
                                    "a 503 from /readyz reported healthy")
            finally:
                stand_in.shutdown()


if __name__ == "__main__":
    BIN_DIR, argv = grail_sources.split_args(sys.argv)
    unittest.main(argv=argv, verbosity=2)
