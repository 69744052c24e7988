#!/usr/bin/env python3
"""Host time per call of intfa.attention_int8 through the Python package, layer by layer, on a
problem small enough that the GPU never limits the rate (B=1, H=1, N=128, d=128): each row calls
one layer CALLS times back to back and divides the wall time (synchronised) by CALLS, and
keeps the least of several rounds.

Layers, outermost first: the public function (argument checks, then the op); the op as the
public function calls it (in plain eager mode its implementation, directly: _CustomOp); the
implementation (output allocation, then the launch); the launch alone (the pybind11 call into the
C++ runtime). The same op through torch's dispatcher (torch.ops.intfa.attention_int8, the path
torch.compile'd graphs take), Torch's SDPA on the FP16 inputs and one tiny torch kernel give the
reference points.

Uses the package's private functions (intfa._torch), so it tracks their names. Needs torch, a GPU
and the package on PYTHONPATH (scripts/device_python.sh builds it as build-device-py/python).
Usage: python3 bench/python_overhead.py [--calls N] [--json FILE]
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

import intfa
from intfa import _torch as layers


def per_call_us(function, calls, rounds=7):
    """The least, over rounds, of the synchronised wall time of `calls` calls, per call, in us:
    other work on the host only ever adds time, and it varied by 2x between rounds on the lent
    machine."""
    for _ in range(20):
        function()
    torch.cuda.synchronize()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            function()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return min(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()

    torch.manual_seed(0)
    shape = (1, 1, 128, 128)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16) for _ in range(3))
    z = intfa.quantize(q, k, v)
    numerics = dict(p_encoding=layers.DEFAULTS["p_encoding"], p_scale=layers.DEFAULTS["p_scale"])
    op_arguments = (z.q, z.k, z.v, z.q_scale, z.k_scale, z.v_scale, False, 0.0, "HND",
                    torch.float16, numerics["p_encoding"], numerics["p_scale"], False, None)
    out, lse = layers._empty_attention(z.q, "HND", torch.float16, False)
    stream = layers._stream(q.device)

    def public():
        intfa.attention_int8(z.q, z.k, z.v, z.q_scale, z.k_scale, z.v_scale, **numerics)

    def op_as_called():
        layers._attention_int8_op(*op_arguments)

    def dispatcher():
        torch.ops.intfa.attention_int8(*op_arguments)

    def implementation():
        layers._attention_int8_op.implementation(*op_arguments)

    def launch():
        layers._launch_attention(z.q, z.k, z.v, z.q_scale, z.k_scale, z.v_scale, out, lse, False,
                                 0.0, "HND", numerics["p_encoding"], numerics["p_scale"], None,
                                 stream)

    def sdpa():
        F.scaled_dot_product_attention(q, k, v)

    scratch = torch.zeros(16, device="cuda")

    def tiny_kernel():
        scratch.add_(1.0)

    rows = [("intfa.attention_int8 (public)", public),
            ("the op, as the public function calls it", op_as_called),
            ("implementation (allocate + launch)", implementation),
            ("launch (pybind11 -> C++ runtime)", launch),
            ("the op through torch's dispatcher", dispatcher),
            ("torch SDPA, FP16", sdpa),
            ("one tiny torch kernel", tiny_kernel)]
    results = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{args.calls} calls per round")
    print(f"{'layer':40} {'us per call':>12} {'this layer':>12}")
    timed = [(name, per_call_us(function, args.calls)) for name, function in rows]
    for index, (name, us) in enumerate(timed):
        own = us - timed[index + 1][1] if index < 3 else None
        print(f"{name:40} {us:12.1f} {'' if own is None else f'{own:12.1f}'}")
        results.append({"layer": name, "us_per_call": us, "own_us": own})
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "calls": args.calls, "rows": results}, handle, indent=1)


if __name__ == "__main__":
    main()
