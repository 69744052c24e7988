#!/usr/bin/env python3
"""Tables for bench/RESULTS.md from the JSON files of one device run (scripts/device_run.sh and
scripts/device/e2e.sh write them into logs.tgz): speed against SDPA (kernel only, and
`intfa.attention` end to end where the run had the Python package), host time per call,
instructions per score (ncu), quantize bandwidth, accuracy, the speed of each numerics option,
the tile-config sweep, the JIT path and INT4.

    python3 bench/write_results.py RUN_DIR > tables.md

RUN_DIR holds compare_sdpa.json, python_overhead.json, limits_*.csv (with
scripts/issue_bound.py), accuracy.json, jit.json, sweep.json, numerics_*.json and int4.json; a
missing file leaves its section out.
"""
import glob
import json
import os
import sys
from collections import defaultdict

from accuracy_tables import markdown as accuracy_tables

INT8_PEAK_TOPS = 1979  # H100 SXM dense INT8, datasheet


def load(run_dir, name):
    path = os.path.join(run_dir, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


# compare_sdpa.py --timing; runs written before it had the option were timed in orders.
TIMING_DESCRIPTIONS = {
    "interleaved": "contenders timed in turns of about 2 ms, interleaved, the order reversed "
                   "every round, medians.",
    "orders": "every contender's single calls timed together, in both orders, the lower median "
              "kept (--timing orders; at N=16k it favoured intfa's kernels, compare_sdpa.py says "
              "how much).",
}


def speed_section(compare):
    rows = compare["rows"]
    end_to_end = any("intfa_full_e2e_ms" in r for r in rows)
    nan = float("nan")
    lines = ["## Speed against PyTorch SDPA FP16 (same process, same inputs)", "",
             f"{compare['device']}, {compare['date']}, torch {compare['torch']}, "
             f"B={rows[0]['batch']}, H={rows[0]['heads']}. Command: `{compare['command']}`.",
             "TOPS = 4·B·H·N²·d / time (halved for causal); "
             + TIMING_DESCRIPTIONS[compare.get("timing", "orders")]
             + " *kernel only*: attention over inputs quantized "
             "beforehand" + ("; *`intfa.attention`*: what a user calling it on FP16 tensors gets "
                             "(quantize + attend + host time)." if end_to_end else "."), "",
             "| d | N | causal | SDPA flash | SDPA cuDNN | full INT8 kernel | % INT8 peak | "
             "/ cuDNN | half INT8 kernel | / cuDNN"
             + (" | `intfa.attention` full | / cuDNN | / its kernel | `intfa.attention` half "
                "| / cuDNN |" if end_to_end else " |"),
             "|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|---|---|"
                                                          if end_to_end else "")]
    for r in rows:
        cudnn = r.get("sdpa_cudnn_ms", nan)
        line = (f"| {r['head_dim']} | {r['seq']} | {'on' if r['causal'] else 'off'} | "
                f"{r.get('sdpa_flash_tops', nan):.0f} | {r.get('sdpa_cudnn_tops', nan):.0f} | "
                f"{r['intfa_full_tops']:.0f} | "
                f"{100 * r['intfa_full_tops'] / INT8_PEAK_TOPS:.0f}% | "
                f"{cudnn / r['intfa_full_ms']:.2f}x | {r['intfa_half_tops']:.0f} | "
                f"{cudnn / r['intfa_half_ms']:.2f}x |")
        if end_to_end:
            line += (f" {r.get('intfa_full_e2e_tops', nan):.0f} | "
                     f"{cudnn / r.get('intfa_full_e2e_ms', nan):.2f}x | "
                     f"{r['intfa_full_ms'] / r.get('intfa_full_e2e_ms', nan):.2f} | "
                     f"{r.get('intfa_half_e2e_tops', nan):.0f} | "
                     f"{cudnn / r.get('intfa_half_e2e_ms', nan):.2f}x |")
        lines.append(line)
    return lines


def host_time_section(overhead):
    lines = ["## Host time per call (`bench/python_overhead.py`)", "",
             f"{overhead['gpu']}, torch {overhead['torch']}, B=1 H=8 N=128 d=64 (the GPU never "
             f"limits the rate), the least over 7 rounds of {overhead['calls']} calls.", "",
             "| layer | µs per call |", "|---|---|"]
    for row in overhead["rows"]:
        lines.append(f"| {row['layer']} | {row['us_per_call']:.1f} |")
    return lines


def quantize_section(sweep, compare):
    copy = compare.get("copy_gbps") if compare else None
    best = {}
    for r in sweep:
        best[(r["variant"], r["head_dim"])] = r["quantize_gbps"]
    lines = ["## Quantize kernels: bandwidth", "",
             "Bytes read + written by the Q, K (and V for full INT8) quantize kernels of one "
             "problem (B=4, H=32, N=4096), against a plain device-to-device copy"
             + (f" measured in the same run: {copy:.0f} GB/s." if copy else "."), "",
             "| kernels | d | GB/s | of copy |", "|---|---|---|---|"]
    for (variant, d), gbps in sorted(best.items()):
        what = "Q, K, V (full INT8)" if variant == "full_int8" else "Q, K (half INT8)"
        share = f"{100 * gbps / copy:.0f}%" if copy else ""
        lines.append(f"| {what} | {d} | {gbps:.0f} | {share} |")
    return lines


