#!/usr/bin/env bash
# On the GPU machine, in one call: what changed since the last GPU run, checked and measured.
#   1. the Python extension is built with that machine's Python in the background while
#   2. the C++ GPU tests run (and the examples/ programs): the one-call 16-bit entry point with K smoothing and the rotation,
#      the quantize kernels, accuracy on the input families (issue 25), the paged KV cache
#      (append, decode, serving loop, CUDA graph) and merge_states (issue 28);
#   3. the Python GPU tests: the clients (return_lse, out=, padded head dims, fallback,
#      transformers/diffusers/patch_sdpa, issue 27), the paged ops, and the ops with the
#      transforms;
#   4. decode bandwidth on the issue's shapes against SDPA cuDNN FP16 (bench/compare_decode.py);
#   5. accuracy of the real kernels per input family and transform (bench/accuracy.py);
#   6. `intfa.attention` end to end against SDPA at d=128 (bench/compare_sdpa.py, both orders).
#   usage: INTFA_BUILD=build-dev scripts/device/verify.sh
#          carry: a slim build with bin/ and lib/ (build-dev) and .deps (prepare_device_deps.sh)
# Every step under its own limit, cut to what is left of INTFA_DEADLINE_S; logs under $OUT/logs.
export INTFA_BUILD=${INTFA_BUILD:-build-dev}
export INTFA_DEADLINE_S=${INTFA_DEADLINE_S:-500}
source "$(dirname "$0")/common.sh"

python=$(command -v python3)
deps=$PWD/.deps
xxhash_define=""
[ -f /usr/include/xxhash.h ] || xxhash_define=-DXXHASH_INCLUDE_DIR=$deps/include
( cmake -S . -B build-device-py -DCMAKE_BUILD_TYPE=Release -DINTFA_BUILD_TESTS=OFF \
    -DINTFA_BUILD_PYTHON=ON -DPython_EXECUTABLE="$python" \
    -Dpybind11_DIR="$deps/pybind11/share/cmake/pybind11" $xxhash_define &&
  cmake --build build-device-py --target _intfa -j "$(( $(nproc) - 2 ))" ) \
  > "$logs/python_build.log" 2>&1 &
python_build=$!

gtests gpu_tests 190 "${VERIFY_TESTS:-Attention16bit*:*QuantizeRowsGpu*:*AccuracyOnReal*:*PagedServingGpu*:*PagedDecodeGpu*:*PagedAppendGpu*:*MergeStatesGpu*:Shapes/WgmmaGpu.*}"

# The examples a host app starts from (examples/, built by the consumer tests on the project
# machine and copied into build-dev/examples): C++ linked statically, C against the shared library.
for example in attend_static attend_c; do
  [ -x "$build/examples/$example" ] || continue
  TAIL_LINES=4 timed "example_$example" 40 env LD_LIBRARY_PATH="$PWD/$build/lib:$LD_LIBRARY_PATH" \
    "$build/examples/$example"
  grep -E "relative L2" "$logs/example_$example.log" | tee -a "$summary"
done

wait "$python_build"
note "python build: exit $? ($(tail -1 "$logs/python_build.log"))"
export PYTHONPATH=$PWD/build-device-py/python INTFA_TEST_REPORT=$logs/python_report.txt
: > "$INTFA_TEST_REPORT"
TAIL_LINES=25 timed python_tests 130 "$python" -m pytest -q -rs -p no:cacheprovider \
  python/tests/test_clients.py python/tests/test_paged_gpu.py python/tests/test_gpu.py \
  -k "not Shapes"
grep -E "passed|failed" "$logs/python_tests.log" | tail -2 | tee -a "$summary"
grep -E "^FAILED" "$logs/python_tests.log" | head -20 | tee -a "$summary"
tee -a "$summary" < "$INTFA_TEST_REPORT"

TAIL_LINES=14 timed compare_decode 70 "$python" bench/compare_decode.py \
  --lib "$build/lib/libintfa.so" --out-dir "$logs"
grep -E "^\||device copy" "$logs/compare_decode.log" | tee -a "$summary"

TAIL_LINES=4 timed accuracy 60 "$python" bench/accuracy.py --lib "$build/lib/libintfa.so" \
  --inputs all --options plain,smooth,rotate,smooth+rotate --numerics issue \
  --head-dims 64,128 --seqs 1024,4096 --out-dir "$logs/accuracy"
if [ -f "$logs/accuracy/accuracy.md" ]; then
  awk '/relative L2/{on=1} /cosine/{on=0} on' "$logs/accuracy/accuracy.md" | grep "^|" \
    | tee -a "$summary" > /dev/null
fi

TAIL_LINES=16 timed compare_sdpa 80 "$python" bench/compare_sdpa.py --intfa binding \
  --head-dims 128 --seqs 1024,4096,16384 --causal off --repeats 10 --out-dir "$logs"
grep -E "^\|" "$logs/compare_sdpa.log" | tee -a "$summary" > /dev/null
finish
