"""Can the quantize passes hide behind the attention kernel? A probe for issue 23 through the
Python package: intfa.quantize (the passes) and intfa.attention_int8 (the kernel) over chunks of
the batch, chunk i's attention on the caller's stream while chunk i+1's passes run on a side
stream, which may have a higher priority (its blocks then take SMs as attention blocks retire).
Against: the passes then the kernel, each over the whole batch, on one stream. Same process,
CUDA events, warm-up, median, every schedule timed in both orders.
usage: python3 bench/overlap_probe.py [--head-dims 64,128] [--seqs 1024,4096,16384]"""
import argparse

import torch

import intfa
from intfa_ctypes import time_ms


def chunked(q, k, v, causal, chunks, side):
    """The passes of chunk i on `side`, its attention on the current stream after them."""
    main = torch.cuda.current_stream()
    side.wait_stream(main)
    b = q.shape[0]
    step = b // chunks
    ready = []
    outputs = []
    with torch.cuda.stream(side):
        for i in range(chunks):
            s = slice(i * step, (i + 1) * step)
            ready.append((intfa.quantize(q[s], k[s], v[s]), torch.cuda.Event()))
            ready[-1][1].record(side)
    for z, event in ready:
        main.wait_event(event)
        outputs.append(intfa.attention_int8(z.q, z.k, z.v, z.q_scale, z.k_scale, z.v_scale,
                                            is_causal=causal, q_dot_k_mean=z.q_dot_k_mean))
    for z, _ in ready:  # the side stream's tensors are used on the main one
        for t in (z.q, z.k, z.v, z.q_scale, z.k_scale, z.v_scale, z.q_dot_k_mean):
            if t is not None:
                t.record_stream(main)
    return outputs


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--seqs", default="1024,4096,16384")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    b, h = 4, 32
    low, high = torch.cuda.Stream.priority_range()
    streams = {"same priority": torch.cuda.Stream(priority=0),
               "passes first": torch.cuda.Stream(priority=high)}
    print(f"device: {torch.cuda.get_device_name()}; stream priorities {low}..{high}")
    for d in [int(x) for x in args.head_dims.split(",")]:
        for n in [int(x) for x in args.seqs.split(",")]:
            for causal in (False, True):
                q, k, v = (torch.randn(b, h, n, d, dtype=torch.float16, device="cuda")
                           for _ in range(3))
                z = intfa.quantize(q, k, v)
                calls = {
                    "attention": lambda: intfa.attention(q, k, v, is_causal=causal),
                    "kernel": lambda: intfa.attention_int8(
                        z.q, z.k, z.v, z.q_scale, z.k_scale, z.v_scale, is_causal=causal,
                        q_dot_k_mean=z.q_dot_k_mean),
                    "passes": lambda: intfa.quantize(q, k, v),
                }

                def in_order():
                    y = intfa.quantize(q, k, v)
                    return intfa.attention_int8(y.q, y.k, y.v, y.q_scale, y.k_scale, y.v_scale,
                                                is_causal=causal, q_dot_k_mean=y.q_dot_k_mean)
                calls["passes, kernel"] = in_order
                for name, side in streams.items():
                    for chunks in (2, 4):
                        calls[f"{chunks} chunks, {name}"] = (
                            lambda c=chunks, s=side: chunked(q, k, v, causal, c, s))
                results = {c: [] for c in calls}
                for order in (list(calls), list(reversed(list(calls)))):
                    for c in order:
                        results[c].append(time_ms(calls[c], args.repeats))
                serial = [a + b for a, b in zip(results["kernel"], results["passes"])]
                print(f"d={d} N={n} causal={causal} (ms, order 1 / order 2; kernel + passes "
                      f"{serial[0]:.3f} / {serial[1]:.3f})")
                for c, times in results.items():
                    kernel_ratio = "/".join(f"{k_ / t:.2f}"
                                            for k_, t in zip(results["kernel"], times))
                    print(f"  {c:32s} {times[0]:.3f} / {times[1]:.3f}  kernel/this {kernel_ratio}")


if __name__ == "__main__":
    main()
