#!/usr/bin/env python3
"""Accuracy of intfa against float64 attention of the ORIGINAL (unquantized) inputs, over ALL
output elements: relative L2, cosine and mean relative error (sum |o - r| / sum |r|).

Inputs are fresh random FP16 tensors each run (N(0,1) and U(-0.5,0.5)); intfa quantizes them on
the GPU (intfa_quantize_qk / intfa_quantize_v) and runs attention through the C API. The float64
reference is computed on the GPU with torch in float64 from the same FP16 inputs, once per input
set, and every numerics option is scored against it.

    python3 bench/accuracy.py --lib build/lib/libintfa.so --out-dir $OUT
"""
import argparse
import ctypes
import datetime
import json
import os
import sys

import torch

from accuracy_tables import markdown
from intfa_ctypes import FULL_INT8, HALF_INT8, Intfa, IntfaAttention, Options

# name -> (variant, p_encoding, p_scale, v_granularity); p: 0 = s8/127, 1 = u8/255;
# p_scale: 0 = running max, 1 = tile max; v: 0 = per tensor, 1 = per channel, 2 = per block.
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
}
DEFAULT_SET = ["full s8/running/tensor (paper)", "full u8/running/tensor", "half"]


def float64_attention(q, k, v, rows_per_chunk=2048):
    """softmax(q k^T / sqrt(d)) v in float64, a chunk of query rows at a time (bounded memory)."""
    q64, k64, v64 = q.double(), k.double(), v.double()
    scale = 1.0 / q.shape[-1] ** 0.5
    out = torch.empty_like(q64)
    for start in range(0, q.shape[2], rows_per_chunk):
        rows = slice(start, start + rows_per_chunk)
        scores = torch.matmul(q64[:, :, rows], k64.transpose(-1, -2)) * scale
        out[:, :, rows] = torch.matmul(torch.softmax(scores, dim=-1), v64)
    return out


def error_metrics(output, reference):
    o, r = output.double().flatten(), reference.flatten()
    difference = o - r
    return {
        "rel_l2": (difference.norm() / r.norm()).item(),
        "cosine": (torch.dot(o, r) / (o.norm() * r.norm())).item(),
        "mre": (difference.abs().sum() / r.abs().sum()).item(),
    }


def random_inputs(distribution, shape):
    if distribution == "normal":
        return [torch.randn(shape, dtype=torch.float16, device="cuda") for _ in range(3)]
    return [(torch.rand(shape, device="cuda") - 0.5).half() for _ in range(3)]


def run_intfa(lib, q, k, v, numerics):
    variant, p_encoding, p_scale, v_granularity = numerics
    options = Options()
    lib.lib.intfa_default_options(ctypes.byref(options))
    options.p_encoding, options.p_scale, options.v_granularity = p_encoding, p_scale, v_granularity
    run = IntfaAttention(lib, q, k, v, False, variant, options)
    run.out.fill_(float("nan"))  # poison: an unwritten element fails every metric
    run.attend()
    torch.cuda.synchronize()
    return run.out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", default="build/lib/libintfa.so")
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--seqs", default="1024,2048,4096,8192,16384")
    parser.add_argument("--inputs", default="normal,uniform")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--numerics", default="default",
                        help="'default' (paper, intfa default, half), 'all', or names joined by ';'")
    parser.add_argument("--out-dir", default=".")
    args = parser.parse_args()

    if args.numerics == "default":
        names = DEFAULT_SET
    elif args.numerics == "all":
        names = list(NUMERICS)
    else:
        names = args.numerics.split(";")
    unknown = [n for n in names if n not in NUMERICS]
    if unknown:
        parser.error(f"--numerics: unknown {unknown}; known: {list(NUMERICS)}")

    seed = int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(seed)
    lib = Intfa(args.lib)
    device = torch.cuda.get_device_name()
    rows = []
    for distribution in args.inputs.split(","):
        for d in [int(x) for x in args.head_dims.split(",")]:
            for n in [int(x) for x in args.seqs.split(",")]:
                q, k, v = random_inputs(distribution, (args.batch, args.heads, n, d))
                reference = float64_attention(q, k, v)
                for name in names:
                    output = run_intfa(lib, q, k, v, NUMERICS[name])
                    row = {"numerics": name, "inputs": distribution, "head_dim": d, "seq": n,
                           **error_metrics(output, reference)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                del q, k, v, reference
                torch.cuda.empty_cache()

    os.makedirs(args.out_dir, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    command = " ".join(sys.argv)
    with open(os.path.join(args.out_dir, "accuracy.json"), "w") as f:
        json.dump({"device": device, "date": stamp, "command": command, "seed": seed,
                   "batch": args.batch, "heads": args.heads, "rows": rows}, f, indent=1)
    lines = [f"Device: {device}; {stamp}; B={args.batch}, H={args.heads}, seed {seed}; `{command}`",
            ] + markdown(rows, names)
    with open(os.path.join(args.out_dir, "accuracy.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
