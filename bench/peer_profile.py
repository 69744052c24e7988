#!/usr/bin/env python3
"""The peers' attention kernels and intfa's under ncu, side by side (issue 44, "Done means": the
instruction count and issue share of each missed target, against the kernels it is measured
against).

Run mode (under ncu): builds the contenders of bench/compare_peers.py at one shape, calls each a
few times to warm up, then once inside an NVTX range named "profile", so that

    ncu --nvtx --nvtx-include "profile/" --csv --metrics ... --log-file F.csv \\
        python3 bench/peer_profile.py run --head-dim 128 --seq 16384 [--causal]

profiles exactly one call of each (every kernel it launches: the attention kernel and any helper).

Table mode (no GPU): reads those CSV files and prints, per kernel of one call, its time, speed,
warp instructions per 32 score elements (everything in the kernel, the producer and epilogue
included; "scores" counts the (query, key) pairs the shape defines, halved for causal), the share
of issue slots busy, warps per scheduler and the pipes' shares, then what each intfa kernel would
need to reach a given multiple of the best FP8 peer:

    python3 bench/peer_profile.py table logs/peer_ncu_*.csv [--target 1.1]

At the same clock, time = instructions / (schedulers x issue share), so to be `target` times as
fast as a peer, a kernel issuing I instructions per 32 scores needs an issue share of
target x I / I_peer x share_peer, or at its own share S at most I_peer x S / (target x
share_peer) instructions: the line "needs" prints both (above about 70% busy, a loop of dependent
softmax chains like these does not get there).
"""
import argparse
import csv
import io
import re
import sys

# The metrics `run` is profiled with (scripts/device/peer_limits.sh passes the same list).
METRICS = (
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.avg.per_second",
    "smsp__inst_executed.sum",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__warps_active.avg.per_cycle_active",
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
)
# Which contender a kernel belongs to, from its (mangled or plain) name; the first pattern that
# matches wins. Where one pattern serves several contenders (cuDNN's FP16 and FP8 graphs, intfa's
# two variants), its kernels go to those that ran, in the order `run` called them: `run` prints
# "profiled NAME" for each, and `table` reads those lines from the log beside each CSV file (the
# same name ending in .log, as scripts/device/peer_limits.sh writes it).
KERNEL_OWNERS = (
    (("fa3_fp8",), re.compile(r"FlashAttnFwdSm90.*float_e4m3")),
    (("fa3_bf16",), re.compile(r"FlashAttnFwdSm90")),
    (("intfa_full", "intfa_half"), re.compile(r"attention_forward_wgmma")),
    (("sdpa_cudnn", "cudnn_fp8"), re.compile(r"sdpa|fprop|fmha|flash|cudnn", re.IGNORECASE)),
)
CONTENDERS = ("sdpa_cudnn", "fa3_fp8", "fa3_bf16", "cudnn_fp8", "intfa_full", "intfa_half")
FP8_PEERS = ("fa3_fp8", "cudnn_fp8")


def run(args):
    import os

    import torch

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compare_peers import Peers, Inputs, make_run, parse_args

    peer_args = parse_args(["--lib", args.lib] if args.lib else [])
    names = args.contenders.split(",")
    peers = Peers(names, peer_args.intfa, peer_args.lib)
    torch.manual_seed(args.seed)
    shape = (args.batch, args.heads, args.seq, args.head_dim)
    inputs = Inputs(*(torch.randn(shape, device="cuda", dtype=torch.float16) for _ in range(3)))
    torch.set_grad_enabled(False)
    for name in names:
        try:
            contender = make_run(name, peers, inputs, args.causal, peer_args)
            with contender.context():
                for _ in range(3):
                    contender.call()
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_push("profile")
                contender.call()
                torch.cuda.synchronize()
                torch.cuda.nvtx.range_pop()
            print(f"profiled {name}", flush=True)
        except Exception as error:  # noqa: BLE001: a peer that cannot run is reported, not fatal
            print(f"missing {name}: {type(error).__name__}: {error}", flush=True)


def read_kernels(path):
    """[(kernel name, {metric: value})] of one ncu --csv file, in launch order."""
    with open(path) as f:
        lines = f.read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), len(lines))
    kernels = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        key = (row["ID"], row["Kernel Name"])
        try:
            value = float(row["Metric Value"].replace(",", ""))
        except ValueError:
            continue
        unit = row["Metric Unit"]
        if row["Metric Name"] == "gpu__time_duration.sum":
            value *= {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3,
                      "msecond": 1e-3}.get(unit, 1.0)
        if row["Metric Name"] == "sm__cycles_elapsed.avg.per_second":
            value *= {"GHz": 1e9, "MHz": 1e6, "cycle/nsecond": 1e9, "cycle/usecond": 1e6}.get(
                unit, 1.0)
        kernels.setdefault(key, {})[row["Metric Name"]] = value
    return [(name, metrics) for (_, name), metrics in kernels.items()]


def contenders_that_ran(csv_path):
    """The contenders the run beside `csv_path` profiled, in order (all of CONTENDERS when its
    log is not there)."""
    try:
        with open(re.sub(r"\.csv$", ".log", csv_path)) as f:
            ran = [line.split()[1] for line in f if line.startswith("profiled ")]
    except OSError:
        return list(CONTENDERS)
    return ran or list(CONTENDERS)


