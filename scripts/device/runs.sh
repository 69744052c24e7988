#!/usr/bin/env bash
# On the GPU machine, one purpose of scripts/device_run.sh (which dispatches here): The same bench
# with several builds or environments, for host-side or template changes:
# RUNS is a ';'-separated list of "NAME BUILD_DIR [VAR=VALUE ...]", timed in that order and again
# reversed (a kernel timed right after another can run slower). Optional: AB_BENCH_ARGS,
# RUNS_TESTS (a gtest filter to run first), RUNS_SANITIZE (a ';'-separated list of
# "[VAR=VALUE ...] intfa run options" run under memcheck and racecheck).
# Expects a Release build carried in build/ (or INTFA_BUILD); writes under $OUT.
source "$(dirname "$0")/common.sh"

[ -n "${RUNS_TESTS:-}" ] && gtests gpu_tests 240 "$RUNS_TESTS"
IFS=';' read -r -a sanitize_runs <<< "${RUNS_SANITIZE:-}"
for run in "${sanitize_runs[@]}"; do
  assignments=$(tr ' ' '\n' <<< "$run" | grep '=')
  options=$(tr ' ' '\n' <<< "$run" | grep -v '=')
  for tool in memcheck racecheck; do
    # shellcheck disable=SC2086 # lists of assignments and options
    ( [ -n "$assignments" ] && export $assignments; sanitize $tool 120 $options )
  done
done
IFS=';' read -r -a runs <<< "${RUNS:?RUNS names the builds and environments to time}"
order=("${runs[@]}")
for ((i = ${#runs[@]} - 1; i >= 0; --i)); do order+=("${runs[i]}"); done
round=1
for ((i = 0; i < ${#order[@]}; ++i)); do
  [ "$i" -eq "${#runs[@]}" ] && round=2
  set -- ${order[i]}
  name=$1 run_build=$2; shift 2
  # shellcheck disable=SC2086 # AB_BENCH_ARGS is a list of options
  TAIL_LINES=14 timed "run_${name}_round${round}" 150 env "$@" $run_build/bin/intfa bench \
    ${AB_BENCH_ARGS:---head-dims 64,128 --seq 1024,4096,16384 --causal off,on} --repeats 15 \
    --json "$logs/run_${name}_round${round}.json"
done

finish
