#!/usr/bin/env bash
# On the GPU machine, one purpose of scripts/device_run.sh (which dispatches here): ncu's
# instruction and issue counts of the heuristic's kernels (d=64 and 128, N=4k and 16k),
# the speed those instructions allow with every issue slot busy (scripts/issue_bound.py), the
# stall reasons, then compare_sdpa.
# Expects a Release build carried in build/ (or INTFA_BUILD); writes under $OUT.
# LIMITS_BENCH_ARGS: more `intfa bench` options for every profiled launch (e.g. --k-scale block);
# LIMITS_SKIP_COMPARE=1 leaves compare_sdpa out.
source "$(dirname "$0")/common.sh"

# ncu leaves the clocks alone (--clock-control none), so its SM clock is the one the timings
# ran at. Metrics this ncu does not know are left out rather than failing the run.
metrics=$(known_ncu_metrics gpu__time_duration.sum sm__cycles_elapsed.avg.per_second \
  smsp__inst_executed.sum smsp__issue_active.avg.pct_of_peak_sustained_active \
  smsp__warps_active.avg.per_cycle_active \
  sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active \
  sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active \
  sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active)
for shape in "64 4096 off" "64 16384 off" "128 4096 off" "128 16384 off" "128 16384 on"; do
  set -- $shape
  name="limits_d$1_n$2_$3"
  TAIL_LINES=3 timed "$name" 120 ncu --clock-control none --csv --metrics "$metrics" \
    -k regex:attention --launch-skip 3 --launch-count 1 --log-file "$logs/$name.csv" \
    $bin/intfa bench --head-dims "$1" --seq "$2" --causal "$3" --repeats 1 ${LIMITS_BENCH_ARGS:-}
done
# Why the slots stay idle: warps stalled per issued instruction, by reason.
for d in 64 128; do
  TAIL_LINES=2 timed "stalls_d${d}_n16384_off" 120 ncu --clock-control none --csv \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    -k regex:attention --launch-skip 3 --launch-count 1 \
    --log-file "$logs/stalls_d${d}_n16384_off.csv" \
    $bin/intfa bench --head-dims $d --seq 16384 --causal off --repeats 1 ${LIMITS_BENCH_ARGS:-}
done
python3 scripts/issue_bound.py "$logs"/limits_*.csv "$logs"/stalls_*.csv | tee -a "$summary"
if [ -z "${LIMITS_SKIP_COMPARE:-}" ]; then
  TAIL_LINES=30 timed compare_sdpa 240 python3 bench/compare_sdpa.py --lib $build/lib/libintfa.so \
    --out-dir "$logs"
fi

finish
