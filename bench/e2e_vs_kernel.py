#!/usr/bin/env python3
"""Why `intfa.attention` (16-bit inputs: K/V quantize passes, then the Hopper kernel that
quantizes Q itself) measured faster than the INT8 kernel alone on pre-quantized inputs at 16k
tokens (H200, 2026-11-28 18:34, d=128 non-causal: 800 against 765 TOPS): times both, alternating,
in one process with CUDA events, and the attention kernel of each when run under ncu
(`scripts/device/ncu_kernel.sh e2e_vs_kernel attention_forward ... this script --calls 2`).

    python3 bench/e2e_vs_kernel.py --head-dim 128 --seq 16384 [--causal] [--rounds 10]
"""
import argparse

import torch

import intfa


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--seq", type=int, default=16384)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--calls", type=int, default=0,
                        help="only this many calls of each path, untimed (for a profiler)")
    args = parser.parse_args()
    shape = (args.batch, args.heads, args.seq, args.head_dim)
    torch.manual_seed(0)
    q, k, v = (torch.randn(shape, dtype=torch.float16, device="cuda") for _ in range(3))
    z = intfa.quantize(q, k, v)

    def e2e():
        return intfa.attention(q, k, v, is_causal=args.causal, fallback="error")

    def kernel():
        return intfa.attention_int8(z.q, z.k, z.v, z.q_scale, z.k_scale, z.v_scale,
                                    is_causal=args.causal, q_dot_k_mean=z.q_dot_k_mean)

    def kernel_no_lse_term():
        return intfa.attention_int8(z.q, z.k, z.v, z.q_scale, z.k_scale, z.v_scale,
                                    is_causal=args.causal)

    paths = {"intfa.attention": e2e, "attention_int8": kernel,
             "attention_int8 (no q_dot_k_mean)": kernel_no_lse_term}
    if args.calls:
        for _ in range(args.calls):
            for call in paths.values():
                call()
        torch.cuda.synchronize()
        return
    for call in paths.values():  # compile and warm up
        call()
        call()
    torch.cuda.synchronize()
    times = {name: [] for name in paths}
    for round_index in range(args.rounds):
        order = list(paths.items())
        if round_index % 2:
            order.reverse()
        for name, call in order:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            call()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end))
    flops = 4 * args.batch * args.heads * args.seq * args.seq * args.head_dim
    if args.causal:
        flops //= 2
    for name, values in times.items():
        values.sort()
        median = values[len(values) // 2]
        print(f"d={args.head_dim} N={args.seq} causal={args.causal} {name}: {median:.3f} ms "
              f"(min {values[0]:.3f}), {flops / median / 1e9:.0f} TOPS")


if __name__ == "__main__":
    main()
