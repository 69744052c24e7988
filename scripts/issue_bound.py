#!/usr/bin/env python3
"""What the attention kernel's instruction count allows: from ncu's metrics of one launch per
problem (`scripts/device_run.sh limits` writes them as limits_d<D>_n<N>_<causal>.csv), the speed
the same instructions would reach with every issue slot of every scheduler busy, beside the speed
measured and the share of the slots ncu saw busy.

A score element is one (query, key) pair; a warp instruction serves 32 of a warp's lanes, so
"instructions per 32 scores" is the warp instructions each 32 score elements cost, everything in
the kernel included (loads, barriers, the epilogue).

    python3 scripts/issue_bound.py logs/limits_d*_n*_*.csv [--batch 4 --heads 32]

Files named stalls_*.csv (ncu's smsp__average_warps_issue_stalled_*_per_issue_active metrics)
give each problem's largest stall reasons instead: warps waiting for that reason, per issued
instruction.
"""
import argparse
import csv
import io
import re

SMS = 132
SCHEDULERS_PER_SM = 4
INT8_OPS_PER_CLOCK_PER_SM = 8192  # dense wgmma s8: 1979 TOPS at 1.83 GHz on 132 SMs


def read_kernels(path):
    """[(kernel name, {metric name: (value, unit)})] of every kernel profiled in an `ncu --csv`
    file, in launch order (bench/peer_profile.py reads several per file)."""
    with open(path) as f:
        lines = f.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), len(lines))
    kernels = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        value = row["Metric Value"].replace(",", "")
        try:
            metric = (float(value), row["Metric Unit"])
        except ValueError:
            continue
        kernels.setdefault((int(row["ID"]), row["Kernel Name"]), {})[row["Metric Name"]] = metric
    return [(name, metrics) for (_, name), metrics in sorted(kernels.items())]


def read_metrics(path):
    """Metric name -> (value, unit) of the one kernel profiled in an `ncu --csv` file."""
    metrics = {}
    for _, kernel_metrics in read_kernels(path):
        metrics.update(kernel_metrics)
    return metrics


def seconds(value_unit):
    value, unit = value_unit
    scale = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3,
             "msecond": 1e-3, "s": 1.0, "second": 1.0}
    return value * scale[unit.lower()]


def hertz(value_unit):
    value, unit = value_unit
    scale = {"hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9, "cycle/second": 1.0,
             "cycle/nsecond": 1e9, "cycle/usecond": 1e6, "cycle/msecond": 1e3}
    return value * scale[unit.lower()]


def print_stalls(path, top=8):
    prefix, suffix = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
    reasons = {name[len(prefix):-len(suffix)]: value
               for name, (value, _) in read_metrics(path).items()
               if name.startswith(prefix) and name.endswith(suffix)}
    largest = sorted(reasons.items(), key=lambda item: -item[1])[:top]
    print(f"{path.rsplit('/', 1)[-1]}: " + ", ".join(f"{k} {v:.2f}" for k, v in largest))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=32)
    args = parser.parse_args()
    for path in sorted(args.files):
        if re.search(r"(^|/)stalls_[^/]*\.csv$", path):
            print_stalls(path)
    print("| d | N | causal | measured TOPS | SM clock GHz | % of the INT8 MMA rate at that clock "
          "| instructions per 32 scores | issue slots busy (ncu) | TOPS with every slot busy "
          "| XU (MUFU) pipe | ALU pipe | FMA pipe |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for path in sorted(args.files):
        shape = re.search(r"(^|/)limits_d(\d+)_n(\d+)_(on|off)\.csv$", path)
        if not shape:
            continue
        d, n, causal = int(shape.group(2)), int(shape.group(3)), shape.group(4) == "on"
        metrics = read_metrics(path)
        if "gpu__time_duration.sum" not in metrics:
            print(f"| {d} | {n} | {'on' if causal else 'off'} | no ncu data in {path} |")
            continue
        pairs = args.batch * args.heads * n * n / (2 if causal else 1)
        ops = 4 * pairs * d
        time = seconds(metrics["gpu__time_duration.sum"])
        clock = hertz(metrics["sm__cycles_elapsed.avg.per_second"])
        instructions = metrics["smsp__inst_executed.sum"][0]
        measured = ops / time / 1e12
        mma_rate = INT8_OPS_PER_CLOCK_PER_SM * SMS * clock / 1e12
        # Every scheduler issues at most one warp instruction per cycle.
        issue_bound = ops / (instructions / (SMS * SCHEDULERS_PER_SM * clock)) / 1e12

        def percent(name):
            entry = metrics.get(name)
            return f"{entry[0]:.0f}%" if entry else "-"

        print(f"| {d} | {n} | {'on' if causal else 'off'} | {measured:.0f} | {clock / 1e9:.2f} "
              f"| {100 * measured / mma_rate:.0f}% | {32 * instructions / pairs:.1f} "
              f"| {percent('smsp__issue_active.avg.pct_of_peak_sustained_active')} "
              f"| {issue_bound:.0f} "
              f"| {percent('sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active')} "
              f"| {percent('sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active')} "
              f"| {percent('sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active')} |")


if __name__ == "__main__":
    main()
