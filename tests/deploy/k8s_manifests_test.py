"""deploy/k8s agrees with itself, with the Dockerfile and with grail-server.

Ports, the data directory, the drain time and the flag names are read from
server/rpc/server_config.cc (ABSL_FLAG lines); every ConfigMap key must be a grail-server flag's
environment variable with a value that flag accepts, and with --bin-dir the real
grail-server is started with exactly the ConfigMap's environment to show it takes it.
"""

import os
import posixpath
import re
import subprocess
import sys
import tempfile
import unittest

import yaml

import grail_sources

BIN_DIR = None


def load_manifests():
    """[(file name, document)] for every document of every deploy/k8s/*.yaml."""
    docs = []
    for path in sorted(grail_sources.K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.append((path.name, doc))
    return docs


def subset(small, big):
    return all(big.get(k) == v for k, v in small.items())


def probe_seconds(probe):
    return probe.get("periodSeconds", 10) * probe.get("failureThreshold", 3)


class K8sManifestsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = load_manifests()
        cls.flags = grail_sources.server_flags()
        kinds = {}
        for name, doc in cls.docs:
            kinds.setdefault(doc["kind"], []).append(doc)
        cls.kinds = kinds
        cls.kustomization = kinds["Kustomization"][0]
        cls.configmap = next(d for d in kinds["ConfigMap"]
                             if d["metadata"]["name"] == "grail-kg-config")
        cls.env = cls.configmap["data"]
        cls.statefulset = next(d for d in kinds["StatefulSet"]
                               if d["metadata"]["name"] == "grail-kg")
        cls.nats = next(d for d in kinds["StatefulSet"] if d["metadata"]["name"] == "nats")
        cls.nats_config = next(d for d in kinds["ConfigMap"]
                               if d["metadata"]["name"] == "nats-config")["data"]["nats.conf"]
        cls.pod = cls.statefulset["spec"]["template"]
        cls.container = next(c for c in cls.pod["spec"]["containers"]
                             if c["name"] == "grail-server")
        cls.ports = {p["name"]: p["containerPort"] for p in cls.container["ports"]}
        # grail-kg's Services (nats.yaml has its own).
        cls.services = [s for s in kinds["Service"]
                        if s["metadata"]["labels"].get("app.kubernetes.io/name") == "grail-kg"]
        cls.nats_services = [s for s in kinds["Service"] if s not in cls.services]

    def all_containers(self):
        spec = self.pod["spec"]
        return spec["containers"] + spec.get("initContainers", [])

    def setting(self, flag):
        """The value grail-server gets for `flag`: the ConfigMap's, else its default."""
        kind, default = self.flags[flag]
        text = self.env.get(grail_sources.env_name(flag))
        return default if text is None else grail_sources.parse_flag_value(kind, text)

    def test_kustomization_lists_every_manifest(self):
        # *.example.yaml are templates applied by hand (secrets), never by kustomize.
        files = {name for name, doc in self.docs
                 if doc["kind"] != "Kustomization" and not name.endswith(".example.yaml")}
        self.assertEqual(set(self.kustomization["resources"]), files)
        images = {i["name"] for i in self.kustomization.get("images", [])}
        spec = self.pod["spec"]
        for container in spec["containers"] + spec.get("initContainers", []):
            self.assertIn(container["image"].split(":")[0], images, container["name"])

    def test_has_the_objects_a_deployment_needs(self):
        self.assertEqual(len(self.kinds["ConfigMap"]), 2)  # grail-kg's flags, nats.conf
        self.assertEqual(len(self.kinds["StatefulSet"]), 2)  # grail-kg, nats
        self.assertGreaterEqual(len(self.services), 2)
        self.assertEqual(len(self.kinds["ServiceMonitor"]), 1)
        self.assertEqual(self.kinds["ServiceMonitor"][0]["apiVersion"], "monitoring.coreos.com/v1")
        # Replicas of one graph (replication through nats.yaml), so more than one.
        self.assertGreaterEqual(self.statefulset["spec"]["replicas"], 2)

    def test_replicas_share_one_graph_through_a_three_node_jetstream_cluster(self):
        self.assertTrue(self.setting("nats_stream"))
        nats_spec = self.nats["spec"]
        nodes = nats_spec["replicas"]
        self.assertEqual(nodes, 3)
        headless = next(s for s in self.nats_services
                        if s["metadata"]["name"] == nats_spec["serviceName"])
        self.assertEqual(headless["spec"]["clusterIP"], "None")
        self.assertIs(headless["spec"].get("publishNotReadyAddresses"), True,
                      "routes must resolve before the nodes are ready")
        container = nats_spec["template"]["spec"]["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        service_ports = {p["name"]: p["port"] for p in headless["spec"]["ports"]}
        self.assertEqual(service_ports["client"], ports["client"])
        self.assertEqual(service_ports["cluster"], ports["cluster"])
        # --nats-url names every node, so that a replica fails over to any of them.
        urls = [u.strip() for u in self.setting("nats_url").split(",")]
        self.assertEqual(urls, [f"nats://nats-{i}.{headless['metadata']['name']}:{ports['client']}"
                                for i in range(nodes)])
        # The stream in an odd number of copies that the cluster can hold.
        copies = self.setting("nats_stream_replicas")
        self.assertIn(copies, (3, 5))
        self.assertLessEqual(copies, nodes)
        # Routes to every node's cluster port; JetStream's files on the node's claim.
        for i in range(nodes):
            self.assertIn(f"nats://nats-{i}.{headless['metadata']['name']}:{ports['cluster']}",
                          self.nats_config)
        store_dir = re.search(r"store_dir:\s*(\S+)", self.nats_config).group(1)
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        claims = {c["metadata"]["name"] for c in nats_spec["volumeClaimTemplates"]}
        self.assertIn(mounts.get(store_dir), claims, "JetStream's store is not on a claim")
        # Lame-duck mode must finish within the grace period.
        lame_duck = int(re.search(r"lame_duck_duration:\s*(\d+)s", self.nats_config).group(1))
        self.assertGreater(nats_spec["template"]["spec"]["terminationGracePeriodSeconds"],
                           lame_duck)
        pid_file = re.search(r"pid_file:\s*(\S+)", self.nats_config).group(1)
        self.assertIn(pid_file, " ".join(container["lifecycle"]["preStop"]["exec"]["command"]))
        for bound in ("requests", "limits"):
            self.assertEqual({"cpu", "memory"} - container["resources"][bound].keys(), set())
        self.assertIs(container["securityContext"]["allowPrivilegeEscalation"], False)

    def test_nats_server_accepts_the_cluster_configuration(self):
        nats_server = grail_sources.tool_or_skip(self, "nats-server")
        with tempfile.TemporaryDirectory() as work:
            path = os.path.join(work, "nats.conf")
            with open(path, "w") as f:
                f.write(self.nats_config)
            env = dict(os.environ, POD_NAME="nats-0")  # set by the pod's fieldRef
            result = subprocess.run([nats_server, "-c", path, "-t"], capture_output=True,
                                    text=True, timeout=30, env=env)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)

    def test_every_configmap_key_is_a_server_flag_with_a_valid_value(self):
        self.assertTrue(self.env)
        for variable, value in self.env.items():
            with self.subTest(variable=variable):
                flag = grail_sources.flag_of_env(variable, self.flags)
                self.assertIsNotNone(flag, f"{variable} names no grail-server flag")
                self.assertIsInstance(value, str, "ConfigMap values must be strings (quote them)")
                grail_sources.parse_flag_value(self.flags[flag][0], value)
        self.assertEqual(self.container["envFrom"],
                         [{"configMapRef": {"name": self.configmap["metadata"]["name"]}}])

    def test_container_ports_are_the_servers(self):
        self.assertEqual(self.ports["grpc"], self.setting("port"))
        self.assertEqual(self.ports["metrics"], self.setting("metrics_port"))
        # The defaults too, so the image and a bare `grail-server` agree with the manifests.
        self.assertEqual(self.ports["grpc"], self.flags["port"][1])
        self.assertEqual(self.ports["metrics"], self.flags["metrics_port"][1])
        annotations = self.pod["metadata"]["annotations"]
        self.assertEqual(annotations["prometheus.io/scrape"], "true")
        self.assertEqual(int(annotations["prometheus.io/port"]), self.ports["metrics"])
        self.assertEqual(annotations.get("prometheus.io/path", "/metrics"), "/metrics")

    def probe_command(self, kind):
        return self.container[kind]["exec"]["command"]

    def test_probes_are_grpc_health_checks_over_tls_on_the_grpc_port(self):
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            with self.subTest(probe=kind):
                probe = self.container[kind]
                self.assertFalse({"httpGet", "tcpSocket", "grpc"} & probe.keys())
                command = self.probe_command(kind)
                self.assertEqual(command[0], "grail-client")
                self.assertEqual(command[-1], "health")
                self.assertIn(f"--target=localhost:{self.ports['grpc']}", command)
                ca = next(a.split("=", 1)[1] for a in command if a.startswith("--tls-ca="))
                self.assertEqual(posixpath.dirname(ca),
                                 posixpath.dirname(self.setting("tls_cert")),
                                 "the probe trusts a CA from another place than the cert's")
                # The client's own deadline ends before the kubelet gives up on the probe.
                deadline = next(int(a.split("=", 1)[1]) for a in command
                                if a.startswith("--deadline-ms="))
                self.assertLess(deadline, probe.get("timeoutSeconds", 1) * 1000)
        # Loading the model and rebuilding the index of a large graph takes minutes.
        self.assertGreaterEqual(probe_seconds(self.container["startupProbe"]), 300)
        self.assertGreater(probe_seconds(self.container["livenessProbe"]),
                           self.container["livenessProbe"].get("timeoutSeconds", 1))

    def test_tls_and_tokens_come_from_mounted_secrets(self):
        secrets = {d["metadata"]["name"]: d for name, d in self.docs
                   if d["kind"] == "Secret" and name == "secrets.example.yaml"}
        volumes = {v["name"]: v for v in self.pod["spec"]["volumes"]}
        mounts = {m["mountPath"]: m for m in self.container["volumeMounts"]}
        for flag in ("tls_cert", "tls_key", "auth_tokens"):
            with self.subTest(flag=flag):
                path = self.setting(flag)
                self.assertTrue(path, f"the ConfigMap does not set --{flag.replace('_', '-')}")
                mount = mounts.get(posixpath.dirname(path))
                self.assertIsNotNone(mount, f"{path} is not in a mounted directory")
                self.assertTrue(mount.get("readOnly"))
                self.assertNotIn("subPath", mount, "subPath mounts never see Secret updates")
                volume = volumes[mount["name"]]
                secret = secrets.get(volume["secret"]["secretName"])
                self.assertIsNotNone(secret, "the Secret is not in secrets.example.yaml")
                self.assertIn(posixpath.basename(path), secret["stringData"])
        # The probes' CA is in the TLS Secret too.
        ca = next(a.split("=", 1)[1] for a in self.probe_command("readinessProbe")
                  if a.startswith("--tls-ca="))
        volume = volumes[mounts[posixpath.dirname(ca)]["name"]]
        self.assertIn(posixpath.basename(ca), secrets[volume["secret"]["secretName"]]["stringData"])

    def test_grace_period_covers_prestop_and_drain(self):
        drain = self.setting("drain_seconds")
        pause = 0
        prestop = self.container.get("lifecycle", {}).get("preStop", {})
        command = prestop.get("exec", {}).get("command", [])
        if command[:1] == ["sleep"]:
            pause = int(command[1])
        elif "sleep" in prestop:
            pause = int(prestop["sleep"]["seconds"])
        self.assertGreater(self.pod["spec"]["terminationGracePeriodSeconds"], pause + drain)

    def test_store_is_on_the_volume_claim_and_the_model_on_a_volume(self):
        mounts = {m["mountPath"]: m["name"] for m in self.container["volumeMounts"]}
        claims = {c["metadata"]["name"]: c
                  for c in self.statefulset["spec"]["volumeClaimTemplates"]}
        data_dir = self.setting("data_dir")
        self.assertIn(data_dir, mounts, "GRAIL_DATA_DIR is not a mount")
        self.assertIn(mounts[data_dir], claims, "the data directory is not on a claim")
        self.assertEqual(claims[mounts[data_dir]]["spec"]["accessModes"], ["ReadWriteOnce"])
        model_dir = posixpath.dirname(self.setting("model"))
        self.assertIn(model_dir, mounts, "GRAIL_MODEL's directory is not a mount")
        volumes = {v["name"] for v in self.pod["spec"].get("volumes", [])}
        self.assertIn(mounts[model_dir], volumes | claims.keys())
        # The init container that fills the model volume writes where the server reads.
        for init in self.pod["spec"].get("initContainers", []):
            init_mounts = {m["name"]: m["mountPath"] for m in init.get("volumeMounts", [])}
            if mounts[model_dir] in init_mounts:
                self.assertIn(self.setting("model"), " ".join(init["command"]))

    def test_services_reach_the_pods_named_ports(self):
        pod_labels = self.pod["metadata"]["labels"]
        self.assertTrue(subset(self.statefulset["spec"]["selector"]["matchLabels"], pod_labels))
        headless = [s for s in self.services if s["spec"].get("clusterIP") == "None"]
        self.assertEqual([s["metadata"]["name"] for s in headless],
                         [self.statefulset["spec"]["serviceName"]])
        exposed = set()
        for service in self.services:
            with self.subTest(service=service["metadata"]["name"]):
                self.assertTrue(subset(service["spec"]["selector"], pod_labels))
                for port in service["spec"]["ports"]:
                    target = port.get("targetPort", port["port"])
                    if isinstance(target, str):
                        self.assertIn(target, self.ports, "targetPort names no container port")
                        exposed.add(target)
                    else:
                        self.assertIn(target, self.ports.values())
        self.assertEqual(exposed, {"grpc", "metrics"})
        self.assertTrue(any(p.get("targetPort") == "grpc" for s in self.services
                            if s["spec"].get("clusterIP") != "None" for p in s["spec"]["ports"]),
                        "no ClusterIP Service for gRPC")

    def test_servicemonitor_selects_the_metrics_service(self):
        monitor = self.kinds["ServiceMonitor"][0]
        wanted = monitor["spec"]["selector"]["matchLabels"]
        matching = [s for s in self.services if subset(wanted, s["metadata"].get("labels", {}))]
        self.assertEqual(len(matching), 1, [s["metadata"]["name"] for s in matching])
        service_ports = {p["name"]: p for p in matching[0]["spec"]["ports"]}
        for endpoint in monitor["spec"]["endpoints"]:
            self.assertIn(endpoint["port"], service_ports)
            self.assertEqual(service_ports[endpoint["port"]]["targetPort"], "metrics")
            self.assertEqual(endpoint.get("path", "/metrics"), "/metrics")

    def test_runs_as_the_images_non_root_user(self):
        dockerfile = (grail_sources.ROOT / "Dockerfile").read_text()
        user = re.findall(r"^USER\s+(\d+)(?::(\d+))?", dockerfile, flags=re.M)[-1]
        security = self.pod["spec"]["securityContext"]
        self.assertTrue(security["runAsNonRoot"])
        self.assertEqual(security["runAsUser"], int(user[0]))
        self.assertNotEqual(security["runAsUser"], 0)
        self.assertIn("fsGroup", security)
        if user[1]:
            self.assertEqual(security["runAsGroup"], int(user[1]))
        for container in self.all_containers():
            with self.subTest(container=container["name"]):
                self.assertIs(container["securityContext"]["allowPrivilegeEscalation"], False)
        # Service links would put <SERVICE>_PORT=tcp://... into the environment, where a
        # Service named "grail" would override --port.
        self.assertIs(self.pod["spec"]["enableServiceLinks"], False)

    def test_every_container_has_requests_and_limits(self):
        for container in self.all_containers():
            with self.subTest(container=container["name"]):
                for bound in ("requests", "limits"):
                    self.assertEqual({"cpu", "memory"} - container["resources"][bound].keys(),
                                     set(), f"{bound} incomplete")

    def test_thread_counts_fit_the_cpu_limit(self):
        # 0 means one thread per core of the *node* inside a container.
        limit = self.container["resources"]["limits"]["cpu"]
        cores = float(limit[:-1]) / 1000 if str(limit).endswith("m") else float(limit)
        for flag in ("extraction_threads", "compute_threads"):
            with self.subTest(flag=flag):
                threads = self.setting(flag)
                self.assertGreater(threads, 0, "0 counts the node's cores, not the pod's")
                self.assertLessEqual(threads, max(1, round(cores)))

    def test_real_server_starts_with_the_configmap_and_the_probe_passes(self):
        if BIN_DIR is None:
            self.skipTest("no --bin-dir")
        with tempfile.TemporaryDirectory() as work:
            model = grail_sources.train_tiny_model(BIN_DIR, work)
            ca, cert, key = grail_sources.make_tls_files(work)
            tokens = os.path.join(work, "tokens")
            with open(tokens, "w") as f:
                f.write("deploy-test-token-0123456789 read probe-test\n")
            env = dict(self.env)
            # A real NATS with JetStream here, one node (so the stream in one copy).
            nats_port = grail_sources.free_port()
            nats = subprocess.Popen(["nats-server", "-js", "-a", "127.0.0.1", "-p",
                                     str(nats_port), "-sd", os.path.join(work, "js")],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # Where this machine can put them; everything else exactly as the ConfigMap says.
            env.update({"GRAIL_MODEL": str(model), "GRAIL_DATA_DIR": os.path.join(work, "store"),
                        "GRAIL_PORT": "0", "GRAIL_METRICS_PORT": "0", "GRAIL_HOST": "127.0.0.1",
                        "GRAIL_TLS_CERT": cert, "GRAIL_TLS_KEY": key,
                        "GRAIL_AUTH_TOKENS": tokens,
                        "GRAIL_NATS_URL": f"nats://127.0.0.1:{nats_port}",
                        "GRAIL_NATS_STREAM_REPLICAS": "1"})
            server = grail_sources.Server(BIN_DIR, env, work)
            try:
                port = server.wait_ready()["port"]
                started = server.start_event()
                # The readiness probe's command, with this machine's port and CA path.
                command = [os.path.join(BIN_DIR, "grail-client")]
                for arg in self.probe_command("readinessProbe")[1:]:
                    if arg.startswith("--target="):
                        arg = f"--target=localhost:{port}"
                    elif arg.startswith("--tls-ca="):
                        arg = f"--tls-ca={ca}"
                    command.append(arg)
                probe = subprocess.run(command, capture_output=True, text=True, timeout=30)
            finally:
                code = server.stop()
                nats.kill()
                nats.wait()
            self.assertEqual(code, 0, server.log_text())
            self.assertEqual((probe.returncode, probe.stdout), (0, "SERVING\n"), probe.stderr)
            for variable, text in self.env.items():
                flag = grail_sources.flag_of_env(variable, self.flags)
                if variable in ("GRAIL_MODEL", "GRAIL_DATA_DIR", "GRAIL_PORT",
                                "GRAIL_METRICS_PORT", "GRAIL_HOST", "GRAIL_TLS_CERT",
                                "GRAIL_TLS_KEY", "GRAIL_AUTH_TOKENS", "GRAIL_NATS_URL",
                                "GRAIL_NATS_STREAM_REPLICAS") or flag not in started:
                    continue
                with self.subTest(variable=variable):
                    expected = grail_sources.parse_flag_value(self.flags[flag][0], text)
                    self.assertEqual(started[flag], expected, "the server did not take it")


if __name__ == "__main__":
    BIN_DIR, argv = grail_sources.split_args(sys.argv)
    unittest.main(argv=argv, verbosity=2)
