#!/usr/bin/env bash
# On the GPU machine, one purpose of scripts/device_run.sh (which dispatches here): Template
# variants (.variants/<name>/, a full copy of templates/ with one change; hand-made
# or scripts/make_ablations.py) against the embedded templates, same problems and configs.
# Optional: AB_BENCH_ARGS (the bench's problem and config options instead of d=64,128,
# N=4k,16k, causal off and on), AB_TESTS (a gtest filter run with each variant), AB_SKIP_PYTHON=1.
# Expects a Release build carried in build/ (or INTFA_BUILD); writes under $OUT.
source "$(dirname "$0")/common.sh"

pipe_rates
# Template variants (.variants/<name>/, a full copy of templates/ with one change) against the
# embedded templates: same problems and configs (default: the heuristic's), same process setup.
for dir in embedded .variants/*/; do
  name=$(basename "$dir")
  if [ "$dir" = embedded ]; then unset INTFA_TEMPLATE_DIR; else export INTFA_TEMPLATE_DIR=$PWD/$dir; fi
  [ "$dir" != embedded ] && [ -n "${AB_TESTS:-}" ] && gtests "ab_tests_$name" 200 "$AB_TESTS"
  # shellcheck disable=SC2086 # AB_BENCH_ARGS is a list of options
  timed "ab_$name" 150 $bin/intfa bench ${AB_BENCH_ARGS:---head-dims 64,128 --seq 4096,16384 \
    --causal off,on} --repeats 15 --json "$logs/ab_$name.json"
  TAIL_LINES=4 timed "ab_accuracy_$name" 30 $bin/intfa run --seq 4096 --heads 8
done
unset INTFA_TEMPLATE_DIR
[ -z "${AB_SKIP_PYTHON:-}" ] && TAIL_LINES=25 timed python 240 scripts/device_python.sh "$logs"

finish
