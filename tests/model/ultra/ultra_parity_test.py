"""ULTRA's networks against an independent re-computation of the reference forward.

The reference below is written from the paper's equations (Galkin et al., ICLR 2024, Section
4) in plain python3-torch, with the conventions of the released weights: messages accumulate
at an edge's first index (out[edge_index[0]] += x[edge_index[1]] * w[type]), the entity graph
holds (h, t) with relation r and (t, h) with r + R, the relation graph's four adjacency
matrices are A_hh = E_h^T E_h, A_tt, A_ht = E_h^T E_t and A_th = E_t^T E_h over the entity-by-
relation incidence matrices (inverse relations included), and the relation network starts from
the query relation read forwards (r for both (h, r, ?) and (?, r, t)) — or, for an archive
imported with --head-queries inverse, from the query relation itself (r's inverse for
(?, r, t)).

A checkpoint of ULTRA's layout (modules named as DeepGraphLearning/ULTRA names them, torch.save
of {"model": state dict, "optimizer": ...}) is imported with grail-tools import-ultra; the
archive's scores, from grail-eval and from the archive's forward called here, must match the
reference within 1e-4 relative. With ../shared/models/ultra/ultra_3g.pth present the released
weights are checked the same way. Hostile checkpoints are refused by name.

Run by ctest with --bin-dir <build>/bin --ops-library <build>/lib/libgrail_ops.so.
"""

import argparse
import collections
import os
import pickle
import stat
import struct
import subprocess
import sys
import tempfile
import unittest
import zipfile
from pathlib import Path

import torch
from torch import nn

ARGS = None
RELEASED = Path(__file__).resolve().parents[3] / "shared" / "models" / "ultra" / "ultra_3g.pth"


class Layer(nn.Module):
    """One generalised relational layer, named as ULTRA's checkpoints name its parts."""

    def __init__(self, dim, project):
        super().__init__()
        self.linear = nn.Linear(2 * dim, dim)
        self.layer_norm = nn.LayerNorm(dim)
        if project:
            self.relation_projection = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim))
        else:
            self.relation = nn.Embedding(4, dim)


class Nbf(nn.Module):
    def __init__(self, dim, layers, project):
        super().__init__()
        self.layers = nn.ModuleList([Layer(dim, project) for _ in range(layers)])
        if project:
            self.mlp = nn.Sequential(nn.Linear(2 * dim, 2 * dim), nn.ReLU(), nn.Linear(2 * dim, 1))


class Ultra(nn.Module):
    def __init__(self, dim=8, relation_layers=3, entity_layers=2):
        super().__init__()
        self.relation_model = Nbf(dim, relation_layers, project=False)
        self.entity_model = Nbf(dim, entity_layers, project=True)


def propagate(x, boundary, edge_index, edge_type, weight, layer_state, dim):
    """One layer of the reference: x [B, N, d]; weight [B, K, d] (per query) or [K, d]."""
    linear_w, linear_b, norm_w, norm_b = layer_state
    if weight.dim() == 2:
        weight = weight.unsqueeze(0).expand(x.size(0), -1, -1)
    message = x[:, edge_index[1]] * weight[:, edge_type]
    update = boundary.clone().index_add_(1, edge_index[0], message)
    out = torch.cat([x, update], -1) @ linear_w.t() + linear_b
    out = torch.nn.functional.layer_norm(out, [dim], norm_w, norm_b, 1e-5)
    return torch.relu(out) + x


