#!/usr/bin/env bash
# The paged INT8/INT4 KV cache on the lent GPU (issue 28; see ../shared/device/README.md): its GPU
# tests, compute-sanitizer (memcheck and racecheck) on decode steps, `intfa bench --decode` and
# `intfa tune --decode` on the issue's shapes, the side-by-side comparison with PyTorch SDPA cuDNN
# FP16 on the same logical K/V (bench/compare_decode.py, both orders), and, when .deps was carried,
# the Python package's paged tests built with that machine's Python. Expects a Release build
# carried in build/ (built on the project machine); writes logs under $OUT/logs (logs.tgz) and a
# summary last. Each step runs under its own time limit, cut to what is left of INTFA_DEADLINE_S
# (default 460 s, so that the whole script stays under 8 minutes).
#   usage: scripts/device_decode.sh            (run from the repository root)
#   device call: run(command="bash scripts/device_decode.sh", carry=["build", ".deps"])
# Shapes (d=128, 32 query heads over 8 KV heads, INT8 and INT4): B=8 N=32k one query; B=32 N=4k
# one query; B=8 N=32k 16 queries.
set -u
cd "$(dirname "$0")/.."
# The environment, the carried build, logs, timed() and the device line: scripts/device/common.sh.
export INTFA_DEADLINE_S=${INTFA_DEADLINE_S:-460}
source scripts/device/common.sh
export INTFA_CACHE_DIR=/tmp/intfa-cache-decode  # (its own: the bundle below is its deploy cache)

gtest_verdict() {
  grep -E "^\[  FAILED|tests? ran|PASSED|SKIPPED \]|relative L2|rel. L2" "$logs/$1.log" | tail -"${2:-12}" |
    tee -a "$summary"
}

# Every kernel of the family (and the attention kernels precompile always lists), compiled on all
# cores into a bundle the steps below read instead of compiling one at a time.
bundle=/tmp/intfa-decode-bundle
TAIL_LINES=4 timed precompile 90 $bin/intfa precompile --out "$bundle" --arch sm_90a \
  --head-dims 64,128,256 --variants full --dtypes f16,bf16 --paged-bits 8,4 -j "$(nproc)"
[ -f "$bundle/manifest.json" ] && export INTFA_DEPLOY_CACHE=$bundle

# The GPU tests: appends byte for byte, the serving loop, edge cases, the CUDA graph, merge_states;
# then the CPU model's accuracy study (its numbers are in templates/decode/README.md).
timed gpu_tests 170 $bin/intfa_tests \
  --gtest_filter='*PagedServingGpu*:*PagedDecodeGpu*:*PagedAppendGpu*:*MergeStatesGpu*'
gtest_verdict gpu_tests 20
grep -E "against the same quantized cache" "$logs/gpu_tests.log" | tee -a "$summary"
TAIL_LINES=4 timed cpu_tests 60 $bin/intfa_tests \
  --gtest_filter='PagedCacheModel*:PagedCacheAccuracy*:PagedFamily*:PagedValidation*'
gtest_verdict cpu_tests 4
grep -E "relative L2" "$logs/cpu_tests.log" | tee -a "$summary"

# compute-sanitizer on decode steps: the edge cases (empty sequences, page boundaries, rows with
# no key), warps that split a row tile's tokens and merge through shared memory (32 rows), the
# split combine, appends and merge_states.
for tool in memcheck racecheck; do
  TAIL_LINES=3 timed "${tool}_decode" 100 compute-sanitizer --tool $tool --error-exitcode 9 \
    $bin/intfa_tests --gtest_filter='PagedDecodeGpu.LengthOnePage*:PagedDecodeGpu.RowsThatSeeNoKey*:Cases/PagedServingGpu.*/Int8_Gqa8x2_Causal16_Rows32:Cases/PagedAppendGpu.*/Int4_D128_F16_Smoothed:Cases/MergeStatesGpu.*/F16_InPlace_D64'
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$logs/${tool}_decode.log" | tail -3 |
    tee -a "$summary"
done

# Decode and append speed on the issue's shapes (bandwidth over the bytes read).
TAIL_LINES=8 timed bench_b8_n32k 60 $bin/intfa bench --decode --batch 8 --seq 32k --q-len 1,16 \
  --bits 8,4 --repeats 30 --json "$logs/bench_b8_n32k.json"
TAIL_LINES=6 timed bench_b32_n4k 40 $bin/intfa bench --decode --batch 32 --seq 4k --q-len 1 \
  --bits 8,4 --repeats 30 --json "$logs/bench_b32_n4k.json"
grep -hE "^B[0-9]" "$logs/bench_b8_n32k.log" "$logs/bench_b32_n4k.log" | tee -a "$summary"

# The same shapes with PyTorch SDPA cuDNN FP16 on the same logical K/V, in the same process.
TAIL_LINES=14 timed compare_decode 100 python3 bench/compare_decode.py --lib $build/lib/libintfa.so \
  --out-dir "$logs"
grep -E "^\||device copy" "$logs/compare_decode.log" | tee -a "$summary"

# The split heuristic against every split count (and the other tile configs at 16 queries).
TAIL_LINES=8 timed tune_splits 60 $bin/intfa tune --decode --batch 8,32 --seq 4k,32k --q-len 1 \
  --bits 8 --repeats 10 --json "$logs/tune_splits.json"
grep -E "^B[0-9]" "$logs/tune_splits.log" | tee -a "$summary"
TAIL_LINES=20 timed tune_configs_q16 60 $bin/intfa tune --decode --batch 8 --seq 32k --q-len 16 \
  --bits 8,4 --configs all --repeats 5 --json "$logs/tune_configs_q16.json"

# The Python package's paged tests with this machine's Python (needs .deps: see
# scripts/prepare_device_deps.sh).
python_paged() {
  local root=$PWD
  build_python_extension &&
    cd python/tests &&
    PYTHONPATH=$root/build-device-py/python INTFA_TEST_REPORT=$logs/python_report.txt \
      python3 -m unittest -v test_paged_gpu test_paged_arguments test_paged_layout
}
if [ -d .deps ]; then
  TAIL_LINES=6 timed python_paged 200 env logs="$logs" bash -c "$(declare -f build_python_extension python_paged); python_paged"
  grep -E "^(Ran |OK|FAILED)" "$logs/python_paged.log" | tee -a "$summary"
  [ -f "$logs/python_report.txt" ] && tee -a "$summary" < "$logs/python_report.txt"
else
  note "python_paged: SKIPPED (carry .deps, made by scripts/prepare_device_deps.sh, to build the extension here)"
fi

echo; echo "=== summary ($(( $(date +%s) - started )) s) ==="
cat "$summary"
