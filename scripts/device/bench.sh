#!/usr/bin/env bash
# On the GPU machine, one purpose of scripts/device_run.sh (which dispatches here): The JIT path,
# the tuner, the accuracy tables, the speed of each numerics option, INT4 and
# the SDPA table.
# Expects a Release build carried in build/ (or INTFA_BUILD); writes under $OUT.
source "$(dirname "$0")/common.sh"

timed jit 60 $bin/intfa bench --jit --repeats 5 --json "$logs/jit.json"
# One bucket set of the tuner (d=128, non-causal, N buckets 1k, 4k, 16k), into its own database.
timed tune 120 $bin/intfa tune --head-dims 128 --causal off --tuning-db "$logs/tuning.json" \
  --json "$logs/tune.json"
timed accuracy 120 python3 bench/accuracy.py --lib $build/lib/libintfa.so --numerics all \
  --out-dir "$logs"
# The speed of each numerics option picks the defaults (issue 4).
for numerics in "s8 running tensor" "u8 running tensor" "u8 tile tensor" "u8 tile channel" \
                "u8 running block" "u8 tile block"; do
  set -- $numerics
  TAIL_LINES=10 timed "numerics_$1_$2_$3" 60 $bin/intfa bench --head-dims 64,128 --seq 16384 \
    --causal off,on --repeats 15 --p $1 --p-scale $2 --v-scale $3 \
    --json "$logs/numerics_$1_$2_$3.json"
done
# INT4 Q.K: emulated on Hopper (no INT4 tensor cores), so its speed is reported, not targeted.
timed int4 60 $bin/intfa bench --head-dims 128 --seq 4096 --causal off --variants full,half \
  --qk-bits 4 --repeats 5 --json "$logs/int4.json"
TAIL_LINES=40 timed compare_sdpa 240 python3 bench/compare_sdpa.py --lib $build/lib/libintfa.so \
  --out-dir "$logs"

finish
