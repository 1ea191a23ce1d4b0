"""deploy/prometheus/prometheus.yml is a valid Prometheus configuration that finds
grail-server's metrics port, both as a static target and through the pod annotations of
deploy/k8s's StatefulSet.

promtool (Debian's `prometheus`) checks the file. Debian builds Prometheus without
Kubernetes service discovery, so its promtool rejects `kubernetes_sd_configs` as an unknown
field: the test then checks the rest of the file (the relabelling rules included) with that
block swapped for a static one, and runs the relabelling itself over the targets Kubernetes
would discover for our pod, to show they keep exactly its metrics port.
"""

import copy
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import yaml

import grail_sources

CONFIG = grail_sources.DEPLOY / "prometheus" / "prometheus.yml"


def relabel(labels, rules):
    """Prometheus's relabelling (keep, drop, replace) over one target; None if dropped."""
    labels = dict(labels)
    for rule in rules:
        action = rule.get("action", "replace")
        value = rule.get("separator", ";").join(labels.get(n, "")
                                                for n in rule.get("source_labels", []))
        regex = re.compile(rule.get("regex", "(.*)"))  # anchored, as Prometheus anchors it
        match = regex.fullmatch(value)
        if action == "keep" and not match:
            return None
        if action == "drop" and match:
            return None
        if action == "replace" and match:
            replacement = re.sub(r"\$\{?(\d+)\}?", r"\\g<\1>", rule.get("replacement", "$1"))
            result = match.expand(replacement)
            if result:
                labels[rule["target_label"]] = result
            else:
                labels.pop(rule["target_label"], None)
    return labels


def annotation_label(name):
    return "__meta_kubernetes_pod_annotation_" + re.sub(r"[^a-zA-Z0-9_]", "_", name)


class PrometheusConfigTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.config = yaml.safe_load(CONFIG.read_text())
        cls.jobs = {j["job_name"]: j for j in cls.config["scrape_configs"]}
        cls.flags = grail_sources.server_flags()
        docs = [d for f in sorted(grail_sources.K8S.glob("*.yaml"))
                for d in yaml.safe_load_all(f.read_text()) if d]
        cls.statefulset = next(d for d in docs if d["kind"] == "StatefulSet"
                               and d["metadata"]["name"] == "grail-kg")
        cls.kustomization = next(d for d in docs if d.get("kind") == "Kustomization")

    def promtool_check(self, config):
        promtool = grail_sources.tool_or_skip(self, "promtool")
        with tempfile.TemporaryDirectory() as work:
            path = Path(work) / "prometheus.yml"
            path.write_text(yaml.safe_dump(config))
            result = subprocess.run([promtool, "check", "config", str(path)],
                                    capture_output=True, text=True)
        return result.returncode, result.stdout + result.stderr

    def test_promtool_accepts_it(self):
        code, output = self.promtool_check(self.config)
        if code != 0 and "field kubernetes_sd_configs not found" in output:
            # Debian's Prometheus has no Kubernetes discovery; check everything else.
            static = copy.deepcopy(self.config)
            for job in static["scrape_configs"]:
                if job.pop("kubernetes_sd_configs", None) is not None:
                    job["static_configs"] = [{"targets": ["pod.invalid:1"]}]
            code, output = self.promtool_check(static)
        self.assertEqual(code, 0, output)

    def test_static_job_scrapes_the_default_metrics_port(self):
        static = [j for j in self.jobs.values() if "static_configs" in j]
        self.assertTrue(static, "no static_configs job")
        metrics_port = self.flags["metrics_port"][1]
        for job in static:
            self.assertEqual(job.get("metrics_path", "/metrics"), "/metrics")
            for group in job["static_configs"]:
                for target in group["targets"]:
                    self.assertEqual(int(target.rsplit(":", 1)[1]), metrics_port, target)

    def test_kubernetes_job_keeps_only_the_pods_metrics_port(self):
        jobs = [j for j in self.jobs.values() if "kubernetes_sd_configs" in j]
        self.assertEqual(len(jobs), 1, "one kubernetes_sd job expected")
        job = jobs[0]
        sd = job["kubernetes_sd_configs"][0]
        self.assertEqual(sd["role"], "pod")
        if "namespaces" in sd:
            self.assertIn(self.kustomization["namespace"], sd["namespaces"]["names"])

        # The targets role: pod discovers for one of our pods: one per container port.
        template = self.statefulset["spec"]["template"]
        pod_labels = {"__meta_kubernetes_namespace": self.kustomization["namespace"],
                      "__meta_kubernetes_pod_name": "grail-kg-0"}
        for key, value in template["metadata"].get("annotations", {}).items():
            pod_labels[annotation_label(key)] = value
        for key, value in template["metadata"]["labels"].items():
            pod_labels["__meta_kubernetes_pod_label_" + re.sub(r"\W", "_", key)] = value
        discovered = []
        for container in template["spec"]["containers"]:
            for port in container["ports"]:
                target = dict(pod_labels)
                target["__address__"] = f"10.1.2.3:{port['containerPort']}"
                target["__meta_kubernetes_pod_container_port_name"] = port.get("name", "")
                target["__metrics_path__"] = job.get("metrics_path", "/metrics")
                discovered.append(target)
        kept = [t for t in (relabel(d, job["relabel_configs"]) for d in discovered) if t]

        metrics_port = self.flags["metrics_port"][1]
        self.assertEqual(len(kept), 1, kept)
        self.assertEqual(kept[0]["__address__"], f"10.1.2.3:{metrics_port}")
        self.assertEqual(kept[0]["__metrics_path__"], "/metrics")
        self.assertEqual(kept[0]["pod"], "grail-kg-0")

        # And a pod that did not ask to be scraped is not.
        unannotated = [{k: v for k, v in d.items()
                        if k != annotation_label("prometheus.io/scrape")} for d in discovered]
        self.assertEqual([t for t in (relabel(d, job["relabel_configs"])
                                      for d in unannotated) if t], [])


if __name__ == "__main__":
    unittest.main(argv=grail_sources.split_args(sys.argv)[1], verbosity=2)
