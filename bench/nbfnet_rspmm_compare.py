#!/usr/bin/env python3
"""grail::rspmm against NBFNet's own CPU rspmm (the generalised relational sparse-dense
product of the NBFNet and ULTRA repositories, MIT), on the same inputs, the same LibTorch
(Debian's python3-torch) and the same threads: a benchmark-only comparison, outside the
product. NBFNet's source is compiled here from a checkout given on the command line; none of
it is part of this repository.

  git -C ULTRA_CHECKOUT archive HEAD ultra/rspmm/source | tar -x -C /tmp/nbfnet
  bench/nbfnet_rspmm_compare.py --nbfnet-source /tmp/nbfnet/ultra/rspmm/source \\
      --ops-library build/lib/libgrail_ops.so [--graph ../shared/data/fb237_v4/train.txt]

Workloads: one query (F = 32) and 64 folded into the features (F = 2048, NBFNet's batch of
the FB configuration), on the graph's message edges (each fact and its inverse). PNA reads
four reductions: NBFNet calls its operator four times (sum; sum over h^2 and w^2 for the sum
of squares; max; min), ours once. Edges are sorted once, outside the timing, for both. Prints
one JSON object: milliseconds per forward and per forward+backward, best of --repeats.
"""
import argparse
import json
import os
import shutil
import tempfile
import time

import torch
from torch.utils import cpp_extension


def load_graph(path):
    entities, relations, facts = {}, {}, []
    for line in open(path):
        h, r, t = line.split()[:3]
        facts.append((entities.setdefault(h, len(entities)), relations.setdefault(r, len(relations)),
                      entities.setdefault(t, len(entities))))
    R = len(relations)
    src = torch.tensor([f[0] for f in facts] + [f[2] for f in facts])
    dst = torch.tensor([f[2] for f in facts] + [f[0] for f in facts])
    rel = torch.tensor([f[1] for f in facts] + [f[1] + R for f in facts])
    return len(entities), 2 * R, src, rel, dst


def best_ms(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return round(min(times) * 1000, 2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nbfnet-source", required=True, help="NBFNet's rspmm/source folder")
    parser.add_argument("--ops-library", default="build/lib/libgrail_ops.so")
    parser.add_argument("--graph", default="../shared/data/fb237_v4/train.txt")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.ops.load_library(args.ops_library)
    # NBFNet's header includes ATen/native/SparseTensorUtils.h for `using namespace
    # at::sparse` alone; Debian's LibTorch does not ship it, so an empty namespace stands in.
    stub = tempfile.mkdtemp()
    os.makedirs(f"{stub}/ATen/native")
    with open(f"{stub}/ATen/native/SparseTensorUtils.h", "w") as header:
        header.write("#pragma once\nnamespace at { namespace sparse {} }\n")
    nbfnet = cpp_extension.load(
        "nbfnet_rspmm", [f"{args.nbfnet_source}/rspmm.cpp"], extra_include_paths=[stub],
        extra_cflags=["-Ofast", "-fopenmp", "-DAT_PARALLEL_OPENMP"], extra_ldflags=["-fopenmp"],
        verbose=False)
    shutil.rmtree(stub)  # only the compile reads it
    V, R, src, rel, dst = load_graph(args.graph)
    # NBFNet's operator: edge_index (node_in, node_out) sorted by node_in; it reduces into
    # node_in from node_out (its callers pass the edges reversed). Ours reduces into dst.
    order = torch.argsort(dst * V + src)
    edge_index = torch.stack([dst[order], src[order]])
    edge_type = rel[order]
    edge_weight = torch.ones(edge_type.numel())
    graph = torch.ops.grail.relational_graph(src, rel, dst, V)
    report = {"graph": args.graph, "nodes": V, "edges": int(src.numel()), "threads": args.threads,
              "torch": torch.__version__}
    for queries in (1, 64):
        F = 32 * queries
        h = torch.randn(V, F, requires_grad=True)
        w = torch.randn(R, F, requires_grad=True)
        zero = torch.zeros(V, F)

        def theirs(reductions):
            out = []
            for name in reductions:
                if name == "sum_sq":
                    out.append(nbfnet.rspmm_add_mul_forward_cpu(edge_index, edge_type, edge_weight,
                                                                w * w, h * h))
                else:
                    kind = {"sum": "add", "max": "max", "min": "min"}[name]
                    forward = getattr(nbfnet, f"rspmm_{kind}_mul_forward_cpu")
                    out.append(forward(edge_index, edge_type, edge_weight, w, h))
            return out

        def theirs_backward(reductions):
            grads = []
            for name in reductions:
                kind = {"sum": "add", "sum_sq": "add", "max": "max", "min": "min"}[name]
                ww, hh = (w * w, h * h) if name == "sum_sq" else (w, h)
                ww, hh = ww.detach(), hh.detach()
                out = getattr(nbfnet, f"rspmm_{kind}_mul_forward_cpu")(
                    edge_index, edge_type, edge_weight, ww, hh)
                grads.append(getattr(nbfnet, f"rspmm_{kind}_mul_backward_cpu")(
                    edge_index, edge_type, edge_weight, ww, hh, out, torch.ones_like(out)))
            return grads

        def ours(reductions):
            with torch.no_grad():
                return torch.ops.grail.rspmm(h, w, zero, *graph, ",".join(reductions))

        def ours_backward(reductions):
            out = torch.ops.grail.rspmm(h, w, zero, *graph, ",".join(reductions))
            return torch.autograd.grad(sum(o.sum() for o in out), (h, w))

        for label, reductions in (("sum", ["sum"]), ("pna", ["sum", "sum_sq", "max", "min"])):
            # The same sums (NBFNet's max and min start from -inf, ours from init = 0: not
            # compared).
            with torch.no_grad():
                mine, others = ours(["sum"])[0], theirs(["sum"])[0]
                agreement = ((mine - others).abs().max() / others.abs().max()).item()
            report[f"B={queries} {label}"] = {
                "max_relative_difference": agreement,
                "ours_forward_ms": best_ms(lambda: ours(reductions), args.repeats),
                "nbfnet_forward_ms": best_ms(lambda: theirs(reductions), args.repeats),
                "ours_forward_backward_ms": best_ms(lambda: ours_backward(reductions), args.repeats),
                "nbfnet_forward_backward_ms": best_ms(lambda: theirs_backward(reductions),
                                                      max(1, args.repeats // 2)),
            }
            print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
