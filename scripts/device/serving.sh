#!/usr/bin/env bash
# On the GPU machine: transformers' continuous batching on intfa's paged cache (paged|intfa,
# python/intfa/integrations/transformers_paged.py), checked and measured in one call:
#   1. tests: the Python tests of the serving integrations (SERVING_PYTESTS replaces the list);
#   2. break: the block table taken from every sequence's first slot (a copy of the imported
#      module edited, the original restored): the step tests should fail;
#   3. bench: bench/continuous_batching.py with SERVING_BENCH_ARGS (tokens/s of generate_batch
#      against paged|sdpa, greedy agreement, KV bytes per token).
#   usage: INTFA_BUILD=.dbuild [SERVING_STEPS=tests,break,bench] scripts/device/serving.sh
#          carry: the build (bin/, lib/, fake-driver/) and .deps
# Logs under $OUT/logs, a summary last; every step under its own time limit.
export INTFA_BUILD=${INTFA_BUILD:-build-dev}
export INTFA_DEADLINE_S=${INTFA_DEADLINE_S:-570}
source "$(dirname "$0")/common.sh"
steps=",${SERVING_STEPS:-tests,break,bench},"
wants() { [[ "$steps" == *",$1,"* ]]; }
python=$(command -v python3)

build_python_extension "$(nproc)" > "$logs/python_build.log" 2>&1
note "python build: exit $? ($(tail -1 "$logs/python_build.log"))"
export PYTHONPATH=$PWD/build-device-py/python:$PWD/bench INTFA_TEST_REPORT=$logs/python_report.txt
: > "$INTFA_TEST_REPORT"
module=build-device-py/python/intfa/integrations/transformers_paged.py

pytests() {  # pytests NAME LIMIT_S FILES/ARGS...
  local name=$1 limit=$2; shift 2
  TAIL_LINES=25 timed "$name" "$limit" "$python" -m pytest -q -rs -p no:cacheprovider "$@"
  grep -E "passed|failed" "$logs/$name.log" | tail -2 | tee -a "$summary"
  grep -E "^FAILED" "$logs/$name.log" | head -10 | tee -a "$summary"
}

if wants tests; then
  # shellcheck disable=SC2086  # a list of files
  pytests serving_tests "${SERVING_TESTS_LIMIT_S:-200}" \
    ${SERVING_PYTESTS:-python/tests/test_transformers_paged.py python/tests/test_vllm_backend.py}
  tee -a "$summary" < "$INTFA_TEST_REPORT"
fi

if wants break; then
  if [ ! -f "$module" ]; then
    note "break: SKIPPED ($module missing: the Python build failed)"
  else
    cp "$module" "$logs/transformers_paged.orig.py"
    sed -i 's/slots.to(torch.int64)\[index\]/slots.to(torch.int64)[index * 0]/' "$module"
    if ! grep -q 'index \* 0' "$module"; then
      note "break: the edit did not apply (nothing broken)"
    else
      pytests serving_break 120 python/tests/test_transformers_paged.py -k ContinuousBatchingSteps
      note "  (broken on purpose: every page the first slot's; a failure above is the expected outcome)"
    fi
    cp "$logs/transformers_paged.orig.py" "$module"
  fi
fi

if wants bench; then
  # shellcheck disable=SC2086  # a list of arguments
  TAIL_LINES=30 timed serving_bench "${SERVING_BENCH_LIMIT_S:-400}" "$python" \
    bench/continuous_batching.py ${SERVING_BENCH_ARGS:-} --json "$OUT/continuous_batching.json"
  grep -E "tokens/s|budget" "$logs/serving_bench.log" | tee -a "$summary" > /dev/null
fi
checkpoint
finish
