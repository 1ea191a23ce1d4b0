"""The fine-tuning CronJob (deploy/k8s/components/tune, applied by deploy/k8s-tune) agrees
with grail-tune, with the StatefulSet it tunes and with the Secrets it reads, and asks for
nothing more than it needs.

Every argument the CronJob gives grail-tune is one of its flags with a value it takes (the
real binary, with --bin-dir); --reload-target names every replica the StatefulSet runs, by
the headless Service's per-pod names; the archive it replaces is the one the server loads, on
the volume both mount; its token comes from a Secret the example lists, with a key the
tokens file's example gives admin scope; it gets no Kubernetes API token. With kubectl on
PATH the overlay is rendered too: the StatefulSet's models then live on the shared claim.
"""

import os
import posixpath
import subprocess
import sys
import unittest

import yaml

import grail_sources

BIN_DIR = None


def docs_of(path):
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


class TuneComponentTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        objects = grail_sources.tune_component_objects()
        cls.cronjob = next(d for d in objects if d["kind"] == "CronJob")
        cls.pvc = next(d for d in objects if d["kind"] == "PersistentVolumeClaim")
        cls.pod = cls.cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        cls.container = cls.pod["containers"][0]
        cls.args = dict(a[2:].split("=", 1) for a in cls.container["args"])
        base = {}
        for path in grail_sources.K8S.glob("*.yaml"):
            for d in docs_of(path):
                base.setdefault(d["kind"], []).append(d)
        cls.statefulset = next(d for d in base["StatefulSet"]
                               if d["metadata"]["name"] == "grail-kg")
        cls.configmap = next(d for d in base["ConfigMap"]
                             if d["metadata"]["name"] == "grail-kg-config")["data"]
        cls.headless = next(d for d in base["Service"]
                            if d["metadata"]["name"] == "grail-kg-headless")
        cls.patch = docs_of(grail_sources.TUNE_COMPONENT / "statefulset-models.yaml")[0]

    def test_every_argument_is_a_grail_tune_flag_it_takes(self):
        if BIN_DIR is None:
            self.skipTest("needs --bin-dir")
        run = subprocess.run([os.path.join(BIN_DIR, "grail-tune"), *self.container["args"],
                              "--help"], capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(self.container["command"], ["grail-tune"])

    def test_it_reloads_every_replica_by_its_per_pod_name(self):
        port = next(p["port"] for p in self.headless["spec"]["ports"] if p["name"] == "grpc")
        service = self.headless["metadata"]["name"]
        replicas = self.statefulset["spec"]["replicas"]
        name = self.statefulset["metadata"]["name"]
        expected = [f"{name}-{i}.{service}:{port}" for i in range(replicas)]
        self.assertEqual(self.args["reload-target"].split(","), expected)
        self.assertIn(self.args["target"], expected)

    def test_it_replaces_the_archive_the_server_loads_on_the_volume_both_mount(self):
        model = self.configmap["GRAIL_MODEL"]
        self.assertEqual(self.args["model-file"], model)
        models_dir = posixpath.dirname(model)
        claim = self.pvc["metadata"]["name"]
        self.assertEqual(self.pvc["spec"]["accessModes"], ["ReadWriteMany"])
        mounts = {m["mountPath"]: m["name"] for m in self.container["volumeMounts"]}
        volumes = {v["name"]: v for v in self.pod["volumes"]}
        self.assertEqual(volumes[mounts[models_dir]]["persistentVolumeClaim"]["claimName"], claim)
        self.assertFalse(next(m for m in self.container["volumeMounts"]
                              if m["mountPath"] == models_dir).get("readOnly", False))
        # The StatefulSet's server mounts its `model` volume there, which the patch puts on
        # the same claim (dropping the emptyDir), and seeds it only when empty.
        server = self.statefulset["spec"]["template"]["spec"]["containers"][0]
        server_mounts = {m["mountPath"]: m["name"] for m in server["volumeMounts"]}
        patched = {v["name"]: v for v in self.patch["spec"]["template"]["spec"]["volumes"]}
        volume = patched[server_mounts[models_dir]]
        self.assertEqual(volume["persistentVolumeClaim"]["claimName"], claim)
        self.assertIn("emptyDir", volume)
        self.assertIsNone(volume["emptyDir"])
        init = self.patch["spec"]["template"]["spec"]["initContainers"][0]
        self.assertIn(f"[ -f {model} ] ||", init["command"][-1])
        # The report lands beside the archive, where an operator finds it.
        self.assertEqual(posixpath.dirname(self.args["report"]), models_dir)
        self.assertIn(self.args["work-dir"], {m["mountPath"] for m in self.container["volumeMounts"]})

    def test_it_asks_for_what_it_needs_and_nothing_more(self):
        self.assertIs(self.pod["automountServiceAccountToken"], False)
        self.assertEqual(self.cronjob["spec"]["concurrencyPolicy"], "Forbid")
        self.assertEqual(self.cronjob["spec"]["jobTemplate"]["spec"]["backoffLimit"], 0)
        security = self.container["securityContext"]
        self.assertIs(security["allowPrivilegeEscalation"], False)
        self.assertIs(security["readOnlyRootFilesystem"], True)
        self.assertEqual(security["capabilities"]["drop"], ["ALL"])
        self.assertIs(self.pod["securityContext"]["runAsNonRoot"], True)
        # The token: a Secret the example lists, holding an admin-scope token (ReloadModel).
        token = next(e for e in self.container["env"] if e["name"] == "GRAIL_TOKEN")
        ref = token["valueFrom"]["secretKeyRef"]
        secrets = {d["metadata"]["name"]: d
                   for d in docs_of(grail_sources.K8S / "secrets.example.yaml")}
        self.assertIn(ref["key"], secrets[ref["name"]]["stringData"])
        tokens = secrets["grail-kg-tokens"]["stringData"]["tokens"].split("\n")
        self.assertTrue(any(line.split()[1:3] == ["admin", "tune"] for line in tokens if line))
        # It trusts the servers' CA from the Secret the StatefulSet mounts.
        tls = next(v for v in self.pod["volumes"] if v["name"] == "tls")
        self.assertEqual(tls["secret"]["secretName"], "grail-kg-tls")
        self.assertTrue(self.args["tls-ca"].startswith(
            next(m["mountPath"] for m in self.container["volumeMounts"] if m["name"] == "tls")))
        # The time it may run covers its budget.
        budget = self.args["time-budget"]
        self.assertTrue(budget.endswith("h"))
        self.assertGreater(self.cronjob["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"],
                           float(budget[:-1]) * 3600)

    def test_the_overlay_gives_the_job_the_bases_server_image(self):
        overlay = docs_of(grail_sources.K8S_TUNE / "kustomization.yaml")[0]
        kustomization, _ = grail_sources.kustomization_objects()
        base = {i["name"]: i for i in kustomization["images"]}
        self.assertEqual(overlay["namespace"], kustomization["namespace"])
        for image in overlay["images"]:
            self.assertEqual(image, base[image["name"]])
        self.assertEqual(self.container["image"], "grail-kg")

    def test_the_overlay_renders_the_base_with_the_job_and_the_shared_models(self):
        kubectl = grail_sources.tool_or_skip(self, "kubectl", required_in_ci=False)
        rendered = grail_sources.kustomize(self, kubectl, grail_sources.K8S_TUNE)
        kustomization, base = grail_sources.kustomization_objects()
        key = lambda d: (d["kind"], d["metadata"]["name"])
        self.assertEqual(sorted(map(key, rendered)),
                         sorted(map(key, base + [self.cronjob, self.pvc])))
        for doc in rendered:
            if doc["kind"] != "Namespace":
                self.assertEqual(doc["metadata"].get("namespace"), kustomization["namespace"])
        statefulset = next(d for d in rendered if key(d) == ("StatefulSet", "grail-kg"))
        model = next(v for v in statefulset["spec"]["template"]["spec"]["volumes"]
                     if v["name"] == "model")
        self.assertEqual(model, {"name": "model", "persistentVolumeClaim":
                                 {"claimName": self.pvc["metadata"]["name"]}})
        cronjob = next(d for d in rendered if d["kind"] == "CronJob")
        image = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"]
        self.assertEqual(image, next(f"{i['newName']}:{i['newTag']}"
                                     for i in kustomization["images"] if i["name"] == "grail-kg"))


if __name__ == "__main__":
    BIN_DIR, rest = grail_sources.split_args(sys.argv)
    unittest.main(argv=rest, verbosity=2)
