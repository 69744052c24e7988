#!/usr/bin/env python3
"""Times intfa against its strongest peers in ONE process, interleaved, and scores every
contender's accuracy beside its speed (issue 44, item 4).

Contenders at each shape (B, H, head dim d, sequence N, causal off/on; --contenders picks):
  sdpa_cudnn        torch SDPA, FP16, cuDNN back end (sdpa_flash: its flash back end, opt-in)
  fa3_bf16          FlashAttention-3 forward, BF16 (PyPI `fa3-fwd`, module fa3_fwd_interface)
  fa3_fp8           the same, FP8 e4m3 Q/K/V with q/k/v_descale [B, H_kv]; output BF16
  cudnn_fp8         cuDNN's FP8 SDPA graph (PyPI `nvidia-cudnn-frontend`, `sdpa_fp8`); on Hopper
                    the output is FP8 e4m3 too (a BF16 output is Blackwell-only)
  intfa_full/_half  intfa's kernel alone on pre-quantized inputs, full INT8 and half INT8 (the
                    library's default numerics; K per token)
  intfa_e2e         `intfa.attention` as users call it (default numerics: quantize + attend)
  intfa_e2e_kblock  the same with k_granularity="block" (intfa_e2e_kvblock: K and V per block,
                    intfa_e2e_half: variant "half_int8"; opt-in)
  intfa_paged_prefill  `intfa.paged_prefill` over a paged INT8 cache holding K and V (pages of
                    64 in shuffled order, appended beforehand, unsmoothed): every sequence's N
                    queries against its N cached tokens, as a serving prefill reads a cache
                    (the gather and the varlen half INT8 kernel, Q quantized in the kernel;
                    opt-in)
A peer whose wheel does not import, or a contender that fails at a shape, is reported as missing
with the reason; the rest still run.

Timing: bench/compare_sdpa.py's time_interleaved (after each contender's warm-up, --repeats
rounds of one turn of each, a turn being ~2 ms of back-to-back calls, the order reversed every
round; medians). Every contender is timed on inputs prepared beforehand: the peers' FP8
quantization, FA3's [B, N, H, D] copies and intfa's kernel-only quantization are outside the
timed region; `intfa.attention` includes its quantization (that is what it is). FA3 is called
through its registered op (torch.ops.fa3_fwd.fwd) unless --fa3-call func (flash_attn_func, whose
Python layers add host time that shows at 1k).
TOPS = 4 * B * H * N^2 * d / time, halved for causal. Ratios: each intfa contender's TOPS over
the best FP8 peer's at that shape, over FA3 BF16's and over SDPA cuDNN FP16's.

FP8 quantization for the peers (outside the timed region): amax scaling into e4m3, x * 448 /
amax(|x|), saturated, the descale amax / 448. FA3 FP8: per (batch, head) by default
(--fa3-fp8-scale head), or per tensor. cuDNN FP8: per tensor (its descales are scalars);
scale_s (P into e4m3) --cudnn-scale-s (448 by default: P <= 1); scale_o calibrated per input set:
one call with scale_o = 1 gives amax|O|, then scale_o = the power of two at or below 448 / amax,
and the output is read back as O_e4m3 / scale_o. With --fa3-fp8-scale tensor both FP8 peers read
the very same e4m3 tensors.

Accuracy: for each input family (--inputs; the generators of bench/accuracy.py, N(0,1) by
default) at each (d, N, causal), on a smaller batch (--acc-batch 1, --acc-heads 8 by default),
each contender's output against float64 attention of the ORIGINAL FP16 inputs (causal mask
included), over all output elements: relative L2, cosine, mean relative error (sum|o - r| /
sum|r|). A fresh random seed each run, printed and saved.

Writes under --out-dir: compare_peers.json (speed rows, accuracy rows, missing contenders, the
settings and versions) and compare_peers.md (a speed table with the ratios, an accuracy table);
prints a short table last.

    PYTHONPATH=build-device-py/python:/tmp/site python3 bench/compare_peers.py --out-dir $OUT
"""
import argparse
import contextlib
import ctypes
import datetime
import json
import math
import os
import sys
import traceback

# name: (label in the tables, kind). Kinds: "fp16" (FP16 reference peer), "bf16", "fp8" (the FP8
# peers: "best FP8" is the fastest of them at a shape), "intfa".
CONTENDERS = {
    "sdpa_cudnn": ("SDPA cuDNN FP16", "fp16"),
    "sdpa_flash": ("SDPA flash FP16", "fp16"),
    "fa3_bf16": ("FA3 BF16", "bf16"),
    "fa3_fp8": ("FA3 FP8", "fp8"),
    "cudnn_fp8": ("cuDNN FP8", "fp8"),
    "intfa_full": ("intfa kernel full", "intfa"),
    "intfa_half": ("intfa kernel half", "intfa"),
    "intfa_e2e": ("intfa.attention", "intfa"),
    "intfa_e2e_kblock": ("intfa.attention k=block", "intfa"),
    "intfa_e2e_kvblock": ("intfa.attention k,v=block", "intfa"),
    "intfa_e2e_half": ("intfa.attention half", "intfa"),
    "intfa_paged_prefill": ("intfa paged prefill", "intfa"),
}
DEFAULT_CONTENDERS = ("sdpa_cudnn", "fa3_bf16", "fa3_fp8", "cudnn_fp8", "intfa_full",
                      "intfa_half", "intfa_e2e", "intfa_e2e_kblock")
