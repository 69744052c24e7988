#!/usr/bin/env python3
"""Which INT4 quantization of K a 4-bit KV cache should take, per input family (issue 47: "on keys
with channel outliers, K quantized per channel (as KIVI does) or smoothed and rotated, whichever
measures better, <= 8%"), in float64 on the CPU, no GPU or intfa needed: design data for the
kernels, which then have to measure the same.

Decode attention of one query against N cached keys and values, d = 128, with V quantized as the
INT4 cache does (per token, one FP16 scale per 32 channels, symmetric, scale = amax / 7) and K
quantized in each of these ways:

  g32            the cache today: per token, groups of 32 channels (templates/decode/README.md)
  smooth g32     K minus its channel means over the sequence first (the cache's k_offset, fixed
                 from the prefill's keys), then g32; softmax ignores the shift
  rotate g32     K and the query rotated by one random-sign Walsh-Hadamard matrix per head
                 (incoherent processing, as intfa's rotation), then g32
  smooth+rotate  both, smoothing first
  channel b64    per channel, one symmetric FP16 scale per 64 tokens of a channel (KIVI's
                 grouping of K along the tokens, one page of 64 tokens in a paged cache; KIVI
                 itself is asymmetric, with a zero point, and keeps the newest tokens in FP16)
  smooth channel the same after smoothing

and, to split the error between the two, K exact (V's share), smooth+rotate g32 with V in INT8 per
token (K's share), and K and V in INT8 per token unsmoothed for reference (the INT8 cache smooths
K when given k_offset, which the k_offset family would need). Every scheme sees the same inputs
(per trial and head); the rotation's signs come from a generator of their own. Input families as
bench/accuracy.py's (tests/reference/input_families.hpp): normal N(0,1); k_offset (keys with a
per-channel offset of 4 N(0,1), shared by the tokens); outliers (4 channels of Q and K 10x
larger); offset_outliers (both); sharp (Q and K 1.7x); v_outliers (4 channels of V 10x).
The error is the relative L2 of the outputs against exact attention of the original inputs,
summed over `heads` heads per trial; median and range over trials.

Usage: python3 bench/int4_families.py [--seq 4096] [--trials 8] [--heads 8] [--seed 1]
"""
import argparse

import numpy as np

from error_tables import print_error_table
from int4_floor import attention  # one query's exact attention

HEAD_DIM = 128
FAMILIES = ("normal", "k_offset", "outliers", "offset_outliers", "sharp", "v_outliers")
SCHEMES = ("g32", "smooth g32", "rotate g32", "smooth+rotate g32", "channel b64",
           "smooth channel b64", "K exact", "smooth+rotate g32, V INT8",
           "INT8 per token (K and V, unsmoothed)")


def fp16(x):
    return x.astype(np.float16).astype(np.float64)


def symmetric(x, axis, bits):
    """x quantized symmetrically with one scale per slice along `axis` (FP16 at 4 bits, as the
    INT4 cache stores it; FP32 at 8 bits, here float64), dequantized."""
    limit = 2 ** (bits - 1) - 1
    amax = np.abs(x).max(axis=axis, keepdims=True)
    scale = fp16(np.minimum(amax / limit, 65504.0)) if bits == 4 else amax / limit
    safe = np.where(scale > 0, scale, 1.0)
    return np.clip(np.rint(x / safe), -limit, limit) * (scale > 0) * scale


def per_token_groups(x, bits=4, group=32):
    """[tokens, d]: one scale per `group` channels of a token (the cache's INT4 rows)."""
    groups = x.reshape(x.shape[0], -1, group)
    return symmetric(groups, 2, bits).reshape(x.shape)


def per_channel_blocks(x, tokens=64):
    """[tokens, d]: one scale per channel per block of `tokens` tokens (KIVI's K)."""
    n = x.shape[0]
    pad = (-n) % tokens
    padded = np.concatenate([x, np.zeros((pad, x.shape[1]))]) if pad else x
    blocks = padded.reshape(-1, tokens, x.shape[1])
    return symmetric(blocks, 1, 4).reshape(padded.shape)[:n]


def hadamard(d, rng):
    """A random-sign Walsh-Hadamard matrix, orthonormal: H diag(signs) / sqrt(d)."""
    h = np.array([[1.0]])
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    return h * rng.choice([-1.0, 1.0], size=d)[None, :] / np.sqrt(d)


def family_inputs(rng, family, seq):
    q = rng.standard_normal(HEAD_DIM)
    k = rng.standard_normal((seq, HEAD_DIM))
    v = rng.standard_normal((seq, HEAD_DIM))
    channels = rng.choice(HEAD_DIM, size=4, replace=False)
    if family in ("outliers", "offset_outliers"):
        q[channels] *= 10
        k[:, channels] *= 10
    if family == "v_outliers":
        v[:, channels] *= 10
    if family == "sharp":
        q, k = 1.7 * q, 1.7 * k
    if family in ("k_offset", "offset_outliers"):
        k = k + 4 * rng.standard_normal(HEAD_DIM)[None, :]
    return q, k, v


def approximate(scheme, rotation, q, k, v):
    """Attention with K (and V) quantized by `scheme`, in the original inputs' frame; `rotation`
    the head's orthonormal matrix for the rotating schemes."""
    if scheme.startswith("INT8 per token"):
        return attention(q, per_token_groups(k, 8, HEAD_DIM), per_token_groups(v, 8, HEAD_DIM))
    v4 = per_token_groups(v, 8, HEAD_DIM) if scheme.endswith("V INT8") else per_token_groups(v)
    if scheme == "K exact":
        return attention(q, k, v4)
    if scheme.startswith("smooth"):
        k = k - k.mean(axis=0, keepdims=True)
    if "rotate" in scheme:
        q, k = rotation @ q, k @ rotation.T
    k4 = per_channel_blocks(k) if "channel" in scheme else per_token_groups(k)
    return attention(q, k4, v4)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    signs = np.random.default_rng(args.seed + 1)  # the rotations' own generator
    print(f"python3 bench/int4_families.py --seq {args.seq} --trials {args.trials} "
          f"--heads {args.heads} --seed {args.seed}")
    print(f"relative L2 (%) against exact attention of the original inputs, d={HEAD_DIM}, "
          f"N={args.seq}, one query, V in INT4 g32 except where named; median (range) of "
          f"{args.trials} trials of {args.heads} heads, seed {args.seed}")
    print_error_table(
        FAMILIES, SCHEMES, SCHEMES, args.trials, args.heads,
        lambda family: (*family_inputs(rng, family, args.seq), hadamard(HEAD_DIM, signs)),
        lambda inputs: attention(*inputs[:3]),
        lambda scheme, inputs: approximate(scheme, inputs[3], *inputs[:3]))

if __name__ == "__main__":
    main()
