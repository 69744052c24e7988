#!/usr/bin/env python3
"""How accurate a 4-bit KV cache can be on N(0,1) keys and values (issue 28's "INT4: report, aim
<= 4%"), in float64 on the CPU, no GPU or intfa needed.

Decode attention of one query against N cached keys and values, d = 128, every operand N(0,1),
with K and V quantized as the paged cache quantizes them (templates/decode/README.md): symmetric,
one FP16 scale per `group` channels of a token, scale = amax / (2^(bits-1) - 1), values rounded
to nearest. Each row varies which operand is quantized, to how many bits and in which groups; the
error is the relative L2 of the outputs against exact attention, over `heads` heads per trial,
median and range over trials. "K4 V4 g32" is the cache intfa ships (the GPU serving loop measured
13.9-14.3%, bench/RESULTS.md); "K8 V8" is the INT8 cache's per-token scale (0.94-0.98% there).

Usage: python3 bench/int4_floor.py [--seq 4096] [--trials 24] [--heads 8] [--seed 1]
"""
import argparse

import numpy as np

HEAD_DIM = 128

# (name, K bits, K group, V bits, V group); None bits: the operand is exact.
ROWS = [
    ("K4 V4 g32 (the INT4 cache)", 4, 32, 4, 32),
    ("K8 V4 g32", 8, HEAD_DIM, 4, 32),
    ("K4 g32 V8", 4, 32, 8, HEAD_DIM),
    ("K exact, V4 g32", None, 0, 4, 32),
    ("K4 g32, V exact", 4, 32, None, 0),
    ("K4 V4 g16", 4, 16, 4, 16),
    ("K4 V4 g64", 4, 64, 4, 64),
    ("K5 V5 g32", 5, 32, 5, 32),
    ("K6 V6 g32", 6, 32, 6, 32),
    ("K8 V8 per token (the INT8 cache)", 8, HEAD_DIM, 8, HEAD_DIM),
]


def quantized(x, bits, group):
    """x [tokens, d] through the cache's symmetric per-group quantizer, dequantized."""
    if bits is None:
        return x
    limit = 2 ** (bits - 1) - 1
    groups = x.reshape(x.shape[0], -1, group)
    amax = np.abs(groups).max(axis=2, keepdims=True)
    scale = (amax / limit).astype(np.float16).astype(np.float64)
    safe = np.where(scale > 0, scale, 1.0)
    values = np.clip(np.rint(groups / safe), -limit, limit) * (scale > 0)
    return (values * scale).reshape(x.shape)


def attention(q, k, v):
    scores = k @ q / np.sqrt(q.shape[0])
    p = np.exp(scores - scores.max())
    return (p / p.sum()) @ v


def relative_l2(rng, seq, heads, k_bits, k_group, v_bits, v_group):
    error = norm = 0.0
    for _ in range(heads):
        q = rng.standard_normal(HEAD_DIM)
        k = rng.standard_normal((seq, HEAD_DIM))
        v = rng.standard_normal((seq, HEAD_DIM))
        exact = attention(q, k, v)
        approx = attention(q, quantized(k, k_bits, k_group), quantized(v, v_bits, v_group))
        error += ((approx - exact) ** 2).sum()
        norm += (exact ** 2).sum()
    return 100 * np.sqrt(error / norm)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"relative L2 (%) against exact attention, N(0,1), d={HEAD_DIM}, N={args.seq}, "
          f"{args.trials} trials of {args.heads} heads, seed {args.seed}")
    print("| K and V | median | range |\n| --- | --- | --- |")
    for name, *bits in ROWS:
        errors = sorted(relative_l2(rng, args.seq, args.heads, *bits)
                        for _ in range(args.trials))
        print(f"| {name} | {np.median(errors):.2f} | {errors[0]:.2f}-{errors[-1]:.2f} |",
              flush=True)


if __name__ == "__main__":
    main()
