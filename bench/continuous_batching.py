#!/usr/bin/env python3
"""Tokens/s of transformers' continuous batching (``generate_batch``) with intfa's paged INT8 and
INT4 cache (``paged|intfa``, intfa.integrations.transformers_paged; without CUDA graphs, as
transformers configures it by default, and with its graphs of padded batches: "-graphs") against
``paged|sdpa``, on a
randomly initialised Llama-3-8B-shaped model (32 query / 8 KV heads, d=128, hidden 4096, MLP
14336, vocab 128256; --layers of them), in one process. For each --cases entry CONTEXTxBATCH:
BATCH random prompts of CONTEXT tokens, --new-tokens greedy tokens each; every contender first
runs a short warm-up batch, and intfa's the case's prompts for 2 tokens (its kernels for the
case's shapes compiled: the first contender timed after paged|sdpa measured 0.55-0.65x of its
later runs without it), then the timed batch (wall clock
from generate_batch's call to its return: prefill chunks and decode steps as the scheduler mixes
them; with graphs, the captures of transformers' warm-up too, as each generate_batch makes
them again). Reported: generated tokens/s and its ratio to paged|sdpa; the median time between
two tokens of a request; greedy agreement with paged|sdpa (positions equal, positions before a
request's first difference, and first tokens: the only position both predict from the same
text; --floor adds paged|sdpa on a float16 copy of the model, the agreement two 16-bit runs
reach on this randomly initialised model); the KV bytes per token of each cache and the blocks
each gets in the same --kv-gib of KV memory (what "capacity" means: intfa's config() sizes
num_blocks for the budget, paged|sdpa's cache is transformers' 16-bit one). --check: every
attention output of an untimed intfa run against float32 attention of its original K/V;
--profile: GPU time by kernel on the last case.

    python3 bench/continuous_batching.py --cases 2048x32,8192x32,32768x8 --floor --check \
        --json $OUT/cb.json
(scripts/device/serving.sh runs it on the device.) paged|sdpa's cost grows with the cache:
transformers gives it a [max_batch_tokens, cache tokens] mask, hence the small --kv-gib.
"""
import argparse
import collections
import copy
import json
import os
import sys
import time

import torch

# One contender: its row name, attn_implementation, ContinuousBatchingConfig, blocks in the KV
# budget, KV bytes per token (all layers), model, and cache width (16: transformers' own).
Contender = collections.namedtuple("Contender",
                                   "impl name cb blocks bytes_per_token model bits options")


def build_model(layers, seed):
    import transformers
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        hidden_size=4096, intermediate_size=14336, num_hidden_layers=layers,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=128256,
        max_position_embeddings=131072, rope_theta=500000.0, eos_token_id=None,
        bos_token_id=None, pad_token_id=0)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(config)
    return model.to(torch.bfloat16).eval()