# The baselines of the ratio columns: (key suffix, what, how to find its TOPS in a row).
BASELINES = (("best_fp8", "best FP8 peer"), ("fa3_bf16", "FA3 BF16"),
             ("sdpa_cudnn", "SDPA cuDNN FP16"))
E4M3_MAX = 448.0


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contenders", default=",".join(DEFAULT_CONTENDERS),
                        help="comma-separated, of: " + ", ".join(CONTENDERS))
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--seqs", default="1024,4096,16384")
    parser.add_argument("--causal", default="off,on")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=10,
                        help="rounds of time_interleaved (one turn of each contender a round)")
    parser.add_argument("--turn-ms", type=float, default=2.0)
    parser.add_argument("--inputs", default="normal",
                        help="accuracy input families, ',' or 'all' (bench/accuracy.py's)")
    parser.add_argument("--acc-batch", type=int, default=1)
    parser.add_argument("--acc-heads", type=int, default=8)
    parser.add_argument("--acc-seqs", default="",
                        help="sequence lengths for accuracy (default: --seqs)")
    parser.add_argument("--no-accuracy", action="store_true")
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--intfa", default="auto", choices=["auto", "binding", "ctypes"],
                        help="intfa's kernel-only path (auto: the Python package when importable); "
                        "intfa.attention needs the package")
    parser.add_argument("--lib", default="build/lib/libintfa.so", help="for --intfa ctypes")
    parser.add_argument("--fa3-fp8-scale", default="head", choices=["head", "tensor"],
                        help="FA3 FP8 descales per (batch, head) or one per tensor")
    parser.add_argument("--fa3-call", default="op", choices=["op", "func"],
                        help="op: torch.ops.fa3_fwd.fwd; func: fa3_fwd_interface.flash_attn_func")
    parser.add_argument("--fa3-num-splits", type=int, default=1,
                        help="FA3's num_splits (1: flash_attn_func's default; 0: its heuristic)")
    parser.add_argument("--cudnn-scale-s", type=float, default=E4M3_MAX,
                        help="cuDNN FP8's scale_s (P in [0, 1] to e4m3); descale_s = 1 / it")
    parser.add_argument("--out-dir", default=".")
    args = parser.parse_args(argv)
    args.contender_list = [c.strip() for c in args.contenders.split(",") if c.strip()]
    unknown = [c for c in args.contender_list if c not in CONTENDERS]
    if unknown:
        parser.error(f"--contenders: unknown {unknown}; known: {list(CONTENDERS)}")
    args.head_dim_list = [int(x) for x in args.head_dims.split(",")]
    args.seq_list = [int(x) for x in args.seqs.split(",")]
    args.acc_seq_list = [int(x) for x in args.acc_seqs.split(",")] if args.acc_seqs else \
        list(args.seq_list)
    bad = [c for c in args.causal.split(",") if c not in ("off", "on")]
    if bad:
        parser.error(f"--causal: expected off and/or on, got {bad}")
    args.causal_list = [c == "on" for c in args.causal.split(",")]
    return args


# ---------------------------------------------------------------- pure logic (no torch needed)

def attention_ops(batch, heads, seq, head_dim, causal):
    """4 * B * H * N^2 * d, halved for causal."""
    return 4.0 * batch * heads * seq * seq * head_dim / (2 if causal else 1)


def add_ratios(row, names):
    """Adds to a speed row (with "<name>_tops" for each contender timed) the best FP8 peer and,
    for each intfa contender, "<name>_vs_<baseline>" (its TOPS over the baseline's)."""
    fp8 = {n: row[n + "_tops"] for n in names
           if CONTENDERS[n][1] == "fp8" and row.get(n + "_tops") is not None}
    if fp8:
        best = max(fp8, key=fp8.get)
        row["best_fp8"], row["best_fp8_tops"] = best, fp8[best]
    baselines = {"best_fp8": row.get("best_fp8_tops"), "fa3_bf16": row.get("fa3_bf16_tops"),
                 "sdpa_cudnn": row.get("sdpa_cudnn_tops")}
    for name in names:
        tops = row.get(name + "_tops")
        if CONTENDERS[name][1] != "intfa" or tops is None:
            continue
        for key, base in baselines.items():
            if base:
                row[f"{name}_vs_{key}"] = tops / base
    return row


