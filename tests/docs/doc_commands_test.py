"""Runs the documentation's commands: every fenced block whose info string is `sh runnable`
in README.md, docs/*.md and deploy/README.md.

Each page runs as one bash script (`set -euo pipefail`), its runnable blocks in order, so a
block may use what an earlier block of the same page made. It runs in a fresh directory in
which `build` links to the build tree under test, so a page's `build/bin/grail-train` is this
build's, as it is a reader's after `scripts/build.sh` in the repository root; `repo` links to
the checkout, for pages that read its files. Pages use the default ports (50051, 9090);
they are moved to free ones here so that pages run beside other tests: written out, the
numbers are replaced, and left to the defaults, GRAIL_PORT and GRAIL_METRICS_PORT (the
server's) and GRAIL_TARGET (the client's) point there. What a page starts in the background
is killed when it ends (it runs in its own process group).

Other blocks (```sh without the mark) are shown, not run: the two README commands (they are
CI itself), installs, cluster commands, hours of training. A block marked runnable that
fails fails its page, with the script and its output.

    python3 tests/docs/doc_commands_test.py --bin-dir BUILD/bin [--page SUBSTRING]
"""

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "deploy" / "README.md"]
FENCE = re.compile(r"^```sh runnable[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
BIN_DIR = None
PAGE_TIMEOUT = 600


def runnable_blocks(text):
    return [m.group(1) for m in FENCE.finditer(text)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_page(script, build_dir):
    """(exit status, output) of `script` run as a page is."""
    ports = {"50051": str(free_port()), "9090": str(free_port())}
    script = re.sub(r"\b(50051|9090)\b", lambda m: ports[m.group(1)], script)
    with tempfile.TemporaryDirectory(prefix="grail-docs-") as work:
        os.symlink(build_dir, Path(work) / "build")
        os.symlink(ROOT, Path(work) / "repo")
        log = Path(work) / ".page-output"
        # python3 is Debian's, as on a fresh Debian 12 machine (python3-grpcio and
        # python3-torch are its packages); some machines put another Python first on PATH.
        shims = Path(work) / ".shims"
        shims.mkdir()
        os.symlink("/usr/bin/python3", shims / "python3")
        with open(log, "w") as out:
            process = subprocess.Popen(
                ["bash", "-c", "set -euo pipefail\n" + script], cwd=work, stdout=out,
                stderr=subprocess.STDOUT, text=True, start_new_session=True,
                env={**os.environ, "PATH": f"{shims}:{os.environ.get('PATH', '')}",
                     "GRAIL_TOKEN": "", "GRAIL_PORT": ports["50051"],
                     "GRAIL_METRICS_PORT": ports["9090"],
                     "GRAIL_TARGET": f"localhost:{ports['50051']}"})
            try:
                process.wait(timeout=PAGE_TIMEOUT)
                timed_out = ""
            except subprocess.TimeoutExpired:
                timed_out = f"\n(killed after {PAGE_TIMEOUT} s)"
            finally:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait()
        return process.returncode, log.read_text(errors="replace") + timed_out


class DocCommandsTest(unittest.TestCase):
    def test_the_entrance_and_getting_started_have_runnable_commands(self):
        for page in [ROOT / "README.md", ROOT / "docs" / "getting-started.md"]:
            with self.subTest(page=page.name):
                self.assertGreaterEqual(len(runnable_blocks(page.read_text())), 1)

    def test_a_failing_command_fails_its_page(self):
        status, _ = run_page("true\nfalse\necho never\n", Path(BIN_DIR).parent)
        self.assertNotEqual(status, 0)
        status, output = run_page("ls build/bin/grail-server && echo 50051\n",
                                  Path(BIN_DIR).parent)
        self.assertEqual(status, 0, output)
        self.assertNotIn("50051", output)  # the default port was replaced

    def test_every_runnable_command_of_every_page_succeeds(self):
        ran = 0
        for page in PAGES:
            blocks = runnable_blocks(page.read_text())
            if not blocks:
                continue
            name = str(page.relative_to(ROOT))
            if PAGE_FILTER and PAGE_FILTER not in name:
                continue
            with self.subTest(page=name):
                script = "\n".join(blocks)
                status, output = run_page(script, Path(BIN_DIR).parent)
                self.assertEqual(status, 0, f"\n--- {name}, its runnable commands:\n{script}"
                                            f"\n--- output:\n{output[-8000:]}")
                ran += 1
        self.assertGreater(ran, 0)


def main():
    global BIN_DIR, PAGE_FILTER
    args = sys.argv[:]
    PAGE_FILTER = None
    if "--bin-dir" in args:
        i = args.index("--bin-dir")
        BIN_DIR = os.path.abspath(args[i + 1])
        del args[i:i + 2]
    if "--page" in args:
        i = args.index("--page")
        PAGE_FILTER = args[i + 1]
        del args[i:i + 2]
    if BIN_DIR is None:
        BIN_DIR = str(ROOT / "build" / "bin")
    unittest.main(argv=args, verbosity=2)


PAGE_FILTER = None
if __name__ == "__main__":
    main()
