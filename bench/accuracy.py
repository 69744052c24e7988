#!/usr/bin/env python3
"""Accuracy of intfa against float64 attention of the ORIGINAL (unquantized) inputs, over ALL
output elements: relative L2, cosine and mean relative error (sum |o - r| / sum |r|).

Inputs are fresh random FP16 tensors each run, of the input families of
tests/reference/input_families.hpp (N(0,1), U(-0.5,0.5), keys with 4-sigma channel offsets, 4
outlier channels of Q and K 10x larger, sharp attention with Q and K scaled 1.7x, combinations,
outlier channels of V). intfa runs through the C API: by default the one call intfa.attention
makes (intfa_attention_forward_16bit: K smoothing, the rotation and V's quantization inside), or
with --path split intfa_quantize_qk / intfa_quantize_v / intfa_attention_forward. The float64
reference is computed on the GPU with torch from the same FP16 inputs, once per input set, and
every numerics option and Q/K transform (--options) is scored against it, with the LSE's max error
against the log-sum-exp of the original scores.

    python3 bench/accuracy.py --lib build/lib/libintfa.so --out-dir $OUT
    python3 bench/accuracy.py --inputs normal,k_offset,outliers,sharp --options all ...
"""
import argparse
import ctypes
import datetime
import json
import os
import sys

import torch

from accuracy_tables import markdown
from intfa_ctypes import (FULL_INT8, HALF_INT8, ROTATE_AUTO, Intfa, IntfaAttention, Options,
                          attention_16bit, rotation)

# name -> (variant, p_encoding, p_scale, v_granularity[, k_granularity]); p: 0 = s8/127,
# 1 = u8/255; p_scale: 0 = running max, 1 = tile max; v: 0 = per tensor, 1 = per channel,
# 2 = per block; k (default 0): 0 = per token, 1 = per 64-key block.
NUMERICS = {
    "full s8/running/tensor (paper)": (FULL_INT8, 0, 0, 0),
    "full u8/running/tensor": (FULL_INT8, 1, 0, 0),
    "full s8/tile/tensor": (FULL_INT8, 0, 1, 0),
    "full u8/tile/tensor": (FULL_INT8, 1, 1, 0),
    "full u8/running/channel": (FULL_INT8, 1, 0, 1),
    "full u8/tile/channel": (FULL_INT8, 1, 1, 1),
    "full s8/running/block": (FULL_INT8, 0, 0, 2),
    "full u8/running/block": (FULL_INT8, 1, 0, 2),
    "full s8/tile/block": (FULL_INT8, 0, 1, 2),
    "full u8/tile/block": (FULL_INT8, 1, 1, 2),
    "half": (HALF_INT8, 1, 0, 0),
    # K with one scale per 64 keys (AttentionOptions::k_granularity = block): the faster opt-in.
    "full u8/tile/channel k=block": (FULL_INT8, 1, 1, 1, 1),
    # K and V both per 64-key block: the fewest scale instructions per tile (issue 44).
    "full u8/tile/block k=block": (FULL_INT8, 1, 1, 2, 1),
    "half k=block": (HALF_INT8, 1, 0, 0, 1),
}
DEFAULT_SET = ["full s8/running/tensor (paper)", "full u8/running/tensor", "half"]
# The defaults of issue 25's tables: full INT8 with the library's numerics, and half INT8.
ISSUE_SET = ["full u8/tile/channel", "half"]
# Per-block K against the defaults it modifies.
K_BLOCK_SET = ["full u8/tile/channel", "full u8/tile/channel k=block", "full u8/tile/block k=block",
               "half", "half k=block"]

# How Q and K are quantized: (smooth_k, rotate); "default" is the library's own choice.
TRANSFORMS = {"plain": (False, False), "smooth": (True, False), "rotate": (False, True),
              "smooth+rotate": (True, True), "smooth+auto": (True, "auto"),
              "default": (None, None)}

INPUT_FAMILIES = ("normal", "uniform", "k_offset", "outliers", "sharp", "offset_outliers",
                  "sharp_offset_outliers", "v_outliers", "outlier_heads")


