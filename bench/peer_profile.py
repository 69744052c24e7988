#!/usr/bin/env python3
"""The peers' attention kernels and intfa's under ncu, side by side (issue 44, "Done means": the
instruction count and issue share of each missed target, against the kernels it is measured
against).

Run mode (under ncu): builds the contenders of bench/compare_peers.py at one shape, calls each a
few times to warm up, then once inside an NVTX range named "profile", so that

    ncu --nvtx --nvtx-include "profile/" --csv --metrics ... --log-file F.csv \\
        python3 bench/peer_profile.py run --head-dim 128 --seq 16384 [--causal]

profiles exactly one call of each (every kernel it launches). Inside the range each contender's
call follows a marker: PyTorch's one-thread spin kernel, launched once per contender and named
in the run's output ("marker NAME"), so that `table` knows whose kernels follow each marker.

Table mode (no GPU): reads those CSV files and prints, per contender, its longest kernel (its
attention kernel): time, speed, warp instructions per 32 score elements (everything in the
kernel, the producer and epilogue included; "scores" counts the (query, key) pairs the shape
defines, halved for causal), the share of issue slots busy over the kernel's elapsed cycles
(instructions / (schedulers x clock x time); ncu's own share over active cycles beside it), warps
per scheduler and the pipes' shares; then what each intfa kernel would need to reach a given
multiple of the best FP8 peer:

    python3 bench/peer_profile.py table logs/peer_ncu_*.csv [--target 1.1]

Time = instructions / (schedulers x clock x elapsed share), so to be `target` times as fast as a
peer, a kernel issuing I instructions per 32 scores needs an elapsed share of
target x (I / I_peer) x (clock_peer / clock) x share_peer, or, at its own share S, at most
I_peer x S x clock / (target x share_peer x clock_peer) instructions: the line "needs" prints
both.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from issue_bound import SCHEDULERS_PER_SM, SMS, hertz, read_kernels, seconds  # noqa: E402

SCHEDULERS = SMS * SCHEDULERS_PER_SM
# The metrics `run` is profiled with (scripts/device/peer_limits.sh passes those its ncu knows).
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
MARKER = re.compile(r"spin_kernel")
# Runs without markers (before they existed): which contender a kernel belongs to, from its
# name; the first pattern that matches wins. Where one pattern serves several contenders (cuDNN's
# FP16 and FP8 graphs, intfa's two variants), its kernels go to those that ran, in the order the
# run's output names them ("profiled NAME"), which `table` reads from the log beside each CSV
# file (the same name ending in .log, as scripts/device/peer_limits.sh writes it).
KERNEL_OWNERS = (
    (("fa3_fp8",), re.compile(r"FlashAttnFwdSm90.*float_e4m3")),
    (("fa3_bf16",), re.compile(r"FlashAttnFwdSm90")),
    (("intfa_full", "intfa_half"), re.compile(r"attention_forward_wgmma")),
    (("sdpa_cudnn", "cudnn_fp8"), re.compile(r"sdpa|fprop|fmha|cudnn", re.IGNORECASE)),
)
CONTENDERS = ("sdpa_cudnn", "fa3_fp8", "fa3_bf16", "cudnn_fp8", "intfa_full", "intfa_half")
FP8_PEERS = ("fa3_fp8", "cudnn_fp8")


def run(args):
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
                try:
                    print(f"marker {name}", flush=True)
                    torch.cuda._sleep(1000)  # the marker: spin_kernel
                    contender.call()
                    torch.cuda.synchronize()
                finally:
                    torch.cuda.nvtx.range_pop()
            print(f"profiled {name}", flush=True)
        except Exception as error:  # noqa: BLE001: a peer that cannot run is reported, not fatal
            print(f"missing {name}: {type(error).__name__}: {error}", flush=True)


def kernel_metrics(path):
    """[(kernel name, {metric: value, times in seconds and clocks in hertz})] of one ncu --csv
    file, in launch order."""
    converted = []
    for name, metrics in read_kernels(path):
        values = {metric: value for metric, (value, _) in metrics.items()}
        if "gpu__time_duration.sum" in metrics:
            values["gpu__time_duration.sum"] = seconds(metrics["gpu__time_duration.sum"])
        if "sm__cycles_elapsed.avg.per_second" in metrics:
            values["sm__cycles_elapsed.avg.per_second"] = hertz(
                metrics["sm__cycles_elapsed.avg.per_second"])
        converted.append((name, values))
    return converted


def log_lines(csv_path, word):
    """The contender names of the lines "`word` NAME" in the run's log beside `csv_path`."""
    try:
        with open(re.sub(r"\.csv$", ".log", csv_path)) as f:
            return [line.split()[1] for line in f if line.startswith(word + " ")]
    except OSError:
        return []


