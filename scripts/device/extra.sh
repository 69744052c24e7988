#!/usr/bin/env bash
# On the GPU machine, one purpose of scripts/device_run.sh (which dispatches here): K smoothing's
# cost, the default numerics' speed at N=16k, INT4 accuracy.
# Expects a Release build carried in build/ (or INTFA_BUILD); writes under $OUT.
source "$(dirname "$0")/common.sh"

# The default numerics at N=16k (B=4, H=32) against RESULTS.md's table: a change of the kernel's
# addressing (varlen) must not cost the dense kernels.
TAIL_LINES=6 timed dense_speed 60 $bin/intfa bench --head-dims 64,128 --seq 16384 --causal off,on \
  --repeats 15 --json "$logs/dense_speed.json"
# K smoothing's cost (its mean pass is in the quantize columns), against plain K in the same run.
for smoothing in "" --smooth-k; do
  TAIL_LINES=6 timed "quantize${smoothing:+_smooth_k}" 60 $bin/intfa bench --head-dims 64,128 \
    --seq 4096,16384 --repeats 10 $smoothing --json "$logs/quantize${smoothing:+_smooth_k}.json"
done
# INT4 Q.K: its error against float64 of the original inputs (intfa run checks it too).
for variant in full half; do
  for d in 64 128; do
    for n in 1024 4096; do
      for dist in normal uniform; do
        TAIL_LINES=0 timed "int4_${variant}_d${d}_n${n}_${dist}" 60 $bin/intfa run --qk-bits 4 \
          --variant $variant --head-dim $d --seq $n --heads 8 --dist $dist --repeats 5
        note "  $(grep -m1 'relative L2' "$logs/int4_${variant}_d${d}_n${n}_${dist}.log")"
      done
    done
  done
done

finish
