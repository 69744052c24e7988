#!/usr/bin/env python3
"""Times intfa's paged INT8/INT4 decode (its C API through ctypes) and PyTorch SDPA FP16 with the
cuDNN back end in the same process, on the same logical K/V, with CUDA events (warm-up, median of
--repeats runs; each contender timed in both orders, the lower median kept), and reports the
ratios issue 28 sets targets for.

Two timings of each contender (--timing):
  graph  a CUDA graph of --graph-rounds passes over the input sets, replayed; the time per call.
         A serving loop runs decode this way (captured once, replayed per step), and it is the
         GPU's time alone: no launch latency of the host sits inside the measured span.
  call   one call between two events, synchronized after each: the start event is recorded before
         the host has launched anything, so the span also holds the host's launch path: ctypes and
         intfa's C++ for intfa (15-20 us on the lent H100 hosts), PyTorch's dispatch and cuDNN's
         graph lookup for SDPA (40-100 us there), which is why per-call ratios come out above the
         graph ones.
Each contender gets --input-sets copies of its K/V (fresh random data each, the same logical
values for both), taken in turn, so that no call finds its bytes in the L2 (50 MB) left there by
the call before: true where the other sets hold more than the L2 (the default shapes: 151 MB
and more per INT4 set), not for small --shapes.

intfa reads a paged cache (pages in random order, filled by intfa_paged_append from the same FP16
K/V SDPA gets); SDPA reads dense FP16 [B, H_kv, N, D] K/V with enable_gqa. Queries see every key
(no mask). Bandwidth = the bytes each must read (intfa: INT8/INT4 K/V and their scales; SDPA: FP16
K/V) / time; the device's copy bandwidth (a 1 GiB device-to-device copy, read + write) is the
yardstick. Each intfa output is also checked against float32 attention of the FP16 K/V.

    python3 bench/compare_decode.py --lib build/lib/libintfa.so --out-dir $OUT
"""
import argparse
import ctypes
import json
import math
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from intfa_ctypes import F16, Tensor, time_ms


class PagedCache(ctypes.Structure):
    _fields_ = [("num_pages", ctypes.c_int), ("page_size", ctypes.c_int),
                ("heads_kv", ctypes.c_int), ("head_dim", ctypes.c_int), ("bits", ctypes.c_int),
                ("k_data", ctypes.c_void_p), ("v_data", ctypes.c_void_p),
                ("k_scale", ctypes.c_void_p), ("v_scale", ctypes.c_void_p),
                ("k_offset", ctypes.c_void_p)]


class DecodeProblem(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int), ("q_len", ctypes.c_int), ("heads_q", ctypes.c_int),
                ("max_pages", ctypes.c_int), ("max_seq_len", ctypes.c_int),
                ("causal", ctypes.c_int)]


class DecodeTensors(ctypes.Structure):
    _fields_ = [("q", Tensor), ("out", Tensor), ("lse", ctypes.c_void_p),
                ("block_table", ctypes.c_void_p), ("seq_lens", ctypes.c_void_p),
                ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t)]


class DecodeOptions(ctypes.Structure):
    _fields_ = [("softmax_scale", ctypes.c_double), ("num_splits", ctypes.c_int),
                ("block_rows", ctypes.c_int), ("stage_tokens", ctypes.c_int),
                ("stages", ctypes.c_int)]


def strides4(tensor, order):
    """ctypes int64[4] of `tensor`'s strides taken in `order` (the C API's [batch, heads, seq,
    head_dim] view)."""
    return (ctypes.c_int64 * 4)(*[tensor.stride(i) for i in order])


