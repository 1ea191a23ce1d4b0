"""Sums up a Chrome trace of training steps (grail-train --trace FILE): where a step's time
goes on the host and on the GPU.

  python3 bench/step_trace.py TRACE.json[.gz] --steps 5 [--top 15] [--json OUT.json]

Reports, per step: the traced window's wall time; the GPU's busy time (the union of its
kernels, copies and sets) and the kernels' count; the host's time in CUDA runtime calls that
wait for the GPU (synchronisations, blocking copies); the operators run on the host; and the
operators with the most self time on the host (time inside an operator less the operators it
called), per thread kind (the training thread, autograd's). A step whose GPU is busy a small
share of the window and whose host is busy the rest is bound by the host's issuing of its
operators; a step whose host waits in synchronisations most of the window is bound by the GPU.
"""
import argparse
import collections
import gzip
import json
import sys

GPU_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset"}
# CUDA runtime calls in which the host waits for the device.
WAITING_CALLS = ("Synchronize", "cudaMemcpy", "cudaStreamWaitEvent", "cudaEventSynchronize")


def union_length(intervals):
    total, end = 0.0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def self_times(events):
    """Self time per operator name on one thread: each event's duration less its children's
    (events nest by time, as the profiler records them)."""
    stack = []
    for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
            stack.pop()
        e["_children"] = 0.0
        if stack:
            stack[-1]["_children"] += e["dur"]
        stack.append(e)
    result = collections.Counter()
    for e in events:
        result[e["name"]] += e["dur"] - e["_children"]
    return result


def summarise(trace, steps, top):
    events = [e for e in trace.get("traceEvents", trace if isinstance(trace, list) else [])
              if e.get("ph") == "X" and "dur" in e]
    if not events:
        raise SystemExit("step_trace: no complete events in the trace")
    for e in events:
        e["ts"], e["dur"] = float(e["ts"]), float(e["dur"])
    host = [e for e in events if e.get("cat") in ("cpu_op", "user_annotation")]
    gpu = [e for e in events if e.get("cat") in GPU_CATEGORIES]
    runtime = [e for e in events if e.get("cat") == "cuda_runtime"]
    everything = host + gpu + runtime
    start = min(e["ts"] for e in everything)
    stop = max(e["ts"] + e["dur"] for e in everything)
    window = stop - start

    threads = collections.defaultdict(list)
    for e in host:
        threads[e.get("tid")].append(e)
    by_thread = {}
    for tid, thread_events in threads.items():
        selfs = self_times(thread_events)
        busy = union_length([(e["ts"], e["ts"] + e["dur"]) for e in thread_events])
        by_thread[str(tid)] = {
            "operators_per_step": len(thread_events) / steps,
            "busy_ms_per_step": busy / steps / 1e3,
            "top_self_ms_per_step": [[name, round(t / steps / 1e3, 3)]
                                     for name, t in selfs.most_common(top)],
        }
    waiting = [e for e in runtime if any(w in e["name"] for w in WAITING_CALLS)]
    launches = [e for e in runtime if "Launch" in e["name"]]
    gpu_busy = union_length([(e["ts"], e["ts"] + e["dur"]) for e in gpu])
    gpu_by_name = collections.Counter()
    for e in gpu:
        gpu_by_name[e["name"][:80]] += e["dur"]
    return {
        "steps": steps,
        "window_ms_per_step": window / steps / 1e3,
        "gpu_busy_ms_per_step": gpu_busy / steps / 1e3,
        "gpu_busy_share": gpu_busy / window,
        "kernels_per_step": sum(e.get("cat") == "kernel" for e in gpu) / steps,
        "launch_calls_per_step": len(launches) / steps,
        "launch_ms_per_step": sum(e["dur"] for e in launches) / steps / 1e3,
        "host_waiting_ms_per_step": sum(e["dur"] for e in waiting) / steps / 1e3,
        "host_waiting_calls": collections.Counter(e["name"] for e in waiting).most_common(5),
        "top_gpu_ms_per_step": [[name, round(t / steps / 1e3, 3)]
                                for name, t in gpu_by_name.most_common(top)],
        "threads": by_thread,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--steps", type=int, required=True, help="steps the trace holds")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--json", help="also write the summary here")
    args = parser.parse_args()
    with (gzip.open if args.trace.endswith(".gz") else open)(args.trace, "rt") as f:
        summary = summarise(json.load(f), args.steps, args.top)
    text = json.dumps(summary, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    sys.exit(main())
