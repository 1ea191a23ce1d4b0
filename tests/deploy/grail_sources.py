"""What the deploy tests hold deploy/ against, read from the project's own sources.

Nothing here is a copy: grail-server's flags come from the ABSL_FLAG lines of
server/rpc/server_config.cc, the exported metric names from the registrations in
server/metrics/server_metrics.cc and server/metrics/process_metrics.cc, the package lists from
scripts/setup.sh. A renamed flag or metric therefore fails the deploy tests until deploy/
follows. The helpers at the end start the real grail-server for the tests that need it.
"""

import json
import os
import re
import socket
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
# deploy/k8s with the fine-tuning CronJob (the component k8s/components/tune).
K8S_TUNE = DEPLOY / "k8s-tune"
TUNE_COMPONENT = K8S / "components" / "tune"

# Labels Prometheus attaches to every scraped series (job, instance) and the ones
# deploy/prometheus/prometheus.yml's kubernetes job and the Prometheus Operator add.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "container", "endpoint"}


def read(relative):
    return (ROOT / relative).read_text(encoding="utf-8")


def _strip_comments(cc_text):
    cc_text = re.sub(r"/\*.*?\*/", " ", cc_text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", cc_text)


def server_flags():
    """grail-server's flags: {name: (type, default as a Python value)}."""
    text = _strip_comments(read("server/rpc/server_config.cc"))
    flags = {}
    for m in re.finditer(r"ABSL_FLAG\(\s*([\w:]+)\s*,\s*(\w+)\s*,\s*([^,]+?)\s*,", text):
        kind, name, default = m.group(1), m.group(2), m.group(3)
        if kind == "int":
            if not re.fullmatch(r"[\d\s<>*+-]+", default):
                raise ValueError(f"cannot read the default of --{name}: {default}")
            value = int(eval(default, {"__builtins__": {}}))  # digits and shifts only
        elif kind == "bool":
            value = {"true": True, "false": False}[default]
        elif kind == "std::string":
            value = json.loads(default)
        else:
            value = default
        flags[name] = (kind, value)
    if not {"model", "data_dir", "port", "metrics_port", "drain_seconds"} <= flags.keys():
        raise ValueError(f"server_config.cc's flags not understood: {sorted(flags)}")
    return flags


def env_name(flag):
    """The environment variable grail-server reads a flag from (common/command_line.h)."""
    return "GRAIL_" + flag.upper()


def flag_of_env(variable, flags):
    for name in flags:
        if env_name(name) == variable:
            return name
    return None


def parse_flag_value(kind, text):
    """Parses `text` as Abseil would for a flag of `kind`; raises ValueError if it would not."""
    if kind == "int":
        return int(text)
    if kind == "bool":
        lowered = text.lower()
        if lowered in ("true", "t", "yes", "y", "1"):
            return True
        if lowered in ("false", "f", "no", "n", "0"):
            return False
        raise ValueError(f"not a bool: {text}")
    return text


def _call_arguments(text, open_paren):
    """The text between the parenthesis at `open_paren` and its match."""
    depth = 0
    i = open_paren
    in_string = False
    while i < len(text):
        c = text[i]
        if in_string:
            if c == "\\":
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return text[open_paren + 1:i]
        i += 1
    raise ValueError("unbalanced parentheses")


class Metric:
    def __init__(self, name, kind, labels):
        self.name, self.kind, self.labels = name, kind, set(labels)

    def series(self):
        """The names it is exported under in the text format."""
        if self.kind == "histogram":
            return {self.name + s for s in ("_bucket", "_sum", "_count")}
        return {self.name}


def exported_metrics():
    """{name: Metric} for every metric grail-server registers."""
    metrics = {}
    for source in ("server/metrics/server_metrics.cc", "server/metrics/process_metrics.cc"):
        text = _strip_comments(read(source))
        # Every metric name literal, whoever passes it to the registry (graph_gauge does).
        for m in re.finditer(r'"((?:grail|process)_[a-z0-9_]+)"', text):
            metrics.setdefault(m.group(1), Metric(m.group(1), "untyped", []))
        # Registrations: the kind, and the label names declared with it (server_metrics.cc's
        # Counters/Histograms, the scrape-time AddFamily).
        for m in re.finditer(r"\b(Counters?|Histograms?|Gauges?|AddGauge|AddCounter|AddFamily)"
                             r"\s*\(", text):
            args = _call_arguments(text, m.end() - 1)
            name = re.search(r'"([a-z_:][a-z0-9_:]*)"', args)
            if name is None:
                continue  # a name passed through a variable (graph_gauge's `name`)
            kind = {"Counter": "counter", "Counters": "counter", "Histogram": "histogram",
                    "Histograms": "histogram", "Gauge": "gauge", "Gauges": "gauge", "AddGauge": "gauge",
                    "AddCounter": "counter", "AddFamily": "gauge"}[m.group(1)]
            if m.group(1) == "AddFamily" and "MetricType::Counter" in args:
                kind = "counter"
            labels = []
            for brace in re.finditer(r'\{\s*("[^"]*"(?:\s*,\s*"[^"]*")*)\s*\}', args):
                labels += re.findall(r'"([^"]*)"', brace.group(1))
            metrics[name.group(1)] = Metric(name.group(1), kind, labels)
    if "grail_requests_total" not in metrics or "process_cpu_seconds_total" not in metrics:
        raise ValueError(f"metric registrations not understood: {sorted(metrics)}")
    return metrics


def exported_series():
    """{series name: Metric}: histograms expanded to _bucket, _sum and _count."""
    return {s: m for m in exported_metrics().values() for s in m.series()}


def setup_packages(mode):
    """scripts/setup.sh's package list: mode 'runtime' or 'dev'."""
    text = read("scripts/setup.sh")
    array = {"runtime": "runtime_packages", "dev": "packages"}[mode]
    m = re.search(r"^%s=\((.*?)^\)" % array, text, flags=re.S | re.M)
    if m is None:
        raise ValueError(f"no {array}=( ... ) in scripts/setup.sh")
    body = re.sub(r"#[^\n]*", " ", m.group(1))
    return body.split()


# --- the real grail-server -------------------------------------------------------------

def free_port():
    """A loopback TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_tiny_model(bin_dir, work):
    """Trains a model on six facts in about a second; returns its path."""
    triples = Path(work) / "triples.txt"
    triples.write_text("a\tr1\tb\nb\tr2\tc\nc\tr1\td\nd\tr2\ta\na\tr2\tc\nb\tr1\td\n")
    model = Path(work) / "model.pt"
    subprocess.run([str(Path(bin_dir) / "grail-train"), "--train", str(triples), "--valid",
                    str(triples), "--out", str(model), "--epochs", "1"],
                   check=True, capture_output=True, timeout=120)
    return model


def make_tls_files(work):
    """A CA and a server certificate it signed for localhost / 127.0.0.1 (openssl, P-256);
    returns the paths (ca, cert, key)."""
    work = Path(work)
    ext = work / "server.ext"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = lambda args: subprocess.run(["openssl", *args], check=True, capture_output=True,
                                      cwd=work, timeout=60)
    run(["req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
         "-subj", "/CN=deploy-test-ca"])
    run(["req", *curve, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"])
    run(["x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
         "-CAcreateserial", "-out", "server.crt", "-days", "1", "-extfile", str(ext)])
    return str(work / "ca.crt"), str(work / "server.crt"), str(work / "server.key")


class Server:
    """grail-server started with exactly `env` (plus PATH) as its environment."""

    def __init__(self, bin_dir, env, work):
        self.work = Path(work)
        self.ready_file = self.work / "ready.json"
        self.log_path = self.work / "server.log"
        full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        full_env.update(env)
        full_env["GRAIL_READY_FILE"] = str(self.ready_file)
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen([str(Path(bin_dir) / "grail-server")], env=full_env,
                                        stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, seconds=60):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.ready_file.exists():
                return json.loads(self.ready_file.read_text())
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"grail-server did not get ready:\n{self.log_text()}")

    def log_text(self):
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text()

    def start_event(self):
        """The JSON of its structured `start` log line (the configuration it runs with)."""
        for line in self.log_text().splitlines():
            if line.startswith("{"):
                event = json.loads(line)
                if event.get("event") == "start":
                    return event
        raise AssertionError(f"no start line in:\n{self.log_text()}")

    def stop(self):
        """SIGTERM, then its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        return self.process.returncode


def kustomization_objects():
    """(the kustomization, every object of the files it lists as resources, as written)."""
    import yaml
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    objects = []
    for name in kustomization["resources"]:
        objects += [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]
    return kustomization, objects


def kustomize(test, kubectl, directory):
    """The objects `kubectl kustomize DIRECTORY` renders (offline, as `kubectl apply -k` would
    send them); fails `test` when it cannot render them."""
    import subprocess
    import yaml
    result = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True,
                            text=True, timeout=120)
    test.assertEqual(result.returncode, 0, result.stderr)
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def tune_component_objects():
    """Every object of the files the tune component lists as resources, as written."""
    import yaml
    component = yaml.safe_load((TUNE_COMPONENT / "kustomization.yaml").read_text())
    objects = []
    for name in component["resources"]:
        objects += [d for d in yaml.safe_load_all((TUNE_COMPONENT / name).read_text()) if d]
    return objects


def tool_or_skip(test, name, required_in_ci=True):
    """The path of tool `name`; skips the test without it, or fails under CI when setup.sh
    installs it (like the C++ tests' REQUIRE_TOOL)."""
    import shutil
    path = shutil.which(name)
    if path is None:
        if required_in_ci and os.environ.get("CI"):
            test.fail(f"{name} not found (scripts/setup.sh installs it)")
        test.skipTest(f"{name} not found")
    return path


def split_args(argv):
    """Pops `--bin-dir DIR` from argv; returns (bin_dir or None, the rest for unittest)."""
    rest, bin_dir = [argv[0]], None
    i = 1
    while i < len(argv):
        if argv[i] == "--bin-dir" and i + 1 < len(argv):
            bin_dir = argv[i + 1]
            i += 2
        else:
            rest.append(argv[i])
            i += 1
    return bin_dir, rest
