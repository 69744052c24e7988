#!/usr/bin/env python3
"""How accurate full INT8 attention is with V's scales per channel (the default), per 64-token
block of a channel (the existing option, whose kernel folds each block apart), and per token
folded into P (not built: P' = round(255 p * s_v[token] / s_ref) against the tile's largest V
scale, as the paged decode folds its per-token V scales into P), in float64 on the CPU with
numpy: design data for issue 44's "per-block K made <= 1.5%", no GPU or intfa needed.

A simplified model of the Hopper kernel's full INT8 numerics, not the bit-exact one of
tests/reference: Q and K INT8 per token (K smoothed: minus its mean over the keys), or K per
64-key block; S = q8 . k8 * scales; per 128-key tile P = exp(S - tile max) rounded to u8 (255);
P.V in exact integers, folded into the output with the tile's factor; l from the same rounded P
(the per-token fold: from the unrounded P, which a kernel would sum in FP32). Relative L2 (%) of
the output against float64 attention of the original inputs, median (range) over trials.

Usage: python3 bench/v_granularity_model.py [--seq 2048] [--rows 256] [--trials 4] [--heads 4]
       [--k-blocks 8,16,32,64]   (K per token against K per block of these key counts instead)
"""
import argparse

import numpy as np

from error_tables import print_error_table

HEAD_DIM = 128
TILE = 128
BLOCK = 64
FAMILIES = ("normal", "k_offset", "sharp", "v_outliers")
SCHEMES = (("token", "channel"), ("block", "channel"), ("token", "block"), ("block", "block"),
           ("token", "token"), ("block", "token"))


def family_inputs(rng, family, rows, seq):
    q = rng.standard_normal((rows, HEAD_DIM))
    k = rng.standard_normal((seq, HEAD_DIM))
    v = rng.standard_normal((seq, HEAD_DIM))
    if family == "k_offset":
        k = k + 4 * rng.standard_normal(HEAD_DIM)[None, :]
    if family == "sharp":
        q, k = 1.7 * q, 1.7 * k
    if family == "v_outliers":
        v[:, rng.choice(HEAD_DIM, size=4, replace=False)] *= 10
    return q, k, v


def int8(x, scale):
    safe = np.where(scale > 0, scale, 1.0)
    return np.clip(np.rint(x / safe), -127, 127) * (scale > 0)


def exact(q, k, v):
    s = q @ k.T / np.sqrt(HEAD_DIM)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def modelled(q, k, v, k_scales, v_scales):
    seq = k.shape[0]
    k = k - k.mean(axis=0, keepdims=True)  # smoothing: softmax ignores the shift
    q_scale = np.abs(q).max(axis=1, keepdims=True) / 127
    q8 = int8(q, q_scale)
    if k_scales == "token":
        k_scale = np.abs(k).max(axis=1, keepdims=True) / 127
    else:  # "block" (BLOCK keys) or "block<N>" (N keys, --k-blocks)
        size = int(k_scales[len("block"):] or BLOCK)
        blocks = np.abs(k).reshape(-1, size, HEAD_DIM).max(axis=(1, 2)) / 127
        k_scale = np.repeat(blocks, size)[:, None]
    k8 = int8(k, k_scale)
    s = (q8 @ k8.T) * q_scale * k_scale.T / np.sqrt(HEAD_DIM)
    if v_scales == "channel":
        v_scale = np.abs(v).max(axis=0, keepdims=True) / 127
        v8 = int8(v, v_scale)
    elif v_scales == "block":
        blocks = np.abs(v).reshape(-1, BLOCK, HEAD_DIM).max(axis=1) / 127  # [blocks, d]
        v_scale = np.repeat(blocks, BLOCK, axis=0)
        v8 = int8(v, v_scale)
    else:
        v_token = np.abs(v).max(axis=1, keepdims=True) / 127  # [seq, 1]
        v8 = int8(v, v_token)
    out = np.zeros((q.shape[0], HEAD_DIM))
    total = np.zeros((q.shape[0], 1))
    frame = np.full((q.shape[0], 1), -np.inf)
    for first in range(0, seq, TILE):
        tile = slice(first, first + TILE)
        st = s[:, tile]
        m = st.max(axis=1, keepdims=True)
        p = np.exp(st - m)
        if v_scales == "token":
            reference = v_token[tile].max()
            p8 = np.rint(255 * p * (v_token[tile].T / reference))
            values = (p8 @ v8[tile]) * reference / 255
            sums = p.sum(axis=1, keepdims=True)
        else:
            p8 = np.rint(255 * p)
            if v_scales == "channel":
                values = (p8 @ v8[tile]) * v_scale / 255
            else:
                values = sum((p8[:, b:b + BLOCK] @ v8[tile][b:b + BLOCK]) *
                             v_scale[first + b][None, :] for b in range(0, TILE, BLOCK)) / 255
            sums = p8.sum(axis=1, keepdims=True) / 255
        new_frame = np.maximum(frame, m)
        old = np.exp(frame - new_frame)
        old[np.isneginf(frame)] = 0.0
        weight = np.exp(m - new_frame)
        out = out * old + values * weight
        total = total * old + sums * weight
        frame = new_frame
    return out / total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--k-blocks", default="",
                        help="instead: K per token against K per block of each of these key "
                             "counts (e.g. 8,16,32,64), V per channel")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    schemes = SCHEMES
    if args.k_blocks:
        schemes = (("token", "channel"),) + tuple(
            (f"block{size}", "channel") for size in args.k_blocks.split(","))
    print(f"python3 bench/v_granularity_model.py --seq {args.seq} --rows {args.rows} "
          f"--trials {args.trials} --heads {args.heads} --seed {args.seed}"
          + (f" --k-blocks {args.k_blocks}" if args.k_blocks else ""))
    print_error_table(
        FAMILIES, schemes, [f"K {k} / V {v}" for k, v in schemes], args.trials, args.heads,
        lambda family: family_inputs(rng, family, args.rows, args.seq),
        lambda inputs: exact(*inputs),
        lambda scheme, inputs: modelled(*inputs, *scheme))

if __name__ == "__main__":
    main()
