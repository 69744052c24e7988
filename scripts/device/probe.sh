#!/usr/bin/env bash
# On the GPU machine, one purpose of scripts/device_run.sh (which dispatches here): Where a block's
# time goes: time per wave against tiles per block, ncu stall samples per SASS
# instruction. Optional: PROBE_TESTS (a gtest filter to run first), PROBE_AB_BUILD (a second
# carried build timed on the same shapes), PROBE_COMPARE=1, PROBE_SOURCE_SEQ (default 1024).
# Expects a Release build carried in build/ (or INTFA_BUILD); writes under $OUT.
source "$(dirname "$0")/common.sh"

[ -n "${PROBE_TESTS:-}" ] && gtests gpu_tests 240 "$PROBE_TESTS"
# B=1, H=33: 33 * N / 128 blocks of N / 128 tiles, a whole number of waves on 132 SMs, so the
# time per wave against the tiles per block separates a block's fixed cost from a tile's. A
# second build (PROBE_AB_BUILD, e.g. the same source with one host change) runs the same shapes.
for build_dir in $build ${PROBE_AB_BUILD:-}; do
  for d in 128 64; do
    TAIL_LINES=12 timed "waves_d${d}_$(basename "$build_dir")" 90 $build_dir/bin/intfa bench \
      --batch 1 --heads 33 --head-dims $d --seq 1024,2048,4096,8192,16384 --causal off \
      --repeats 15 --json "$logs/waves_d${d}_$(basename "$build_dir").json"
  done
done
TAIL_LINES=12 timed reference_shapes 90 $bin/intfa bench --head-dims 128 --seq 1024,4096,16384 \
  --causal off --repeats 15 --json "$logs/reference_shapes.json"
# Where the warps wait, per SASS instruction (stall samples); at 1k the prologue and epilogue
# weigh most.
timed ncu_source 150 ncu --section WarpStateStats --section SourceCounters -k regex:attention \
  --launch-skip 3 --launch-count 1 -o "$logs/source" \
  $bin/intfa bench --batch 1 --heads 33 --seq ${PROBE_SOURCE_SEQ:-1024} --repeats 1
timed ncu_source_csv 60 ncu -i "$logs/source.ncu-rep" --page source --csv --print-source sass
gzip -f "$logs/ncu_source_csv.log"
TAIL_LINES=25 timed stall_samples 30 python3 scripts/stall_samples.py "$logs/ncu_source_csv.log.gz"
if [ -n "${PROBE_COMPARE:-}" ]; then
  TAIL_LINES=30 timed compare_sdpa 240 python3 bench/compare_sdpa.py --lib $build/lib/libintfa.so \
    --out-dir "$logs"
fi

finish
