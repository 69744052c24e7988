#!/usr/bin/env python3
"""Times intfa (through its C API, with ctypes) and PyTorch SDPA FP16 (flash and cuDNN back ends)
in the same process, on the same shapes, with CUDA events (warm-up, median of --repeats runs).

Writes JSON rows, a Markdown table for bench/RESULTS.md and a PNG plot (TOPS vs sequence length).
TOPS = 4 * B * H * N * N * D / time, halved for causal. intfa's attention time excludes
quantization; the quantize time is reported in its own column and in "intfa+quant".

    python3 bench/compare_sdpa.py --lib build/lib/libintfa.so --out-dir $OUT
"""
import argparse
import ctypes
import datetime
import json
import math
import os
import statistics
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

F16, BF16, I8, I4X2 = 0, 1, 2, 3
FULL_INT8, HALF_INT8 = 0, 1


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("strides", ctypes.c_int64 * 4)]


class Shape(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int), ("heads", ctypes.c_int), ("seq", ctypes.c_int),
                ("head_dim", ctypes.c_int)]


class Problem(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int), ("heads_q", ctypes.c_int), ("heads_kv", ctypes.c_int),
                ("seq_q", ctypes.c_int), ("seq_kv", ctypes.c_int), ("head_dim", ctypes.c_int),
                ("causal", ctypes.c_int), ("variant", ctypes.c_int), ("qk_bits", ctypes.c_int)]


class AttentionTensors(ctypes.Structure):
    _fields_ = [("q", Tensor), ("k", Tensor), ("v", Tensor), ("out", Tensor),
                ("q_scale", ctypes.c_void_p), ("k_scale", ctypes.c_void_p),
                ("v_scale", ctypes.c_void_p), ("lse", ctypes.c_void_p)]


class Options(ctypes.Structure):
    _fields_ = [("softmax_scale", ctypes.c_double), ("p_encoding", ctypes.c_int),
                ("p_scale", ctypes.c_int), ("v_granularity", ctypes.c_int),
                ("block_m", ctypes.c_int), ("block_n", ctypes.c_int), ("warps", ctypes.c_int),
                ("stages", ctypes.c_int)]


class Intfa:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.intfa_last_error.restype = ctypes.c_char_p
        self.lib.intfa_v_int8_bytes.restype = ctypes.c_size_t
        self.lib.intfa_v_scale_count.restype = ctypes.c_size_t

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what}: {self.lib.intfa_last_error().decode()}")

    @staticmethod
    def view(tensor, dtype):
        strides = list(tensor.stride())
        if dtype == I4X2:
            strides = [s for s in strides]
        return Tensor(tensor.data_ptr(), dtype, (ctypes.c_int64 * 4)(*strides))


def time_ms(fn, repeats, warmup=5):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


