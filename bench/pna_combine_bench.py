"""grail::pna_combine against the script it replaces in a PNA layer (model/ops/pna_combine.h),
forward and backward, on one layer's shapes: V nodes of G columns of d values (defaults:
fb237_v4's training graph at a batch of 64), five parts, three scalers.

  /usr/bin/python3 bench/pna_combine_bench.py --ops-library build/lib/libgrail_ops.so

Prints the best of --repeats runs of each, in milliseconds, and their largest relative
differences (values and every gradient).
"""

import argparse
import time

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops-library", required=True)
    parser.add_argument("--nodes", type=int, default=4707)
    parser.add_argument("--group", type=int, default=64)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()
    torch.ops.load_library(args.ops_library)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    V, G, d = args.nodes, args.group, args.dim
    parts = [torch.randn(V * G, d, requires_grad=True) for _ in range(5)]
    weight = (torch.randn(5 * d, 3 * d) / 8).requires_grad_()
    scale = torch.rand(V, 3)
    bias = torch.randn(d, requires_grad=True)
    grad = torch.randn(V * G, d)
    inputs = parts + [weight, bias]

    def script():
        return (torch.matmul(torch.cat(parts, 1), weight).view(V, G, 3, d)
                * scale.view(V, 1, 3, 1)).sum(2).view(-1, d) + bias

    def fused():
        return torch.ops.grail.pna_combine(parts, weight, scale, bias)

    results = {}
    for name, run in (("script", script), ("pna_combine", fused)):
        forward = backward = float("inf")
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            out = run()
            t1 = time.perf_counter()
            grads = torch.autograd.grad(out, inputs, grad)
            t2 = time.perf_counter()
            forward, backward = min(forward, t1 - t0), min(backward, t2 - t1)
        results[name] = [out.detach()] + list(grads)
        print(f"{name:12s} forward {forward * 1e3:7.1f} ms  backward {backward * 1e3:7.1f} ms")
    worst = max(((a - b).abs().max() / b.abs().max()).item()
                for a, b in zip(results["pna_combine"], results["script"]))
    print(f"largest relative difference (values, gradients): {worst:.2e}")


if __name__ == "__main__":
    main()
