#!/usr/bin/env python3
"""The first intfa.attention call of a process on a cold kernel cache (issue 49, item 7: at most
1.0 s), against the second call: B=1, H=8, N=1024, d=128, FP16, default numerics. Each run is a
fresh Python process with a fresh INTFA_CACHE_DIR, so the first call compiles every kernel it
launches (NVRTC) and loads them; both calls are timed on the host and synchronised. Torch's CUDA
context and the inputs are made before the first call (and timed apart), as in an application
whose first attention comes after its first tensors.

Each setting of --settings (an environment, e.g. INTFA_PARALLEL_COMPILE=0: the call's kernels
compiled one after another, the behaviour before they were compiled at once) runs --runs times,
the settings alternating run by run; the table gives the median and the range of each time, and
NVRTC's own time per kernel from INTFA_LOG's lines (the median over the runs of each kernel).
Needs torch, a GPU and the package on PYTHONPATH (scripts/device_python.sh, or the device
scripts' build_python_extension, builds it as build-device-py/python).
Usage: python3 bench/cold_call.py [--runs N] [--settings "A=1 B=2,C=0"] [--json FILE]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


def child():
    """One process: the times of its first and second call, as a JSON line on stdout."""
    started = time.perf_counter()
    import torch

    import intfa
    imported = time.perf_counter()
    generator = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(1, 8, 1024, 128, device="cuda", dtype=torch.float16,
                           generator=generator) for _ in range(3))
    torch.cuda.synchronize()
    ready = time.perf_counter()
    intfa.attention(q, k, v)
    torch.cuda.synchronize()
    first = time.perf_counter()
    intfa.attention(q, k, v)
    torch.cuda.synchronize()
    second = time.perf_counter()
    print(json.dumps({"import_s": imported - started, "cuda_and_inputs_s": ready - imported,
                      "first_s": first - ready, "second_s": second - first}))


COMPILED = re.compile(r"intfa: compiled (.+) in (\d+) ms$", re.MULTILINE)
FETCHED = re.compile(r"intfa: fetched (\d+) kernel\(s\) of one call on (\d+) thread\(s\) in (\d+) ms")


def run_once(setting):
    """A fresh process with a fresh cache under `setting` (a dict of environment variables)."""
    with tempfile.TemporaryDirectory(prefix="intfa-cold-") as cache:
        env = dict(os.environ, INTFA_CACHE_DIR=cache, INTFA_LOG="1", **setting)
        env.pop("INTFA_DEPLOY_CACHE", None)
        done = subprocess.run([sys.executable, __file__, "--child"], env=env, capture_output=True,
                              text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"the child failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["compile_ms"] = {spec: int(ms) for spec, ms in COMPILED.findall(done.stderr)}
    fetched = FETCHED.findall(done.stderr)
    result["fetched"] = [{"kernels": int(n), "threads": int(t), "ms": int(ms)}
                         for n, t, ms in fetched]
    return result


def parse_setting(text):
    return dict(item.split("=", 1) for item in text.split()) if text.strip() else {}


def describe(values):
    return (f"{statistics.median(values) * 1e3:8.2f} ms "
            f"({min(values) * 1e3:.1f}-{max(values) * 1e3:.1f})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--settings", default="INTFA_PARALLEL_COMPILE=1,INTFA_PARALLEL_COMPILE=0",
                        help="comma-separated environments, each 'NAME=VALUE ...' (default: "
                             "the call's kernels compiled at once, then one after another)")
    parser.add_argument("--json", help="write every run's times here")
    args = parser.parse_args()
    if args.child:
        child()
        return 0
    settings = [text.strip() for text in args.settings.split(",")]
    results = {text: [] for text in settings}
    for _ in range(args.runs):
        for text in settings:
            results[text].append(run_once(parse_setting(text)))
    print(f"First and second intfa.attention call of a fresh process on a fresh cache "
          f"(B=1 H=8 N=1024 d=128 f16, defaults), {args.runs} runs each: median (range)")
    print(f"{'setting':32} {'first call':>24} {'second call':>24} {'CUDA + inputs':>24}")
    for text in settings:
        runs = results[text]
        print(f"{text or '(none)':32} {describe([r['first_s'] for r in runs]):>24} "
              f"{describe([r['second_s'] for r in runs]):>24} "
              f"{describe([r['cuda_and_inputs_s'] for r in runs]):>24}")
    for text in settings:
        kernels = {}  # spec -> its compile times
        for run in results[text]:
            for spec, ms in run["compile_ms"].items():
                kernels.setdefault(spec, []).append(ms)
        fetched = [f["ms"] for run in results[text] for f in run["fetched"]]
        threads = sorted({f["threads"] for run in results[text] for f in run["fetched"]})
        per_kernel = ", ".join(f"{spec.split()[0]} {statistics.median(ms):.0f}"
                               for spec, ms in kernels.items())
        print(f"{text or '(none)'}: NVRTC ms per kernel (median): {per_kernel}; fetched together "
              f"in {statistics.median(fetched) if fetched else 0:.0f} ms on {threads} thread(s)")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