def run(model, impl, prompts, new_tokens, cb_config, stats=None):
    """Seconds of one generate_batch and its tokens; with `stats` (a dict), the median time
    between two tokens of a request (its decode steps, beside whatever else the step ran)."""
    from transformers import GenerationConfig
    model.set_attn_implementation(impl)
    generation = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, eos_token_id=None,
                                  pad_token_id=0)
    torch.cuda.synchronize()
    start = time.perf_counter()
    results = model.generate_batch(prompts, generation, continuous_batching_config=cb_config,
                                   record_timestamps=stats is not None)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    outputs = [results[key] for key in results]
    failed = [o.error for o in outputs if o.error is not None]
    if len(outputs) != len(prompts) or failed:
        raise RuntimeError(f"{impl}: {len(outputs)} of {len(prompts)} results, errors {failed[:2]}")
    if stats is not None:
        gaps = sorted(b - a for o in outputs for a, b in zip(o.timestamps, o.timestamps[1:]))
        stats["inter_token_ms_median"] = 1e3 * gaps[len(gaps) // 2] if gaps else None
    return seconds, [o.generated_tokens for o in outputs]


def profiled_run(model, impl, prompts, new_tokens, cb_config, top=12):
    """GPU time by kernel over one generate_batch (every thread's kernels: CUPTI's activity)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as profiler:
        run(model, impl, prompts, new_tokens, cb_config)
    kernels = [(e.key, e.device_time_total, e.count) for e in profiler.key_averages()
               if e.device_time_total > 0]
    total = sum(t for _, t, _ in kernels)
    kernels.sort(key=lambda k: -k[1])
    return {"gpu_ms": total / 1e3,
            "kernels": [{"name": name[:120], "ms": t / 1e3, "share": t / total, "calls": count,
                         "us_per_call": t / count} for name, t, count in kernels[:top]]}


def agreement(tokens, reference):
    """(positions equal, positions before each request's first difference, first tokens equal),
    as fractions. The first token is the only one both contenders predict from the same
    tokens: after a difference the two continue from different text."""
    equal = total = prefix = first = 0
    for got, expected in zip(tokens, reference):
        total += len(expected)
        equal += sum(a == b for a, b in zip(got, expected))
        first += got[:1] == expected[:1]
        for a, b in zip(got, expected):
            if a != b:
                break
            prefix += 1
    return equal / total, prefix / total, first / len(reference)


def checked_run(model, bits, prompts, new_tokens, options):
    """One untimed run of paged|intfa with every attention call checked against float32
    attention of its original K/V (the tests' ShadowCheck; no CUDA graphs: it reads the offsets
    to the host): the rel L2 of the loop's outputs."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python",
                                    "tests"))
    from test_transformers_paged import ShadowCheck
    from transformers import AttentionInterface
    from intfa.integrations import transformers_paged as paged
    check = ShadowCheck(paged.attention_function(bits, smooth_k=True))
    AttentionInterface.register("paged|intfa_checked", check)
    run(model, "paged|intfa_checked", prompts, new_tokens,
        paged.config(model, **options, use_cuda_graph=False))
    errors = sorted(check.errors)
    return {"calls_checked": len(errors), "rel_l2_max": errors[-1],
            "rel_l2_median": errors[len(errors) // 2]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default="2048x32,8192x32,32768x8",
                        help="CONTEXTxBATCH entries, comma-separated")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--block-size", type=int, default=256)
    parser.add_argument("--max-batch-tokens", type=int, default=8192,
                        help="tokens per step (prefill chunks and decode rows), the same for all")
    parser.add_argument("--kv-gib", type=float, default=5.0,
                        help="KV memory each contender's cache gets")
    parser.add_argument("--impls", default="paged|sdpa,int8,int4",
                        help="paged|sdpa first, then of int8, int4, int8-graphs, int4-graphs "
                        "(with transformers' CUDA graphs; without, its default here)")
    parser.add_argument("--floor", action="store_true",
                        help="also paged|sdpa on a float16 copy of the model: the agreement of "
                        "two 16-bit runs, the floor the quantized ones are read against")
    parser.add_argument("--check", action="store_true",
                        help="an untimed checked run of each intfa width on the first case")
    parser.add_argument("--profile", action="store_true",
                        help="GPU time by kernel of an untimed run of each contender on the "
                        "last case")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json")
    args = parser.parse_args()

    import transformers
    from intfa.integrations import transformers_paged as paged
    model = build_model(args.layers, args.seed)
    text = model.config
    kv_bytes = int(args.kv_gib * 2**30)
    names = {"int8": paged.register("paged|intfa", bits=8),
             "int4": paged.register("paged|intfa4", bits=4)}
    contenders = []
    for impl in args.impls.split(","):
        width, _, graphs = impl.partition("-")
        bits = 16 if impl == "paged|sdpa" else int(width[3:])
        per_block = paged.bytes_per_block(args.block_size, text.num_key_value_heads,
                                          text.head_dim, text.num_hidden_layers, bits)
        blocks = kv_bytes // per_block - 2
        options = dict(block_size=args.block_size, num_blocks=blocks,
                       max_batch_tokens=args.max_batch_tokens)
        # transformers' default for both: no CUDA graphs (it assumes a mask for names without
        # "flash"); "-graphs": its CUDA graphs of padded batches.
        if bits == 16:
            cb = transformers.ContinuousBatchingConfig(**options)
        else:
            cb = paged.config(model, **options, **({"use_cuda_graph": True} if graphs else {}))
        contenders.append(Contender(impl, names.get(width, impl), cb, blocks,
                                    per_block / args.block_size, model, bits, options))
    if args.floor and contenders[0].impl == "paged|sdpa":
        contenders.append(contenders[0]._replace(impl="sdpa-fp16",
                                                 model=copy.deepcopy(model).half()))
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}; {args.layers} layers; KV budget {args.kv_gib} GiB: "
          + ", ".join(f"{c.impl} {c.blocks} blocks ({c.bytes_per_token:.0f} B/token)"
                      for c in contenders), flush=True)

    generator = torch.Generator().manual_seed(args.seed + 1)
    warm = [torch.randint(0, text.vocab_size, (600,), generator=generator).tolist()
            for _ in range(3)]
    for c in contenders:
        run(c.model, c.name, warm, 4, c.cb)
    rows = []
    cases = args.cases.split(",")
    for case in cases:
        context, batch = (int(x) for x in case.lower().split("x"))
        prompts = [torch.randint(0, text.vocab_size, (context,), generator=generator).tolist()
                   for _ in range(batch)]
        results = []
        for c in contenders:
            if c.bits != 16:  # intfa's kernels for this case's shapes compiled before timing
                run(c.model, c.name, prompts, 2, c.cb)
            stats = {}
            seconds, tokens = run(c.model, c.name, prompts, args.new_tokens, c.cb, stats)
            results.append((c, seconds, tokens, stats))
            torch.cuda.empty_cache()
        base = results[0] if results[0][0].impl == "paged|sdpa" else None
        for c, seconds, tokens, stats in results:
            generated = sum(len(t) for t in tokens)
            row = {"context": context, "batch": batch, "impl": c.impl, "seconds": seconds,
                   "tokens_per_s": generated / seconds, "kv_bytes_per_token": c.bytes_per_token,
                   "blocks_in_budget": c.blocks, **stats}
            if base is not None:
                row["speedup_vs_sdpa"] = base[1] / seconds
                (row["agreement"], row["agreement_prefix"],
                 row["agreement_first"]) = agreement(tokens, base[2])
            if args.check and c.impl in ("int8", "int4") and case == cases[0]:
                row["checked"] = checked_run(c.model, c.bits, prompts, args.new_tokens,
                                             c.options)
                print(f"{c.impl} checked run: {row['checked']}", flush=True)
            if args.profile and case == cases[-1] and c.impl != "sdpa-fp16":
                row["profile"] = profiled_run(c.model, c.name, prompts, args.new_tokens, c.cb)
                for kernel in row["profile"]["kernels"]:
                    print(f"    {c.impl} {kernel['share']:6.1%} {kernel['calls']:6d} x "
                          f"{kernel['us_per_call']:9.1f} us  {kernel['name']}")
            rows.append(row)
            print(f"{context:>6} x {batch:<3} {c.impl:<11} {row['tokens_per_s']:9.1f} tokens/s, "
                  f"{row['inter_token_ms_median']:.1f} ms between tokens"
                  + (f"  x{row['speedup_vs_sdpa']:.2f} vs paged|sdpa, greedy agreement "
                     f"{row['agreement']:.1%} (prefix {row['agreement_prefix']:.1%}, first "
                     f"token {row['agreement_first']:.1%})" if base is not None else ""),
                  flush=True)
    if args.json:
        with open(args.json, "w") as stream:
            json.dump({"args": vars(args), "device": torch.cuda.get_device_name(),
                       "transformers": transformers.__version__, "rows": rows}, stream, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
