#!/usr/bin/env bash
# On the GPU machine: `intfa.attention` end to end, as users call it. Runs the C++ GPU tests named
# by E2E_TESTS (default: the 16-bit entry point and the Hopper kernel's), builds the Python
# extension and runs python/tests (scripts/device_python.sh), then the host time per call
# (bench/python_overhead.py) and the SDPA table with the end-to-end columns
# (bench/compare_sdpa.py through the binding: kernel only, `intfa.attention` full and half INT8,
# cuDNN and flash FP16, each timed in both orders).
#   usage: scripts/device/e2e.sh        carry: a build with bin/ and lib/ (INTFA_BUILD, default
#          build-dev) and .deps (scripts/prepare_device_deps.sh)
# Logs under $OUT/logs, a summary last; every step under its own time limit (timed()).
export INTFA_BUILD=${INTFA_BUILD:-build-dev}
source "$(dirname "$0")/common.sh"
timed gpu_tests 200 "$bin/intfa_tests" \
  --gtest_filter="${E2E_TESTS:-*Attention16bit*:*Wgmma*Gpu*:AttentionGpu*}"
grep -E "^\[  FAILED|tests? ran|PASSED" "$logs/gpu_tests.log" | tail -6 | tee -a "$summary"
TAIL_LINES=30 timed python 330 scripts/device_python.sh "$logs"
export PYTHONPATH=$PWD/build-device-py/python
TAIL_LINES=12 timed python_overhead 60 python3 bench/python_overhead.py --calls 2000 \
  --json "$logs/python_overhead.json"
TAIL_LINES=16 timed compare_sdpa 240 python3 bench/compare_sdpa.py --intfa binding \
  --head-dims 64,128 --seqs 1024,4096,16384 --causal off,on --repeats 10 --out-dir "$logs"
finish
