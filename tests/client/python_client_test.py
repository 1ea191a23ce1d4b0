"""The Python client (client/python/grail_kg) against the real grail-server: every call,
errors as GrailError with the server's code and message, the CLI printing what grail-client
prints, and TLS with a bearer token.

Run by ctest with PYTHONPATH=<build>/python (the generated stubs and a copy of the package)
and --bin-dir <build>/bin.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "deploy"))
import grail_sources  # noqa: E402  (the real server and a tiny model, shared with deploy/)

import grpc  # noqa: E402

from grail_kg import Client, GrailError, Session  # noqa: E402

BIN_DIR = None
GRAPH = [("a", "r1", "b"), ("b", "r2", "c"), ("c", "r1", "d"), ("d", "r2", "a"),
         ("a", "r2", "c"), ("b", "r1", "d"), ("d", "r1", "e"), ("e", "r2", "b")]


class ServerCase(unittest.TestCase):
    extra_env = {}

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory()
        work = cls.work.name
        cls.model = grail_sources.train_tiny_model(BIN_DIR, work)
        env = {"GRAIL_MODEL": str(cls.model), "GRAIL_DATA_DIR": os.path.join(work, "store"),
               "GRAIL_PORT": "0", "GRAIL_METRICS_PORT": "-1", "GRAIL_HOST": "127.0.0.1"}
        env.update(cls.make_env(work))
        cls.server = grail_sources.Server(BIN_DIR, env, work)
        cls.port = cls.server.wait_ready()["port"]
        cls.target = f"127.0.0.1:{cls.port}"

    @classmethod
    def make_env(cls, work):
        return {}

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        cls.work.cleanup()
        assert code == 0, cls.server.log_text()

    def grail_client(self, *args, env=None):
        return subprocess.run([os.path.join(BIN_DIR, "grail-client"), *args],
                              capture_output=True, text=True, timeout=60, env=env)

    def python_cli(self, *args, env=None):
        full_env = dict(os.environ if env is None else env)
        full_env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
        return subprocess.run([sys.executable, "-m", "grail_kg", *args], capture_output=True,
                              text=True, timeout=60, env=full_env)


class PlaintextTest(ServerCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        with Client(cls.target) as kg:
            cls.acks = list(kg.add_triples(GRAPH, chunk=3))

    def test_add_triples_yields_one_ack_per_chunk(self):
        self.assertEqual([a.chunk_index for a in self.acks], [0, 1, 2])
        self.assertEqual([a.facts_sent for a in self.acks], [3, 3, 2])
        self.assertEqual(sum(a.facts_added for a in self.acks), len(GRAPH))
        self.assertEqual(sum(a.entities_created for a in self.acks), 5)
        sequences = [a.sequence for a in self.acks]
        self.assertEqual(sequences, sorted(sequences))
        with Client(self.target) as kg:
            stats = kg.stats()
        self.assertEqual((stats["entities"], stats["facts"]), (5, len(GRAPH)))
        self.assertEqual(stats["graph_sequence"], sequences[-1])
        self.assertEqual(sorted(stats["model"]["relations"]), ["r1", "r2"])

    def test_score_is_what_grail_client_prints(self):
        with Client(self.target) as kg:
            score = kg.score("a", "r1", "c")
            self.assertFalse(score.known_fact)
            self.assertEqual(score.scored_by, "grail")  # a GraIL archive
            self.assertTrue(kg.score("a", "r1", "b").known_fact)
            many = kg.score_many([("a", "r1", "c"), ("c", "r2", "e")])
        # Batched products round differently for other batch shapes: the last bits only.
        self.assertAlmostEqual(many[0].score, score.score, delta=1e-5 * max(1, abs(score.score)))
        alone = kg_score_alone(self.target, ("c", "r2", "e"))
        self.assertEqual((many[1].head, many[1].tail), ("c", "e"))
        self.assertAlmostEqual(many[1].score, alone.score, delta=1e-5 * max(1, abs(alone.score)))
        ours = self.python_cli("--target", self.target, "score", "a", "r1", "c")
        theirs = self.grail_client("--target", self.target, "score", "a", "r1", "c")
        self.assertEqual((ours.returncode, theirs.returncode), (0, 0), ours.stderr)
        self.assertEqual(ours.stdout, theirs.stdout)

    def test_a_staleness_bound_reaches_the_server_and_scores_say_their_version(self):
        # A GraIL archive ignores it (path-family passes are what it bounds): the score is the
        # exact one, computed on the graph version the call read.
        with Client(self.target) as kg:
            exact = kg.score("a", "r1", "c")
            stale = kg.score("a", "r1", "c", max_staleness_sequences=5, max_staleness_ms=1000)
            many = kg.score_many([("a", "r1", "c")], max_staleness_ms=1000)
            sequence = kg.stats()["graph_sequence"]
        self.assertEqual(stale.score, exact.score)
        self.assertEqual(stale.graph_sequence, sequence)
        self.assertEqual(many[0].graph_sequence, sequence)

    def test_rankings_match_grail_client(self):
        with Client(self.target) as kg:
            entities = kg.stats()["entities"]  # other tests may have added some
            tails = kg.rank_tails("a", "r1", top_k=3)
            heads = kg.rank_heads("r2", "c", candidates=["a", "b", "d"])
            filtered = kg.rank_tails("a", "r1", filter_known=True)
        self.assertEqual([e.rank for e in tails.ranked], [1, 2, 3])
        self.assertEqual({e.scored_by for e in tails.ranked}, {"grail"})
        # Every entity but the head itself (GraIL scores pairs).
        self.assertEqual(tails.candidates_scored + tails.candidates_filtered, entities - 1)
        scores = [e.score for e in tails.ranked]
        self.assertEqual(scores, sorted(scores, reverse=True))
        self.assertEqual(sorted(e.entity for e in heads.ranked), ["a", "b", "d"])
        self.assertNotIn("b", [e.entity for e in filtered.ranked])  # (a, r1, b) is stored
        self.assertEqual(filtered.candidates_filtered, 1)
        theirs = json.loads(self.grail_client("--target", self.target, "--json", "--top-k", "3",
                                              "rank-tails", "a", "r1").stdout)
        ours = json.loads(self.python_cli("--target", self.target, "--json", "--top-k", "3",
                                          "rank-tails", "a", "r1").stdout)
        self.assertEqual([(e["entity"], e["score"]) for e in ours["ranked"]],
                         [(e["entity"], e["score"]) for e in theirs["ranked"]])
        self.assertEqual([e["pruned"] for e in ours["ranked"]],
                         [e["pruned"] for e in theirs["ranked"]])
        self.assertEqual({e.pruned for e in tails.ranked}, {False})
        self.assertEqual(ours["candidates_shared_score"], theirs["candidates_shared_score"])
        self.assertEqual(ours["candidates_pruned"], theirs["candidates_pruned"])
        self.assertEqual(tails.candidates_pruned, 0)  # GraIL never prunes

    def test_a_ranking_budget_reaches_the_server_which_bounds_it(self):
        with Client(self.target) as kg:
            # Within the server's budget: accepted (a GraIL model has nothing to prune).
            kg.rank_tails("a", "r1", top_k=1, max_visited_nodes=2, max_visited_edges=2)
            with self.assertRaises(GrailError) as above:
                kg.rank_tails("a", "r1", max_visited_nodes=2**31)
            self.assertEqual(above.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("--max-subgraph-nodes", above.exception.message)
            with self.assertRaises(ValueError):
                kg.rank_heads("r1", "a", max_visited_edges=-1)

    def test_errors_carry_the_code_and_the_servers_message(self):
        with Client(self.target) as kg:
            with self.assertRaises(GrailError) as missing:
                kg.score("nobody", "r1", "a")
            self.assertEqual(missing.exception.code, grpc.StatusCode.NOT_FOUND)
            self.assertIn("nobody", missing.exception.message)
            # A bad chunk is rejected whole, naming its line; the chunk before it is stored.
            acks = []
            with self.assertRaises(GrailError) as bad:
                for ack in kg.add_triples([("x", "r1", "y"), ("y", "r2", "z"),
                                           ("z", "r1", ""), ("q", "r1", "x")], chunk=2):
                    acks.append(ack)
            self.assertEqual(bad.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("line 3", bad.exception.message)
            self.assertEqual(len(acks), 1)
            self.assertTrue(kg.score("x", "r1", "y").known_fact)
            with self.assertRaises(GrailError) as unknown:
                kg.score("q", "r1", "x")
            self.assertEqual(unknown.exception.code, grpc.StatusCode.NOT_FOUND)
        cli = self.python_cli("--target", self.target, "score", "nobody", "r1", "a")
        self.assertEqual(cli.returncode, 1)
        self.assertTrue(cli.stderr.startswith("error: NOT_FOUND: "), cli.stderr)

    def test_remove_triples_yields_one_ack_per_chunk_and_the_facts_are_gone(self):
        with Client(self.target) as kg:
            list(kg.add_triples([("p1", "r1", "p2"), ("p2", "r2", "p3"), ("p3", "r1", "p1")]))
            acks = list(kg.remove_triples([("p1", "r1", "p2"), ("p2", "r2", "p3"),
                                           ("p1", "r2", "nobody")], chunk=2))
            self.assertEqual([a.chunk_index for a in acks], [0, 1])
            self.assertEqual([a.facts_sent for a in acks], [2, 1])
            self.assertEqual([a.facts_removed for a in acks], [2, 0])
            self.assertEqual([a.facts_not_present for a in acks], [0, 1])
            self.assertFalse(kg.score("p1", "r1", "p2").known_fact)
            self.assertTrue(kg.score("p3", "r1", "p1").known_fact)
            self.assertEqual(kg.score("p1", "r1", "p2").graph_sequence, acks[-1].sequence)

    def test_export_gives_every_fact_in_order_of_addition_and_since_a_sequence(self):
        with Client(self.target) as kg:
            before = kg.stats()["graph_sequence"]
            mine = [("x1", "r1", "x2"), ("x2", "r2", "x3"), ("x3", "r1", "x1")]
            acks = list(kg.add_triples(mine, chunk=2))
            pages = list(kg.export_pages(since_sequence=before, page=2))
            self.assertEqual([len(p.triples) for p in pages], [2, 1])
            self.assertEqual({p.graph_sequence for p in pages}, {acks[-1].sequence})
            # Within a chunk by ids: x1 r1 x2 before x2 r2 x3 (x1 was named first).
            self.assertEqual([t for p in pages for t in p.triples], mine)
            self.assertEqual([q for p in pages for q in p.sequences],
                             [acks[0].sequence, acks[0].sequence, acks[1].sequence])
            everything = [t for p in kg.export_pages() for t in p.triples]
            self.assertEqual(len(everything), kg.stats()["facts"])
            self.assertTrue(set(GRAPH) <= set(everything))
            self.assertEqual(everything[-3:], mine)
            # A version this server has not reached.
            with self.assertRaises(GrailError) as ahead:
                list(kg.export_pages(since_sequence=acks[-1].sequence + 5))
            self.assertEqual(ahead.exception.code, grpc.StatusCode.OUT_OF_RANGE)
        # The CLIs write the same file.
        ours = os.path.join(self.work.name, "export-python.tsv")
        theirs = os.path.join(self.work.name, "export-client.tsv")
        cli = self.python_cli("--target", self.target, "--json", "export", ours)
        self.assertEqual(cli.returncode, 0, cli.stderr)
        self.assertEqual(json.loads(cli.stdout)["facts"], len(everything))
        run = self.grail_client("--target", self.target, "export", theirs)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn(f"facts={len(everything)} ", run.stdout)
        self.assertEqual(Path(ours).read_text(), Path(theirs).read_text())
        self.assertEqual(Path(ours).read_text().splitlines()[-1], "x3\tr1\tx1")
        self.assertFalse(os.path.exists(ours + ".partial"))

    def test_remove_entities_removes_each_with_its_facts(self):
        with Client(self.target) as kg:
            list(kg.add_triples([("q1", "r1", "q2"), ("q2", "r2", "q3")]))
            acks = list(kg.remove_entities(["q2", "nobody"]))
            self.assertEqual([(a.entities_removed, a.entities_not_present, a.facts_removed)
                              for a in acks], [(1, 1, 2)])
            with self.assertRaises(GrailError) as gone:
                kg.score("q1", "r1", "q2")
            self.assertEqual(gone.exception.code, grpc.StatusCode.NOT_FOUND)
            self.assertFalse(kg.score("q1", "r1", "q3").known_fact)

    def test_score_explains_with_paths_and_names_its_model(self):
        with Client(self.target) as kg:
            plain = kg.score("a", "r1", "c")
            explained = kg.score("a", "r1", "c", explain=True, max_paths=2)
            self.assertEqual(plain.paths, ())
            self.assertTrue(plain.model_version.startswith(kg.stats()["model"]["path"] + "@"))
            self.assertEqual(explained.model_version, plain.model_version)
            self.assertGreater(len(explained.paths), 0)
            self.assertLessEqual(len(explained.paths), 2)
            for path in explained.paths:
                self.assertEqual(path.steps[0].from_entity, "a")
                self.assertEqual(path.steps[-1].to_entity, "c")
                self.assertIn("(h,", path.rule)
                product = 1.0
                for w in path.layer_weights:
                    product *= w
                self.assertAlmostEqual(path.weight, product, delta=1e-6 * product)
            weights = [p.weight for p in explained.paths]
            self.assertEqual(weights, sorted(weights, reverse=True))

    def test_reload_model_serves_the_file_again_with_a_new_generation(self):
        with Client(self.target) as kg:
            before = kg.stats()["model"]
            reloaded = kg.reload_model()
            self.assertEqual(reloaded["previous_version"], reloaded["version"])  # same file
            self.assertGreater(reloaded["generation"], 1)
            self.assertEqual(kg.stats()["model"]["path"], before["path"])
            with self.assertRaises(GrailError) as missing:
                kg.reload_model("/no/such/model.pt")
            self.assertEqual(missing.exception.code, grpc.StatusCode.NOT_FOUND)

    def test_health(self):
        with Client(self.target) as kg:
            self.assertEqual(kg.health(), "SERVING")


def kg_score_alone(target, triple):
    with Client(target) as kg:
        return kg.score(*triple)


class TlsAndTokenTest(ServerCase):
    token = "python-client-token-0123456789"

    @classmethod
    def make_env(cls, work):
        cls.ca, cert, key = grail_sources.make_tls_files(work)
        tokens = os.path.join(work, "tokens")
        with open(tokens, "w") as f:
            f.write(f"{cls.token} write python\n")
        return {"GRAIL_TLS_CERT": cert, "GRAIL_TLS_KEY": key, "GRAIL_AUTH_TOKENS": tokens}

    def test_tls_with_a_token(self):
        with Client(self.target, tls_ca=self.ca, token=self.token) as kg:
            self.assertEqual(sum(a.facts_added for a in kg.add_triples(GRAPH)), len(GRAPH))
            self.assertEqual(kg.stats()["facts"], len(GRAPH))
            # A server-streaming call carries the token too.
            self.assertEqual(sum(len(p.triples) for p in kg.export_pages()), len(GRAPH))
        with Client(self.target, tls_ca=self.ca, token="") as kg:
            with self.assertRaises(GrailError) as refused:
                kg.stats()
            self.assertEqual(refused.exception.code, grpc.StatusCode.UNAUTHENTICATED)
            self.assertEqual(kg.health(), "SERVING")  # health needs no token
        with Client(self.target) as plaintext:
            with self.assertRaises(GrailError) as handshake:
                plaintext.stats()
            self.assertEqual(handshake.exception.code, grpc.StatusCode.UNAVAILABLE)

    def test_token_from_the_environment(self):
        env = dict(os.environ, GRAIL_TOKEN=self.token)
        cli = self.python_cli("--target", f"localhost:{self.port}", "--tls-ca", self.ca, "stats",
                              env=env)
        self.assertEqual(cli.returncode, 0, cli.stderr)
        self.assertIn('"model"', cli.stdout)
        env.pop("GRAIL_TOKEN")
        cli = self.python_cli("--target", f"localhost:{self.port}", "--tls-ca", self.ca, "stats",
                              env=env)
        self.assertEqual(cli.returncode, 1)
        self.assertIn("UNAUTHENTICATED", cli.stderr)


class ReplicatedTest(unittest.TestCase):
    """Two replicas of one graph through a real nats-server (JetStream) on loopback: clients
    sharing a Session read on one replica what was acknowledged on the other."""

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory()
        work = cls.work.name
        model = grail_sources.train_tiny_model(BIN_DIR, work)
        port = grail_sources.free_port()
        cls.nats_log = open(os.path.join(work, "nats.log"), "w")
        cls.nats = subprocess.Popen(
            ["nats-server", "-js", "-a", "127.0.0.1", "-p", str(port), "-sd",
             os.path.join(work, "js")], stdout=cls.nats_log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        cls.servers, cls.targets = [], []
        for name in ("a", "b"):
            home = os.path.join(work, name)
            os.mkdir(home)
            env = {"GRAIL_MODEL": str(model), "GRAIL_DATA_DIR": os.path.join(home, "store"),
                   "GRAIL_PORT": "0", "GRAIL_METRICS_PORT": "-1", "GRAIL_HOST": "127.0.0.1",
                   "GRAIL_NATS_URL": f"nats://127.0.0.1:{port}", "GRAIL_NATS_STREAM": "graph",
                   "GRAIL_REPLICA_NAME": name}
            server = grail_sources.Server(BIN_DIR, env, home)
            cls.servers.append(server)
            cls.targets.append(f"127.0.0.1:{server.wait_ready()['port']}")

    @classmethod
    def tearDownClass(cls):
        codes = [server.stop() for server in cls.servers]
        cls.nats.kill()
        cls.nats.wait()
        cls.nats_log.close()
        cls.work.cleanup()
        assert codes == [0, 0], codes

    def test_a_shared_session_reads_on_one_replica_what_was_written_on_the_other(self):
        session = Session()
        with Client(self.targets[0], session=session) as writer, \
                Client(self.targets[1], session=session) as reader:
            acks = list(writer.add_triples(GRAPH, chunk=3))
            self.assertEqual(session.sequence, acks[-1].sequence)
            stats = reader.stats()
            self.assertGreaterEqual(stats["graph_sequence"], acks[-1].sequence)
            self.assertEqual(stats["facts"], len(GRAPH))
            self.assertTrue(reader.score("a", "r1", "b").known_fact)
            removed = list(reader.remove_triples([("a", "r1", "b")]))
            self.assertEqual(session.sequence, removed[-1].sequence)
            self.assertFalse(writer.score("a", "r1", "b").known_fact)

    def test_a_session_ahead_of_the_replica_fails_unavailable_saying_how_far_behind(self):
        with Client(self.targets[1], session=Session(10**6), timeout=0.5) as kg:
            with self.assertRaises(GrailError) as behind:
                kg.stats()
        self.assertEqual(behind.exception.code, grpc.StatusCode.UNAVAILABLE)
        self.assertIn("behind the requested min_graph_sequence 1000000", behind.exception.message)

    def test_grail_client_takes_min_graph_sequence_and_writes_checkpoints(self):
        run = subprocess.run([os.path.join(BIN_DIR, "grail-client"), "--target", self.targets[1],
                              "--deadline-ms", "500", "--min-graph-sequence", "1000000",
                              "stats"], capture_output=True, text=True, timeout=60)
        self.assertEqual(run.returncode, 1)
        self.assertIn("UNAVAILABLE", run.stderr)
        checkpoint = os.path.join(self.work.name, "checkpoint")
        run = subprocess.run([os.path.join(BIN_DIR, "grail-client"), "--target", self.targets[0],
                              "checkpoint", checkpoint], capture_output=True, text=True,
                             timeout=60)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn(f"dir={checkpoint} graph_sequence=", run.stdout)
        self.assertTrue(os.path.exists(os.path.join(checkpoint, "CURRENT")))


class RelationRemovalTest(ServerCase):
    """A server that stores relations outside its model's vocabulary, so that one can be
    added and removed without touching the facts other tests use."""

    @classmethod
    def make_env(cls, work):
        return {"GRAIL_ALLOW_UNKNOWN_RELATIONS": "true"}

    def test_remove_relations_removes_every_fact_of_each(self):
        with Client(self.target) as kg:
            list(kg.add_triples([("s1", "rx", "s2"), ("s2", "rx", "s3"), ("s1", "r1", "s3")]))
            before = kg.stats()["relations"]
            acks = list(kg.remove_relations(["rx", "nothing"]))
            self.assertEqual([(a.relations_removed, a.relations_not_present, a.facts_removed)
                              for a in acks], [(1, 1, 2)])
            self.assertEqual(kg.stats()["relations"], before - 1)
            self.assertTrue(kg.score("s1", "r1", "s3").known_fact)



if __name__ == "__main__":
    BIN_DIR, argv = grail_sources.split_args(sys.argv)
    unittest.main(argv=argv, verbosity=2)