def _fmt(value, spec, missing="–"):
    return missing if value is None or (isinstance(value, float) and math.isnan(value)) \
        else format(value, spec)


def speed_table(rows, names):
    """Markdown: TOPS of every contender, then per intfa contender its ratios over the best FP8
    peer, FA3 BF16 and SDPA cuDNN FP16 ("/FP8 · /FA3 BF16 · /cuDNN")."""
    intfa = [n for n in names if CONTENDERS[n][1] == "intfa"]
    header = (["d", "N", "causal"] + [f"{CONTENDERS[n][0]} TOPS" for n in names] +
              ["best FP8"] + [f"{CONTENDERS[n][0]}: /FP8 · /FA3 BF16 · /cuDNN" for n in intfa])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        cells = [str(r["head_dim"]), str(r["seq"]), "on" if r["causal"] else "off"]
        cells += [_fmt(r.get(n + "_tops"), ".0f") for n in names]
        cells.append(CONTENDERS[r["best_fp8"]][0] if r.get("best_fp8") else "–")
        for n in intfa:
            cells.append(" · ".join(_fmt(r.get(f"{n}_vs_{key}"), ".2f") for key, _ in BASELINES))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def accuracy_table(acc_rows, names):
    """Markdown: one row per (inputs, d, N, causal), a cell per contender:
    relative L2 % · cosine · mean relative error %."""
    header = ["inputs", "d", "N", "causal"] + [CONTENDERS[n][0] for n in names]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    keys = []
    for r in acc_rows:
        key = (r["inputs"], r["head_dim"], r["seq"], r["causal"])
        if key not in keys:
            keys.append(key)
    for key in keys:
        by = {r["contender"]: r for r in acc_rows
              if (r["inputs"], r["head_dim"], r["seq"], r["causal"]) == key}
        cells = [key[0], str(key[1]), str(key[2]), "on" if key[3] else "off"]
        for n in names:
            r = by.get(n)
            cells.append("–" if r is None or "rel_l2" not in r else
                         f"{100 * r['rel_l2']:.2f}% · {r['cosine']:.6f} · {100 * r['mre']:.2f}%")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def short_table(rows, acc_rows, names):
    """The table printed last: per shape the best FP8 peer's TOPS, each intfa contender's ratio
    over it, and the relative L2 (%) of every contender on the first input family."""
    intfa = [n for n in names if CONTENDERS[n][1] == "intfa"]
    family = acc_rows[0]["inputs"] if acc_rows else None
    acc = {(r["head_dim"], r["seq"], r["causal"], r["contender"]): r["rel_l2"]
           for r in acc_rows if r["inputs"] == family and "rel_l2" in r}
    shapes = [(r["head_dim"], r["seq"], r["causal"]) for r in rows]
    shapes += [s for s in dict.fromkeys((k[0], k[1], k[2]) for k in acc) if s not in shapes]
    by_shape = {(r["head_dim"], r["seq"], r["causal"]): r for r in rows}
    header = (["d", "N", "causal", "best FP8 TOPS"] + [f"{n} /FP8" for n in intfa] +
              [f"{n} L2%" for n in names])
    lines = [f"(ratios: TOPS over the best FP8 peer; L2%: relative L2 on {family})",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for shape in shapes:
        r = by_shape.get(shape, {})
        best = (f"{r['best_fp8_tops']:.0f} ({r['best_fp8']})" if r.get("best_fp8") else "–")
        cells = [str(shape[0]), str(shape[1]), "on" if shape[2] else "off", best]
        cells += [_fmt(r.get(f"{n}_vs_best_fp8"), ".2f") for n in intfa]
        cells += [_fmt(None if (shape + (n,)) not in acc else 100 * acc[shape + (n,)], ".2f")
                  for n in names]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def missing_lines(missing):
    """Markdown bullets: each missing contender and why (where: shape or 'all')."""
    return [f"- {name} ({where}): {reason}" for (name, where), reason in missing.items()]


def write_outputs(out_dir, meta, rows, acc_rows, missing, names):
    """compare_peers.json and compare_peers.md under out_dir; returns the short table's lines."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "compare_peers.json"), "w") as f:
        json.dump({**meta, "rows": rows, "accuracy": acc_rows,
                   "missing": [{"contender": n, "where": w, "reason": r}
                               for (n, w), r in missing.items()]}, f, indent=1)
    settings = meta.get("settings", {})
    lines = [f"Device: {meta.get('device')}; {meta.get('date')}; seed {meta.get('seed')}; "
             f"versions {json.dumps(meta.get('versions', {}))}; `{meta.get('command')}`", "",
             f"Speed: B={settings.get('batch')}, H={settings.get('heads')}, TOPS = 4·B·H·N²·d / t "
             "(halved for causal), time_interleaved medians of "
             f"{settings.get('repeats')} rounds; ratios are TOPS over the best FP8 peer's, FA3 "
             "BF16's and SDPA cuDNN FP16's. FP8 peers: "
             f"{settings.get('fp8_note', '')}", ""] + speed_table(rows, names)
    lines += ["", f"Accuracy: B={settings.get('acc_batch')}, H={settings.get('acc_heads')}, "
              "against float64 attention of the original FP16 inputs; each cell relative L2 · "
              "cosine · mean relative error.", ""] + accuracy_table(acc_rows, names)
    if missing:
        lines += ["", "Missing:"] + missing_lines(missing)
    with open(os.path.join(out_dir, "compare_peers.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return short_table(rows, acc_rows, names)


# ---------------------------------------------------------------- the contenders (torch)

class Missing(Exception):
    """A contender that cannot run here (a wheel that does not import, no intfa package...)."""


def as_runtime_error(call, errors, name):
    """`call` with every exception turned into a RuntimeError (time_interleaved drops a contender
    on RuntimeError only) and the last one remembered in errors[name]."""
    def wrapped():
        try:
            return call()
        except Exception as error:  # noqa: BLE001: any failure of a peer is reported, not fatal
            errors[name] = f"{type(error).__name__}: {error}"
            if isinstance(error, RuntimeError):
                raise
            raise RuntimeError(errors[name]) from error
    return wrapped


class Peers:
    """The imported peer modules, each None with the reason in `why` when it does not import."""

    def __init__(self, names, intfa_mode, lib_path):
        import torch
        self.torch = torch
        torch.cuda.current_device()  # torch's CUDA context first: cuDNN's handle shares it
        self.why = {}
        self.versions = {"torch": torch.__version__,
                         "torch_cudnn": torch.backends.cudnn.version()}
        self.fa3 = self.fa3_op = None
        if {"fa3_bf16", "fa3_fp8"} & set(names):
            try:
                import fa3_fwd_interface
                self.fa3 = fa3_fwd_interface
                self.fa3_op = torch.ops.fa3_fwd.fwd
                self.versions["fa3_fwd"] = _dist_version("fa3-fwd")
            except Exception as error:  # noqa: BLE001
                self.why["fa3"] = f"fa3_fwd does not import: {type(error).__name__}: {error}"
        self.cudnn = self.cudnn_handle = None
        if "cudnn_fp8" in names:
            try:
                _prefer_torch_cudnn()
                import cudnn
                self.cudnn = cudnn
                self.cudnn_handle = cudnn.create_handle()
                self.versions["cudnn_frontend"] = getattr(cudnn, "__version__", None)
                self.versions["cudnn_backend"] = cudnn.backend_version_string()
            except Exception as error:  # noqa: BLE001
                self.why["cudnn"] = (f"nvidia-cudnn-frontend does not import or has no handle: "
                                     f"{type(error).__name__}: {error}")
        self.intfa = self.binding = self.lib = None
        self.binding_error = None
        try:
            import intfa
            from intfa_binding import BindingAttention
            self.intfa, self.binding = intfa, BindingAttention
            self.versions["intfa"] = getattr(intfa, "__version__", None)
        except Exception as error:  # noqa: BLE001
            self.binding_error = f"`import intfa` failed: {type(error).__name__}: {error}"
        if intfa_mode == "binding" and self.binding is None:
            self.why["intfa_kernel"] = self.binding_error
        elif intfa_mode == "ctypes" or (intfa_mode == "auto" and self.binding is None):
            try:
                from intfa_ctypes import Intfa
                self.lib = Intfa(lib_path)
                self.binding = None  # the kernel alone through ctypes
            except Exception as error:  # noqa: BLE001: no library, or an older one
                self.why["intfa_kernel"] = f"no intfa: {self.binding_error}; ctypes: {error}"
        if self.intfa is None:
            self.why["intfa_e2e"] = (f"intfa.attention needs the Python package: "
                                     f"{self.binding_error}")

    def reason(self, name):
        """Why `name` cannot run at all, or None."""
        key = {"fa3_bf16": "fa3", "fa3_fp8": "fa3", "cudnn_fp8": "cudnn",
               "intfa_full": "intfa_kernel", "intfa_half": "intfa_kernel"}.get(
                   name, "intfa_e2e" if name.startswith(("intfa_e2e", "intfa_paged")) else None)
        return self.why.get(key)


def _dist_version(name):
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:  # noqa: BLE001
        return None


def _prefer_torch_cudnn():
    """cudnn-frontend dlopens the first libcudnn.so.9 on LD_LIBRARY_PATH, else site-packages':
    put torch's own cuDNN first so that both use one library."""
    candidates = []
    try:
        import nvidia.cudnn
        candidates += [os.path.join(p, "lib") for p in nvidia.cudnn.__path__]
    except ImportError:
        pass
    import torch
    candidates.append(os.path.join(os.path.dirname(torch.__file__), "lib"))
    for folder in candidates:
        if os.path.exists(os.path.join(folder, "libcudnn.so.9")):
            os.environ["LD_LIBRARY_PATH"] = folder + os.pathsep + os.environ.get(
                "LD_LIBRARY_PATH", "")
            return folder
    return None


class Inputs:
    """FP16 q, k, v [B, H, N, D] and, made once on first use, what the peers read: [B, N, H, D]
    BF16 copies and e4m3 quantizations (per (batch, head) or per tensor)."""

    def __init__(self, q, k, v):
        self.q, self.k, self.v = q, k, v
        self.cache = {}

    def get(self, key, make):
        if key not in self.cache:
            self.cache[key] = make()
        return self.cache[key]

    def bnhd(self, dtype):
        return self.get(("bnhd", dtype), lambda: tuple(
            x.transpose(1, 2).contiguous().to(dtype) for x in (self.q, self.k, self.v)))

    def e4m3(self, per):
        """((q8, k8, v8) [B, N, H, D] float8_e4m3fn, (q, k, v) descales: [B, H] float32 for
        per="head", [1] for per="tensor")."""
        def make():
            pairs = [to_e4m3(x, per) for x in self.bnhd(self.q.dtype)]
            return tuple(p[0] for p in pairs), tuple(p[1] for p in pairs)
        return self.get(("e4m3", per), make)


def to_e4m3(x, per, group=1):
    """x [B, N, H, D] 16-bit -> (x * 448 / amax saturated to e4m3, amax / 448): amax per
    (batch, `group` consecutive heads) ([B, H / group] descales; FA3's decode takes Q's per KV
    head) or over the tensor ([1])."""
    import torch
    xf = x.float()
    if per == "head":
        b, n, h, d = xf.shape
        grouped = xf.view(b, n, h // group, group, d)
        amax = grouped.abs().amax(dim=(1, 3, 4)).clamp_min(1e-12)  # [B, H / group]
        scale = E4M3_MAX / amax
        x8 = (grouped * scale[:, None, :, None, None]).clamp_(-E4M3_MAX, E4M3_MAX).view(b, n, h, d)
    else:
        amax = xf.abs().amax().clamp_min(1e-12).reshape(1)
        scale = E4M3_MAX / amax
        x8 = (xf * scale).clamp_(-E4M3_MAX, E4M3_MAX)
    return x8.to(torch.float8_e4m3fn), (1.0 / scale).float().contiguous()


class Run:
    """One contender ready at one input set: call() is what is timed; result() runs it once more
    and returns the output as float32 [B, H, N, D]; context() wraps both."""

    def __init__(self, call, result, context=contextlib.nullcontext):
        self.call, self.result, self.context = call, result, context


def make_sdpa(peers, inputs, causal, backend):
    torch = peers.torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    q, k, v = inputs.q, inputs.k, inputs.v
    chosen = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[backend]

    def call():
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return Run(call, lambda: call().float(), lambda: sdpa_kernel(chosen))


def make_fa3(peers, inputs, causal, fp8, args):
    torch = peers.torch
    if fp8:
        (q, k, v), descales = inputs.e4m3(args.fa3_fp8_scale)
        b, _, h, _ = q.shape
        q_d, k_d, v_d = (d.expand(b, h).contiguous() if d.numel() == 1 else d for d in descales)
    else:
        q, k, v = inputs.bnhd(torch.bfloat16)
        q_d = k_d = v_d = None
    scale = q.shape[-1] ** -0.5
    if args.fa3_call == "op":
        op, splits = peers.fa3_op, args.fa3_num_splits

        def call():  # the schema: fwd(Tensor q, Tensor k, Tensor v, ..., q_descale, k_descale,
            # v_descale, softmax_scale, is_causal, ..., num_splits, ...) -> (out, lse, ...)
            return op(q, k, v, q_descale=q_d, k_descale=k_d, v_descale=v_d,
                      softmax_scale=scale, is_causal=causal, num_splits=splits)[0]
    else:
        func = peers.fa3.flash_attn_func

        def call():
            return func(q, k, v, softmax_scale=scale, causal=causal, q_descale=q_d,
                        k_descale=k_d, v_descale=v_d, num_splits=args.fa3_num_splits)
    return Run(call, lambda: call().float().transpose(1, 2))


def build_cudnn_fp8_graph(cudnn, handle, b, h, n, d, causal, attn_scale):
    """cuDNN's FP8 SDPA forward graph on e4m3 Q, K, V and O stored [B, N, H, D] (dims
    [B, H, N, D] with those strides), scalar descales/scales, Amax_O an output, Amax_S left
    virtual, no stats; causal as the band right_bound=0 from the top-left diagonal. Returns
    (graph, {name: graph tensor}). Needs no torch."""
    e4m3, fp32 = cudnn.data_type.FP8_E4M3, cudnn.data_type.FLOAT
    graph = cudnn.pygraph(io_data_type=e4m3, intermediate_data_type=fp32,
                          compute_data_type=fp32, handle=handle)
    dims, strides = (b, h, n, d), (n * h * d, d, h * d, 1)
    t = {name: graph.tensor(name=name, dim=dims, stride=strides, data_type=e4m3)
         for name in ("q", "k", "v")}
    for name in ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o"):
        t[name] = graph.tensor(name=name, dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=fp32)
    mask = (dict(diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT, right_bound=0)
            if causal else {})
    o, _stats, _amax_s, amax_o = graph.sdpa_fp8(
        q=t["q"], k=t["k"], v=t["v"], descale_q=t["descale_q"], descale_k=t["descale_k"],
        descale_v=t["descale_v"], descale_s=t["descale_s"], scale_s=t["scale_s"],
        scale_o=t["scale_o"], generate_stats=False, attn_scale=attn_scale, name="sdpa_fp8",
        **mask)
    o.set_output(True).set_dim(dims).set_stride(strides).set_data_type(e4m3)
    amax_o.set_output(True).set_dim((1, 1, 1, 1)).set_stride((1, 1, 1, 1)).set_data_type(fp32)
    t["o"], t["amax_o"] = o, amax_o
    return graph, t


def make_cudnn_fp8(peers, inputs, causal, args):
    torch, cudnn, handle = peers.torch, peers.cudnn, peers.cudnn_handle
    (q8, k8, v8), (q_d, k_d, v_d) = inputs.e4m3("tensor")
    b, n, h, d = q8.shape
    stream = torch.cuda.current_stream().cuda_stream
    cudnn.set_stream(handle, stream)
    graph, t = build_cudnn_fp8_graph(cudnn, handle, b, h, n, d, causal, d ** -0.5)
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    graph.check_support()
    graph.build_plans()
    workspace = torch.empty(max(1, graph.get_workspace_size()), dtype=torch.uint8,
                            device=q8.device)
    scalar = lambda x: torch.full((1, 1, 1, 1), float(x), dtype=torch.float32,  # noqa: E731
                                  device=q8.device)
    scale_o = scalar(1.0)
    o = torch.empty((b, n, h, d), dtype=torch.float8_e4m3fn, device=q8.device)
    amax_o = scalar(0.0)
    pack = {t["q"]: q8, t["k"]: k8, t["v"]: v8, t["descale_q"]: q_d.reshape(1, 1, 1, 1),
            t["descale_k"]: k_d.reshape(1, 1, 1, 1), t["descale_v"]: v_d.reshape(1, 1, 1, 1),
            t["descale_s"]: scalar(1.0 / args.cudnn_scale_s),
            t["scale_s"]: scalar(args.cudnn_scale_s), t["scale_o"]: scale_o, t["o"]: o,
            t["amax_o"]: amax_o}

    def call():
        graph.execute(pack, workspace, handle=handle)
    # Calibrate scale_o: with scale_o = 1 the output holds O itself, amax|O| both ways.
    call()
    torch.cuda.synchronize()
    amax = max(float(o.float().abs().max()), float(amax_o.item()), 1e-30)
    scale_o.fill_(2.0 ** math.floor(math.log2(E4M3_MAX / amax)))

    def result():
        call()
        return (o.float() / scale_o.reshape(1)).transpose(1, 2)
    return Run(call, result)


def intfa_options(peers):
    """The library's default numerics as the Options struct BindingAttention/IntfaAttention read."""
    from intfa_ctypes import Options
    options = Options()
    if peers.lib is not None:
        peers.lib.lib.intfa_default_options(ctypes.byref(options))
        return options
    # Through the package: its defaults by name, to the C enums' values (their index), for each
    # numerics option the ctypes struct has.
    from intfa._checks import NUMERICS_FIELDS
    members = {name for name, _ in Options._fields_}
    for field in NUMERICS_FIELDS:
        if field["name"] in members:
            setattr(options, field["name"], list(field["values"]).index(field["default"]))
    return options


def make_intfa_kernel(peers, inputs, causal, variant):
    from intfa_ctypes import IntfaAttention
    options = intfa_options(peers)
    if peers.binding is not None:
        run = peers.binding(inputs.q, inputs.k, inputs.v, causal, variant, options)
        return Run(run.attend, lambda: run.attend().float())
    run = IntfaAttention(peers.lib, inputs.q, inputs.k, inputs.v, causal, variant, options)

    def result():
        run.attend()
        return run.out.float()
    return Run(run.attend, result)


def make_intfa_e2e(peers, inputs, causal, **numerics):
    attention, (q, k, v) = peers.intfa.attention, (inputs.q, inputs.k, inputs.v)

    def call():  # fallback="error": a problem intfa does not serve raises, not SDPA's timing
        return attention(q, k, v, is_causal=causal, fallback="error", **numerics)
    return Run(call, lambda: call().float())


def make_intfa_paged_prefill(peers, inputs, causal, page_size=64):
    torch, intfa = peers.torch, peers.intfa
    b, h, n, d = inputs.q.shape
    pages = -(-n // page_size)
    cache = intfa.PagedKVCache(b * pages, page_size, h, d, bits=8, device=inputs.q.device)
    table = torch.randperm(b * pages, device=inputs.q.device).int().view(b, pages)
    position = torch.arange(n, device=inputs.q.device)
    slots = (table[:, position // page_size].long() * page_size + position % page_size)
    rows = [x.transpose(1, 2).reshape(b * n, h, d) for x in (inputs.q, inputs.k, inputs.v)]
    cache.append(rows[1], rows[2], slots.reshape(-1))
    q_rows = rows[0].contiguous()
    starts = torch.arange(0, (b + 1) * n, n, dtype=torch.int32, device=inputs.q.device)
    lengths = torch.full((b,), n, dtype=torch.int32, device=inputs.q.device)

    def call():
        return cache.prefill(q_rows, starts, table, lengths, max_q_len=n, max_seq_len=n,
                             kv_tokens=b * n, causal=causal)
    return Run(call, lambda: call().view(b, n, h, d).transpose(1, 2).float())


def make_run(name, peers, inputs, causal, args):
    from intfa_ctypes import FULL_INT8, HALF_INT8
    reason = peers.reason(name)
    if reason:
        raise Missing(reason)
    if name in ("sdpa_cudnn", "sdpa_flash"):
        return make_sdpa(peers, inputs, causal, name.split("_")[1])
    if name in ("fa3_bf16", "fa3_fp8"):
        return make_fa3(peers, inputs, causal, name == "fa3_fp8", args)
    if name == "cudnn_fp8":
        return make_cudnn_fp8(peers, inputs, causal, args)
    if name in ("intfa_full", "intfa_half"):
        return make_intfa_kernel(peers, inputs, causal,
                                 FULL_INT8 if name == "intfa_full" else HALF_INT8)
    if name == "intfa_paged_prefill":
        return make_intfa_paged_prefill(peers, inputs, causal)
    numerics = {"intfa_e2e": {}, "intfa_e2e_kblock": {"k_granularity": "block"},
                "intfa_e2e_kvblock": {"k_granularity": "block", "v_granularity": "block"},
                "intfa_e2e_half": {"variant": "half_int8"}}[name]
    return make_intfa_e2e(peers, inputs, causal, **numerics)


def build_runs(names, peers, inputs, causal, args, where, missing):
    """{name: Run} of those that build and run once without an error; the others go to
    missing[(name, where)] with the reason."""
    runs = {}
    for name in names:
        try:
            run = make_run(name, peers, inputs, causal, args)
            with run.context():
                run.call()
            peers.torch.cuda.synchronize()
            runs[name] = run
        except Missing as error:
            missing[(name, "all")] = str(error)
        except Exception as error:  # noqa: BLE001: a failing peer is reported, the rest run
            missing[(name, where)] = f"{type(error).__name__}: {error}".strip()
            print(f"{name} failed at {where}:\n{traceback.format_exc()}", file=sys.stderr)
    return runs


def float64_reference(q, k, v, causal, budget_bytes=1 << 31):
    """softmax(q k^T / sqrt(d)) v in float64 over the FP16 inputs [B, H, N, D], the causal mask
    top-left aligned (N_q = N_kv), a chunk of query rows at a time."""
    import torch
    b, h, n, d = q.shape
    q64, k64, v64 = q.double(), k.double(), v.double()
    out = torch.empty_like(q64)
    rows = max(1, min(n, budget_bytes // (8 * b * h * n)))
    keys = torch.arange(n, device=q.device)
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        scores = torch.matmul(q64[:, :, start:stop], k64.transpose(-1, -2)) * d ** -0.5
        if causal:
            queries = torch.arange(start, stop, device=q.device)[:, None]
            scores.masked_fill_(keys[None, :] > queries, float("-inf"))
        out[:, :, start:stop] = torch.matmul(torch.softmax(scores, dim=-1), v64)
        del scores
    return out


def main(argv=None):
    args = parse_args(argv)
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from accuracy import INPUT_FAMILIES, error_metrics, random_inputs
    from compare_sdpa import time_interleaved

    families = list(INPUT_FAMILIES) if args.inputs == "all" else args.inputs.split(",")
    unknown = [f for f in families if f not in INPUT_FAMILIES]
    if unknown:
        sys.exit(f"--inputs: unknown {unknown}; known: {INPUT_FAMILIES}")
    seed = int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(seed)
    print(f"seed {seed}", flush=True)
    names = args.contender_list
    peers = Peers(names, args.intfa, args.lib)
    device = torch.cuda.get_device_name()
    path = ("binding" if peers.binding is not None else
            "ctypes" if peers.lib is not None else "none")
    print(f"device {device}; versions {json.dumps(peers.versions)}; intfa kernel via {path}",
          flush=True)
    for key, reason in peers.why.items():
        print(f"missing {key}: {reason}", flush=True)
    missing, rows, acc_rows = {}, [], []
    errors = {}
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    def meta():  # the settings and versions, written with every save
        fa3_per = "(batch, head)" if args.fa3_fp8_scale == "head" else "tensor"
        fa3_how = ("through torch.ops.fa3_fwd.fwd" if args.fa3_call == "op" else
                   "by flash_attn_func")
        fp8_note = (f"FA3 FP8 amax-scaled to e4m3 per {fa3_per}; cuDNN FP8 per tensor, scale_s "
                    f"{args.cudnn_scale_s:g}, scale_o calibrated (power of two at or below 448 "
                    f"/ amax|O|), FP8 output; FA3 called {fa3_how}, num_splits "
                    f"{args.fa3_num_splits}")
        return {"device": device, "date": stamp, "command": " ".join(sys.argv), "seed": seed,
                "versions": peers.versions, "intfa_kernel_path": path,
                "settings": {"batch": args.batch, "heads": args.heads, "repeats": args.repeats,
                             "turn_ms": args.turn_ms, "acc_batch": args.acc_batch,
                             "acc_heads": args.acc_heads, "inputs": families,
                             "fa3_fp8_scale": args.fa3_fp8_scale, "fa3_call": args.fa3_call,
                             "fa3_num_splits": args.fa3_num_splits,
                             "cudnn_scale_s": args.cudnn_scale_s, "fp8_note": fp8_note}}

    def save():  # after every shape, so that a run stopped at its time limit keeps its rows
        return write_outputs(args.out_dir, meta(), rows, acc_rows, missing, names)

    with torch.no_grad():
        if not args.no_speed:
            for d in args.head_dim_list:
                for causal in args.causal_list:
                    for n in args.seq_list:
                        where = f"d={d} N={n} causal={'on' if causal else 'off'}"
                        shape = (args.batch, args.heads, n, d)
                        inputs = Inputs(*random_inputs("normal", shape))
                        runs = build_runs(names, peers, inputs, causal, args, where, missing)
                        errors.clear()
                        contenders = {name: (as_runtime_error(run.call, errors, name),
                                             run.context) for name, run in runs.items()}
                        medians, turns = time_interleaved(contenders, args.repeats, where,
                                                          turn_ms=args.turn_ms)
                        row = {"device": device, "head_dim": d, "seq": n, "causal": causal,
                               "batch": args.batch, "heads": args.heads,
                               "calls_per_turn": turns}
                        row.update(medians)
                        ops = attention_ops(args.batch, args.heads, n, d, causal)
                        for name in runs:
                            if name + "_ms" in row:
                                row[name + "_tops"] = ops / row[name + "_ms"] / 1e9
                            else:
                                missing[(name, where)] = (
                                    "failed while timed: " + errors.get(name, "see the log"))
                        add_ratios(row, names)
                        rows.append(row)
                        print(json.dumps(row), flush=True)
                        save()
                        del runs, contenders, inputs
                        torch.cuda.empty_cache()
        if not args.no_accuracy:
            for family in families:
                for d in args.head_dim_list:
                    for causal in args.causal_list:
                        for n in args.acc_seq_list:
                            where = (f"accuracy {family} d={d} N={n} "
                                     f"causal={'on' if causal else 'off'}")
                            shape = (args.acc_batch, args.acc_heads, n, d)
                            inputs = Inputs(*random_inputs(family, shape))
                            reference = float64_reference(inputs.q, inputs.k, inputs.v, causal)
                            runs = build_runs(names, peers, inputs, causal, args, where, missing)
                            for name, run in runs.items():
                                row = {"contender": name, "inputs": family, "head_dim": d,
                                       "seq": n, "causal": causal, "batch": args.acc_batch,
                                       "heads": args.acc_heads}
                                try:
                                    with run.context():
                                        output = run.result()
                                    row.update(error_metrics(output, reference))
                                except Exception as error:  # noqa: BLE001
                                    missing[(name, where)] = f"{type(error).__name__}: {error}"
                                    continue
                                acc_rows.append(row)
                                print(json.dumps(row), flush=True)
                            save()
                            del runs, inputs, reference
                            torch.cuda.empty_cache()

    short = save()
    print(open(os.path.join(args.out_dir, "compare_peers.md")).read())
    if missing:
        print("missing:\n" + "\n".join(missing_lines(missing)))
    print(f"\n=== peers (seed {seed}; {device}) ===")
    print("\n".join(short))


if __name__ == "__main__":
    main()