def contender_kernels(path):
    """{contender: (its longest kernel's name, metrics)} of one CSV file."""
    kernels = kernel_metrics(path)
    owned = []  # (contender, name, metrics)
    if any(MARKER.search(name) for name, _ in kernels):
        markers = iter(log_lines(path, "marker"))
        who = None
        for name, metrics in kernels:
            if MARKER.search(name):
                who = next(markers, None)
            elif who is not None:
                owned.append((who, name, metrics))
    else:
        ran = log_lines(path, "profiled") or list(CONTENDERS)
        seen = {}
        for name, metrics in kernels:
            for names, pattern in KERNEL_OWNERS:
                if pattern.search(name):
                    present = [n for n in ran if n in names] or list(names)
                    index = seen.get(names, 0)
                    seen[names] = index + 1
                    if index < len(present):
                        owned.append((present[index], name, metrics))
                    break
    longest = {}
    for who, name, metrics in owned:
        time = metrics.get("gpu__time_duration.sum", 0.0)
        if who not in longest or time > longest[who][1].get("gpu__time_duration.sum", 0.0):
            longest[who] = (name, metrics)
    return longest


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
        for who, (kernel, metrics) in contender_kernels(path).items():
            time = metrics.get("gpu__time_duration.sum")
            if not time:
                print(f"skipped {who} in {path}: no gpu__time_duration", file=sys.stderr)
                continue
            inst = metrics.get("smsp__inst_executed.sum")
            clock = metrics.get("sm__cycles_elapsed.avg.per_second")
            rows.append({
                "d": d, "n": n, "causal": causal, "who": who, "kernel": kernel[:60],
                "ms": time * 1e3, "tops": ops / time / 1e12, "clock": clock,
                "per32": inst / (scores / 32) if inst else None,
                "busy": 100 * inst / (SCHEDULERS * clock * time) if inst and clock else None,
                "active": metrics.get("smsp__issue_active.avg.pct_of_peak_sustained_active"),
                "warps": metrics.get("smsp__warps_active.avg.per_cycle_active"),
                "xu": metrics.get("sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"),
                "fma": metrics.get("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"),
                "alu": metrics.get("sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active"),
            })

    def fmt(value, spec, scale=1.0):
        return "-" if value is None else format(value * scale, spec)

    def seq(n):
        return f"{n // 1024}k" if n % 1024 == 0 else str(n)

    print("| d | N | causal | kernel of | ms | TOPS | instr / 32 scores | issue busy % (elapsed) | "
          "(active) | warps / scheduler | GHz | XU % | FMA % | ALU % |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['d']} | {seq(r['n'])} | {'on' if r['causal'] else 'off'} | {r['who']} | "
              f"{r['ms']:.3f} | {r['tops']:.0f} | {fmt(r['per32'], '.2f')} | "
              f"{fmt(r['busy'], '.1f')} | {fmt(r['active'], '.1f')} | {fmt(r['warps'], '.2f')} | "
              f"{fmt(r['clock'], '.2f', 1e-9)} | {fmt(r['xu'], '.1f')} | {fmt(r['fma'], '.1f')} | "
              f"{fmt(r['alu'], '.1f')} |")
    print()
    for shape in sorted({(r["d"], r["n"], r["causal"]) for r in rows}):
        here = [r for r in rows if (r["d"], r["n"], r["causal"]) == shape]
        fp8 = [r for r in here if r["who"] in FP8_PEERS and r["busy"]]
        if not fp8:
            continue
        best = max(fp8, key=lambda r: r["tops"])
        for r in here:
            if not r["who"].startswith("intfa") or not r["busy"]:
                continue
            clocks = best["clock"] / r["clock"]
            needed = args.target * r["per32"] / best["per32"] * clocks * best["busy"]
            fewer = best["per32"] * r["busy"] / (args.target * best["busy"] * clocks)
            print(f"d={shape[0]} N={seq(shape[1])} causal {'on' if shape[2] else 'off'}: "
                  f"{r['who']} at {r['per32']:.2f} instr/32 needs {needed:.0f}% of issue slots "
                  f"busy to be {args.target}x {best['who']} ({best['per32']:.2f} at "
                  f"{best['busy']:.0f}%); it has {r['busy']:.0f}%, at which it needs "
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
    t.add_argument("--batch", type=int, default=4, help="as the run had it")
    t.add_argument("--heads", type=int, default=32, help="as the run had it")
    t.add_argument("--target", type=float, default=1.1)
    args = parser.parse_args()
    run(args) if args.mode == "run" else table(args)


if __name__ == "__main__":
    main()