class IntfaDecode:
    """One problem's paged cache, filled from dense FP16 K/V, ready to time."""

    def __init__(self, lib, k, v, q, bits, page_size):
        self.lib = lib
        batch, heads_kv, seq, head_dim = k.shape
        _, heads_q, q_len, _ = q.shape
        pages_per_sequence = -(-seq // page_size)
        num_pages = batch * pages_per_sequence
        row = head_dim * bits // 8
        groups = 1 if bits == 8 else head_dim // 32
        scale_dtype = torch.float32 if bits == 8 else torch.float16
        shape = (num_pages, heads_kv, page_size)
        self.k_data = torch.empty(shape + (row,), dtype=torch.uint8, device="cuda")
        self.v_data = torch.empty_like(self.k_data)
        self.k_scale = torch.empty(shape + ((groups,) if bits == 4 else ()), dtype=scale_dtype,
                                   device="cuda")
        self.v_scale = torch.empty_like(self.k_scale)
        self.cache = PagedCache(num_pages, page_size, heads_kv, head_dim, bits,
                                self.k_data.data_ptr(), self.v_data.data_ptr(),
                                self.k_scale.data_ptr(), self.v_scale.data_ptr(), None)
        generator = torch.Generator().manual_seed(1)
        pool = torch.randperm(num_pages, generator=generator).to(torch.int32)
        self.table = pool.view(batch, pages_per_sequence).cuda()
        self.lengths = torch.full((batch,), seq, dtype=torch.int32, device="cuda")
        # Append each sequence's tokens: [tokens, heads_kv, d] rows into their slots.
        positions = torch.arange(seq, device="cuda")
        for b in range(batch):
            slots = (self.table[b, positions // page_size].long() * page_size +
                     positions % page_size).to(torch.int32)
            rows_k = k[b].transpose(0, 1).contiguous()
            rows_v = v[b].transpose(0, 1).contiguous()
            view = lambda t: Tensor(t.data_ptr(), F16, (ctypes.c_int64 * 4)(  # noqa: E731
                0, t.stride(1), t.stride(0), 1))
            self.check(lib.intfa_paged_append(ctypes.byref(self.cache), ctypes.byref(view(rows_k)),
                                              ctypes.byref(view(rows_v)),
                                              ctypes.c_void_p(slots.data_ptr()), seq, None),
                       "intfa_paged_append")
        torch.cuda.synchronize()
        self.q = q.transpose(1, 2).contiguous()  # [B, q_len, H_q, d]
        self.out = torch.empty_like(self.q)
        self.problem = DecodeProblem(batch, q_len, heads_q, pages_per_sequence, seq, 0)
        self.options = DecodeOptions(0.0, 0, 0, 0, 0)
        workspace_bytes = ctypes.c_size_t()
        self.check(lib.intfa_paged_decode_workspace_bytes(
            ctypes.byref(self.cache), ctypes.byref(self.problem), ctypes.byref(self.options),
            ctypes.byref(workspace_bytes)), "intfa_paged_decode_workspace_bytes")
        splits = ctypes.c_int()
        self.check(lib.intfa_paged_decode_splits(ctypes.byref(self.cache),
                                                 ctypes.byref(self.problem),
                                                 ctypes.byref(self.options),
                                                 ctypes.byref(splits)), "intfa_paged_decode_splits")
        self.splits = splits.value
        self.workspace = torch.empty(max(workspace_bytes.value, 256), dtype=torch.uint8,
                                     device="cuda")
        order = (0, 2, 1, 3)  # [B, q_len, H, d] tensors as [B, H, q_len, d] views
        self.tensors = DecodeTensors(Tensor(self.q.data_ptr(), F16, strides4(self.q, order)),
                                     Tensor(self.out.data_ptr(), F16, strides4(self.out, order)),
                                     None, self.table.data_ptr(), self.lengths.data_ptr(),
                                     self.workspace.data_ptr(), self.workspace.numel())
        # K and V with their scales, for the tokens the sequences hold.
        scale_bytes = groups * self.k_scale.element_size()
        self.bytes_read = 2 * batch * seq * heads_kv * (row + scale_bytes)

    def check(self, status, what):
        if status != 0:
            raise RuntimeError(f"{what}: {self.lib.intfa_last_error().decode()}")

    def __call__(self):
        self.check(self.lib.intfa_paged_decode(
            ctypes.byref(self.cache), ctypes.byref(self.problem), ctypes.byref(self.tensors),
            ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), ctypes.byref(self.options)),
            "intfa_paged_decode")

    def output(self):
        return self.out.transpose(1, 2)  # [B, H, q_len, d]


def cycling(calls):
    """One callable that makes the next of `calls` (one per input set) on each call."""
    state = {"next": 0}

    def call():
        calls[state["next"]]()
        state["next"] = (state["next"] + 1) % len(calls)
    return call


def graph_ms(calls, repeats, rounds):
    """Median time per call of a CUDA graph that makes every call of `calls` `rounds` times."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture: compiles, workspaces, handles
        for call in calls:
            call()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(rounds):
            for call in calls:
                call()
    graph.replay()
    torch.cuda.synchronize()
    count = rounds * len(calls)
    return time_ms(graph.replay, repeats, warmup=2) / count


def time_in_both_orders(contenders, repeats, timing, rounds):
    """{name: ms per call or None}: each contender (a list of calls, one per input set) timed in
    the listed order and then reversed, the lower median kept."""
    best = {}
    for order in (list(contenders), list(reversed(contenders))):
        for name in order:
            if best.get(name, 0) is None:
                continue
            try:
                if timing == "graph":
                    ms = graph_ms(contenders[name], repeats, rounds)
                else:
                    ms = time_ms(cycling(contenders[name]), repeats)
            except RuntimeError as error:
                print(f"{name} ({timing}) failed: {error}", file=sys.stderr)
                best[name] = None
                continue
            best[name] = ms if name not in best else min(best[name], ms)
    return best


def device_copy_gbps(repeats):
    source = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    target = torch.empty_like(source)
    ms = time_ms(lambda: target.copy_(source), repeats)
    del source, target
    torch.cuda.empty_cache()
    return 2 * (1 << 30) / ms / 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", default="build/lib/libintfa.so")
    parser.add_argument("--shapes", default="8x32768x1,32x4096x1,8x32768x16",
                        help="BATCHxSEQxQUERIES, comma-separated")
    parser.add_argument("--bits", default="8,4")
    parser.add_argument("--heads-q", type=int, default=32)
    parser.add_argument("--heads-kv", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--timing", default="graph,call",
                        help="graph (CUDA graph replays, per call) and/or call (one call per "
                             "event pair, the host's launch path inside)")
    parser.add_argument("--input-sets", type=int, default=3,
                        help="copies of each contender's K/V, taken in turn (L2 reuse)")
    parser.add_argument("--graph-rounds", type=int, default=4,
                        help="passes over the input sets in one captured graph")
    parser.add_argument("--out-dir", default=".")
    args = parser.parse_args()
    timings = args.timing.split(",")
    for timing in timings:
        if timing not in ("graph", "call"):
            parser.error(f"--timing: {timing!r} is neither graph nor call")

    lib = ctypes.CDLL(args.lib)
    lib.intfa_last_error.restype = ctypes.c_char_p
    torch.manual_seed(0)
    copy_gbps = device_copy_gbps(args.repeats)
    gpu = torch.cuda.get_device_name()
    print(f"{gpu}: device copy {copy_gbps:.0f} GB/s (read + write)")
    rows = []
    for text in args.shapes.split(","):
        batch, seq, q_len = (int(part) for part in text.split("x"))
        d = args.head_dim
        q = torch.randn(batch, args.heads_q, q_len, d, device="cuda", dtype=torch.float16)
        sets = []
        for _ in range(args.input_sets):
            k = torch.randn(batch, args.heads_kv, seq, d, device="cuda", dtype=torch.float16)
            sets.append((k, torch.randn_like(k)))
        k, v = sets[0]
        reference = torch.nn.functional.scaled_dot_product_attention(
            q.float(), k.float(), v.float(), enable_gqa=True)

        def sdpa_call(k, v):
            def sdpa():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    return torch.nn.functional.scaled_dot_product_attention(q, k, v,
                                                                            enable_gqa=True)
            return sdpa

        sdpa_calls = [sdpa_call(k, v) for k, v in sets]
        sdpa_bytes = 2 * k.numel() * 2
        for bits in (int(b) for b in args.bits.split(",")):
            decodes = [IntfaDecode(lib, k, v, q, bits, args.page_size) for k, v in sets]
            decode = decodes[0]
            decode.out.fill_(float("nan"))
            decode()
            torch.cuda.synchronize()
            error = ((decode.output().float() - reference).norm() / reference.norm()).item()
            row = dict(gpu=gpu, batch=batch, seq=seq, q_len=q_len, heads_q=args.heads_q,
                       heads_kv=args.heads_kv, head_dim=d, bits=bits, splits=decode.splits,
                       copy_gbps=copy_gbps, rel_l2_vs_fp32=error, input_sets=args.input_sets)
            for timing in timings:
                times = time_in_both_orders({"intfa": decodes, "sdpa_cudnn": sdpa_calls},
                                            args.repeats, timing, args.graph_rounds)
                intfa_ms, sdpa_ms = times.get("intfa"), times.get("sdpa_cudnn")
                row[timing] = dict(
                    intfa_ms=intfa_ms, sdpa_cudnn_ms=sdpa_ms,
                    intfa_gbps=decode.bytes_read / intfa_ms / 1e6 if intfa_ms else None,
                    sdpa_gbps=sdpa_bytes / sdpa_ms / 1e6 if sdpa_ms else None,
                    speedup=sdpa_ms / intfa_ms if intfa_ms and sdpa_ms else None)
            rows.append(row)
            print(json.dumps(row), flush=True)
            del decodes, decode
            torch.cuda.empty_cache()
        del k, v, q, sets, sdpa_calls, reference
        torch.cuda.empty_cache()

    def fmt(value, spec):
        return "-" if value is None else format(value, spec)

    for timing in timings:
        print()
        print(f"timing: {timing}")
        print("| B | N | queries | cache | intfa ms | intfa GB/s (of copy) | SDPA cuDNN FP16 ms "
              "| SDPA GB/s | speedup | rel. L2 vs fp32 |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in rows:
            t = r[timing]
            share = f" ({t['intfa_gbps'] / r['copy_gbps']:.0%})" if t["intfa_gbps"] else ""
            print(f"| {r['batch']} | {r['seq']} | {r['q_len']} | INT{r['bits']} "
                  f"| {fmt(t['intfa_ms'], '.3f')} | {fmt(t['intfa_gbps'], '.0f')}{share} "
                  f"| {fmt(t['sdpa_cudnn_ms'], '.3f')} | {fmt(t['sdpa_gbps'], '.0f')} "
                  f"| {fmt(t['speedup'], '.2f')}x | {r['rel_l2_vs_fp32']:.3%} |")
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "compare_decode.json"), "w") as stream:
        json.dump(rows, stream, indent=1)
    return 0 if all(r[t]["intfa_ms"] for r in rows for t in timings) else 1

if __name__ == "__main__":
    sys.exit(main())