def float64_attention(q, k, v, rows_per_chunk=2048):
    """softmax(q k^T / sqrt(d)) v and its log-sum-exp in float64, a chunk of query rows at a time
    (bounded memory)."""
    q64, k64, v64 = q.double(), k.double(), v.double()
    scale = 1.0 / q.shape[-1] ** 0.5
    out = torch.empty_like(q64)
    lse = torch.empty(q.shape[:3], dtype=torch.float64, device=q.device)
    for start in range(0, q.shape[2], rows_per_chunk):
        rows = slice(start, start + rows_per_chunk)
        scores = torch.matmul(q64[:, :, rows], k64.transpose(-1, -2)) * scale
        out[:, :, rows] = torch.matmul(torch.softmax(scores, dim=-1), v64)
        lse[:, :, rows] = torch.logsumexp(scores, dim=-1)
    return out, lse


def error_metrics(output, reference):
    o, r = output.double().flatten(), reference.flatten()
    difference = o - r
    return {
        "rel_l2": (difference.norm() / r.norm()).item(),
        "cosine": (torch.dot(o, r) / (o.norm() * r.norm())).item(),
        "mre": (difference.abs().sum() / r.abs().sum()).item(),
    }


def random_inputs(family, shape):
    """FP16 q, k, v [B, H, N, D] of an input family (tests/reference/input_families.cpp)."""
    b, h, n, d = shape
    if family == "uniform":
        return [(torch.rand(shape, device="cuda") - 0.5).half() for _ in range(3)]
    if family not in INPUT_FAMILIES:
        raise ValueError(f"unknown input family {family!r}; known: {INPUT_FAMILIES}")
    q, k, v = (torch.randn(shape, device="cuda") for _ in range(3))
    outliers = family in ("outliers", "offset_outliers", "sharp_offset_outliers", "outlier_heads")
    channels = torch.stack([torch.randperm(d, device="cuda")[:4] for _ in range(b * h)])
    mask = torch.zeros(b * h, d, device="cuda").scatter_(1, channels, 1.0).view(b, h, 1, d)
    if family == "outlier_heads":  # only in the heads of even index (b * h + head)
        even = (torch.arange(b * h, device="cuda") % 2 == 0).view(b, h, 1, 1)
        mask = mask * even
    if outliers:  # the same 4 channels of Q and K per head, 10x larger
        q, k = q * (1 + 9 * mask), k * (1 + 9 * mask)
    if family == "v_outliers":
        v = v * (1 + 9 * mask)
    if family in ("sharp", "sharp_offset_outliers"):
        q, k = q * 1.7, k * 1.7
    if family in ("k_offset", "offset_outliers", "sharp_offset_outliers"):
        k = k + 4 * torch.randn(b, h, 1, d, device="cuda")  # per channel, shared by all tokens
    return [x.half() for x in (q, k, v)]


