#!/usr/bin/env bash
# On the GPU machine: per-block K (AttentionOptions::k_granularity = block, issue 22's opt-in
# numerics) checked and measured in one call:
#   1. the C++ GPU tests of per-block K (both kernels against the quantized model) and, since the
#      shared softmax changed under them, the per-token kernels' tests (KB_TESTS);
#   2. the kernel alone per token and per block (`intfa bench`, token / block / block / token);
#   3. the Python GPU test of the option (the package built for that machine's Python);
#   4. the kernel alone per block against SDPA FP16 in one process (bench/compare_sdpa.py through
#      the C API) and `intfa.attention` with it (through the package), both orders;
#   5. accuracy of the real kernels, K per token and per block, per input family
#      (bench/accuracy.py --numerics k_block, against float64 of the original inputs);
#   6. compute-sanitizer memcheck and racecheck of per-block K on shapes that reuse pipeline slots
#      (both Hopper block shapes, the portable kernel, causal tails).
# ncu's instructions per 32 scores of the per-block kernels: LIMITS_BENCH_ARGS="--k-scale block"
# LIMITS_SKIP_COMPARE=1 scripts/device/limits.sh.
#   usage: INTFA_BUILD=build-dev [KB_STEPS=tests,bench,python,compare,accuracy,sanitize] scripts/device/k_blocks.sh
#          carry: build-dev and .deps
# Logs under $OUT/logs, a summary last; every step under its own time limit.
export INTFA_BUILD=${INTFA_BUILD:-build-dev}
export INTFA_DEADLINE_S=${INTFA_DEADLINE_S:-580}
source "$(dirname "$0")/common.sh"
steps=",${KB_STEPS:-tests,bench,python,compare,accuracy,sanitize},"
wants() { [[ "$steps" == *",$1,"* ]]; }

python_build=""
if wants python || wants compare; then
  build_python_extension "$(( $(nproc) - 2 ))" > "$logs/python_build.log" 2>&1 &
  python_build=$!
fi

if wants tests; then
  gtests per_block_tests 150 '*PerBlockK*'
  gtests per_token_tests 200 "${KB_TESTS:-AttentionGpuOptions.*:Shapes/WgmmaGpu.*:WgmmaGpuOptions.*:WgmmaHalfGpuOptions.*:*QuantizeRowsGpu*:Attention16bit*}"
fi

bench_args=(--head-dims "${KB_HEAD_DIMS:-64,128}" --seq "${KB_SEQS:-1k,4k,16k}" --causal off,on
            --repeats 15)
for k_scale in token block block token; do
  wants bench || break
  TAIL_LINES=14 timed "bench_$k_scale" 60 "$bin/intfa" bench "${bench_args[@]}" \
    --k-scale "$k_scale" --json "$logs/bench_${k_scale}_$(date +%s).json"
done

if [ -n "$python_build" ]; then
  wait "$python_build"
  note "python build: exit $? ($(tail -1 "$logs/python_build.log"))"
fi
export PYTHONPATH=$PWD/build-device-py/python:$PWD/bench INTFA_TEST_REPORT=$logs/python_report.txt
: > "$INTFA_TEST_REPORT"
if wants python; then
  TAIL_LINES=8 timed python_tests 90 python3 -m pytest -q -rs -p no:cacheprovider \
    python/tests/test_gpu.py -k "per_block or k_granularity"
  tee -a "$summary" < "$INTFA_TEST_REPORT"
fi

if wants compare; then
  TAIL_LINES=20 timed compare_kernel 150 python3 bench/compare_sdpa.py --intfa ctypes \
    --lib "$build/lib/libintfa.so" --k-scale block --head-dims "${KB_HEAD_DIMS:-64,128}" \
    --seqs "${KB_COMPARE_SEQS:-1024,4096,16384}" --causal off,on --repeats 10 \
    --out-dir "$logs/compare_kernel"
  TAIL_LINES=20 timed compare_e2e 150 python3 bench/compare_sdpa.py --intfa binding \
    --k-scale block --head-dims "${KB_HEAD_DIMS:-64,128}" \
    --seqs "${KB_COMPARE_SEQS:-1024,4096,16384}" --causal off,on --repeats 10 \
    --out-dir "$logs/compare_e2e"
fi
if wants accuracy; then
  TAIL_LINES=30 timed accuracy 120 python3 bench/accuracy.py --lib "$build/lib/libintfa.so" \
    --numerics k_block --inputs normal,k_offset,outliers,sharp,offset_outliers \
    --head-dims 64,128 --seqs 1024,8192 --out-dir "$logs/accuracy"
fi
if wants sanitize; then
  # 517 keys: 5 key tiles through 2 stages (slots reused), a partial last 64-key block.
  problem=(--heads 2 --seq 300 --seq-kv 517 --causal --k-scale block --repeats 1)
  for tool in memcheck racecheck; do
    for run in "--head-dim 128" "--head-dim 128 --config 192,128,16,2" "--head-dim 64 --variant half" \
               "--head-dim 64 --config 64,64,4,2"; do
      name="sanitize_${tool}_$(echo "$run" | tr -c 'a-z0-9' '_')"
      # shellcheck disable=SC2086 # $run is a list of options
      TAIL_LINES=3 timed "$name" 60 compute-sanitizer --tool "$tool" --error-exitcode 9 \
        "$bin/intfa" run "${problem[@]}" $run
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$logs/$name.log" | tail -1 | sed "s/^/$name: /" |
        tee -a "$summary"
    done
  done
fi
finish
