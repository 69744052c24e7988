#!/usr/bin/env python3
"""Per-kernel GPU time of ``intfa.attention`` under each rotation (off, on, auto), from
torch.profiler: which of the call's launches (K smoothing's mean pass, K's rows with V, the
attention kernel with its own Q pass) a numerics option makes slower. Mean microseconds per call
over --repeats calls after a warm-up, B=4 H=32, FP16, full INT8 by default.

On sm_90 every intfa kernel is a programmatic dependent launch: its time starts when it is
scheduled, before it waits for the kernel before it, so a kernel after a longer one shows part of
that one's time, and the kernels' sum exceeds the call's. Compare one kernel across rotations;
INTFA_PROGRAMMATIC_LAUNCH=0 gives each kernel's time alone (and a slower call).

    PYTHONPATH=build/python:bench python3 bench/kernel_times.py --head-dims 128 --seqs 1024,4096
"""
import argparse
import collections

import torch
from torch.profiler import ProfilerActivity, profile

import intfa
from accuracy import INPUT_FAMILIES, random_inputs


def kernel_times(call, repeats):
    """{kernel name (its first 60 characters): mean us per call}."""
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            call()
        torch.cuda.synchronize()
    totals = collections.defaultdict(float)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            totals[event.name[:60]] += event.device_time / repeats
    return totals


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--head-dims", default="128")
    parser.add_argument("--seqs", default="1024,4096")
    parser.add_argument("--causal", default="off")
    parser.add_argument("--variant", default="full_int8")
    parser.add_argument("--inputs", default="normal", choices=INPUT_FAMILIES)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    for d in [int(x) for x in args.head_dims.split(",")]:
        for n in [int(x) for x in args.seqs.split(",")]:
            q, k, v = random_inputs(args.inputs, (4, 32, n, d))
            for causal in [c == "on" for c in args.causal.split(",")]:
                print(f"d={d} N={n} causal={causal} {args.variant} inputs={args.inputs}")
                for rotate in (False, True, "auto", False):
                    times = kernel_times(lambda: intfa.attention(
                        q, k, v, is_causal=causal, variant=args.variant, rotate=rotate),
                        args.repeats)
                    parts = ", ".join(f"{name} {us:.1f}" for name, us in sorted(times.items()))
                    print(f"  rotate={rotate!s:5}: total {sum(times.values()):.1f} us: {parts}",
                          flush=True)


if __name__ == "__main__":
    main()
