#!/usr/bin/env bash
# On the GPU machine: builds the Python package with THAT machine's Python (an extension is built
# for one Python version: one built on the project machine for 3.11 does not import under 3.12),
# then runs python/tests with torch on the GPU (intfa.attention against SDPA over the attention
# issue's shape set, a torch.compile'd module, the ops' plumbing) and a short
# bench/compare_sdpa.py through the binding. Needs .deps: run scripts/prepare_device_deps.sh on
# the project machine and carry ".deps".
#   usage: scripts/device_python.sh [LOG_DIR]      (default: $OUT/logs)
# Logs go to LOG_DIR/python_*; a short summary is printed last (and kept in
# LOG_DIR/python_summary.txt). Exit: 0 everything passed; 1 a test or the benchmark failed;
# 2 the build failed; 3 this Python has no Python.h, so no extension can be built here.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/intfa-out}
log_dir=${1:-$OUT/logs}
mkdir -p "$log_dir"
export PATH=/usr/local/cuda/bin:$PATH
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# torch may have loaded its own libnvrtc.so.13 first; NVRTC still gets the toolkit's headers.
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
# The tests' own cache, heuristic tile configs and this GPU's arch: a tuning database written by
# an earlier step could pick configs intfa.precompile does not compile.
export INTFA_CACHE_DIR=${INTFA_PY_CACHE_DIR:-/tmp/intfa-cache-python}
unset INTFA_TUNE_DB INTFA_DEPLOY_CACHE INTFA_ARCH
python=$(command -v "${PYTHON:-python3}")
build_dir=build-device-py
deps=$PWD/.deps
summary=$log_dir/python_summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
elapsed() { echo $(( $(date +%s) - $1 )); }

include_dir=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if [ ! -f "$include_dir/Python.h" ]; then
  note "python: NO Python.h for $("$python" --version 2>&1) in $include_dir: the extension cannot" \
       "be built on this machine (it needs that Python's development headers)"
  exit 3
fi
if [ ! -f "$deps/pybind11/share/cmake/pybind11/pybind11Config.cmake" ]; then
  note "python: no .deps/pybind11: run scripts/prepare_device_deps.sh on the project machine and" \
       "carry .deps"
  exit 2
fi
xxhash_define=""
[ -f /usr/include/xxhash.h ] || xxhash_define=-DXXHASH_INCLUDE_DIR=$deps/include

start=$(date +%s)
if ! { cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DINTFA_BUILD_TESTS=OFF \
         -DINTFA_BUILD_PYTHON=ON -DPython_EXECUTABLE="$python" \
         -Dpybind11_DIR="$deps/pybind11/share/cmake/pybind11" $xxhash_define &&
       cmake --build "$build_dir" --target _intfa -j "$(nproc)"; } > "$log_dir/python_build.log" 2>&1
then
  tail -30 "$log_dir/python_build.log"
  note "python: build FAILED after $(elapsed "$start") s (python_build.log)"
  exit 2
fi
note "python: built $build_dir/python/intfa for $("$python" --version 2>&1) in $(elapsed "$start") s"

export PYTHONPATH=$PWD/$build_dir/python
export INTFA_TEST_REPORT=$log_dir/python_report.txt
: > "$INTFA_TEST_REPORT"
if "$python" -c "import pytest" 2> /dev/null; then
  runner=(-m pytest -v -rs -p no:cacheprovider python/tests)
else
  runner=(-m unittest discover -v -s python/tests -t python/tests)
fi
start=$(date +%s)
"$python" "${runner[@]}" > "$log_dir/python_tests.log" 2>&1
tests_rc=$?
note "python tests (${runner[1]}): exit $tests_rc in $(elapsed "$start") s:" \
     "$(grep -E '^(Ran |OK|FAILED)|(passed|failed).* in ' "$log_dir/python_tests.log" | tr '\n' ' ')"
grep -E '^(FAIL|ERROR):|^(FAILED|SUBFAIL) ' "$log_dir/python_tests.log" | head -20 | tee -a "$summary"
tee -a "$summary" < "$INTFA_TEST_REPORT"

start=$(date +%s)
"$python" bench/compare_sdpa.py --intfa binding --head-dims 128 --seqs 1024,4096 \
  --causal off,on --repeats 10 --out-dir "$log_dir/python_compare" \
  > "$log_dir/python_compare.log" 2>&1
compare_rc=$?
note "compare_sdpa through the binding: exit $compare_rc in $(elapsed "$start") s"
grep -E '^\|' "$log_dir/python_compare.log" | tee -a "$summary"

echo
echo "=== python summary ==="
cat "$summary"
[ "$tests_rc" = 0 ] && [ "$compare_rc" = 0 ]