def reference_scores(state, facts, num_entities, num_relations, queries, inverse_head_queries=False):
    """Every entity's score for each query (source, relation in [0, 2R)): [len(queries), N]."""
    dim = state["entity_model.layers.0.linear.weight"].size(0)
    n_rel = 2 * num_relations
    heads = torch.tensor([h for h, _, _ in facts])
    rels = torch.tensor([r for _, r, _ in facts])
    tails = torch.tensor([t for _, _, t in facts])
    edge_index = torch.stack([torch.cat([heads, tails]), torch.cat([tails, heads])])
    edge_type = torch.cat([rels, rels + num_relations])
    # Incidence: E_h[e, r] = 1 when e is a head of message relation r; E_t for tails.
    e_h = torch.zeros(num_entities, n_rel)
    e_t = torch.zeros(num_entities, n_rel)
    e_h[edge_index[0], edge_type] = 1
    e_t[edge_index[1], edge_type] = 1
    adjacency = [e_h.t() @ e_h, e_t.t() @ e_t, e_h.t() @ e_t, e_t.t() @ e_h]
    rel_index, rel_type = [], []
    for kind, a in enumerate(adjacency):
        nz = (a > 0).nonzero().t()
        rel_index.append(nz)
        rel_type.append(torch.full((nz.size(1),), kind))
    rel_index = torch.cat(rel_index, 1)
    rel_type = torch.cat(rel_type)

    source = torch.tensor([s for s, _ in queries])
    relation = torch.tensor([r for _, r in queries])
    start = torch.where(relation >= num_relations, relation - num_relations, relation)
    if inverse_head_queries:
        start = relation
    b = len(queries)
    # Relation network: all ones at the query relation.
    boundary = torch.zeros(b, n_rel, dim)
    boundary[torch.arange(b), start] = 1
    x = boundary
    l = 0
    while f"relation_model.layers.{l}.linear.weight" in state:
        p = f"relation_model.layers.{l}."
        x = propagate(x, boundary, rel_index, rel_type, state[p + "relation.weight"],
                      (state[p + "linear.weight"], state[p + "linear.bias"],
                       state[p + "layer_norm.weight"], state[p + "layer_norm.bias"]), dim)
        l += 1
    relations = x  # [B, 2R, d]
    query = relations[torch.arange(b), relation]
    boundary = torch.zeros(b, num_entities, dim)
    boundary[torch.arange(b), source] = query
    h = boundary
    l = 0
    while f"entity_model.layers.{l}.linear.weight" in state:
        p = f"entity_model.layers.{l}."
        hidden = torch.relu(relations @ state[p + "relation_projection.0.weight"].t()
                            + state[p + "relation_projection.0.bias"])
        projected = hidden @ state[p + "relation_projection.2.weight"].t() + state[p + "relation_projection.2.bias"]
        h = propagate(h, boundary, edge_index, edge_type, projected,
                      (state[p + "linear.weight"], state[p + "linear.bias"],
                       state[p + "layer_norm.weight"], state[p + "layer_norm.bias"]), dim)
        l += 1
    feature = torch.cat([h, query.unsqueeze(1).expand(-1, num_entities, -1)], -1)
    hidden = torch.relu(feature @ state["entity_model.mlp.0.weight"].t() + state["entity_model.mlp.0.bias"])
    return (hidden @ state["entity_model.mlp.2.weight"].t() + state["entity_model.mlp.2.bias"]).squeeze(-1)


def random_facts(num_entities, num_relations, count, seed):
    g = torch.Generator().manual_seed(seed)
    facts = set()
    while len(facts) < count:
        h, t = torch.randint(num_entities, (2,), generator=g).tolist()
        r = int(torch.randint(num_relations, (1,), generator=g))
        if h != t:
            facts.add((h, r, t))
    return sorted(facts)


def write_facts(path, facts):
    with open(path, "w") as f:
        for h, r, t in facts:
            f.write(f"e{h}\tr{r}\te{t}\n")


def run(*args):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True)


def save_checkpoint(path, state):
    torch.save({"model": state, "optimizer": {"state": {}, "param_groups": [
        {"lr": 5e-4, "betas": (0.9, 0.999), "weight_decay": 0.01, "amsgrad": False, "params": [0, 1]}]}},
        path)


class UltraParityTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.tmp = Path(self.dir.name)
        # Names in the files' order of first appearance are the graph's ids (entities e0..,
        # relations r0..): keep the facts sorted so that every entity and relation appears.
        self.num_entities, self.num_relations = 24, 4
        self.facts = random_facts(self.num_entities, self.num_relations, 70, seed=1)
        names = {}
        for h, r, t in self.facts:
            for e in (h, t):
                names.setdefault(e, len(names))
        self.order = names  # entity -> graph id in grail-eval's indexing
        write_facts(self.tmp / "graph.txt", self.facts)

    def tearDown(self):
        self.dir.cleanup()

    def import_checkpoint(self, checkpoint, head_queries="forward"):
        out = self.tmp / f"ultra.{head_queries}.pt"
        result = run(Path(ARGS.bin_dir) / "grail-tools", "import-ultra", "--checkpoint", checkpoint,
                     "--out", out, "--head-queries", head_queries)
        self.assertEqual(result.returncode, 0, result.stderr)
        return out

    def check_grail_eval(self, archive, state):
        test = [f for f in random_facts(self.num_entities, self.num_relations, 40, seed=2)
                if f not in self.facts and f[0] in self.order and f[2] in self.order][:15]
        write_facts(self.tmp / "test.txt", test)
        result = run(Path(ARGS.bin_dir) / "grail-eval", "--model", archive, "--graph", self.tmp / "graph.txt",
                     "--test", self.tmp / "test.txt", "--score-only", "--scores-out", self.tmp / "scores.txt")
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(self.tmp / "scores.txt") as f:
            ours = [float(line.split("\t")[3]) for line in f]
        # Relation ids are as the graph file names them (r0.. appear in sorted order).
        expected = reference_scores(state, self.facts, self.num_entities, self.num_relations,
                                    [(h, r) for h, r, _ in test])
        want = [float(expected[i, t]) for i, (_, _, t) in enumerate(test)]
        self.assertEqual(len(ours), len(want))
        for o, w in zip(ours, want):
            self.assertAlmostEqual(o, w, delta=1e-4 * max(1.0, abs(w)))

    def check_archive_forward(self, archive, state, inverse_head_queries=False):
        """Every entity's score for tail and head queries, the archive called directly."""
        module = torch.jit.load(str(archive))
        n, r = self.num_entities, self.num_relations
        src = torch.tensor([h for h, _, _ in self.facts] + [t for _, _, t in self.facts])
        dst = torch.tensor([t for _, _, t in self.facts] + [h for h, _, _ in self.facts])
        rel = torch.tensor([x for _, x, _ in self.facts] + [x + r for _, x, _ in self.facts])
        queries = [(0, 1), (5, 2 + r), (7, 0), (3, 3 + r)]
        b = len(queries)
        # The relation graph as model/ultra/relation_graph.h documents it: for A_k[a, b] > 0 an edge
        # b -k-> a (a accumulates). Its adjacency from the reference's definition.
        e_h = torch.zeros(n, 2 * r)
        e_t = torch.zeros(n, 2 * r)
        e_h[src, rel] = 1
        e_t[dst, rel] = 1
        rs, rk, rd = [], [], []
        for kind, a in enumerate([e_h.t() @ e_h, e_t.t() @ e_t, e_h.t() @ e_t, e_t.t() @ e_h]):
            for i, j in (a > 0).nonzero().tolist():
                rs.append(j)
                rk.append(kind)
                rd.append(i)
        # Shared layout: every entity a node, every query a column (model/path/path_batch.h).
        dist = torch.zeros(n, b, dtype=torch.long)
        cell_query = torch.arange(b).repeat(n, 1)
        source_cell = torch.tensor([s * b + q for q, (s, _) in enumerate(queries)])
        node, _ = module(src, dst, rel, dist, cell_query, source_cell,
                         torch.tensor([q for _, q in queries]), torch.tensor(rs), torch.tensor(rk),
                         torch.tensor(rd), r)
        ours = node.view(n, b).t()
        expected = reference_scores(state, self.facts, n, r, queries, inverse_head_queries)
        torch.testing.assert_close(ours, expected, rtol=1e-4, atol=1e-4)
        return ours

    def test_imported_checkpoint_scores_as_the_reference_forward(self):
        torch.manual_seed(0)
        model = Ultra()
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.3)
        save_checkpoint(self.tmp / "ckpt.pth", model.state_dict())
        archive = self.import_checkpoint(self.tmp / "ckpt.pth")
        state = {k: v.detach() for k, v in model.state_dict().items()}
        self.check_grail_eval(archive, state)
        forward = self.check_archive_forward(archive, state)
        # Head queries started at the inverse relation: the reference computed so, and the
        # tail queries (rows 0 and 2) unchanged.
        inverse = self.check_archive_forward(self.import_checkpoint(self.tmp / "ckpt.pth", "inverse"),
                                             state, inverse_head_queries=True)
        torch.testing.assert_close(inverse[[0, 2]], forward[[0, 2]])
        self.assertGreater((inverse[[1, 3]] - forward[[1, 3]]).abs().max().item(), 1e-3)

    @unittest.skipUnless(RELEASED.exists(), "the released ULTRA checkpoint is not beside the repository")
    def test_released_checkpoint_scores_as_the_reference_forward(self):
        archive = self.import_checkpoint(RELEASED)
        state = {k: v.float() for k, v in torch.load(RELEASED, map_location="cpu")["model"].items()}
        self.check_grail_eval(archive, state)
        self.check_archive_forward(archive, state)

    def test_checkpoints_of_another_shape_or_content_are_refused_by_name(self):
        model = Ultra()
        state = model.state_dict()
        missing = collections.OrderedDict(state)
        del missing["entity_model.mlp.2.bias"]
        save_checkpoint(self.tmp / "missing.pth", missing)
        wide = collections.OrderedDict(state)
        wide["relation_model.layers.1.relation.weight"] = torch.zeros(5, 8)
        save_checkpoint(self.tmp / "wide.pth", wide)
        extra = collections.OrderedDict(state)
        extra["entity_model.layers.0.extra.weight"] = torch.zeros(3)
        save_checkpoint(self.tmp / "extra.pth", extra)
        for name, expected in (("missing", "entity_model.mlp.2.bias"),
                               ("wide", "relation_model.layers.1.relation.weight"),
                               ("extra", "entity_model.layers.0.extra.weight")):
            result = run(Path(ARGS.bin_dir) / "grail-tools", "import-ultra", "--checkpoint",
                         self.tmp / f"{name}.pth", "--out", self.tmp / f"{name}.pt")
            self.assertNotEqual(result.returncode, 0, name)
            self.assertIn(expected, result.stderr, name)
            self.assertFalse((self.tmp / f"{name}.pt").exists(), name)

    def test_a_checkpoint_with_a_damaged_tensor_record_is_refused_by_its_crc(self):
        # LibTorch's zip reader checks no CRC-32: the flipped weight was imported as a weight.
        save_checkpoint(self.tmp / "ckpt.pth", Ultra().state_dict())
        data = bytearray((self.tmp / "ckpt.pth").read_bytes())
        with zipfile.ZipFile(self.tmp / "ckpt.pth") as archive:
            record = next(i for i in archive.infolist() if "/data/" in i.filename and i.file_size)
        local = record.header_offset
        name_bytes, extra_bytes = struct.unpack("<HH", data[local + 26:local + 30])
        data[local + 30 + name_bytes + extra_bytes] ^= 0x5A
        (self.tmp / "damaged.pth").write_bytes(bytes(data))
        result = run(Path(ARGS.bin_dir) / "grail-tools", "import-ultra", "--checkpoint",
                     self.tmp / "damaged.pth", "--out", self.tmp / "damaged.pt")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("damaged.pth is damaged: ", result.stderr)
        self.assertIn(f"{record.filename} fails its CRC-32 check", result.stderr)
        self.assertFalse((self.tmp / "damaged.pt").exists())

    def test_a_checkpoint_that_would_run_code_is_refused_without_running_it(self):
        marker = self.tmp / "ran"

        class Payload:
            def __reduce__(self):
                return (os.system, (f"touch {marker}",))

        torch.save({"model": {"x": Payload()}}, self.tmp / "hostile.pth")
        result = run(Path(ARGS.bin_dir) / "grail-tools", "import-ultra", "--checkpoint",
                     self.tmp / "hostile.pth", "--out", self.tmp / "hostile.pt")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("system", result.stderr)
        self.assertFalse(marker.exists())

    def test_an_out_path_that_is_not_a_file_or_is_the_input_is_refused_and_kept(self):
        # The archive is written aside and renamed over --out: a FIFO or a device there was
        # replaced by a regular file, and --out equal to --checkpoint overwrote the input.
        save_checkpoint(self.tmp / "ckpt.pth", Ultra().state_dict())
        released = (self.tmp / "ckpt.pth").read_bytes()
        os.mkfifo(self.tmp / "fifo")
        for out, says in ((self.tmp / "fifo", "is a FIFO"), ("/dev/null", "is a device"),
                          (self.tmp / "ckpt.pth", "is the file --checkpoint reads")):
            result = run(Path(ARGS.bin_dir) / "grail-tools", "import-ultra", "--checkpoint",
                         self.tmp / "ckpt.pth", "--out", out)
            self.assertEqual(result.returncode, 2, out)
            self.assertIn(f"--out {out} {says}", result.stderr)
        self.assertTrue(stat.S_ISFIFO(os.stat(self.tmp / "fifo").st_mode))
        self.assertTrue(stat.S_ISCHR(os.stat("/dev/null").st_mode))
        self.assertEqual((self.tmp / "ckpt.pth").read_bytes(), released)
        self.assertEqual(sorted(p.name for p in self.tmp.iterdir()), ["ckpt.pth", "fifo", "graph.txt"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--ops-library", required=True)
    ARGS, rest = parser.parse_known_args()
    torch.ops.load_library(ARGS.ops_library)
    unittest.main(argv=[sys.argv[0]] + rest)
