#!/usr/bin/env python3
"""Charts of a peer comparison (bench/compare_peers.py's compare_peers.json, a device run) as PNG:
speed in TOPS by sequence length, one figure per head dim with causal off and on side by side,
and relative L2 against float64 of the original inputs per contender and input family. Each
figure's caption names the device, the date and the command of the run it was drawn from.

    python3 bench/charts.py RUN/compare_peers.json --out-dir bench/charts

Needs matplotlib (not a dependency of intfa: `python3 -m pip install matplotlib` in a venv).
"""
import argparse
import json
import os
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

# Contender key in compare_peers.json -> (legend label, line style). The order is the legend's.
CONTENDERS = [
    ("intfa_full", "intfa INT8 kernel (full INT8)", dict(color="#c0392b", lw=2.4, marker="o")),
    ("intfa_half", "intfa INT8 kernel (half INT8)", dict(color="#e67e22", lw=2.0, marker="o")),
    ("intfa_e2e", "intfa.attention (16-bit in, quantize + kernel)",
     dict(color="#c0392b", lw=1.6, ls="--", marker=".")),
    ("fa3_fp8", "FlashAttention-3 FP8", dict(color="#2c3e50", lw=1.6, marker="s")),
    ("cudnn_fp8", "cuDNN FP8 SDPA", dict(color="#7f8c8d", lw=1.6, marker="s")),
    ("fa3_bf16", "FlashAttention-3 BF16", dict(color="#2980b9", lw=1.6, marker="^")),
    ("sdpa_cudnn", "SDPA cuDNN FP16", dict(color="#27ae60", lw=1.6, marker="^")),
]


def caption(meta):
    settings = meta.get("settings", {})
    return textwrap.fill(f"{meta.get('device')}, {meta.get('date')}; B={settings.get('batch')}, "
                         f"H={settings.get('heads')}, contenders interleaved in one process; "
                         f"`{meta.get('command')}`", 170)


def speed_figure(meta, rows, head_dim, path):
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for axis, causal in zip(axes, (False, True)):
        selected = sorted((r for r in rows if r["head_dim"] == head_dim and r["causal"] == causal),
                          key=lambda r: r["seq"])
        seqs = [r["seq"] for r in selected]
        for key, label, style in CONTENDERS:
            values = [r.get(f"{key}_tops") for r in selected]
            if seqs and all(v is not None for v in values):
                axis.plot(seqs, values, label=label, **style)
        axis.set_xscale("log", base=2)
        axis.set_xticks(seqs, [f"{s // 1024}k" for s in seqs])
        axis.set_title(f"d={head_dim}, causal {'on' if causal else 'off'}")
        axis.set_xlabel("sequence length")
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("TOPS (4·B·H·N²·d / t, halved for causal)")
    axes[1].legend(fontsize=8, loc="lower right")
    figure.suptitle(f"Attention forward speed, head dim {head_dim}")
    figure.text(0.01, 0.005, caption(meta), fontsize=6.5)
    figure.tight_layout(rect=(0, 0.05, 1, 1))
    figure.savefig(path, dpi=130)
    plt.close(figure)


def accuracy_figure(meta, accuracy, path):
    families = sorted({a["inputs"] for a in accuracy})
    keys = [(key, label) for key, label, _ in CONTENDERS
            if any(a["contender"] == key for a in accuracy)]
    figure, axis = plt.subplots(figsize=(9, 3.8))
    width = 0.8 / max(1, len(families))
    for index, family in enumerate(families):
        # The worst case over the shapes measured, per contender.
        values = [max((a["rel_l2"] for a in accuracy
                       if a["contender"] == key and a["inputs"] == family), default=0.0) * 100
                  for key, _ in keys]
        positions = [i + index * width for i in range(len(keys))]
        bars = axis.bar(positions, values, width, label=family)
        axis.bar_label(bars, fmt="%.2f", fontsize=7)
    axis.set_xticks([i + width * (len(families) - 1) / 2 for i in range(len(keys))],
                    [label.replace(" (", "\n(") for _, label in keys], fontsize=7)
    axis.set_ylabel("relative L2 vs float64, % (worst shape)")
    axis.set_title("Accuracy against float64 of the original inputs (" + ", ".join(families) +
                   ")")
    if len(families) > 1:
        axis.legend(fontsize=8)
    axis.grid(axis="y", alpha=0.3)
    figure.text(0.01, 0.005, caption(meta), fontsize=6.5)
    figure.tight_layout(rect=(0, 0.06, 1, 1))
    figure.savefig(path, dpi=130)
    plt.close(figure)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="compare_peers.json of a device run")
    parser.add_argument("--out-dir", default="bench/charts")
    args = parser.parse_args()
    with open(args.run) as f:
        run = json.load(f)
    os.makedirs(args.out_dir, exist_ok=True)
    device = run.get("device", "gpu").replace("NVIDIA ", "").replace(" ", "_").lower()
    written = []
    for head_dim in sorted({r["head_dim"] for r in run["rows"]}):
        path = os.path.join(args.out_dir, f"{device}_speed_d{head_dim}.png")
        speed_figure(run, run["rows"], head_dim, path)
        written.append(path)
    if run.get("accuracy"):
        path = os.path.join(args.out_dir, f"{device}_accuracy.png")
        accuracy_figure(run, run["accuracy"], path)
        written.append(path)
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
