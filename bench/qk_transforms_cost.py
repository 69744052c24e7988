#!/usr/bin/env python3
"""The end-to-end cost of K smoothing and of the rotation of Q and K: ``intfa.attention`` (the
Python package: quantize and attend in one C++ call, host time included) with each combination of
``smooth_k`` and ``rotate`` on the same FP16 inputs, timed with CUDA events (warm-up, median of
--repeats; the combinations in both orders, the lower median kept: bench/compare_sdpa.py says why).

Ratios are against plain quantization (today's speed before issue 25) and against K smoothing
alone; "smooth+auto" is the defaults (K smoothing, the heads with outlier channels rotated), which
on inputs without outliers rotates nothing (its cost is the decisions) and on --inputs outliers
rotates every head (its cost is the rotation's).

    PYTHONPATH=build-device-py/python python3 bench/qk_transforms_cost.py --out-dir $OUT
"""
import argparse
import contextlib
import datetime
import json
import os
import sys

import torch

import intfa
from accuracy import INPUT_FAMILIES, random_inputs
from compare_sdpa import time_in_both_orders

COMBINATIONS = {"plain": (False, False), "smooth": (True, False), "rotate": (False, True),
                "smooth+rotate": (True, True), "smooth+auto": (True, "auto")}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--seqs", default="1024,4096,16384")
    parser.add_argument("--shapes", default="1x8,4x32", help="BxH pairs joined by ','")
    parser.add_argument("--causal", default="off,on")
    parser.add_argument("--variants", default="full_int8,half_int8")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--inputs", default="normal", choices=INPUT_FAMILIES,
                        help="the input family (bench/accuracy.py's)")
    parser.add_argument("--out-dir", default=".")
    args = parser.parse_args()

    device = torch.cuda.get_device_name()
    rows = []
    for shape in args.shapes.split(","):
        batch, heads = (int(x) for x in shape.split("x"))
        for d in [int(x) for x in args.head_dims.split(",")]:
            for n in [int(x) for x in args.seqs.split(",")]:
                q, k, v = random_inputs(args.inputs, (batch, heads, n, d))
                for causal in [c == "on" for c in args.causal.split(",")]:
                    for variant in args.variants.split(","):
                        contenders = {}
                        for name, (smooth_k, rotate) in COMBINATIONS.items():
                            contenders[name] = (
                                lambda smooth_k=smooth_k, rotate=rotate: intfa.attention(
                                    q, k, v, is_causal=causal, variant=variant,
                                    smooth_k=smooth_k, rotate=rotate),
                                contextlib.nullcontext)
                        row = {"batch": batch, "heads": heads, "head_dim": d, "seq": n,
                               "causal": causal, "variant": variant, "inputs": args.inputs}
                        row.update(time_in_both_orders(contenders, args.repeats,
                                                       f"{shape} d={d} n={n}"))
                        for name in COMBINATIONS:
                            row[name + "_vs_plain"] = row[name + "_ms"] / row["plain_ms"]
                            row[name + "_vs_smooth"] = row[name + "_ms"] / row["smooth_ms"]
                        row["smooth+auto_vs_smooth+rotate"] = (row["smooth+auto_ms"]
                                                               / row["smooth+rotate_ms"])
                        rows.append(row)
                        print(json.dumps(row), flush=True)
                del q, k, v
                torch.cuda.empty_cache()

    os.makedirs(args.out_dir, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    with open(os.path.join(args.out_dir, "qk_transforms_cost.json"), "w") as f:
        json.dump({"device": device, "date": stamp, "command": " ".join(sys.argv),
                   "torch": torch.__version__, "rows": rows}, f, indent=1)
    lines = [f"Device: {device}; {stamp}; `{' '.join(sys.argv)}`; inputs {args.inputs}", "",
             "| B x H | d | N | causal | variant | plain ms | smooth / plain | rotate / plain | "
             "smooth+rotate / plain | smooth+rotate / smooth | smooth+auto / smooth | "
             "smooth+auto / smooth+rotate |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['batch']}x{r['heads']} | {r['head_dim']} | {r['seq']} | "
            f"{'on' if r['causal'] else 'off'} | {r['variant']} | {r['plain_ms']:.3f} | "
            f"{r['smooth_vs_plain']:.3f} | {r['rotate_vs_plain']:.3f} | "
            f"{r['smooth+rotate_vs_plain']:.3f} | {r['smooth+rotate_vs_smooth']:.3f} | "
            f"{r['smooth+auto_vs_smooth']:.3f} | {r['smooth+auto_vs_smooth+rotate']:.3f} |")
    with open(os.path.join(args.out_dir, "qk_transforms_cost.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
