#!/usr/bin/env python3
"""Design data for issue 46 item 1, an automatic numerics policy that needs a data-dependent
signal. The candidate is a per-head statistic that the channel-mean pass could compute from the
256 keys it already samples: the largest channel RMS over the median one, after the mean is taken
out ("spread"). It is computed for each input family of tests/reference/input_families.cpp. The
families are generated here on the CPU, as bench/accuracy.py generates them on the GPU. Beside it
stands the CPU model's full INT8 error with K smoothing, with and without rotation
(build/bin/intfa_accuracy_model). Needs torch (CPU) and the C++ build.

    python3 bench/channel_spread.py [MODEL]   (default build/bin/intfa_accuracy_model)
"""
import subprocess
import sys

import torch

FAMILIES = ["normal", "uniform", "k_offset", "outliers", "sharp", "offset_outliers",
            "sharp_offset_outliers", "v_outliers"]
SHAPE = (1, 8, 2048, 128)  # B, H, N, D
SAMPLES = 256  # the keys the channel-mean pass reads (templates/quantize/quantize_params.h)


def family_inputs(family, generator):
    """q, k, v [B, H, N, D] float32 of an input family."""
    b, h, _, d = SHAPE
    if family == "uniform":
        return [torch.rand(SHAPE, generator=generator) - 0.5 for _ in range(3)]
    q, k, v = (torch.randn(SHAPE, generator=generator) for _ in range(3))
    channels = torch.stack([torch.randperm(d, generator=generator)[:4] for _ in range(b * h)])
    mask = torch.zeros(b * h, d).scatter_(1, channels, 1.0).view(b, h, 1, d)
    if family in ("outliers", "offset_outliers", "sharp_offset_outliers"):
        q, k = q * (1 + 9 * mask), k * (1 + 9 * mask)  # 4 channels of Q and K, 10x larger
    if family == "v_outliers":
        v = v * (1 + 9 * mask)
    if family in ("sharp", "sharp_offset_outliers"):
        q, k = q * 1.7, k * 1.7
    if family in ("k_offset", "offset_outliers", "sharp_offset_outliers"):
        k = k + 4 * torch.randn(b, h, 1, d, generator=generator)
    return q, k, v


def spread(x):
    """Per (batch, head): the largest channel RMS of the sampled rows, less their mean, over the
    median channel's."""
    n = x.shape[2]
    sampled = x[:, :, [i * n // SAMPLES for i in range(SAMPLES)]]
    centred = sampled - sampled.mean(2, keepdim=True)
    rms = centred.pow(2).mean(2).sqrt()
    return rms.max(-1).values / rms.median(-1).values


def model_errors(model):
    """{(family, option): relative L2 in %} from the CPU model's first table."""
    text = subprocess.run(
        [model, "--families", ",".join(FAMILIES), "--options", "smooth,smooth+rotate",
         "--variants", "full", "--head-dims", str(SHAPE[3]), "--seqs", str(SHAPE[2]),
         "--query-rows", "256"], capture_output=True, text=True, check=True).stdout
    errors = {}
    for line in text.split("**")[2].splitlines():  # the relative L2 table
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) > 5 and cells[1] in FAMILIES:
            errors[(cells[1], cells[3])] = cells[5]
    return errors


def main():
    generator = torch.Generator().manual_seed(1)
    errors = model_errors(sys.argv[1] if len(sys.argv) > 1 else "build/bin/intfa_accuracy_model")
    print("| family | K spread (over 8 heads) | Q spread | full INT8, smoothed | + rotation |")
    print("| --- | --- | --- | --- | --- |")
    for family in FAMILIES:
        q, k, _ = family_inputs(family, generator)
        k_spread, q_spread = spread(k), spread(q)
        print(f"| {family} | {k_spread.min():.2f}-{k_spread.max():.2f} | "
              f"{q_spread.min():.2f}-{q_spread.max():.2f} | {errors[(family, 'smooth')]}% | "
              f"{errors[(family, 'smooth+rotate')]}% |")


if __name__ == "__main__":
    main()
