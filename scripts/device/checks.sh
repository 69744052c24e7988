#!/usr/bin/env bash
# On the GPU machine, one purpose of scripts/device_run.sh (which dispatches here): The GPU tests,
# the demo, the SASS of the Hopper kernels, the Python package's tests and
# compute-sanitizer (memcheck, racecheck, synccheck) over every kernel family.
# Expects a Release build carried in build/ (or INTFA_BUILD); writes under $OUT.
source "$(dirname "$0")/common.sh"

timed gpu_tests 180 $bin/intfa_tests --gtest_filter='*Gpu*'
grep -E "^\[  FAILED|tests? ran|PASSED|SKIPPED \]" "$logs/gpu_tests.log" | tail -15 | tee -a "$summary"
TAIL_LINES=3 timed cpu_tests 150 $bin/intfa_tests --gtest_filter='-*Gpu*'
grep -E "^\[  FAILED|tests? ran|PASSED" "$logs/cpu_tests.log" | tail -8 | tee -a "$summary"
timed demo 60 $bin/intfa run --seq 4096 --heads 16
timed sass 60 python3 scripts/dump_sass.py "$INTFA_CACHE_DIR" "$logs/sass" \
  "attention_wgmma sm_90a d128"
TAIL_LINES=25 timed python 240 scripts/device_python.sh "$logs"
for args in "--seq 200 --heads 2 --causal" "--seq 77 --seq-kv 300 --heads 4 --heads-kv 2 --variant half" \
            "--seq 130 --head-dim 64 --p-scale tile --v-scale block" "--seq 65 --head-dim 256 --causal" \
            "--seq 90 --qk-bits 4 --v-scale tensor --p s8 --p-scale running" \
            "--seq 100 --head-dim 64 --causal --smooth-k"; do
  sanitize memcheck 60 $args
done
# Varlen: the packed sequences of the GPU test (empty and length-1 neighbours, GQA, INT4).
for tool in memcheck racecheck; do
  TAIL_LINES=2 timed "${tool}_varlen" 120 compute-sanitizer --tool $tool --error-exitcode 9 \
    $bin/intfa_tests --gtest_filter='Cases/VarlenGpu.*'
done
for tool in racecheck synccheck; do
  for args in "--seq 200 --heads 1" "--seq 130 --head-dim 64 --causal --variant half" \
              "--seq 90 --qk-bits 4 --smooth-k --v-scale block --causal"; do
    sanitize $tool 90 $args
  done
done

finish
