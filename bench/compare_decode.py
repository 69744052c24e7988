#!/usr/bin/env python3
"""Times intfa's paged INT8/INT4 decode (its C API through ctypes) against PyTorch SDPA FP16 with
the cuDNN back end and FlashAttention-3's FP8 decode (`flash_attn_with_kvcache` of the PyPI
`fa3-fwd` wheel on dense e4m3 K/V, when it imports: carry it as scripts/device/peers.sh says) in
the same process, on the same logical K/V, interleaved, and reports the ratios issues 28 and 47
set targets for.

Timing (bench/compare_sdpa.py's time_interleaved): after each contender's warm-up, one turn of
each in turn (about 2 ms of calls), the order reversed every round, the median per call kept.
What a turn is (--timing):
  graph  a replay of a CUDA graph of --graph-rounds passes over the input sets; the time per
         call. A serving loop runs decode this way (captured once, replayed per step), and it is
         the GPU's time alone: no launch latency of the host sits inside the measured span.
  call   back-to-back calls, cycling over the input sets: the span also holds each call's host
         launch path (ctypes and intfa's C++; PyTorch's dispatch and cuDNN's graph lookup; FA3's
         Python wrapper) wherever the host is slower than the GPU.
Each contender gets --input-sets copies of its K/V (fresh random data each, the same logical
values for all), taken in turn, so that no call finds its bytes in the L2 (50 MB) left there by
the call before: true where the other sets hold more than the L2 (the default shapes: 151 MB
and more per INT4 set), not for small --shapes.

intfa reads a paged cache (pages in random order, filled by intfa_paged_append from the same FP16
K/V SDPA gets); SDPA reads dense FP16 [B, H_kv, N, D] K/V with enable_gqa; FA3 FP8 reads dense
e4m3 [B, N, H_kv, D] K/V and an e4m3 query, each scaled per (batch, KV head) to e4m3's range
(descales as FA3 takes them). Queries see every key (no mask). Bandwidth = the bytes each must
read (intfa: INT8/INT4 K/V and their scales; SDPA: FP16 K/V; FA3: e4m3 K/V) / time; the device's
copy bandwidth (a 1 GiB device-to-device copy, read + write) is the yardstick. Each output is
also checked against float32 attention of the FP16 K/V.

A shape is BATCHxSEQxQUERIES, optionally followed by :HEADS_Q/HEADS_KV and then @PAGE_SIZE, in
that order (else --heads-q, --heads-kv, --page-size): issue 47's B=1 long context is
1x131072x1:64/8@64.

    python3 bench/compare_decode.py --lib build/lib/libintfa.so --out-dir $OUT
"""
import argparse
import contextlib
import ctypes
import json
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from compare_peers import to_e4m3
from compare_sdpa import time_interleaved
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

    def __init__(self, lib, k, v, q, bits, page_size, splits=0):
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
        self.options = DecodeOptions(0.0, splits, 0, 0, 0)
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


def graph_replay(calls, rounds):
    """(replay, calls per replay): a CUDA graph that makes every call of `calls` `rounds` times."""
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
    return graph.replay, rounds * len(calls)


def time_contenders(contenders, repeats, timing, rounds, where):
    """{name: ms per call} of the contenders (name: a list of calls, one per input set) timed
    interleaved; one that fails (to capture, or to run) is left out and said."""
    turns, per_turn = {}, {}
    for name, calls in contenders.items():
        try:
            if timing == "graph":
                turns[name], per_turn[name] = graph_replay(calls, rounds)
            else:
                turns[name], per_turn[name] = cycling(calls), 1
        except Exception as error:  # noqa: BLE001: a peer that cannot be captured is left out
            print(f"{name} ({timing}) failed at {where}: {type(error).__name__}: {error}",
                  file=sys.stderr)
    medians, _ = time_interleaved({name: (turn, contextlib.nullcontext)
                                   for name, turn in turns.items()}, repeats, where)
    return {name: medians[name + "_ms"] / per_turn[name] for name in turns
            if name + "_ms" in medians}


def fa3_fp8_calls(fa3, q, sets):
    """One call per (k, v) of `sets` (FP16 [B, H_kv, N, d]) of FA3's FP8 decode
    (flash_attn_with_kvcache) of q [B, H_q, q_len, d]: e4m3 K and V with descales per (batch, KV
    head), Q's per (batch, KV head) too (the shape FA3 takes), all made before timing."""
    group = q.shape[1] // sets[0][0].shape[1]
    q8, q_descale = to_e4m3(q.transpose(1, 2).contiguous(), "head", group)
    calls = []
    for k, v in sets:
        k8, k_descale = to_e4m3(k.transpose(1, 2).contiguous(), "head")
        v8, v_descale = to_e4m3(v.transpose(1, 2).contiguous(), "head")

        def call(k8=k8, v8=v8, k_descale=k_descale, v_descale=v_descale):
            return fa3.flash_attn_with_kvcache(q8, k8, v8, q_descale=q_descale,
                                               k_descale=k_descale, v_descale=v_descale)
        calls.append(call)
    return calls


