"""Half INT8 tile configs against each other through the Python package, the way users call it
(intfa.attention_int8 on intfa.quantize's tensors, config= forcing each), same process, CUDA
events, warm-up, median, each config timed in both orders.
usage: python3 bench/half_config_ab.py [--configs "128,128,12,3;192,64,16,3"] [--seqs 4096,16384]"""
import argparse

import torch

import intfa
from intfa_ctypes import time_ms


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--configs", default="128,128,12,3;192,64,16,3")
    parser.add_argument("--seqs", default="4096,16384")
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    configs = [tuple(int(x) for x in c.split(",")) for c in args.configs.split(";")]
    d, b, h = args.head_dim, 4, 32
    print(f"device: {torch.cuda.get_device_name()}")
    for causal in (False, True):
        for n in [int(x) for x in args.seqs.split(",")]:
            q, k, v = (torch.randn(b, h, n, d, dtype=torch.float16, device="cuda")
                       for _ in range(3))
            z = intfa.quantize(q, k, None)
            ops = 4.0 * b * h * n * n * d / (2 if causal else 1)
            calls = {c: (lambda c=c: intfa.attention_int8(
                z.q, z.k, v, z.q_scale, z.k_scale, None, is_causal=causal,
                q_dot_k_mean=z.q_dot_k_mean, config=c)) for c in configs}
            calls[None] = lambda: intfa.attention_int8(z.q, z.k, v, z.q_scale, z.k_scale, None,
                                                       is_causal=causal,
                                                       q_dot_k_mean=z.q_dot_k_mean)
            results = {c: [] for c in calls}
            for order in (list(calls), list(reversed(list(calls)))):
                for c in order:
                    results[c].append(time_ms(calls[c], args.repeats))
            cells = "  ".join(f"{'default' if c is None else ','.join(map(str, c))}: "
                              + "/".join(f"{ops / t / 1e9:.0f}" for t in results[c])
                              for c in calls)
            print(f"d={d} N={n} causal={causal}: TOPS (order 1 / order 2)  {cells}")


if __name__ == "__main__":
    main()
