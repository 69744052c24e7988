#!/usr/bin/env bash
# On the GPU machine: paged prefill (include/intfa/paged.hpp, paged_prefill) and the varlen Hopper
# kernel under it, checked and measured in one call:
#   1. tests: the paged prefill GPU tests (against the quantized CPU model and float64), the
#      varlen tests (packed against dense, bit for bit, on the Hopper and the portable kernel),
#      and the kernels' other GPU tests (PREFILL_TESTS replaces the filter);
#   2. break: PREFILL_BREAK_TESTS with each of PREFILL_BREAK_VARIANTS (template folders broken on
#      purpose): each run should fail;
#   3. bench: `intfa bench --decode --prefill` for each entry of PREFILL_BENCH_ARGS (';'-separated
#      argument lists): paged prefill against intfa's dense kernel alone at the same shape.
#   usage: INTFA_BUILD=.dbuild [PREFILL_STEPS=tests,break,bench] scripts/device/paged_prefill.sh
#          carry: the build (bin/, lib/, fake-driver/) and .deps, and the break variants
# Logs under $OUT/logs, a summary last; every step under its own time limit.
export INTFA_BUILD=${INTFA_BUILD:-build-dev}
export INTFA_DEADLINE_S=${INTFA_DEADLINE_S:-570}
source "$(dirname "$0")/common.sh"
steps=",${PREFILL_STEPS:-tests,break,bench},"
wants() { [[ "$steps" == *",$1,"* ]]; }

if wants tests; then
  gtests prefill_tests "${PREFILL_TESTS_LIMIT_S:-240}" "${PREFILL_TESTS:-Cases/PagedPrefillGpu.*:Cases/VarlenGpu.*:Shapes/WgmmaGpu.*:Shapes/WgmmaHalfGpu.*:*PagedServingGpu*:*PagedDecodeGpu*:*PagedAppendGpu*}"
fi

if wants break; then
  for dir in ${PREFILL_BREAK_VARIANTS:-}; do
    INTFA_TEMPLATE_DIR=$PWD/$dir gtests "break_$(basename "$dir")" 120 \
      "${PREFILL_BREAK_TESTS:-Cases/PagedPrefillGpu.*:Cases/VarlenGpu.*}"
    note "  (broken on purpose with $dir: a failure above is the expected outcome)"
  done
fi

if wants bench; then
  IFS=';' read -r -a benches <<< "${PREFILL_BENCH_ARGS:---batch 4 --seq 4k,16k --q-len 4k --head-dims 64,128 --bits 8,4 --causal}"
  index=0
  for arguments in "${benches[@]}"; do
    index=$(( index + 1 ))
    # shellcheck disable=SC2086  # one entry is a list of arguments
    TAIL_LINES=20 timed "prefill_bench_$index" "${PREFILL_BENCH_LIMIT_S:-200}" "$bin/intfa" bench \
      --decode --prefill $arguments --json "$logs/prefill_bench_$index.json"
    grep -E "^B[0-9]" "$logs/prefill_bench_$index.log" | tee -a "$summary" > /dev/null
    cp "$logs/prefill_bench_$index.json" "$OUT/" 2> /dev/null
  done
fi
checkpoint
