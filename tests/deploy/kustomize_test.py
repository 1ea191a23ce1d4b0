"""`kubectl kustomize deploy/k8s` renders the manifests offline, as `kubectl apply -k` would
before sending them: every listed file exists and parses, every object lands in the
kustomization's namespace, and the image settings reach the containers.

scripts/setup.sh does not install kubectl (Debian 12's kubernetes-client is 1.20, with a much
older kustomize than clusters use today): the test uses the kubectl on PATH and skips
without one. No cluster is contacted; nothing validates the objects against the
API server's schemas (that needs a cluster or a schema bundle, neither of which is here).
"""

import sys
import unittest

import grail_sources


class KustomizeTest(unittest.TestCase):
    def test_renders_every_object_into_the_namespace(self):
        kubectl = grail_sources.tool_or_skip(self, "kubectl", required_in_ci=False)
        rendered = grail_sources.kustomize(self, kubectl, grail_sources.K8S)

        kustomization, expected = grail_sources.kustomization_objects()
        key = lambda d: (d["kind"], d["metadata"]["name"])
        self.assertEqual(sorted(map(key, rendered)), sorted(map(key, expected)))

        namespace = kustomization["namespace"]
        for doc in rendered:
            with self.subTest(object=key(doc)):
                if doc["kind"] == "Namespace":
                    self.assertEqual(doc["metadata"]["name"], namespace)
                else:
                    self.assertEqual(doc["metadata"].get("namespace"), namespace)

        images = {i["name"]: f"{i['newName']}:{i['newTag']}" for i in kustomization["images"]}
        statefulset = next(d for d in rendered if d["kind"] == "StatefulSet")
        spec = statefulset["spec"]["template"]["spec"]
        for container in spec["containers"] + spec.get("initContainers", []):
            with self.subTest(container=container["name"]):
                self.assertIn(container["image"], images.values())


if __name__ == "__main__":
    unittest.main(argv=grail_sources.split_args(sys.argv)[1], verbosity=2)