class IntfaAttention:
    """Quantized inputs and output buffers of one problem, ready to time."""

    def __init__(self, lib, q, k, v, causal, variant, options):
        self.lib, self.causal, self.variant, self.options = lib, causal, variant, options
        b, h, n, d = q.shape
        self.shape = (b, h, n, d)
        self.q, self.k, self.v = q, k, v
        dev = q.device
        self.q8 = torch.empty((b, h, n, d), dtype=torch.int8, device=dev)
        self.k8 = torch.empty((b, h, n, d), dtype=torch.int8, device=dev)
        self.qs = torch.empty((b, h, n), dtype=torch.float32, device=dev)
        self.ks = torch.empty((b, h, n), dtype=torch.float32, device=dev)
        self.v8 = torch.empty(lib.lib.intfa_v_int8_bytes(b, h, n, d), dtype=torch.int8, device=dev)
        count = lib.lib.intfa_v_scale_count(options.v_granularity, b, h, n, d)
        self.vs = torch.empty(count, dtype=torch.float32, device=dev)
        self.out = torch.empty_like(q)
        self.stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self.problem = Problem(b, h, h, n, n, d, int(causal), variant, 8)
        v_view = Tensor()
        lib.lib.intfa_v_int8_view(ctypes.c_void_p(self.v8.data_ptr()), b, h, n, d,
                                  ctypes.byref(v_view))
        self.tensors = AttentionTensors(
            Intfa.view(self.q8, I8), Intfa.view(self.k8, I8),
            v_view if variant == FULL_INT8 else Intfa.view(v, F16), Intfa.view(self.out, F16),
            self.qs.data_ptr(), self.ks.data_ptr(), self.vs.data_ptr(), None)
        self.quantize()

    def quantize(self):
        b, h, n, d = self.shape
        shape = Shape(b, h, n, d)
        for src, dst, scale in ((self.q, self.q8, self.qs), (self.k, self.k8, self.ks)):
            self.lib.check(self.lib.lib.intfa_quantize_qk(
                ctypes.byref(shape), ctypes.byref(Intfa.view(src, F16)),
                ctypes.byref(Intfa.view(dst, I8)), ctypes.c_void_p(scale.data_ptr()), 8,
                self.stream), "quantize_qk")
        if self.variant == FULL_INT8:
            self.lib.check(self.lib.lib.intfa_quantize_v(
                ctypes.byref(shape), ctypes.byref(Intfa.view(self.v, F16)),
                ctypes.c_void_p(self.v8.data_ptr()), ctypes.c_void_p(self.vs.data_ptr()),
                self.options.v_granularity, self.stream), "quantize_v")

    def attend(self):
        self.lib.check(self.lib.lib.intfa_attention_forward(
            ctypes.byref(self.problem), ctypes.byref(self.tensors), self.stream,
            ctypes.byref(self.options)), "attention_forward")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", default="build/lib/libintfa.so")
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--seqs", default="1024,2048,4096,8192,16384")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--causal", default="off,on")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--p", default="u8", choices=["u8", "s8"])
    parser.add_argument("--p-scale", default="running", choices=["running", "tile"])
    parser.add_argument("--v-scale", default="tensor", choices=["tensor", "channel", "block"])
    parser.add_argument("--config", default="", help="block_m,block_n,warps,stages per head dim: "
                        "'64:128,64,8,2;128:128,64,8,2' (default: intfa's choice)")
    parser.add_argument("--out-dir", default=".")
    args = parser.parse_args()

    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    lib = Intfa(args.lib)
    configs = {}
    for item in filter(None, args.config.split(";")):
        d, cfg = item.split(":")
        configs[int(d)] = [int(x) for x in cfg.split(",")]
    device = torch.cuda.get_device_name()
    rows = []
    for d in [int(x) for x in args.head_dims.split(",")]:
        options = Options()
        lib.lib.intfa_default_options(ctypes.byref(options))
        options.p_encoding = 1 if args.p == "u8" else 0
        options.p_scale = 0 if args.p_scale == "running" else 1
        options.v_granularity = {"tensor": 0, "channel": 1, "block": 2}[args.v_scale]
        if d in configs:
            options.block_m, options.block_n, options.warps, options.stages = configs[d]
        for causal in [c == "on" for c in args.causal.split(",")]:
            for n in [int(x) for x in args.seqs.split(",")]:
                shape = (args.batch, args.heads, n, d)
                q, k, v = (torch.randn(shape, dtype=torch.float16, device="cuda") for _ in range(3))
                ops = 4.0 * args.batch * args.heads * n * n * d / (2 if causal else 1)
                row = {"device": device, "head_dim": d, "seq": n, "causal": causal,
                       "batch": args.batch, "heads": args.heads}
                for name, backend in (("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                                      ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)):
                    try:
                        with sdpa_kernel(backend):
                            ms = time_ms(lambda: torch.nn.functional.scaled_dot_product_attention(
                                q, k, v, is_causal=causal), args.repeats)
                        row[name + "_ms"] = ms
                    except RuntimeError as error:
                        print(f"{name} failed at d={d} n={n}: {error}", file=sys.stderr)
                for name, variant in (("intfa_full", FULL_INT8), ("intfa_half", HALF_INT8)):
                    run = IntfaAttention(lib, q, k, v, causal, variant, options)
                    row[name + "_ms"] = time_ms(run.attend, args.repeats)
                    row[name + "_quant_ms"] = time_ms(run.quantize, max(5, args.repeats // 2))
                    del run
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
                   "torch": torch.__version__, "rows": rows}, f, indent=1)
    lines = [f"Device: {device}; {stamp}; torch {torch.__version__}; `{' '.join(sys.argv)}`", "",
             "| d | N | causal | SDPA flash TOPS | SDPA cuDNN TOPS | intfa full TOPS | full / flash"
             " | full / cuDNN | intfa half TOPS | full quant ms | full+quant / cuDNN |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        total = r["intfa_full_ms"] + r["intfa_full_quant_ms"]
        lines.append(
            f"| {r['head_dim']} | {r['seq']} | {'on' if r['causal'] else 'off'} | "
            f"{r.get('sdpa_flash_tops', float('nan')):.0f} | {r.get('sdpa_cudnn_tops', float('nan')):.0f} | "
            f"{r['intfa_full_tops']:.0f} | {r.get('full_vs_sdpa_flash', float('nan')):.2f}x | "
            f"{r.get('full_vs_sdpa_cudnn', float('nan')):.2f}x | {r['intfa_half_tops']:.0f} | "
            f"{r['intfa_full_quant_ms']:.3f} | {r.get('sdpa_cudnn_ms', float('nan')) / total:.2f}x |")
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
