#!/usr/bin/env python3
"""Context-parallel intfa attention over N GPUs (issue 29): correctness against one GPU and the
time of a long causal sequence, by ring and by Ulysses, with the ring's per-step compute and
transfer times (is the transfer hidden behind the compute?).

    PYTHONPATH=build/python torchrun --nproc-per-node 8 bench/context_parallel.py \
        --seq 131072 --heads 32 --kv-heads 8 --head-dim 128

Every rank builds the same whole sequence, takes its shard (zig-zag for the causal ring,
contiguous for Ulysses), and rank 0 prints: rel L2 of the gathered output against one
intfa.attention over the whole sequence on rank 0's GPU; the milliseconds of ring_attention,
ulysses_attention and the single-GPU call (--single-gpu), and the speedup; for the ring, the
compute of one step (each rank's local attention of one K/V shard, no transfer) and the transfer
of one shard alone (batch_isend_irecv, no compute), maxima over the ranks.
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


def gathered(shard, zigzag, layout="HND"):
    shards = [torch.empty_like(shard) for _ in range(dist.get_world_size())]
    dist.all_gather(shards, shard.contiguous())
    return cp.unshard_sequence(shards, layout=layout, zigzag=zigzag)


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
    ulysses_shard = [cp.shard_sequence(x, rank, world_size) for x in (q, k, v)]
    options = dict(is_causal=is_causal, variant=args.variant)

    def ring():
        return cp.ring_attention(*ring_shard, **options)

    def ulysses():
        return cp.ulysses_attention(*ulysses_shard, **options)

    lines = [f"{world_size} GPUs, B={args.batch} N={args.seq} H={args.heads}/{args.kv_heads} "
             f"D={args.head_dim} {args.dtype} {args.variant} causal={is_causal}"]
    results = {"ring": (ring, is_causal), "ulysses": (ulysses, False)}
    if args.heads % world_size or args.kv_heads % world_size:
        lines.append(f"ulysses: skipped, heads {args.heads}/{args.kv_heads} not divisible by "
                     f"{world_size}")
        del results["ulysses"]
    single_ms = None
    whole = None
    if args.single_gpu:
        def single():
            return intfa.attention(q, k, v, **options)
        whole = single()
        single_ms = timed_ms(single, args.repeats)
        lines.append(f"one GPU: {single_ms:.2f} ms")
    for name, (function, zigzag) in results.items():
        out = gathered(function(), zigzag)
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
    q_states, shard = cp._prepare_shard(*ring_shard, world_size, is_causal, kernels)
    off_diagonal_step = 1 if world_size > 1 else 0

    def compute_step():
        cp._RingRank(q_states, rank, world_size, is_causal, kernels).attend(off_diagonal_step,
                                                                           shard)

    def prepare():
        cp._prepare_shard(*ring_shard, world_size, is_causal, kernels)

    compute_ms = slowest(timed_ms(compute_step, args.repeats))
    prepare_ms = slowest(timed_ms(prepare, args.repeats))
    shard_bytes = sum(t.numel() * t.element_size() for t in cp._flatten(shard))
    lines.append(f"ring step: quantize own shard {prepare_ms:.2f} ms once, attention "
                 f"{compute_ms:.2f} ms per step, shard {shard_bytes / 2**20:.1f} MiB")
    if world_size > 1:
        transport = cp._P2PRing(None)
        transfer_ms = slowest(timed_ms(lambda: transport.start(shard).wait(), args.repeats))
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
