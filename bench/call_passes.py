#!/usr/bin/env python3
"""`intfa.attention` calls (B=4, H=32, FP16 N(0,1), default numerics) after warm-up calls, the
last inside the NVTX range "intfa_call", for a profiler (`ncu --nvtx --nvtx-include intfa_call/`:
scripts/device/passes.sh). Prints the bytes a call must move at least (read Q, K, V once, write O
once), the yardstick for the DRAM bytes of its kernels.

    python3 bench/call_passes.py --head-dim 128 --seq 4096 [--variant full_int8] [--calls 3]
"""
import argparse

import torch

import intfa


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--variant", default="full_int8")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    shape = (args.batch, args.heads, args.seq, args.head_dim)
    q, k, v = (torch.randn(shape, dtype=torch.float16, device="cuda") for _ in range(3))
    for call in range(args.calls):
        last = call == args.calls - 1
        if last:
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push("intfa_call")
        intfa.attention(q, k, v, is_causal=args.causal, variant=args.variant)
        if last:
            torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    minimum = 4 * q.numel() * q.element_size()
    print(f"minimum bytes of a call (read Q, K, V, write O): {minimum / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
