#!/usr/bin/env python3
"""Times intfa (through its Python package when importable, else its C API with ctypes) and
PyTorch SDPA FP16 (flash and cuDNN back ends) in the same process, on the same shapes, with CUDA
events: warm-up, then --repeats rounds of one turn of each contender (about 2 ms of back-to-back
calls), the order reversed every round, medians (--timing interleaved, the default); or each
contender's single calls together, in the listed order and then reversed, the lower median kept
(--timing orders, the way of every run before 2026-11-28 03:23).

Writes JSON rows, a Markdown table for bench/RESULTS.md and a PNG plot (TOPS vs sequence length).
TOPS = 4 * B * H * N * N * D / time, halved for causal. intfa's attention time excludes
quantization; the quantize time is reported in its own column and in "intfa+quant".

    python3 bench/compare_sdpa.py --lib build/lib/libintfa.so --out-dir $OUT
"""
import argparse
import contextlib
import ctypes
import datetime
import json
import math
import os
import statistics
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from intfa_ctypes import FULL_INT8, HALF_INT8, Intfa, IntfaAttention, Options, time_ms

try:  # the pybind11 package: PYTHONPATH=build/python (or build-device-py/python), or pip install .
    from intfa_binding import BindingAttention, defaults_end_to_end, end_to_end
except ImportError:
    BindingAttention = defaults_end_to_end = end_to_end = None


def time_in_both_orders(contenders, repeats, where):
    """{name + "_ms": the lower of its two medians}: each contender (name: (call, context), the
    call timed inside the context) timed once in the given order and once in reverse. A kernel
    timed right after another warm one ran up to 10% slower on the H100 (2026-11-23: intfa at
    d=128 N=4k, 653 TOPS timed first, 589-614 right after cuDNN), so a fixed order favours
    whoever goes first. A back end that fails is left out (and said, with `where`)."""
    best = {}
    for order in (list(contenders), list(reversed(contenders))):
        for name in order:
            if name in best and best[name] is None:
                continue
            call, context = contenders[name]
            try:
                with context():
                    ms = time_ms(call, repeats)
            except RuntimeError as error:
                print(f"{name} failed at {where}: {error}", file=sys.stderr)
                best[name] = None
                continue
            best[name] = ms if name not in best else min(best[name], ms)
    return {name + "_ms": ms for name, ms in best.items() if ms is not None}


def time_interleaved(contenders, repeats, where, warmup=5, turn_ms=2.0):
    """({name + "_ms": its median}, {name: calls per turn}): after each contender's warm-up, one
    turn of each in turn, the order reversed every round, so that every contender runs in the
    same state of the GPU (--timing interleaved, the default). A turn is as many back-to-back
    calls as take about `turn_ms` (one at long sequences), timed together; their number comes
    from calls timed after the warm-up, whose first calls of a shape build plans and load kernels.
    Why (H100, 2026-11-28; bench/history/2026-11-28.md, "Two ways to time against SDPA"): timed
    in orders, each contender's calls together, what ran just before sets the GPU's state, and at
    N=16k the two ways part: in one call at 03:27, cuDNN 618 / 575 TOPS in orders against 673 / 643
    interleaved (d=128, causal off / on), full INT8's kernel 854 / 813 against 759 / 741, and in
    orders half INT8's kernel alone measured slower than `intfa.attention` half, which runs it and
    quantizes too (02:58). At 4k the two agree within a few percent; at 1k back-to-back calls
    leave out the launch from an idle GPU that single timed calls include.
    A back end that fails is left out (and said, with `where`)."""
    def events_ms(call, calls):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            call()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop)

    turns = {}  # name: calls per turn
    for name, (call, context) in contenders.items():
        try:
            with context():
                for _ in range(warmup):
                    call()
                torch.cuda.synchronize()
                estimate = events_ms(call, warmup) / warmup
            turns[name] = max(1, math.ceil(turn_ms / max(estimate, 1e-3)))
        except RuntimeError as error:
            print(f"{name} failed at {where}: {error}", file=sys.stderr)
    times = {name: [] for name in turns}
    for round_index in range(repeats):
        live = list(times)
        for name in (live if round_index % 2 == 0 else list(reversed(live))):
            call, context = contenders[name]
            try:
                with context():
                    times[name].append(events_ms(call, turns[name]) / turns[name])
            except RuntimeError as error:
                print(f"{name} failed at {where}: {error}", file=sys.stderr)
                del times[name]
    return ({name + "_ms": statistics.median(ms) for name, ms in times.items()},
            {name: turns[name] for name in times})


