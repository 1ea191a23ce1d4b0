"""grail::rspmm on CUDA against its CPU kernels: parity (forward and backward, double and
float, every reduction, one query and 64 folded into the features, graphs with a hub,
isolated nodes, self-loops and relations without edges) and speed on fb237_v4's training graph
at batch 64 (forward and backward of the PNA reductions, CUDA events) beside the CPU with 2
threads and with every core. Prints one JSON object (bench/gpu_session.sh fused).

  python3 bench/gpu_ops_check.py --ops-library build-torch/lib/libgrail_ops.so \
      [--graph .gpu-carry/data/fb237_v4/train.txt]
"""
import argparse
import json
import os
import time

import torch

DEVICE = "cuda"  # --device cpu checks the script itself on a machine without a GPU


def random_graph(nodes, edges, relations, generator):
    src = torch.randint(nodes - 3, (edges,), generator=generator)
    dst = torch.randint(nodes - 3, (edges,), generator=generator)
    rel = torch.randint(relations - 2, (edges,), generator=generator)
    dst[: edges // 5] = 0  # a hub
    dst[edges // 5: edges // 5 + 4] = src[edges // 5: edges // 5 + 4]  # self-loops
    return src, rel, dst


def run(h, w, init, graph, reduce, weight):
    h = h.detach().requires_grad_()
    w = w.detach().requires_grad_()
    init = init.detach().requires_grad_()
    out = torch.stack(torch.ops.grail.rspmm(h, w, init, *graph, reduce))
    grads = torch.autograd.grad((out * weight).sum(), (h, w, init))
    return [out.detach()] + list(grads)


def relative(a, b):
    return ((a.cpu() - b.cpu()).abs().max() / b.cpu().abs().max().clamp_min(1e-30)).item()


def parity():
    worst = {}
    generator = torch.Generator().manual_seed(0)
    src, rel, dst = random_graph(300, 4000, 12, generator)
    graphs = {device: torch.ops.grail.relational_graph(src.to(device), rel.to(device),
                                                       dst.to(device), 300)
              for device in ("cpu", DEVICE)}
    for dtype in (torch.double, torch.float):
        for queries in (1, 64):
            F = 8 * queries
            h = torch.randn(300, F, dtype=dtype, generator=generator)
            w = torch.randn(12, F, dtype=dtype, generator=generator)
            init = torch.zeros(300, F, dtype=dtype)
            init[:5] = torch.randn(5, F, dtype=dtype, generator=generator)
            for reduce in ("sum", "sum_sq", "max", "min", "sum,sum_sq,max,min"):
                k = len(reduce.split(","))
                weight = torch.randn(k, 300, F, dtype=dtype, generator=generator)
                cpu = run(h, w, init, graphs["cpu"], reduce, weight)
                cuda = run(h.to(DEVICE), w.to(DEVICE), init.to(DEVICE), graphs[DEVICE], reduce, weight.to(DEVICE))
                key = f"{str(dtype).split('.')[-1]} B={queries} {reduce}"
                worst[key] = max(relative(c, g) for c, g in zip(cuda, cpu))
    # The graph built on the GPU (sorts) is the CPU's (counting sort).
    same_graph = all(torch.equal(a.cpu(), b) for a, b in zip(graphs[DEVICE], graphs["cpu"]))
    return worst, same_graph


def timed(fn, device, repeats=10):
    fn()  # warm-up
    if device == "cuda":
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / repeats
    begin = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - begin) * 1000 / repeats


def speed(graph_file):
    names, facts = {}, []
    relations = {}
    for line in open(graph_file):
        h, r, t = line.split()[:3]
        facts.append((names.setdefault(h, len(names)), relations.setdefault(r, len(relations)),
                      names.setdefault(t, len(names))))
    R = len(relations)
    src = torch.tensor([f[0] for f in facts] + [f[2] for f in facts])
    dst = torch.tensor([f[2] for f in facts] + [f[0] for f in facts])
    rel = torch.tensor([f[1] for f in facts] + [f[1] + R for f in facts])
    V, F = len(names), 64 * 32
    result = {"nodes": V, "edges": int(src.numel()), "features": F}
    for device, threads in ((DEVICE, None), ("cpu", 2), ("cpu", torch.get_num_threads())):
        if device == "cpu" and threads is None:
            threads = torch.get_num_threads()
        if threads:
            torch.set_num_threads(threads)
        graph = torch.ops.grail.relational_graph(src.to(device), rel.to(device), dst.to(device), V)
        h = torch.randn(V, F, device=device, requires_grad=True)
        w = torch.randn(2 * R, F, device=device, requires_grad=True)
        init = torch.zeros(V, F, device=device)
        reduce = "sum,sum_sq,max,min"

        def forward():
            with torch.no_grad():
                torch.ops.grail.rspmm(h, w, init, *graph, reduce)

        def both():
            out = torch.ops.grail.rspmm(h, w, init, *graph, reduce)
            torch.autograd.grad(sum(o.sum() for o in out), (h, w))

        label = "cuda" if device == "cuda" else f"cpu {threads} threads"
        repeats = 20 if device == "cuda" else 3
        result[label] = {"forward_ms": round(timed(forward, device, repeats), 3),
                         "forward_backward_ms": round(timed(both, device, repeats), 3)}
        if device == "cpu" and threads == 2:
            # The per-edge formulation it replaces, same inputs and threads.
            s, r, d = src, rel, dst

            def per_edge_forward(grad=False):
                with torch.set_grad_enabled(grad):
                    m = h.index_select(0, s) * w.index_select(0, r)
                    index = d.unsqueeze(1).expand(-1, F)
                    return [init.index_add(0, d, m), (init * init).index_add(0, d, m * m),
                            init.scatter_reduce(0, index, m, "amax", include_self=True),
                            init.scatter_reduce(0, index, m, "amin", include_self=True)]

            def per_edge_both():
                out = per_edge_forward(True)
                torch.autograd.grad(sum(o.sum() for o in out), (h, w))

            result[label]["per_edge_forward_ms"] = round(timed(per_edge_forward, device, 2), 3)
            result[label]["per_edge_forward_backward_ms"] = round(timed(per_edge_both, device, 2),
                                                                  3)
    return result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops-library", required=True)
    parser.add_argument("--graph", default=".gpu-carry/data/fb237_v4/train.txt")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    if os.path.exists(args.ops_library):
        torch.ops.load_library(args.ops_library)
    else:  # the CMake build failed: compile the operator alone, as a PyTorch extension
        from torch.utils import cpp_extension
        ops = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "model", "ops")
        root = os.path.abspath(os.path.join(ops, "..", ".."))
        cuda = ["rspmm_cuda_ops.cc", "rspmm_cuda.cu"] if DEVICE == "cuda" else []
        flags = ["-O3", "-DGRAIL_WITH_CUDA"] if DEVICE == "cuda" else ["-O3"]
        cpp_extension.load(
            name="grail_ops_extension",
            sources=[os.path.join(ops, f) for f in ["rspmm.cc", "rspmm_cpu.cc"] + cuda],
            extra_include_paths=[root], extra_cflags=flags + ["-fopenmp"],
            extra_cuda_cflags=flags + ["-std=c++17"], extra_ldflags=["-fopenmp"],
            is_python_module=False, verbose=False)
        print(json.dumps({"built_with": "torch.utils.cpp_extension"}), flush=True)
    worst, same_graph = parity()
    report = {"gpu": torch.cuda.get_device_name(0) if DEVICE == "cuda" else None,
              "torch": torch.__version__,
              "parity_max_relative": worst, "parity_within_1e-5": max(worst.values()) <= 1e-5,
              "graph_same_on_cuda": same_graph}
    print(json.dumps(report), flush=True)
    report["speed_fb237_v4_batch64"] = speed(args.graph)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
