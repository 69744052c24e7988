#!/usr/bin/env bash
# On the GPU machine: `intfa.attention` end to end, as users call it. Runs the C++ GPU tests named
# by E2E_TESTS (default: the 16-bit entry point and the Hopper kernel's), builds the Python
# extension and runs python/tests (scripts/device_python.sh), then the host time per call
# (bench/python_overhead.py) and the SDPA table with the end-to-end columns
# (bench/compare_sdpa.py through the binding: kernel only, `intfa.attention` full and half INT8,
# cuDNN and flash FP16, each timed in both orders).
#   usage: scripts/device/e2e.sh        carry: a build with bin/ and lib/ (INTFA_BUILD, default
#          build-dev) and .deps (scripts/prepare_device_deps.sh)
# Logs under $OUT/logs, a summary last; every step under its own time limit (timed()).
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/intfa-out}
logs=$OUT/logs
mkdir -p "$logs"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export INTFA_CACHE_DIR=/tmp/intfa-cache PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
unset INTFA_ARCH INTFA_TUNE_DB INTFA_DEPLOY_CACHE
build=${INTFA_BUILD:-build-dev}
built_at=${INTFA_BUILT_AT:-/work/main}
[ -e "$built_at" ] || { mkdir -p "$(dirname "$built_at")" && ln -s "$PWD" "$built_at"; }
summary=$OUT/summary.txt
: > "$summary"
started=$(date +%s)
deadline=$(( started + ${INTFA_DEADLINE_S:-580} ))
note() { echo "$*" | tee -a "$summary"; }

# timed NAME LIMIT_S COMMAND...: COMMAND's output to $logs/NAME.log (its tail echoed), under
# min(LIMIT_S, time left) seconds; its exit status and time go to the summary.
timed() {
  local name=$1 limit=$2; shift 2
  local left=$(( deadline - $(date +%s) - 10 ))
  if [ "$left" -lt 15 ]; then note "$name: SKIPPED (no time left)"; return 0; fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo; echo "=== $name (limit ${limit} s) ==="
  local start=$(date +%s)
  timeout --kill-after=5 "$limit" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  tail -n "${TAIL_LINES:-12}" "$logs/$name.log"
  note "$name: exit $rc in $(( $(date +%s) - start )) s"
}

note "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ)"
timed gpu_tests 200 "$build/bin/intfa_tests" \
  --gtest_filter="${E2E_TESTS:-*Attention16bit*:*Wgmma*Gpu*:AttentionGpu*}"
grep -E "^\[  FAILED|tests? ran|PASSED" "$logs/gpu_tests.log" | tail -6 | tee -a "$summary"
TAIL_LINES=30 timed python 330 scripts/device_python.sh "$logs"
export PYTHONPATH=$PWD/build-device-py/python
TAIL_LINES=12 timed python_overhead 60 python3 bench/python_overhead.py --calls 2000 \
  --json "$logs/python_overhead.json"
TAIL_LINES=16 timed compare_sdpa 240 python3 bench/compare_sdpa.py --intfa binding \
  --head-dims 64,128 --seqs 1024,4096,16384 --causal off,on --repeats 10 --out-dir "$logs"
tar czf "$OUT/logs.tgz" -C "$OUT" logs
echo; echo "=== summary ($(( $(date +%s) - started )) s) ==="
cat "$summary"
