#!/usr/bin/env bash
# On the GPU machine: issue 25, accuracy on the inputs real models produce, on the real kernels.
#   1. gpu_tests: the C++ GPU tests of the quantize kernels (rotation, sampled means, Q's LSE
#      term, exactly against the CPU model) and of the attention kernels against the model with
#      K smoothing (now the default in every check) and the rotation, every input family, both
#      kernels (ACC_TESTS overrides the filter);
#   2. accuracy: bench/accuracy.py through the C API's one call (intfa_attention_forward_16bit,
#      what intfa.attention runs) on every input family, full INT8 defaults and half INT8, with
#      each Q/K transform (plain, smooth, rotate, smooth+rotate), against float64, with the LSE;
#   3. quantize_cost_*: `intfa bench` with each transform: the quantize kernels' time (K
#      smoothing's mean pass and the rotation are all in it; the attention kernel is the same);
#   4. python: builds the extension (as scripts/device_python.sh), runs the Python GPU tests of the
#      ops (LSE and K smoothing, rotation, varlen) and bench/qk_transforms_cost.py: intfa.attention
#      end to end with each transform (ACC_SKIP_PYTHON=1 skips it).
#   usage: scripts/device_accuracy.sh [all|kernels|python]   (all: steps 1-4; kernels: 1-3;
#          python: 4, for a second call when the first ran out of time)
#          carry: a slim build with bin/ and lib/ (INTFA_BUILD, default build-dev: mkdir build-dev
#          && cp -r build/bin build/lib build-dev/) and .deps (scripts/prepare_device_deps.sh) for
#          step 4.
# Logs under $OUT/logs (and logs.tgz), a summary last; every step under its own time limit, cut to
# what is left of INTFA_DEADLINE_S (default 470 s: the whole script stays under 8 minutes).
set -u
mode=${1:-all}
case "$mode" in all|kernels|python) ;; *) echo "usage: $0 [all|kernels|python]" >&2; exit 2;; esac
cd "$(dirname "$0")/.."
# The environment, the carried build, logs, timed() and the device line: scripts/device/common.sh.
export INTFA_BUILD=${INTFA_BUILD:-build-dev}
export INTFA_DEADLINE_S=${INTFA_DEADLINE_S:-470}
source scripts/device/common.sh

kernel_steps() {
  # 1. The GPU tests.
  tests="*QuantizeRowsGpu*:*QuantizeVGpu*:Attention16bitGpu*:AttentionGpuOptions.*:WgmmaGpuOptions.*"
  tests="$tests:WgmmaHalfGpuOptions.*:Shapes/AttentionGpu.*:Shapes/WgmmaGpu.*:*AccuracyOnReal*"
  timed gpu_tests 160 "$build/bin/intfa_tests" --gtest_filter="${ACC_TESTS:-$tests}"
  grep -E "^\[  FAILED|tests? ran|PASSED" "$logs/gpu_tests.log" | tail -8 | tee -a "$summary"

  # 2. Accuracy on the real kernels, every family, transform and variant.
  TAIL_LINES=4 timed accuracy 100 python3 bench/accuracy.py --lib "$build/lib/libintfa.so" \
    --inputs all --options plain,smooth,rotate,smooth+rotate --numerics issue \
    --head-dims 64,128 --seqs 1024,4096,16384 --out-dir "$logs/accuracy"
  if [ -f "$logs/accuracy/accuracy.md" ]; then
    note "accuracy (relative L2 %; the full tables in logs/accuracy/accuracy.md):"
    awk '/relative L2/{on=1} /cosine/{on=0} on' "$logs/accuracy/accuracy.md" | grep "^|" \
      | tee -a "$summary" > /dev/null
  fi

  # 3. The quantize kernels' time with each transform (B=4 H=32, full INT8): the attention kernel
  # is the same, so the difference is the whole cost on the GPU.
  for transforms in "--smooth-k=0 --rotate=0" "--smooth-k=1 --rotate=0" "--smooth-k=0 --rotate=1" \
                    "--smooth-k=1 --rotate=1"; do
    name=quantize_cost_$(echo "$transforms" | tr -d ' -' | tr '=' '_')
    TAIL_LINES=8 timed "$name" 30 "$build/bin/intfa" bench --head-dims 64,128 --seq 1k,4k,16k \
      --batch 4 --heads 32 --repeats 10 $transforms
  done
  note "quantize cost, B=4 H=32 full INT8 (attention ms, quantize ms):"
  for f in "$logs"/quantize_cost_*.log; do
    [ -f "$f" ] || continue
    echo "  $(basename "$f" .log)" | tee -a "$summary"
    grep -E "^full " "$f" | awk '{print "    d=" $2 " N=" $3 " attn " $(NF-3) " ms quant " $(NF-1) " ms"}' \
      | tee -a "$summary"
  done
}

python_steps() {
  # 4. The Python binding: its GPU tests of the ops and the end-to-end cost of each transform.
  python=$(command -v python3)
  timed python_build 150 bash -c "$(declare -f build_python_extension); build_python_extension"
  export PYTHONPATH=$PWD/build-device-py/python INTFA_TEST_REPORT=$logs/python_report.txt
  : > "$INTFA_TEST_REPORT"
  TAIL_LINES=20 timed python_tests 90 "$python" -m pytest -v -rs -p no:cacheprovider \
    python/tests/test_gpu.py -k "OpsTest or VarlenTest"
  grep -E "passed|failed" "$logs/python_tests.log" | tail -2 | tee -a "$summary"
  tee -a "$summary" < "$INTFA_TEST_REPORT"
  TAIL_LINES=4 timed qk_transforms_cost 110 "$python" bench/qk_transforms_cost.py \
    --head-dims 64,128 --seqs 1024,4096,16384 --shapes 1x8,4x32 --causal off \
    --repeats 10 --out-dir "$logs/cost"
  [ -f "$logs/cost/qk_transforms_cost.md" ] && grep "^|" "$logs/cost/qk_transforms_cost.md" \
    | tee -a "$summary" > /dev/null
}

[ "$mode" = python ] || kernel_steps
[ "$mode" = kernels ] || python_steps

echo; echo "=== summary ($(( $(date +%s) - started )) s) ==="
cat "$summary"
