"""The fused operator and a path model's archive in Python (Debian's python3-torch, the same
LibTorch the binaries use): torch.ops.load_library() of libgrail_ops.so registers
grail::rspmm, grail::pna_moments and grail::pna_combine, which pass torch.autograd.gradcheck
in double precision and match the formulations they replace; an archive written by grail-train loads with
torch.jit.load and scores facts as grail-eval does.

Run by ctest with --bin-dir <build>/bin --ops-library <build>/lib/libgrail_ops.so.
"""

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import torch

ARGS = None


def random_graph(nodes, edges, relations, generator):
    src = torch.randint(nodes - 2, (edges,), generator=generator)  # the last two isolated
    dst = torch.randint(nodes - 2, (edges,), generator=generator)
    rel = torch.randint(relations - 1, (edges,), generator=generator)  # the last unused
    dst[: edges // 4] = 0  # a hub
    dst[edges // 4: edges // 4 + 3] = src[edges // 4: edges // 4 + 3]  # self-loops
    return src, rel, dst


def per_edge(h, w, init, src, rel, dst, reduce):
    message = h.index_select(0, src) * w.index_select(0, rel)
    index = dst.unsqueeze(1).expand_as(message)
    out = []
    for name in reduce.split(","):
        if name == "sum":
            out.append(init.index_add(0, dst, message))
        elif name == "sum_sq":
            out.append((init * init).index_add(0, dst, message * message))
        elif name == "max":
            out.append(init.scatter_reduce(0, index, message, "amax", include_self=True))
        else:
            out.append(init.scatter_reduce(0, index, message, "amin", include_self=True))
    return out


class OperatorTest(unittest.TestCase):
    def test_gradcheck_in_double_precision(self):
        generator = torch.Generator().manual_seed(0)
        src, rel, dst = random_graph(12, 40, 4, generator)
        graph = torch.ops.grail.relational_graph(src, rel, dst, 12)
        for features in (3, 8):  # one query of width 3; two of width 4 folded together
            h = torch.randn(12, features, dtype=torch.double, generator=generator)
            w = torch.randn(4, features, dtype=torch.double, generator=generator)
            init = torch.randn(12, features, dtype=torch.double, generator=generator)
            for reduce in ("sum", "sum_sq", "max", "min", "sum,sum_sq,max,min"):
                inputs = tuple(x.clone().requires_grad_() for x in (h, w, init))
                self.assertTrue(torch.autograd.gradcheck(
                    lambda a, b, c: tuple(torch.ops.grail.rspmm(a, b, c, *graph, reduce)),
                    inputs), reduce)

    def test_pna_moments_gradcheck_in_double_precision(self):
        generator = torch.Generator().manual_seed(2)
        total = torch.randn(10, 6, dtype=torch.double, generator=generator)
        count = torch.randint(1, 5, (10, 1), generator=generator).to(torch.double)
        square = (total * total / count + torch.rand(10, 6, dtype=torch.double,
                                                     generator=generator) + 0.1)
        inputs = (total.requires_grad_(), square.requires_grad_())
        self.assertTrue(torch.autograd.gradcheck(
            lambda a, b: tuple(torch.ops.grail.pna_moments(a, b, count)), inputs))

    def test_pna_moments_matches_the_script_formulation(self):
        generator = torch.Generator().manual_seed(3)
        total = torch.randn(300, 64, generator=generator, requires_grad=True)
        count = torch.randint(1, 40, (300, 1), generator=generator).to(torch.float)
        square = (total.detach() ** 2 / count + torch.rand(300, 64, generator=generator))
        square[:5] = total.detach()[:5] ** 2 / count[:5]  # a variance clamped to the floor
        square.requires_grad_()
        mean = total / count
        reference = (mean, (square / count - mean * mean).clamp(min=1e-6).sqrt())
        fused = torch.ops.grail.pna_moments(total, square, count)
        weights = [torch.randn(300, 64, generator=generator) for _ in range(2)]
        grads = [torch.autograd.grad(sum((o * g).sum() for o, g in zip(outs, weights)),
                                     (total, square)) for outs in (fused, reference)]
        for got, expected in zip(list(fused) + list(grads[0]), list(reference) + list(grads[1])):
            self.assertLessEqual(((got - expected).abs().max() / expected.abs().max()).item(),
                                 1e-5)

    def test_pna_combine_gradcheck_in_double_precision(self):
        generator = torch.Generator().manual_seed(4)
        nodes, group, width = 6, 3, 4  # 18 rows, two parts of 4, three scalers
        parts = [torch.randn(nodes * group, width, dtype=torch.double, generator=generator)
                 for _ in range(2)]
        weight = torch.randn(2 * width, 3 * width, dtype=torch.double, generator=generator)
        scale = torch.rand(nodes, 3, dtype=torch.double, generator=generator)
        bias = torch.randn(width, dtype=torch.double, generator=generator)
        inputs = tuple(x.requires_grad_() for x in parts + [weight, scale, bias])
        self.assertTrue(torch.autograd.gradcheck(
            lambda a, b, w, s, c: torch.ops.grail.pna_combine([a, b], w, s, c), inputs))

    def test_pna_combine_matches_the_script_formulation(self):
        generator = torch.Generator().manual_seed(5)
        nodes, group, d = 500, 16, 32  # 8,000 rows: several blocks of rows, on both threads
        parts = [torch.randn(nodes * group, d, generator=generator, requires_grad=True)
                 for _ in range(5)]
        weight = (torch.randn(5 * d, 3 * d, generator=generator) / 8).requires_grad_()
        scale = torch.rand(nodes, 3, generator=generator).requires_grad_()
        bias = torch.randn(d, generator=generator, requires_grad=True)
        fused = torch.ops.grail.pna_combine(parts, weight, scale, bias)
        reference = (torch.matmul(torch.cat(parts, 1), weight).view(nodes, group, 3, d)
                     * scale.view(nodes, 1, 3, 1)).sum(2).view(-1, d) + bias
        loss_weight = torch.randn(nodes * group, d, generator=generator)
        inputs = tuple(parts) + (weight, scale, bias)
        grads = [torch.autograd.grad((out * loss_weight).sum(), inputs)
                 for out in (fused, reference)]
        for got, expected in zip([fused] + list(grads[0]), [reference] + list(grads[1])):
            self.assertLessEqual(((got - expected).abs().max() / expected.abs().max()).item(),
                                 1e-5)

    def test_matches_the_per_edge_formulation(self):
        generator = torch.Generator().manual_seed(1)
        src, rel, dst = random_graph(200, 2000, 9, generator)
        graph = torch.ops.grail.relational_graph(src, rel, dst, 200)
        h = torch.randn(200, 64, generator=generator, requires_grad=True)
        w = torch.randn(9, 64, generator=generator, requires_grad=True)
        init = torch.zeros(200, 64)
        reduce = "sum,sum_sq,max,min"
        fused = torch.stack(torch.ops.grail.rspmm(h, w, init, *graph, reduce))
        reference = torch.stack(per_edge(h, w, init, src, rel, dst, reduce))
        scale = reference.abs().max()
        self.assertLessEqual(((fused - reference).abs().max() / scale).item(), 1e-5)
        weight = torch.randn(fused.shape, generator=generator)
        grads = [torch.autograd.grad((out * weight).sum(), (h, w)) for out in (fused, reference)]
        for got, expected in zip(*grads):
            self.assertLessEqual(((got - expected).abs().max() / expected.abs().max()).item(),
                                 1e-5)

    def test_bad_arguments_are_refused_by_name(self):
        src, rel, dst = torch.tensor([0, 1]), torch.tensor([0, 0]), torch.tensor([1, 0])
        graph = torch.ops.grail.relational_graph(src, rel, dst, 2)
        h = torch.randn(2, 4)
        with self.assertRaisesRegex(RuntimeError, "unknown reduction 'mean'"):
            torch.ops.grail.rspmm(h, torch.randn(1, 4), h, *graph, "mean")
        with self.assertRaisesRegex(RuntimeError, "outside \\[0, 2\\)"):
            torch.ops.grail.relational_graph(src, rel, torch.tensor([1, 5]), 2)


def read_triples(path):
    return [tuple(line.split("\t")[:3]) for line in Path(path).read_text().splitlines() if line]


class ArchiveTest(unittest.TestCase):
    """A path model trained by grail-train, scored in Python and by grail-eval."""

    def test_python_scores_facts_as_grail_eval_does(self):
        work = Path(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, work)
        # Two interleaved chains with a shortcut relation, and facts to score.
        facts = []
        for i in range(30):
            facts.append((f"e{i}", "next", f"e{(i + 1) % 30}"))
            facts.append((f"e{i}", "skip", f"e{(i + 2) % 30}"))
            if i % 3 == 0:
                facts.append((f"e{i}", "back", f"e{(i + 29) % 30}"))
        graph_file, test_file = work / "graph.txt", work / "test.txt"
        graph_file.write_text("".join("\t".join(f) + "\n" for f in facts))
        # Held out: grail-eval skips a test fact the graph holds.
        test = [(f"e{i}", "skip", f"e{(i + 4) % 30}") for i in range(0, 30, 4)]
        test += [(f"e{i}", "next", f"e{(i + 7) % 30}") for i in range(1, 30, 5)]
        test_file.write_text("".join("\t".join(f) + "\n" for f in test))
        bin_dir = Path(ARGS.bin_dir)
        for name, extra in (("masked", []), ("unmasked", ["--reach-mask=false", "--reach-feature"])):
            with self.subTest(name):
                model = work / f"{name}.pt"
                subprocess.run([bin_dir / "grail-train", "--family", "path", "--train", graph_file,
                                "--valid", test_file, "--out", model, "--layers", "3", "--dim", "8",
                                "--pna", "--epochs", "1", "--batch-size", "8", "--max-steps", "3",
                                "--noprogress", *extra], check=True, capture_output=True)
                scores_file = work / f"{name}.tsv"
                subprocess.run([bin_dir / "grail-eval", "--model", model, "--graph", graph_file,
                                "--test", test_file, "--score-only", "--scores-out", scores_file],
                               check=True, capture_output=True)
                expected = {tuple(line.split("\t")[:3]): float(line.split("\t")[3])
                            for line in scores_file.read_text().splitlines()}
                got = score_in_python(model, facts, test)
                self.assertEqual(set(got), set(expected))
                for fact, score in expected.items():
                    self.assertAlmostEqual(got[fact], score, delta=1e-5 * (1 + abs(score)),
                                           msg=str(fact))


def score_in_python(model_path, facts, test):
    """Each test fact's score: its tail's for the query (head, relation, ?) on the whole graph
    (exact for any configuration), through the archive's own forward."""
    module = torch.jit.load(str(model_path))
    relations = list(module.relations)
    R = len(relations)
    entities = sorted({e for h, _, t in facts for e in (h, t)})
    index = {e: i for i, e in enumerate(entities)}
    src, dst, rel = [], [], []
    neighbours = collections.defaultdict(list)
    for h, r, t in facts:
        a, b, k = index[h], index[t], relations.index(r)
        src += [a, b]
        dst += [b, a]
        rel += [k, k + R]
        neighbours[a].append(b)
        neighbours[b].append(a)
    edges = [torch.tensor(x) for x in (src, dst, rel)]
    scores = {}
    for h, r, t in test:
        source = index[h]
        dist = [1 << 40] * len(entities)  # breadth-first distances from the source
        dist[source] = 0
        frontier = [source]
        while frontier:
            following = []
            for u in frontier:
                for v in neighbours[u]:
                    if dist[v] > dist[u] + 1:
                        dist[v] = dist[u] + 1
                        following.append(v)
            frontier = following
        with torch.no_grad():
            node, _ = module.forward(*edges, torch.tensor(dist).view(-1, 1),
                                     torch.zeros(len(entities), 1, dtype=torch.long),
                                     torch.tensor([source]),
                                     torch.tensor([relations.index(r)]))
        scores[(h, r, t)] = node[index[t]].item()
    return scores


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--ops-library", required=True)
    ARGS, rest = parser.parse_known_args()
    torch.ops.load_library(ARGS.ops_library)
    unittest.main(argv=[sys.argv[0]] + rest)