def import_fa3():
    """(module, None) or (None, why): the fa3-fwd wheel's Python interface."""
    try:
        import fa3_fwd_interface
        return fa3_fwd_interface, None
    except Exception as error:  # noqa: BLE001: not installed, or built for another torch
        return None, f"fa3_fwd does not import: {type(error).__name__}: {error}"


def parse_shape(text, args):
    """BATCHxSEQxQUERIES[:HEADS_Q/HEADS_KV][@PAGE_SIZE] -> dict."""
    page_size = args.page_size
    if "@" in text:
        text, page = text.split("@")
        page_size = int(page)
    heads_q, heads_kv = args.heads_q, args.heads_kv
    if ":" in text:
        text, heads = text.split(":")
        heads_q, heads_kv = (int(h) for h in heads.split("/"))
    batch, seq, q_len = (int(part) for part in text.split("x"))
    return dict(batch=batch, seq=seq, q_len=q_len, heads_q=heads_q, heads_kv=heads_kv,
                page_size=page_size)


def device_copy_gbps(repeats):
    source = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    target = torch.empty_like(source)
    ms = time_ms(lambda: target.copy_(source), repeats)
    source = target = None  # freed before the shapes' inputs are made
    torch.cuda.empty_cache()
    return 2 * (1 << 30) / ms / 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lib", default="build/lib/libintfa.so")
    parser.add_argument("--shapes", default="8x32768x1,32x4096x1,64x8192x1,1x131072x1:64/8@64",
                        help="BATCHxSEQxQUERIES[:HEADS_Q/HEADS_KV][@PAGE_SIZE], comma-separated "
                             "(the default: issue 47's table)")
    parser.add_argument("--bits", default="8,4")
    parser.add_argument("--heads-q", type=int, default=32)
    parser.add_argument("--heads-kv", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--splits", type=int, default=0,
                        help="intfa's split count (options.num_splits; 0: the heuristic's)")
    parser.add_argument("--peers", default="sdpa_cudnn,fa3_fp8",
                        help="sdpa_cudnn and/or fa3_fp8 (FA3 when its wheel imports)")
    parser.add_argument("--repeats", type=int, default=30, help="rounds of interleaved turns")
    parser.add_argument("--timing", default="graph,call",
                        help="graph (CUDA graph replays, per call) and/or call (back-to-back "
                             "calls, the host's launch path inside)")
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
    peers = args.peers.split(",") if args.peers else []
    for peer in peers:
        if peer not in ("sdpa_cudnn", "fa3_fp8"):
            parser.error(f"--peers: {peer!r} is neither sdpa_cudnn nor fa3_fp8")
    shapes = [parse_shape(text, args) for text in args.shapes.split(",")]

    lib = ctypes.CDLL(args.lib)
    lib.intfa_last_error.restype = ctypes.c_char_p
    fa3 = None
    if "fa3_fp8" in peers:
        fa3, why = import_fa3()
        if fa3 is None:
            print(f"missing fa3_fp8: {why}", flush=True)
            peers.remove("fa3_fp8")
    torch.manual_seed(0)
    copy_gbps = device_copy_gbps(args.repeats)
    gpu = torch.cuda.get_device_name()
    print(f"{gpu}: device copy {copy_gbps:.0f} GB/s (read + write)")
    rows = []
    for shape in shapes:
        batch, seq, q_len = shape["batch"], shape["seq"], shape["q_len"]
        heads_q, heads_kv, page_size = shape["heads_q"], shape["heads_kv"], shape["page_size"]
        d = args.head_dim
        where = f"B={batch} N={seq} q={q_len} H={heads_q}/{heads_kv} page {page_size}"
        q = torch.randn(batch, heads_q, q_len, d, device="cuda", dtype=torch.float16)
        sets = []
        for _ in range(args.input_sets):
            k = torch.randn(batch, heads_kv, seq, d, device="cuda", dtype=torch.float16)
            sets.append((k, torch.randn_like(k)))
        k, v = sets[0]
        reference = torch.nn.functional.scaled_dot_product_attention(
            q.float(), k.float(), v.float(), enable_gqa=True)

        def relative_l2(output):  # output [B, H_q, q_len, d]
            return ((output.float() - reference).norm() / reference.norm()).item()

        def sdpa_call(k, v):
            def sdpa():
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    return torch.nn.functional.scaled_dot_product_attention(q, k, v,
                                                                            enable_gqa=True)
            return sdpa

        peer_calls, peer_bytes, peer_errors = {}, {}, {}
        if "sdpa_cudnn" in peers:
            peer_calls["sdpa_cudnn"] = [sdpa_call(k, v) for k, v in sets]
            peer_bytes["sdpa_cudnn"] = 2 * k.numel() * 2
            peer_errors["sdpa_cudnn"] = relative_l2(peer_calls["sdpa_cudnn"][0]())
        if "fa3_fp8" in peers:
            try:
                peer_calls["fa3_fp8"] = fa3_fp8_calls(fa3, q, sets)
                peer_bytes["fa3_fp8"] = 2 * k.numel()
                peer_errors["fa3_fp8"] = relative_l2(peer_calls["fa3_fp8"][0]().transpose(1, 2))
            except Exception as error:  # noqa: BLE001: a shape FA3 does not serve
                print(f"fa3_fp8 failed at {where}: {type(error).__name__}: {error}",
                      file=sys.stderr)
                peer_calls.pop("fa3_fp8", None)
        for bits in (int(b) for b in args.bits.split(",")):
            decodes = [IntfaDecode(lib, k, v, q, bits, page_size, args.splits) for k, v in sets]
            decode = decodes[0]
            decode.out.fill_(float("nan"))
            decode()
            torch.cuda.synchronize()
            row = dict(gpu=gpu, batch=batch, seq=seq, q_len=q_len, heads_q=heads_q,
                       heads_kv=heads_kv, head_dim=d, page_size=page_size, bits=bits,
                       splits=decode.splits, copy_gbps=copy_gbps,
                       rel_l2_vs_fp32=relative_l2(decode.output()),
                       peer_rel_l2_vs_fp32=peer_errors, input_sets=args.input_sets)
            for timing in timings:
                times = time_contenders(dict(intfa=decodes, **peer_calls), args.repeats,
                                        timing, args.graph_rounds, f"{where} INT{bits}")
                intfa_ms = times.get("intfa")
                entry = dict(intfa_ms=intfa_ms,
                             intfa_gbps=decode.bytes_read / intfa_ms / 1e6 if intfa_ms else None)
                for peer in peer_calls:
                    ms = times.get(peer)
                    entry[peer + "_ms"] = ms
                    entry[peer + "_gbps"] = peer_bytes[peer] / ms / 1e6 if ms else None
                    entry["speedup_vs_" + peer] = ms / intfa_ms if ms and intfa_ms else None
                row[timing] = entry
            rows.append(row)
            print(json.dumps(row), flush=True)
            del decodes, decode
            torch.cuda.empty_cache()
        k = v = q = sets = peer_calls = reference = None  # freed before the next shape's
        torch.cuda.empty_cache()

    def fmt(value, spec):
        return "-" if value is None else format(value, spec)

    for timing in timings:
        print()
        print(f"timing: {timing}, interleaved")
        print("| B | N | queries | heads | page | cache | intfa ms | intfa GB/s (of copy) "
              "| cuDNN FP16 ms | GB/s | FA3 FP8 ms | GB/s | vs cuDNN | vs FA3 FP8 "
              "| rel. L2 intfa / FA3 FP8 |")
        print("| --- " * 15 + "|")
        for r in rows:
            t = r[timing]
            share = f" ({t['intfa_gbps'] / r['copy_gbps']:.0%})" if t["intfa_gbps"] else ""
            fa3_error = r["peer_rel_l2_vs_fp32"].get("fa3_fp8")
            print(f"| {r['batch']} | {r['seq']} | {r['q_len']} | {r['heads_q']}/{r['heads_kv']} "
                  f"| {r['page_size']} | INT{r['bits']} "
                  f"| {fmt(t['intfa_ms'], '.4f')} | {fmt(t['intfa_gbps'], '.0f')}{share} "
                  f"| {fmt(t.get('sdpa_cudnn_ms'), '.4f')} | {fmt(t.get('sdpa_cudnn_gbps'), '.0f')} "
                  f"| {fmt(t.get('fa3_fp8_ms'), '.4f')} | {fmt(t.get('fa3_fp8_gbps'), '.0f')} "
                  f"| {fmt(t.get('speedup_vs_sdpa_cudnn'), '.2f')}x "
                  f"| {fmt(t.get('speedup_vs_fa3_fp8'), '.2f')}x "
                  f"| {r['rel_l2_vs_fp32']:.3%} / {fmt(fa3_error, '.3%')} |")
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "compare_decode.json"), "w") as stream:
        json.dump(rows, stream, indent=1)
    return 0 if all(r[t]["intfa_ms"] for r in rows for t in timings) else 1


if __name__ == "__main__":
    sys.exit(main())
