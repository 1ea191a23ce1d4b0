"""Every object of deploy/k8s, as `kubectl apply -k` would send it, passes the Kubernetes API's
OpenAPI schemas (tests/deploy/k8s_schema/validate.cjs: kubernetes-models for Kubernetes 1.27,
and the Prometheus Operator's package for the ServiceMonitor): field types, required fields,
enumerations and formats, as the API server checks them on create. The example Secrets are
checked too.

The objects are rendered with `kubectl kustomize` where kubectl is on PATH, otherwise taken
from the kustomization's files as they are (the schema does not depend on the namespace or
the image names kustomize sets). What the schemas do not catch: a misspelt field name (the
API's schemas allow unknown fields; the server drops or, with strict field validation,
refuses them), and values the API server checks in code (a port's range, a name's length);
k8s_manifests_test.py checks the fields the product relies on by name.

Needs Node.js and `npm ci` in tests/deploy/k8s_schema (scripts/test.sh runs it).
"""

import copy
import os
import shutil
import subprocess
import sys
import unittest

import yaml

import grail_sources

SCHEMA_DIR = grail_sources.ROOT / "tests" / "deploy" / "k8s_schema"


def rendered_objects(test):
    kubectl = shutil.which("kubectl")
    if kubectl:
        return grail_sources.kustomize(test, kubectl, grail_sources.K8S)
    return grail_sources.kustomization_objects()[1]


class K8sSchemaTest(unittest.TestCase):
    def setUp(self):
        self.node = grail_sources.tool_or_skip(self, "node")
        if not (SCHEMA_DIR / "node_modules" / "kubernetes-models").is_dir():
            message = f"run `npm ci` in {SCHEMA_DIR} (scripts/test.sh does)"
            if os.environ.get("CI"):
                self.fail(message)
            self.skipTest(message)

    def validate(self, objects):
        """(exit status, {"KIND NAME": "ok" or the validator's complaint})."""
        result = subprocess.run([self.node, str(SCHEMA_DIR / "validate.cjs")],
                                input=yaml.safe_dump_all(objects), capture_output=True,
                                text=True, timeout=120, cwd=SCHEMA_DIR)
        self.assertEqual(result.stderr, "")
        verdicts = {}
        for line in result.stdout.splitlines():
            status, kind, name = line.split(" ", 2)
            name, _, why = name.partition(": ")
            verdicts[f"{kind} {name}"] = "ok" if status == "ok" else why
        return result.returncode, verdicts

    def test_every_rendered_object_passes_the_api_schema(self):
        objects = rendered_objects(self)
        self.assertGreaterEqual(len(objects), 10)
        status, verdicts = self.validate(objects)
        self.assertEqual(len(verdicts), len(objects))
        self.assertEqual({k: v for k, v in verdicts.items() if v != "ok"}, {})
        self.assertEqual(status, 0)

    def test_the_tune_overlay_passes_the_api_schema(self):
        # Rendered with its component where kubectl is here; else the component's own objects.
        kubectl = shutil.which("kubectl")
        if kubectl:
            objects = grail_sources.kustomize(self, kubectl, grail_sources.K8S_TUNE)
        else:
            objects = grail_sources.tune_component_objects()
        self.assertIn("CronJob", {d["kind"] for d in objects})
        status, verdicts = self.validate(objects)
        self.assertEqual({k: v for k, v in verdicts.items() if v != "ok"}, {})
        self.assertEqual(status, 0)

    def test_the_example_secrets_pass_the_api_schema(self):
        objects = [d for d in yaml.safe_load_all(
            (grail_sources.K8S / "secrets.example.yaml").read_text()) if d]
        status, verdicts = self.validate(objects)
        self.assertEqual(sorted(verdicts.values()), ["ok"] * len(objects))
        self.assertEqual(status, 0)

    def test_an_object_the_api_would_refuse_is_refused(self):
        objects = rendered_objects(self)
        statefulset = next(d for d in objects if d["kind"] == "StatefulSet"
                           and d["metadata"]["name"] == "grail-kg")
        probe = copy.deepcopy(statefulset)
        probe["metadata"]["name"] = "wrong-type"
        container = probe["spec"]["template"]["spec"]["containers"][0]
        container["readinessProbe"]["periodSeconds"] = "five"
        missing = copy.deepcopy(statefulset)
        missing["metadata"]["name"] = "no-selector"
        del missing["spec"]["selector"]
        policy = copy.deepcopy(statefulset)
        policy["metadata"]["name"] = "bad-enum"
        policy["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = "TCPX"
        status, verdicts = self.validate([statefulset, probe, missing, policy])
        self.assertEqual(status, 1)
        self.assertEqual(verdicts["StatefulSet grail-kg"], "ok")
        self.assertIn("periodSeconds", verdicts["StatefulSet wrong-type"])
        self.assertIn("selector", verdicts["StatefulSet no-selector"])
        self.assertNotEqual(verdicts["StatefulSet bad-enum"], "ok")

    def test_a_kind_without_a_schema_is_refused(self):
        status, verdicts = self.validate([{"apiVersion": "example.com/v1", "kind": "Widget",
                                           "metadata": {"name": "w"}}])
        self.assertEqual(status, 1)
        self.assertIn("no schema", verdicts["Widget w"])


if __name__ == "__main__":
    unittest.main(argv=grail_sources.split_args(sys.argv)[1], verbosity=2)
