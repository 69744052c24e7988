#!/usr/bin/env bash
# On the GPU machine, one purpose of scripts/device_run.sh (which dispatches here): The tile-config
# sweep and ncu of the d=128 kernel.
# Expects a Release build carried in build/ (or INTFA_BUILD); writes under $OUT.
source "$(dirname "$0")/common.sh"

timed sweep 150 $bin/intfa bench --head-dims 64,128 --seq 4096 --causal off,on --variants full,half \
  --configs all --repeats 10 --json "$logs/sweep.json"
# The limiter of the d=128 full INT8 kernel (N=8192, B=4, H=32).
timed ncu 90 ncu --section SpeedOfLight --section Occupancy --section WarpStateStats \
  --section ComputeWorkloadAnalysis --section InstructionStats -k regex:attention \
  --launch-skip 3 --launch-count 1 $bin/intfa bench --seq 8192 --repeats 1
grep -E "Throughput|Registers|Occupancy|Stall|Issue|Warp Cycles|Eligible|Active Warps|Pipe" \
  "$logs/ncu.log" | head -40

finish