@contextlib.contextmanager
def q_pass():
    """intfa.attention with Q quantized by its own pass (INTFA_QUANTIZE_Q_IN_KERNEL=0, read per
    call), not by the Hopper kernel: what the package did before the kernel quantized Q."""
    previous = os.environ.get("INTFA_QUANTIZE_Q_IN_KERNEL")
    os.environ["INTFA_QUANTIZE_Q_IN_KERNEL"] = "0"
    try:
        yield
    finally:
        if previous is None:
            del os.environ["INTFA_QUANTIZE_Q_IN_KERNEL"]
        else:
            os.environ["INTFA_QUANTIZE_Q_IN_KERNEL"] = previous


def device_copy_gbps(repeats):
    """The bandwidth a plain 1 GiB device-to-device copy reaches: the yardstick for quantize."""
    source = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    target = torch.empty_like(source)
    ms = time_ms(lambda: target.copy_(source), repeats)
    return 2 * source.numel() / ms / 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", default="build/lib/libintfa.so")
    parser.add_argument("--intfa", default="auto", choices=["auto", "binding", "ctypes"],
                        help="how to call intfa (auto: the Python package when importable)")
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--seqs", default="1024,2048,4096,8192,16384")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--causal", default="off,on")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--timing", default="interleaved", choices=["interleaved", "orders"],
                        help="interleaved: --repeats rounds of one turn of each contender, the "
                        "order reversed every round, medians; orders (before 2026-11-28 03:23): "
                        "each contender's --repeats single calls together, in the listed order "
                        "and then reversed, the lower median (time_interleaved says why)")
    parser.add_argument("--p", default="u8", choices=["u8", "s8"])
    parser.add_argument("--p-scale", default="tile", choices=["running", "tile"])
    parser.add_argument("--v-scale", default="channel", choices=["tensor", "channel", "block"])
    parser.add_argument("--k-scale", default="token", choices=["token", "block"],
                        help="K's scales per key or per 64-key block (the opt-in faster "
                        "numerics); through the package it applies to `intfa.attention` only "
                        "(its kernel-only column stays per token): --intfa ctypes times the "
                        "kernel alone with it")
    parser.add_argument("--config", default="", help="block_m,block_n,warps,stages per head dim: "
                        "'64:128,64,8,2;128:128,64,8,2' (default: intfa's choice)")
    parser.add_argument("--smooth-k", default="default", choices=["default", "on", "off"],
                        help="K smoothing of intfa's Q/K quantization (default: the library's)")
    parser.add_argument("--rotate", default="default", choices=["default", "on", "off", "auto"],
                        help="the rotation of Q and K (default: the library's, auto)")
    parser.add_argument("--out-dir", default=".")
    args = parser.parse_args()
    transforms = {"smooth_k": {"default": None, "on": True, "off": False}[args.smooth_k],
                  "rotate": {"default": None, "on": True, "off": False,
                             "auto": "auto"}[args.rotate]}

    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    binding = args.intfa == "binding" or (args.intfa == "auto" and BindingAttention is not None)
    if args.intfa == "binding" and BindingAttention is None:
        sys.exit("--intfa binding: `import intfa` failed (PYTHONPATH=build/python?)")
    lib = None if binding else Intfa(args.lib)
    print(f"intfa through {'its Python package' if binding else 'ctypes: ' + args.lib}", flush=True)
    configs = {}
    for item in filter(None, args.config.split(";")):
        d, cfg = item.split(":")
        configs[int(d)] = [int(x) for x in cfg.split(",")]
    device = torch.cuda.get_device_name()
    copy_gbps = device_copy_gbps(args.repeats)
    print(f"device-to-device copy: {copy_gbps:.0f} GB/s (bytes read + written)", flush=True)
    rows = []
    for d in [int(x) for x in args.head_dims.split(",")]:
        options = Options()
        if lib is not None:
            lib.lib.intfa_default_options(ctypes.byref(options))
        options.p_encoding = 1 if args.p == "u8" else 0
        options.p_scale = 0 if args.p_scale == "running" else 1
        options.v_granularity = {"tensor": 0, "channel": 1, "block": 2}[args.v_scale]
        options.k_granularity = {"token": 0, "block": 1}[args.k_scale]
        if d in configs:
            options.block_m, options.block_n, options.warps, options.stages = configs[d]
        for causal in [c == "on" for c in args.causal.split(",")]:
            for n in [int(x) for x in args.seqs.split(",")]:
                shape = (args.batch, args.heads, n, d)
                q, k, v = (torch.randn(shape, dtype=torch.float16, device="cuda") for _ in range(3))
                ops = 4.0 * args.batch * args.heads * n * n * d / (2 if causal else 1)
                row = {"device": device, "head_dim": d, "seq": n, "causal": causal,
                       "batch": args.batch, "heads": args.heads}
                contenders = {}
                for name, backend in (("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                                      ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)):
                    contenders[name] = (
                        lambda: torch.nn.functional.scaled_dot_product_attention(
                            q, k, v, is_causal=causal),
                        lambda backend=backend: sdpa_kernel(backend))
                runs = {}
                for name, variant in (("intfa_full", FULL_INT8), ("intfa_half", HALF_INT8)):
                    runs[name] = (
                        BindingAttention(q, k, v, causal, variant, options, **transforms)
                        if binding else
                        IntfaAttention(lib, q, k, v, causal, variant, options, **transforms))
                    contenders[name] = (runs[name].attend, contextlib.nullcontext)
                    if binding:  # intfa.attention as users call it: quantize + attend + host
                        call = end_to_end(q, k, v, causal, variant, options,
                                          k_granularity=args.k_scale, **transforms)
                        contenders[name + "_e2e"] = (call, contextlib.nullcontext)
                        # The same with Q's own quantize pass instead of the Hopper kernel's.
                        contenders[name + "_e2e_q_pass"] = (call, q_pass)
                if binding:  # intfa.attention with every option at its default (variant "auto")
                    contenders["intfa_default_e2e"] = (defaults_end_to_end(q, k, v, causal),
                                                       contextlib.nullcontext)
                where = f"d={d} n={n}"
                if args.timing == "interleaved":
                    medians, row["calls_per_turn"] = time_interleaved(contenders, args.repeats,
                                                                      where)
                    row.update(medians)
                else:
                    row.update(time_in_both_orders(contenders, args.repeats, where))
                for name, run in runs.items():
                    row[name + "_quant_ms"] = time_ms(run.quantize, max(5, args.repeats // 2))
                del runs, contenders
                for key in [k for k in row if k.endswith("_ms") and not k.endswith("quant_ms")]:
                    row[key[:-3] + "_tops"] = ops / row[key] / 1e9
                for base in ("sdpa_flash", "sdpa_cudnn"):
                    if base + "_ms" in row:
                        row["full_vs_" + base] = row[base + "_ms"] / row["intfa_full_ms"]
                rows.append(row)
                print(json.dumps(row), flush=True)
                del q, k, v
                torch.cuda.empty_cache()

    os.makedirs(args.out_dir, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    with open(os.path.join(args.out_dir, "compare_sdpa.json"), "w") as f:
        json.dump({"device": device, "date": stamp, "command": " ".join(sys.argv),
                   "copy_gbps": copy_gbps, "intfa_path": "binding" if binding else "ctypes",
                   "timing": args.timing,
                   "torch": torch.__version__, "rows": rows}, f, indent=1)
    lines = [f"Device: {device}; {stamp}; torch {torch.__version__}; "
             f"device copy {copy_gbps:.0f} GB/s; timing {args.timing}; `{' '.join(sys.argv)}`", "",
             "| d | N | causal | SDPA flash TOPS | SDPA cuDNN TOPS | intfa full TOPS | full / flash"
             " | full / cuDNN | intfa half TOPS | half / cuDNN | full quant ms | `intfa.attention` "
             "full TOPS | its / cuDNN | its / kernel only | with Q's own pass: full TOPS | "
             "Q in kernel / Q pass | `intfa.attention` half TOPS | its / cuDNN | half with Q's "
             "own pass TOPS | `intfa.attention` defaults TOPS | defaults / full | defaults / "
             "half |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
             "---|"]
    nan = float("nan")
    for r in rows:
        cudnn_ms = r.get("sdpa_cudnn_ms", nan)
        lines.append(
            f"| {r['head_dim']} | {r['seq']} | {'on' if r['causal'] else 'off'} | "
            f"{r.get('sdpa_flash_tops', nan):.0f} | {r.get('sdpa_cudnn_tops', nan):.0f} | "
            f"{r['intfa_full_tops']:.0f} | {r.get('full_vs_sdpa_flash', nan):.2f}x | "
            f"{r.get('full_vs_sdpa_cudnn', nan):.2f}x | {r['intfa_half_tops']:.0f} | "
            f"{cudnn_ms / r['intfa_half_ms']:.2f}x | {r['intfa_full_quant_ms']:.3f} | "
            f"{r.get('intfa_full_e2e_tops', nan):.0f} | "
            f"{cudnn_ms / r.get('intfa_full_e2e_ms', nan):.2f}x | "
            f"{r['intfa_full_ms'] / r.get('intfa_full_e2e_ms', nan):.2f} | "
            f"{r.get('intfa_full_e2e_q_pass_tops', nan):.0f} | "
            f"{r.get('intfa_full_e2e_q_pass_ms', nan) / r.get('intfa_full_e2e_ms', nan):.3f}x | "
            f"{r.get('intfa_half_e2e_tops', nan):.0f} | "
            f"{cudnn_ms / r.get('intfa_half_e2e_ms', nan):.2f}x | "
            f"{r.get('intfa_half_e2e_q_pass_tops', nan):.0f} | "
            f"{r.get('intfa_default_e2e_tops', nan):.0f} | "
            f"{r.get('intfa_full_e2e_ms', nan) / r.get('intfa_default_e2e_ms', nan):.3f} | "
            f"{r.get('intfa_half_e2e_ms', nan) / r.get('intfa_default_e2e_ms', nan):.3f} |")
    with open(os.path.join(args.out_dir, "compare_sdpa.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        panels = sorted({(r["head_dim"], r["causal"]) for r in rows})
        fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
        for ax, (d, causal) in zip(axes[0], panels):
            sel = [r for r in rows if r["head_dim"] == d and r["causal"] == causal]
            for key, label in (("sdpa_flash_tops", "SDPA flash FP16"),
                               ("sdpa_cudnn_tops", "SDPA cuDNN FP16"),
                               ("intfa_full_tops", "intfa full INT8"),
                               ("intfa_half_tops", "intfa half INT8")):
                ax.plot([r["seq"] for r in sel], [r.get(key, math.nan) for r in sel], "o-",
                        label=label)
            ax.set_xscale("log", base=2)
            ax.set_title(f"d={d} {'causal' if causal else 'non-causal'}")
            ax.set_xlabel("sequence length")
            ax.set_ylabel("TOPS")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
        fig.suptitle(f"{device}, B={args.batch}, H={args.heads}")
        fig.tight_layout()
        fig.savefig(os.path.join(args.out_dir, "compare_sdpa.png"), dpi=110)
    except ImportError:
        print("matplotlib not available: no plot", file=sys.stderr)


if __name__ == "__main__":
    main()
