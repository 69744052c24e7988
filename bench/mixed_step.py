#!/usr/bin/env python3
"""One continuous-batching step that mixes decode requests with a prefill chunk, on intfa's paged
INT8/INT4 cache, the two ways `intfa._paged.attend_step` can run it (issue 45):

  one call   every request through paged_prefill (num_decodes=0): the gather copies each decode
             request's whole cached sequence into dense K/V for its one query;
  split      the leading decode requests through paged_decode and only the chunks through
             paged_prefill (num_decodes=D: vLLM's decode-first batch order, which the vLLM-shaped
             backend asks for with reorder_batch_threshold 1).

Both are timed in the same process, interleaved (bench/compare_sdpa.py's time_interleaved: turns
of about 2 ms, the order reversed each round), and each output is checked against float32
attention of the original K/V (relative L2 per request kind).

    python3 bench/mixed_step.py [--decodes 32] [--context 8192] [--chunks 1] [--chunk 512]
        [--chunk-context 2048] [--heads 32/8] [--head-dim 128] [--page 16] [--bits 8,4]
"""
import argparse
import contextlib
import json
import math
import os
import sys

import torch

import intfa
from intfa._paged import attend_step

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_sdpa import time_interleaved  # noqa: E402


def reference(q, k, v, scale):
    """float32 attention of [n, Hq, d] queries over [L, Hkv, d] K/V (PyTorch's SDPA with GQA),
    causal bottom-right: query i sees keys up to L - n + i."""
    n, length = q.shape[0], k.shape[0]
    allowed = torch.ones(n, length, dtype=torch.bool, device=q.device).tril(length - n)
    out = torch.nn.functional.scaled_dot_product_attention(
        q.float().transpose(0, 1), k.float().transpose(0, 1), v.float().transpose(0, 1),
        attn_mask=allowed, scale=scale, enable_gqa=True)
    return out.transpose(0, 1)


def run(args, bits):
    torch.manual_seed(bits)
    heads_q, heads_kv = (int(x) for x in args.heads.split("/"))
    d, page = args.head_dim, args.page
    # Requests: the decodes first (one query over `context` keys), then the chunks (`chunk`
    # queries, the last of `chunk_context` keys).
    lengths = [args.context] * args.decodes + [args.chunk_context] * args.chunks
    queries = [1] * args.decodes + [args.chunk] * args.chunks
    pages_of = [-(-n // page) for n in lengths]
    num_pages = sum(pages_of) + 1
    cache = intfa.PagedKVCache(num_pages, page, heads_kv, d, bits=bits)
    order = torch.randperm(num_pages - 1).tolist()
    max_pages = max(pages_of)
    table = torch.zeros(len(lengths), max_pages, dtype=torch.int32)
    keys, values, slots = [], [], []
    for b, n in enumerate(lengths):
        owned = [order.pop() for _ in range(pages_of[b])]
        table[b, :len(owned)] = torch.tensor(owned, dtype=torch.int32)
        keys.append(torch.randn(n, heads_kv, d, device="cuda", dtype=torch.float16))
        values.append(torch.randn(n, heads_kv, d, device="cuda", dtype=torch.float16))
        slots.append(torch.tensor([owned[t // page] * page + t % page for t in range(n)],
                                  dtype=torch.int32, device="cuda"))
    cache.append(torch.cat(keys), torch.cat(values), torch.cat(slots))
    starts = [0]
    for count in queries:
        starts.append(starts[-1] + count)
    q = torch.randn(starts[-1], heads_q, d, device="cuda", dtype=torch.float16)
    query_start_loc = torch.tensor(starts, dtype=torch.int32, device="cuda")
    block_table, seq_lens = table.cuda(), torch.tensor(lengths, dtype=torch.int32, device="cuda")
    scale = 1.0 / math.sqrt(d)
    common = dict(max_q_len=max(queries), causal=True, sm_scale=scale)
    prefill_lengths = lengths[args.decodes:]

    def one_call():
        return attend_step(q, cache.k_data, cache.v_data, cache.k_scale, cache.v_scale,
                           query_start_loc, block_table, seq_lens, max_seq_len=max(lengths),
                           kv_tokens=sum(lengths), **common)

    def split():
        return attend_step(q, cache.k_data, cache.v_data, cache.k_scale, cache.v_scale,
                           query_start_loc, block_table, seq_lens,
                           max_seq_len=max(prefill_lengths), kv_tokens=sum(prefill_lengths),
                           num_decodes=args.decodes, decode_max_seq_len=args.context, **common)

    errors = {}
    for name, call in (("one_call", one_call), ("split", split)):
        out = call()
        torch.cuda.synchronize()
        worst = {"decode": 0.0, "chunk": 0.0}
        for b in range(len(lengths)):
            expected = reference(q[starts[b]:starts[b + 1]], keys[b], values[b], scale)
            got = out[starts[b]:starts[b + 1]].float()
            kind = "decode" if b < args.decodes else "chunk"
            worst[kind] = max(worst[kind], ((got - expected).norm() / expected.norm()).item())
        errors[name] = worst
    medians, _ = time_interleaved({"one_call": (one_call, contextlib.nullcontext),
                                   "split": (split, contextlib.nullcontext)},
                                  args.repeats, f"INT{bits}")
    row = dict(bits=bits, decodes=args.decodes, context=args.context, chunks=args.chunks,
               chunk=args.chunk, chunk_context=args.chunk_context, heads=args.heads, head_dim=d,
               page=page, **medians, speedup=medians["one_call_ms"] / medians["split_ms"],
               rel_l2=errors)
    print(f"INT{bits}: {args.decodes} decodes over {args.context} + {args.chunks} x {args.chunk} "
          f"queries over {args.chunk_context}: one call {medians['one_call_ms']:.3f} ms, split "
          f"{medians['split_ms']:.3f} ms ({row['speedup']:.2f}x); worst rel. L2 one call "
          f"{errors['one_call']['decode']:.3%} / {errors['one_call']['chunk']:.3%}, split "
          f"{errors['split']['decode']:.3%} / {errors['split']['chunk']:.3%} (decode / chunk)")
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decodes", type=int, default=32)
    parser.add_argument("--context", type=int, default=8192)
    parser.add_argument("--chunks", type=int, default=1)
    parser.add_argument("--chunk", type=int, default=512)
    parser.add_argument("--chunk-context", type=int, default=2048)
    parser.add_argument("--heads", default="32/8")
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--page", type=int, default=16)
    parser.add_argument("--bits", default="8,4")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    if args.decodes < 1 or args.chunks < 1:
        parser.error("--decodes and --chunks: at least 1 each (a mixed step)")
    print(f"{torch.cuda.get_device_name()}, intfa {intfa.__version__}")
    rows = [run(args, int(bits)) for bits in args.bits.split(",")]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
