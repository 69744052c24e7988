#!/usr/bin/env python3
"""Host time per call of intfa.attention and intfa.attention_int8 through the Python package,
layer by layer, on the issue's tiny problem (B=1, H=8, N=128, d=64): each row calls one layer
CALLS times back to back and divides the wall time (synchronised) by CALLS, and keeps the least of
several rounds. A second table gives the GPU's own time per call of the public calls (a CUDA
graph of 20 calls, replayed), which says whether the GPU rather than the host sets the rate.

Layers of intfa.attention, outermost first: the public function (argument checks, cached per call
signature); the op's implementation (output and workspace from torch's allocator, the plan of the
signature, one call into C++); the C++ call alone (intfa::attention_forward_16bit: quantize and
attend, three launches for full INT8 on sm_90a). Then intfa.attention_int8 (public, the C++ call
alone, and the pieces before it: the signature, the plain-eager test, the output), Torch's SDPA
on the FP16 inputs, and one tiny torch kernel as the reference points.

Uses the package's private functions (intfa._ops, _plans, _tensors), so it tracks their names.
Needs torch, a GPU and the package on PYTHONPATH (scripts/device_python.sh builds it as
build-device-py/python).
Usage: python3 bench/python_overhead.py [--calls N] [--json FILE]
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

import intfa
from intfa import _checks, _ops, _plans, _tensors
from intfa._checks import DEFAULTS, check_numerics
from intfa._op_args import AttentionArgs, Int8AttentionArgs, numerics_text


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


def gpu_us_per_call(function, calls_per_graph=20, replays=50):
    """The GPU's own time per call: `calls_per_graph` calls captured in one CUDA graph, replayed
    `replays` times (the least of 7 rounds, per call). The host launches one graph per 20 calls,
    so what is left is the kernels' time and the gaps between them on the GPU. Where it comes near
    the eager time per call, the GPU and not the host sets the eager rate. None when the call
    cannot be captured."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                function()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls_per_graph):
                function()
    except RuntimeError:
        return None
    return per_call_us(graph.replay, replays) / calls_per_graph


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()

    torch.manual_seed(0)
    shape = (1, 8, 128, 64)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16) for _ in range(3))
    # The op's arguments as intfa.attention passes them by default (K smoothing on, no
    # rotation, every numerics option given as None), so that every row below times the same GPU
    # work.
    args = AttentionArgs(is_causal=False, sm_scale=0.0, layout="HND", variant="full_int8",
                         smooth_k=DEFAULTS["smooth_k"], rotate=DEFAULTS["rotate"],
                         numerics=check_numerics(dict.fromkeys(_checks.NUMERICS)))
    op_numerics = numerics_text(args.numerics)  # as the op's schema carries them
    out = torch.empty_like(q)
    plan = _plans.attention_plan(q, k, v, out, args)
    workspace = torch.empty(plan.workspace_bytes, dtype=torch.uint8, device="cuda")
    stream = _tensors.stream(q.device)
    z = intfa.quantize(q, k, v)
    int8_out, int8_lse = _tensors.empty_attention(z.q, "HND", torch.float16, False)
    int8_args = Int8AttentionArgs(is_causal=False, sm_scale=0.0, layout="HND",
                                  out_dtype=torch.float16, numerics=(), config=None)
    int8_plan = _plans.int8_attention_plan(z.q, z.k, z.v, z.v_scale, int8_out, int8_args)

    # fallback="error": a call intfa did not serve would raise, not time torch's SDPA.
    def public():
        intfa.attention(q, k, v, fallback="error")

    def public_half():
        intfa.attention(q, k, v, variant="half_int8", fallback="error")

    def implementation():
        _ops.attention_op.implementation(q, k, v, args.is_causal, args.sm_scale, args.layout,
                                         args.variant, args.smooth_k, args.rotate,
                                         False, op_numerics)  # return_lse False

    def cpp_call():
        plan.run(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), 0,
                 workspace.data_ptr(), stream)

    def int8_public():
        intfa.attention_int8(*z[:6])

    def int8_cpp_call():
        int8_plan.run(z.q.data_ptr(), z.k.data_ptr(), z.v.data_ptr(), z.q_scale.data_ptr(),
                      z.k_scale.data_ptr(), z.v_scale.data_ptr(), int8_out.data_ptr(), 0, stream)

    # The pieces of the implementation, each alone: where its time above the C++ call goes.
    def allocate_output():
        _tensors.empty_output(q, q.dtype)

    def allocate_workspace():
        torch.empty(plan.workspace_bytes, dtype=torch.uint8, device=q.device)

    def plan_lookup():
        _plans.attention_plan(q, k, v, out, args)

    def device_and_stream():
        with _tensors.on(q.device):
            _tensors.stream(q.device)

    def data_pointers():
        q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), workspace.data_ptr()

    # attention_int8's pieces before its C++ call: the call signature its checks are cached by,
    # the plain-eager test, the output.
    int8_tensors = tuple(z[:6]) + (None,)

    def int8_signature():
        tuple(map(_plans.tensor_signature, int8_tensors))

    def int8_plain_eager():
        _ops.plain_eager(int8_tensors)

    def int8_allocate_output():
        _tensors.empty_output(z.q, torch.float16)

    def sdpa():
        F.scaled_dot_product_attention(q, k, v)

    scratch = torch.zeros(16, device="cuda")

    def tiny_kernel():
        scratch.add_(1.0)

    rows = [("intfa.attention (public, full INT8)", public),
            ("  its implementation (allocate + plan.run)", implementation),
            ("  the C++ call (quantize + attend)", cpp_call),
            ("    allocate the output", allocate_output),
            ("    allocate the workspace", allocate_workspace),
            ("    the plan's lookup", plan_lookup),
            ("    current device and stream", device_and_stream),
            ("    five data_ptr()", data_pointers),
            ("intfa.attention (public, half INT8)", public_half),
            ("intfa.attention_int8 (public)", int8_public),
            ("  the C++ call (attention_forward)", int8_cpp_call),
            ("  the signature of its 7 tensor arguments", int8_signature),
            ("  the plain-eager test", int8_plain_eager),
            ("  allocate the output (INT8 q, FP16 out)", int8_allocate_output),
            ("torch SDPA, FP16", sdpa),
            ("one tiny torch kernel", tiny_kernel)]
    results = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{args.calls} calls per round")
    print(f"{'layer':44} {'us per call':>12}")
    timed = [(name, per_call_us(function, args.calls)) for name, function in rows]
    for name, us in timed:
        print(f"{name:44} {us:12.1f}")
        results.append({"layer": name.strip(), "us_per_call": us})
    # The GPU's side of the top-level rows: the public calls and the references.
    print(f"\n{'call':44} {'GPU us per call (CUDA graph of 20 calls)':>12}")
    for name, function in [row for row in rows if not row[0].startswith(" ")]:
        us = gpu_us_per_call(function)
        print(f"{name:44} {'-' if us is None else f'{us:12.1f}'}")
        results.append({"layer": name.strip(), "gpu_us_per_call": us})
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "calls": args.calls, "rows": results}, handle, indent=1)


if __name__ == "__main__":
    main()
