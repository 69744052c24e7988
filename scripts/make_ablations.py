#!/usr/bin/env python3
"""Writes ablation copies of templates/ into .variants/ for `scripts/device_run.sh ab`: each
removes one part of the Hopper kernel's per-tile work, so that the A/B shows what that part costs.
Their output is wrong by design (the bench times them; their accuracy lines fail). Each edit is a
text replacement of a line of the current templates: if a template changed, the script stops and
names the line it no longer finds.

Usage: scripts/make_ablations.py [NAME ...]   (default: every ablation; .variants/ is replaced)
"""
import os
import shutil
import sys

SOFTMAX = "attention/attention_forward.cuh"
# Parts of the Hopper kernel (attention_forward_wgmma.cuh includes them).
HOPPER_STEPS = "attention/wgmma_tile_steps.cuh"
HOPPER_PIPELINE = "attention/wgmma_pipeline.cuh"

# exp2 on the SFU -> one FFMA on the same argument (the MUFU pipe's share).
NO_EXP = (SOFTMAX,
          "const float e = exp2_approx(fmaf(y[mt][nt][i], c[mt][i >> 1], offset[i >> 1]));",
          "const float e = fmaf(fmaf(y[mt][nt][i], c[mt][i >> 1], offset[i >> 1]), 0.01f, 0.5f);")
# The FP32 fold of the INT32 P.V into the output: one element per n8 tile instead of all.
NO_FOLD = (HOPPER_STEPS,
           "o[tile][i] = fmaf(weight, static_cast<float>(acc[j][i]), o[tile][i]);",
           "if (j == 0 && i == 0) "
           "o[tile][i] = fmaf(weight, static_cast<float>(acc[j][i]), o[tile][i]);")
# The row maximum: the first score of the row instead of the chain over the tile.
NO_MAX = (SOFTMAX,
          "          value = fmaxf(value, fmaxf(y[mt][nt][2 * half], y[mt][nt][2 * half + 1]));",
          "          if (nt == 0) value = y[mt][nt][2 * half];")
# The scores' int -> float conversion (I2FP): the bits reinterpreted instead.
NO_CONVERT = (SOFTMAX,
              "const float dot = static_cast<float>(s[mt][nt][i]);",
              "const float dot = __int_as_float(s[mt][nt][i]);")
# K's per-token scale: the scores used as they are (what a K scale per tile, folded into c,
# would leave), and no loads of the tile's scales.
NO_K_SCALE = (SOFTMAX,
              "          y[mt][nt][i] = dot * ((i & 1) ? scale.y : scale.x);",
              "          y[mt][nt][i] = dot;")
# No softmax arithmetic at all: P taken from the scores' low bits.
NO_SOFTMAX = (HOPPER_STEPS,
              "    Softmax::quantize_p(p, row_sum, y, rows.c, reference);",
              "    for (int step = 0; step < Config::kPvSteps; ++step)\n"
              "      for (int i = 0; i < 4; ++i)\n"
              "        tile.p[step][i] = static_cast<u32>(s[4 * step + i][0]) & 0x01010101u;\n"
              "    tile.row_sum[0] = s[0][1];\n"
              "    tile.row_sum[1] = s[0][2];")
# K and V loaded for the first Stages tiles only; later tiles reuse the slots' data.
NO_LOAD = (HOPPER_PIPELINE,
           "      if (lane == 0) {\n"
           "        mbarrier_arrive_expect_bytes(shared.full(slot), Config::kKTileBytes + Config::kVTileBytes);",
           "      if (lane == 0 && tile >= kStages) {\n"
           "        mbarrier_arrive(shared.full(slot));\n"
           "      } else if (lane == 0) {\n"
           "        mbarrier_arrive_expect_bytes(shared.full(slot), Config::kKTileBytes + Config::kVTileBytes);")

SKELETON = [NO_EXP, NO_FOLD, NO_MAX, NO_SOFTMAX]
ABLATIONS = {
    "abl_no_exp": [NO_EXP],
    "abl_no_fold": [NO_FOLD],
    "abl_no_max": [NO_MAX],
    "abl_no_convert": [NO_CONVERT],
    "abl_no_k_scale": [NO_K_SCALE],
    "abl_no_k_scale_fold": [NO_K_SCALE, NO_FOLD],
    "abl_no_exp_fold_max": [NO_EXP, NO_FOLD, NO_MAX],
    "abl_skeleton": SKELETON,
    "abl_no_load": [NO_LOAD],
    "abl_skeleton_no_load": SKELETON + [NO_LOAD],
}


def write_variant(root, name, edits):
    target = os.path.join(root, ".variants", name)
    shutil.copytree(os.path.join(root, "templates"), target)
    for path, old, new in edits:
        file_path = os.path.join(target, path)
        text = open(file_path).read()
        if old not in text:
            sys.exit(f"{name}: templates/{path} no longer has the line\n  {old.strip()}")
        open(file_path, "w").write(text.replace(old, new, 1))


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    names = sys.argv[1:] or list(ABLATIONS)
    unknown = [name for name in names if name not in ABLATIONS]
    if unknown:
        sys.exit(f"unknown ablation(s) {', '.join(unknown)}; known: {', '.join(ABLATIONS)}")
    shutil.rmtree(os.path.join(root, ".variants"), ignore_errors=True)
    for name in names:
        write_variant(root, name, ABLATIONS[name])
        print(f".variants/{name}")


if __name__ == "__main__":
    main()
