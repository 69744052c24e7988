#!/usr/bin/env bash
# On the GPU machine, one purpose of scripts/device_run.sh (which dispatches here): The Hopper
# (wgmma) kernel: its tests, SASS, sanitizers on shapes with reused pipeline
# slots, the tile sweep, the SDPA table, the JIT and call overhead, the tuner and ncu.
# Expects a Release build carried in build/ (or INTFA_BUILD); writes under $OUT.
source "$(dirname "$0")/common.sh"

gtests gpu_tests 200 '*Gpu*:-*Wgmma*'
timed wgmma_tests 200 $bin/intfa_tests --gtest_filter='*Wgmma*'
grep -E "^\[  FAILED|tests? ran|PASSED|SKIPPED \]|relative L2" "$logs/wgmma_tests.log" | tail -12 |
  tee -a "$summary"
timed demo 60 $bin/intfa run --seq 4096 --heads 16
pipe_rates
timed sass 60 python3 scripts/dump_sass.py "$INTFA_CACHE_DIR" "$logs/sass" "attention_wgmma sm_90a"
note "  GMMA instructions in the wgmma cubins: $(cat "$logs"/sass/*.sass 2>/dev/null | grep -c GMMA)"
# Each shape has more key tiles than stages, so slots are reused (the producer's copies into a
# slot the consumers have released).
for tool in memcheck racecheck; do
  for args in "--seq 500 --heads 2 --causal" "--seq 300 --heads 2" \
              "--seq 400 --head-dim 64 --v-scale block" \
              "--seq 300 --head-dim 256 --causal --p s8 --p-scale running"; do
    sanitize $tool 60 $args
  done
done
# The Hopper kernel's tile configs (the heuristic's choice comes from this sweep).
TAIL_LINES=30 timed wgmma_sweep_d64 120 $bin/intfa bench --head-dims 64 --seq 4096,16384 \
  --causal off,on --repeats 10 --json "$logs/wgmma_sweep_d64.json" \
  --configs "128,64,12,2;128,128,12,2;128,128,12,3;192,64,16,2;192,128,16,2"
TAIL_LINES=30 timed wgmma_sweep_d128 120 $bin/intfa bench --head-dims 128 --seq 4096,16384 \
  --causal off,on --repeats 10 --json "$logs/wgmma_sweep_d128.json" \
  --configs "128,64,12,2;128,128,12,2;128,128,12,3;192,128,16,2;192,128,16,3"
TAIL_LINES=40 timed compare_sdpa 200 python3 bench/compare_sdpa.py --lib $build/lib/libintfa.so \
  --out-dir "$logs"
# The JIT and call-overhead targets of issue 2 on the Hopper path (which encodes three tensor
# maps per call), and the tuner's time with the Hopper candidates.
timed jit 60 $bin/intfa bench --jit --repeats 5 --json "$logs/jit.json"
timed tune 120 $bin/intfa tune --head-dims 128 --causal off --tuning-db "$logs/tuning.json" \
  --json "$logs/tune.json"
TAIL_LINES=25 timed python 240 scripts/device_python.sh "$logs"
timed ncu 90 ncu --section SpeedOfLight --section Occupancy --section WarpStateStats \
  --section ComputeWorkloadAnalysis --section InstructionStats -k regex:attention \
  --launch-skip 3 --launch-count 1 $bin/intfa bench --seq 8192 --repeats 1

finish