def owners(kernel_names, ran):
    """The contender of each kernel name (None: a helper of no contender), in launch order."""
    seen = {}
    result = []
    for kernel in kernel_names:
        who = None
        for names, pattern in KERNEL_OWNERS:
            if pattern.search(kernel):
                present = [name for name in names if name in ran] or list(names)
                who = present[min(seen.get(names, 0), len(present) - 1)]
                seen[names] = seen.get(names, 0) + 1
                break
        result.append(who)
    return result


def table(args):
    rows = []
    for path in args.files:
        match = re.search(r"d(\d+)_n(\d+)_(on|off)", path)
        if not match:
            print(f"skipped {path}: no d<D>_n<N>_<on|off> in its name", file=sys.stderr)
            continue
        d, n, causal = int(match.group(1)), int(match.group(2)), match.group(3) == "on"
        scores = args.batch * args.heads * n * n / (2 if causal else 1)
        ops = 4 * args.batch * args.heads * n * n * d / (2 if causal else 1)
        kernels = [(kernel, metrics) for kernel, metrics in read_kernels(path)
                   if metrics.get("gpu__time_duration.sum", 0.0) >= args.min_time_us * 1e-6]
        ran = contenders_that_ran(path)
        for who, (kernel, metrics) in zip(owners([k for k, _ in kernels], ran), kernels):
            time = metrics["gpu__time_duration.sum"]
            if who is None:
                continue
            rows.append({
                "d": d, "n": n, "causal": causal, "who": who, "kernel": kernel[:60],
                "ms": time * 1e3, "tops": ops / time / 1e12,
                "per32": metrics.get("smsp__inst_executed.sum", 0.0) / (scores / 32),
                "issue": metrics.get("smsp__issue_active.avg.pct_of_peak_sustained_active"),
                "warps": metrics.get("smsp__warps_active.avg.per_cycle_active"),
                "ghz": metrics.get("sm__cycles_elapsed.avg.per_second", 0.0) / 1e9,
                "xu": metrics.get("sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"),
                "fma": metrics.get("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
                "alu": metrics.get("sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"),
            })

    def fmt(value, spec):
        return "-" if value is None else format(value, spec)

    print("| d | N | causal | kernel of | ms | TOPS | instr / 32 scores | issue busy % | warps / "
          "scheduler | GHz | XU % | FMA % | ALU % |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['d']} | {r['n'] // 1024}k | {'on' if r['causal'] else 'off'} | {r['who']} | "
              f"{r['ms']:.3f} | {r['tops']:.0f} | {r['per32']:.2f} | {fmt(r['issue'], '.1f')} | "
              f"{fmt(r['warps'], '.2f')} | {r['ghz']:.2f} | {fmt(r['xu'], '.1f')} | "
              f"{fmt(r['fma'], '.1f')} | {fmt(r['alu'], '.1f')} |")
    print()
    shapes = sorted({(r["d"], r["n"], r["causal"]) for r in rows})
    for shape in shapes:
        here = [r for r in rows if (r["d"], r["n"], r["causal"]) == shape]
        fp8 = [r for r in here if r["who"] in FP8_PEERS]
        if not fp8:
            continue
        best = max(fp8, key=lambda r: r["tops"])
        for r in here:
            if not r["who"].startswith("intfa") or not r["issue"] or not best["issue"]:
                continue
            # Same clock assumed; the measured clocks are in the table.
            needed = args.target * r["per32"] / best["per32"] * best["issue"]
            fewer = best["per32"] * r["issue"] / (args.target * best["issue"])
            print(f"d={shape[0]} N={shape[1] // 1024}k causal {'on' if shape[2] else 'off'}: "
                  f"{r['who']} at {r['per32']:.2f} instr/32 needs {needed:.0f}% of issue slots "
                  f"busy to be {args.target}x {best['who']} ({best['per32']:.2f} at "
                  f"{best['issue']:.0f}%); it has {r['issue']:.0f}%, at which it needs "
                  f"<= {fewer:.2f} instr/32")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("run", help="one call of each contender inside the NVTX range 'profile'")
    r.add_argument("--head-dim", type=int, default=128)
    r.add_argument("--seq", type=int, default=16384)
    r.add_argument("--causal", action="store_true")
    r.add_argument("--batch", type=int, default=4)
    r.add_argument("--heads", type=int, default=32)
    r.add_argument("--contenders", default=",".join(CONTENDERS))
    r.add_argument("--lib", default="", help="libintfa.so for intfa's kernel through ctypes")
    r.add_argument("--seed", type=int, default=0)
    t = sub.add_parser("table", help="the table of ncu CSV files named ..._d<D>_n<N>_<on|off>")
    t.add_argument("files", nargs="+")
    t.add_argument("--batch", type=int, default=4)
    t.add_argument("--heads", type=int, default=32)
    t.add_argument("--target", type=float, default=1.1)
    t.add_argument("--min-time-us", type=float, default=50.0,
                   help="kernels shorter than this (helpers) are left out")
    args = parser.parse_args()
    run(args) if args.mode == "run" else table(args)


if __name__ == "__main__":
    main()
