"""Host time per call of intfa's torch layer alone, without a GPU: intfa.attention,
intfa.attention_int8 and intfa.attention_varlen on CPU tensors of the tiny shape (B=1, H=8, N=128), with the C++ plan
replaced by one that does nothing and the device checks, device guard and stream lookup taken
out. What remains is the Python the package runs per call (signature, checks' cache, plan lookup,
output allocation, addresses), the part of bench/python_overhead.py's figures that is intfa's
own Python; the CUDA allocator's and the driver's share is not in it. Median of 7 runs of
--calls calls, after a warm-up.

Usage: PYTHONPATH=build/python python3 bench/python_layer_host.py [--calls N]"""
import argparse
import contextlib
import statistics
import time
from unittest import mock

import torch

import intfa
from intfa import _attention_checks, _intfa, _ops, _plans, _tensors


class NoOpPlan:
    workspace_bytes = 4096

    def __init__(self, *arguments, **keywords):
        pass

    def run(self, *addresses):
        pass


def median_us(call, calls):
    for _ in range(200):
        call()
    samples = []
    for _ in range(7):
        started = time.perf_counter()
        for _ in range(calls):
            call()
        samples.append((time.perf_counter() - started) / calls * 1e6)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    calls = parser.parse_args().calls
    b, h, n, d = 1, 8, 128, 64
    q = torch.zeros(b, h, n, d, dtype=torch.float16)
    q8 = torch.zeros(b, h, n, d, dtype=torch.int8)
    v8, v_scale = _tensors.empty_v((b, h, n, d), "channel", q.device)
    scales = torch.ones(b, h, n)
    quantized = (q8, q8.clone(), v8, scales, scales.clone(), v_scale)
    # Four packed sequences of 128 queries and keys: [total, H, D] rows and int32 offsets.
    rows = q.transpose(1, 2).reshape(b * n, h, d).contiguous().repeat(4, 1, 1)
    offsets = torch.arange(0, 4 * n + 1, n, dtype=torch.int32)
    no_op = NoOpPlan()
    patches = (
        mock.patch.object(_plans, "attention_plan", lambda *a, **k: no_op),
        mock.patch.object(_intfa, "Int8AttentionPlan", NoOpPlan),
        mock.patch.object(_attention_checks, "check_kernel_device", lambda q, k, v: None),
        mock.patch.object(_attention_checks, "check_device", lambda named_tensors: None),
        mock.patch.object(_ops, "on", lambda device: contextlib.nullcontext()),
        mock.patch.object(_ops, "stream", lambda device: 0),
    )
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        calls_to_time = [
            ("intfa.attention", lambda: intfa.attention(q, q, q)),
            ("intfa.attention, return_lse", lambda: intfa.attention(q, q, q, return_lse=True)),
            ("intfa.attention_int8", lambda: intfa.attention_int8(*quantized)),
            ("intfa.attention_int8, return_lse",
             lambda: intfa.attention_int8(*quantized, return_lse=True)),
            ("intfa.attention_int8, return_lse, q_dot_k_mean",
             lambda: intfa.attention_int8(*quantized, return_lse=True, q_dot_k_mean=scales)),
            ("intfa.attention_varlen (4 x 128 rows)",
             lambda: intfa.attention_varlen(rows, rows, rows, offsets, offsets, n, n)),
            ("intfa.attention_varlen, return_lse",
             lambda: intfa.attention_varlen(rows, rows, rows, offsets, offsets, n, n,
                                            return_lse=True)),
        ]
        print(f"torch {torch.__version__}, {calls} calls x 7, median")
        print("| call | µs per call |\n| --- | --- |")
        for name, call in calls_to_time:
            print(f"| {name} | {median_us(call, calls):.1f} |")


if __name__ == "__main__":
    main()
