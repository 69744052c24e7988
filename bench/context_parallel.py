#!/usr/bin/env python3
"""Context-parallel intfa attention over N GPUs (issues 29, 48): correctness against one GPU and
the time of a long sequence by ring, Ulysses and both (every Ulysses size the heads allow), with
the ring's per-step compute and transfer times (is the transfer hidden behind the compute?).

    PYTHONPATH=build/python torchrun --nproc-per-node 8 bench/context_parallel.py \
        --seq 131072 --heads 32 --kv-heads 8 --head-dim 128

Every rank builds the same whole sequence, takes its shard (shard_sequence with the split's
Ulysses size; zig-zag over the ring when causal), and rank 0 prints: the milliseconds of each
split (context_parallel_attention) and of the single-GPU call (unless --no-single-gpu), the
speedup and the rel L2 of the gathered output against that call; for the ring, the statistics
and quantization of a rank's own shard (once), the compute of one step (its local attention of
one K/V shard, no transfer) and the transfer of one shard alone (one batch_isend_irecv of the
packed shard, no compute), maxima over the ranks. --transfer-only skips the splits.
"""
import argparse
import datetime
import os
import statistics

import torch
import torch.distributed as dist

import intfa
from intfa import distributed as cp


def timed_ms(function, repeats, warmup=2):
    """Median milliseconds of `function` over `repeats` runs, the ranks started together."""
    for _ in range(warmup):
        function()
    times = []
    for _ in range(repeats):
        dist.barrier()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        function()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def slowest(value):
    """The maximum of a float over the ranks (the slowest rank sets the time)."""
    tensor = torch.tensor([value], device="cuda", dtype=torch.float64)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return tensor.item()


def gathered(shard, zigzag, ulysses_size=1, layout="HND"):
    shards = [torch.empty_like(shard) for _ in range(dist.get_world_size())]
    dist.all_gather(shards, shard.contiguous())
    return cp.unshard_sequence(shards, layout=layout, zigzag=zigzag, ulysses_size=ulysses_size)


def rel_l2(out, ref):
    return ((out.float() - ref.float()).norm() / ref.float().norm()).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seq", type=int, default=131072, help="tokens of the whole sequence")
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--variant", default="full_int8", choices=("full_int8", "half_int8"))
    parser.add_argument("--dtype", default="float16", choices=("float16", "bfloat16"))
    parser.add_argument("--non-causal", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-single-gpu", dest="single_gpu", action="store_false",
                        help="skip the one-GPU call (the reference and the speedup)")
    parser.add_argument("--transfer-only", action="store_true",
                        help="time the ring's shard transfer alone (NCCL settings compared)")
    args = parser.parse_args()

    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl", timeout=datetime.timedelta(minutes=10))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    is_causal = not args.non_causal
    dtype = getattr(torch, args.dtype)

    generator = torch.Generator(device="cuda").manual_seed(0)  # the same sequence on every rank
    q, k, v = (torch.randn(args.batch, heads, args.seq, args.head_dim, generator=generator,
                           device="cuda", dtype=dtype)
               for heads in (args.heads, args.kv_heads, args.kv_heads))
    ring_shard = [cp.shard_sequence(x, rank, world_size, zigzag=is_causal) for x in (q, k, v)]
    options = dict(is_causal=is_causal, variant=args.variant)

    def split(ulysses_size):  # context_parallel_attention with this Ulysses size, on its shards
        shard = [cp.shard_sequence(x, rank, world_size, zigzag=is_causal,
                                   ulysses_size=ulysses_size) for x in (q, k, v)]
        return lambda: cp.context_parallel_attention(*shard, ulysses_size=ulysses_size,
                                                     **options)

    lines = [f"{world_size} GPUs, B={args.batch} N={args.seq} H={args.heads}/{args.kv_heads} "
             f"D={args.head_dim} {args.dtype} {args.variant} causal={is_causal}"]
    # Every Ulysses size the heads allow: 1 is the ring, world_size Ulysses, between both (USP).
    results = {}
    for size in range(1, world_size + 1):
        if world_size % size == 0 and args.heads % size == 0 and args.kv_heads % size == 0:
            name = "ring" if size == 1 else "ulysses" if size == world_size else \
                f"ulysses {size} x ring {world_size // size}"
            results[name] = (split(size), is_causal, size)
    chosen = cp.choose_ulysses_size(args.heads, args.kv_heads, world_size,
                                    shard_tokens=args.seq // world_size)
    lines.append(f"context_parallel_attention's default: Ulysses size {chosen}")
    single_ms = None
    whole = None
    if args.single_gpu:
        def single():
            return intfa.attention(q, k, v, **options)
        whole = single()
        single_ms = timed_ms(single, args.repeats)
        lines.append(f"one GPU: {single_ms:.2f} ms")
    if args.transfer_only:
        results = {}
    for name, (function, zigzag, ulysses_size) in results.items():
        out = gathered(function(), zigzag, ulysses_size)
        elapsed_ms = slowest(timed_ms(function, args.repeats))
        line = f"{name}: {elapsed_ms:.2f} ms"
        if whole is not None:
            line += f", {single_ms / elapsed_ms:.2f}x one GPU, rel_l2 vs one GPU " \
                    f"{rel_l2(out, whole):.3e}"
        lines.append(line)

    # The ring's parts alone: one step's local attention (this rank's Q against its own K/V
    # shard, which has the cost of every step but the diagonal one in the causal split) and one
    # shard's transfer.
    kernels = cp.IntfaKernels(variant=args.variant)

    def prepare():
        # The whole sequence's K means and V scales (an all-reduce), then this shard quantized.
        statistics = cp._sequence_statistics(*ring_shard, None, rank, world_size, is_causal,
                                             kernels)
        return cp._prepare_shard(*ring_shard, is_causal, kernels, statistics)

    q_states, shard = prepare()
    off_diagonal_step = 1 if world_size > 1 else 0

    def compute_step():
        cp._RingRank(q_states, rank, world_size, is_causal, kernels).attend(off_diagonal_step,
                                                                           shard)

    compute_ms = slowest(timed_ms(compute_step, args.repeats))
    prepare_ms = slowest(timed_ms(prepare, args.repeats))
    shard_bytes = sum(t.numel() * t.element_size() for t in cp._flatten(shard))
    lines.append(f"ring step: statistics and quantize own shard {prepare_ms:.2f} ms once, "
                 f"attention {compute_ms:.2f} ms per step, shard {shard_bytes / 2**20:.1f} MiB")
    if world_size > 1:
        transport, packed = cp._P2PRing(None), cp._PackedShard(shard)
        transfer_ms = slowest(timed_ms(lambda: transport.start(packed).wait(), args.repeats))
        bandwidth = shard_bytes / transfer_ms / 1e6
        hidden = "hidden" if transfer_ms <= compute_ms else "NOT hidden"
        lines.append(f"ring transfer: {transfer_ms:.2f} ms per step ({bandwidth:.1f} GB/s): "
                     f"{hidden} behind the {compute_ms:.2f} ms of attention; "
                     f"{world_size} steps ideal {prepare_ms + world_size * compute_ms:.2f} ms")
    if rank == 0:
        print("\n".join(lines), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