def run_intfa(lib, q, k, v, numerics, transform, path):
    """intfa's output and LSE (float32 [B, H, N]; None on the split path)."""
    variant, p_encoding, p_scale, v_granularity, *k_granularity = numerics
    smooth_k, rotate = TRANSFORMS[transform]
    options = Options()
    lib.lib.intfa_default_options(ctypes.byref(options))
    options.p_encoding, options.p_scale, options.v_granularity = p_encoding, p_scale, v_granularity
    options.k_granularity = k_granularity[0] if k_granularity else 0
    if path == "one-call":
        lse = torch.full(q.shape[:3], float("nan"), dtype=torch.float32, device=q.device)
        out = attention_16bit(lib, q, k, v, False, variant, options, smooth_k, rotate, lse)
        torch.cuda.synchronize()
        return out, lse
    run = IntfaAttention(lib, q, k, v, False, variant, options, smooth_k, rotate)
    run.out.fill_(float("nan"))  # poison: an unwritten element fails every metric
    run.attend()
    torch.cuda.synchronize()
    return run.out, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", default="build/lib/libintfa.so")
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--seqs", default="1024,2048,4096,8192,16384")
    parser.add_argument("--inputs", default="normal,uniform",
                        help="input families joined by ',' or 'all': " + ", ".join(INPUT_FAMILIES))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--numerics", default="default",
                        help="'default' (paper, intfa default, half), 'issue' (intfa default, "
                             "half), 'k_block' (those two with K per token and per 64-key block), "
                             "'all', or names joined by ';'")
    parser.add_argument("--options", default="default",
                        help="Q/K transforms joined by ',' or 'all': " + ", ".join(TRANSFORMS))
    parser.add_argument("--path", default="one-call", choices=["one-call", "split"],
                        help="intfa_attention_forward_16bit, or the quantize calls and "
                             "intfa_attention_forward, which rotate no head automatically: "
                             "split takes --options whose rotation is on or off (plain, smooth, "
                             "rotate, smooth+rotate), not default or smooth+auto")
    parser.add_argument("--out-dir", default=".")
    args = parser.parse_args()

    sets = {"default": DEFAULT_SET, "issue": ISSUE_SET, "k_block": K_BLOCK_SET,
            "all": list(NUMERICS)}
    names = sets.get(args.numerics) or args.numerics.split(";")
    unknown = [n for n in names if n not in NUMERICS]
    if unknown:
        parser.error(f"--numerics: unknown {unknown}; known: {list(NUMERICS)}")
    transforms = (["plain", "smooth", "rotate", "smooth+rotate"] if args.options == "all"
                  else args.options.split(","))
    unknown = [t for t in transforms if t not in TRANSFORMS]
    if unknown:
        parser.error(f"--options: unknown {unknown}; known: {list(TRANSFORMS)}")
    families = INPUT_FAMILIES if args.inputs == "all" else args.inputs.split(",")
    unknown = [f for f in families if f not in INPUT_FAMILIES]
    if unknown:
        parser.error(f"--inputs: unknown {unknown}; known: {INPUT_FAMILIES}")

    seed = int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(seed)
    lib = Intfa(args.lib)
    if args.path == "split":
        # The split calls decide no rotation per head (IntfaAttention runs automatic rotation as
        # off): a column named for it would report the unrotated numerics.
        _, default_rotate = lib.default_transforms()
        automatic = [t for t in transforms
                     if rotation(TRANSFORMS[t][1], default_rotate) == ROTATE_AUTO]
        if automatic:
            parser.error(f"--path split: {automatic} rotate automatically, which only the one "
                         "call does; give rotation on or off (--options plain,smooth,rotate,...)")
    device = torch.cuda.get_device_name()
    # One column per numerics and transform: "full u8/tile/channel [smooth+rotate]".
    labels = [f"{name} [{transform}]" if transforms != ["default"] else name
              for name in names for transform in transforms]
    rows = []
    for family in families:
        for d in [int(x) for x in args.head_dims.split(",")]:
            for n in [int(x) for x in args.seqs.split(",")]:
                q, k, v = random_inputs(family, (args.batch, args.heads, n, d))
                reference, reference_lse = float64_attention(q, k, v)
                for name in names:
                    for transform in transforms:
                        output, lse = run_intfa(lib, q, k, v, NUMERICS[name], transform,
                                                args.path)
                        label = f"{name} [{transform}]" if transforms != ["default"] else name
                        row = {"numerics": label, "inputs": family, "head_dim": d, "seq": n,
                               **error_metrics(output, reference)}
                        if lse is not None:
                            row["lse_max_abs_error"] = (lse.double() - reference_lse).abs().max().item()
                        rows.append(row)
                        print(json.dumps(row), flush=True)
                del q, k, v, reference, reference_lse
                torch.cuda.empty_cache()

    os.makedirs(args.out_dir, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join(sys.argv)
    with open(os.path.join(args.out_dir, "accuracy.json"), "w") as f:
        json.dump({"device": device, "date": stamp, "command": command, "seed": seed,
                   "batch": args.batch, "heads": args.heads, "path": args.path, "rows": rows},
                  f, indent=1)
    lines = [f"Device: {device}; {stamp}; B={args.batch}, H={args.heads}, seed {seed}; "
             f"path {args.path}; `{command}`"] + markdown(rows, labels)
    with open(os.path.join(args.out_dir, "accuracy.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