def numerics_section(run_dir, compare):
    """The TOPS of every numerics_*.json, with SDPA cuDNN's from compare_sdpa.json of the same
    run where it has the same problem."""
    files = sorted(glob.glob(os.path.join(run_dir, "numerics_*.json")))
    if not files:
        return []
    cudnn = {(r["head_dim"], r["seq"], r["causal"]): r["sdpa_cudnn_tops"]
             for r in (compare["rows"] if compare else [])}
    table = defaultdict(dict)
    names = []
    for path in files:
        name = os.path.basename(path)[len("numerics_"):-len(".json")].replace("_", "/")
        names.append(name)
        with open(path) as f:
            for r in json.load(f):
                table[(r["head_dim"], r["seq"], r["causal"])][name] = r["tops"]
    paper = "s8/running/tensor"
    lines = ["## Speed of each full-INT8 numerics option (TOPS; ratio to the paper's numerics)", "",
             "| d | N | causal | " + " | ".join(names) + " | SDPA cuDNN FP16 (same run) |",
             "|---|---|---|" + "---|" * (len(names) + 1)]
    for (d, n, causal), cells in sorted(table.items()):
        base = cells.get(paper)
        shown = [f"{cells[x]:.0f}" + (f" ({cells[x] / base:.2f})" if base else "") for x in names]
        reference = cudnn.get((d, n, causal))
        shown.append(f"{reference:.0f}" if reference else "-")
        lines.append(f"| {d} | {n} | {'on' if causal else 'off'} | " + " | ".join(shown) + " |")
    return lines


def sweep_section(sweep):
    buckets = defaultdict(list)
    for r in sweep:
        buckets[(r["variant"], r["head_dim"], r["causal"])].append((r["tops"], r["config"]))
    lines = ["## Tile-config sweep (B=4, H=32, N=4096): the three fastest per bucket", "",
             "| variant | d | causal | fastest | second | third |", "|---|---|---|---|---|---|"]
    for (variant, d, causal), results in sorted(buckets.items()):
        results.sort(reverse=True)
        cells = [f"{c.replace('block_', '').replace('warps', 'w').replace('stages', 's')} "
                 f"{t:.0f}" for t, c in results[:3]]
        lines.append(f"| {variant} | {d} | {'on' if causal else 'off'} | " + " | ".join(cells) + " |")
    return lines


def jit_section(jit):
    lines = ["## JIT path", "", f"{jit['gpu']}; `intfa bench --jit --repeats 5`.", "",
             "| kernel | cold compile, first in process | cold compile, median | "
             "disk hit to launchable |", "|---|---|---|---|"]
    for k in jit["kernels"]:
        lines.append(f"| {k['kernel']} | {k['cold_compile_ms_first']:.0f} ms | "
                     f"{k['cold_compile_ms_median']:.0f} ms | "
                     f"{k['disk_hit_to_launchable_ms_median']:.2f} ms |")
    lines += ["", f"In-memory hit: `attention_forward` costs {jit['api_call_us']:.2f} µs of host "
              f"time per call against {jit['raw_launch_us']:.2f} µs for a raw `cuLaunchKernel` of "
              f"the same kernel and parameters: {jit['memory_hit_overhead_us']:.2f} µs above it."]
    return lines


def int4_section(rows):
    lines = ["## INT4 Q·K on this GPU", "",
             "Hopper has no INT4 tensor cores (`mma.sync` s4 is emulated); reported, not targeted.",
             "", "| variant | d | N | TOPS |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['variant']} | {r['head_dim']} | {r['seq']} | {r['tops']:.1f} |")
    return lines


def main():
    run_dir = sys.argv[1]
    compare = load(run_dir, "compare_sdpa.json")
    sweep = load(run_dir, "sweep.json")
    accuracy = load(run_dir, "accuracy.json")
    jit = load(run_dir, "jit.json")
    int4 = load(run_dir, "int4.json")
    overhead = load(run_dir, "python_overhead.json")
    sections = []
    if compare:
        sections.append(speed_section(compare))
    if overhead:
        sections.append(host_time_section(overhead))
    if sweep:
        sections.append(quantize_section(sweep, compare))
    if accuracy:
        names = list(dict.fromkeys(r["numerics"] for r in accuracy["rows"]))
        sections.append(["## Accuracy against float64 attention of the original inputs", "",
                         f"{accuracy['device']}, {accuracy['date']}, B={accuracy['batch']}, "
                         f"H={accuracy['heads']}, fresh random inputs (seed {accuracy['seed']}); "
                         f"every output element. Command: `{accuracy['command']}`."]
                        + accuracy_tables(accuracy["rows"], names))
    sections.append(numerics_section(run_dir, compare))
    if sweep:
        sections.append(sweep_section(sweep))
    if jit:
        sections.append(jit_section(jit))
    if int4:
        sections.append(int4_section(int4))
    print("\n\n".join("\n".join(s) for s in sections if s))


if __name__ == "__main__":
    main()
