#!/usr/bin/env bash
# Sourced by the scripts of scripts/device/: the environment of the lent GPU machine (see
# ../shared/device/README.md), the carried build, logs under $OUT and the step helpers (timed,
# sanitize, gtests, pipe_rates). At most 8 files come back from $OUT, so the details go into
# logs.tgz, which is rewritten after every step: a call stopped at its time limit still returns
# what was done. Each step runs under its own time limit, cut to what is left of INTFA_DEADLINE_S
# (default 570 s from the start).
set -u
OUT=${OUT:-/tmp/intfa-out}
logs=$OUT/logs
mkdir -p "$logs"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export INTFA_CACHE_DIR=/tmp/intfa-cache
export PATH=/usr/local/cuda/bin:$PATH
export PYTHONUNBUFFERED=1
unset INTFA_ARCH INTFA_TUNE_DB INTFA_DEPLOY_CACHE
# INTFA_BUILD: the carried build folder (default build/); INTFA_BUILT_AT: the source path it was
# configured at on the project machine (the tests' recorded paths point there).
build=${INTFA_BUILD:-build}
bin=$build/bin
# The tool tests run build/bin/intfa (the path CMake recorded): a carried build elsewhere is
# linked there when nothing else is.
[ "$build" = build ] || [ -e build ] || ln -s "$build" build
built_at=${INTFA_BUILT_AT:-/work/main}
[ -e "$built_at" ] || { mkdir -p "$(dirname "$built_at")" && ln -s "$PWD" "$built_at"; }
summary=$OUT/summary.txt
# A second script in the same call keeps the first one's summary (INTFA_KEEP_SUMMARY=1).
[ -n "${INTFA_KEEP_SUMMARY:-}" ] || : > "$summary"
started=$(date +%s)
deadline=$(( started + ${INTFA_DEADLINE_S:-570} ))

note() { echo "$*" | tee -a "$summary"; }
checkpoint() {
  cp "$summary" "$logs/" 2>/dev/null
  tar czf "$OUT/.logs.tgz" -C "$OUT" logs && mv "$OUT/.logs.tgz" "$OUT/logs.tgz"
}
trap checkpoint EXIT

# timed NAME LIMIT_S COMMAND...: runs COMMAND (stdout+stderr to $logs/NAME.log, its tail echoed)
# under min(LIMIT_S, time left) seconds; notes its exit status and time, then checkpoints.
timed() {
  local name=$1 limit=$2; shift 2
  local left=$(( deadline - $(date +%s) - 10 ))
  if [ "$left" -lt 15 ]; then note "$name: SKIPPED (no time left)"; return 0; fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo; echo "=== $name (limit ${limit} s) ==="
  local start=$(date +%s)
  # timeout runs programs, not shell functions: a function of these scripts (build_python_extension,
  # say) runs in a bash of its own, with its definition and the exported variables.
  if declare -F "$1" > /dev/null; then set -- bash -c "$(declare -f "$1"); \"\$@\"" _ "$@"; fi
  timeout --kill-after=5 "$limit" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  tail -n "${TAIL_LINES:-15}" "$logs/$name.log"
  local verdict="exit $rc"
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && verdict="TIMED OUT after $limit s"
  note "$name: $verdict in $(( $(date +%s) - start )) s"
  checkpoint
  return 0
}

# sanitize TOOL LIMIT_S ARGS...: `intfa run ARGS` once under compute-sanitizer's TOOL, as a step
# named after the tool and the arguments.
sanitize() {
  local tool=$1 limit=$2; shift 2
  TAIL_LINES=2 timed "${tool}_$(echo "$*" | tr -c 'a-z0-9\n' '_')" "$limit" \
    compute-sanitizer --tool "$tool" --error-exitcode 9 $bin/intfa run "$@" --repeats 1
}

# gtests NAME LIMIT_S FILTER: intfa_tests with a gtest filter, as a step; its verdict lines go to
# the summary.
gtests() {
  timed "$1" "$2" $bin/intfa_tests --gtest_filter="$3"
  grep -E "^\[  FAILED|tests? ran|PASSED|SKIPPED \]" "$logs/$1.log" | tail -8 | tee -a "$summary"
}

# known_ncu_metrics METRIC...: those of the metrics this ncu knows, comma-separated (each one it
# does not know is noted), so that a profile leaves them out rather than failing.
known_ncu_metrics() {
  ncu --query-metrics > "$logs/ncu_query_metrics.log" 2>&1
  local metric known=""
  for metric in "$@"; do
    if grep -q "^${metric%%.*} " "$logs/ncu_query_metrics.log"; then
      known=${known:+$known,}$metric
    else
      note "  ncu does not know ${metric%%.*}" >&2
    fi
  done
  echo "$known"
}

# build_python_extension [JOBS]: the Python package for this machine's python3 in
# build-device-py/python (an extension is built for one Python version, so it is built here, with
# the pybind11 and xxhash.h carried in .deps: scripts/prepare_device_deps.sh).
build_python_extension() {
  local deps=$PWD/.deps xxhash=""
  [ -f /usr/include/xxhash.h ] || xxhash=-DXXHASH_INCLUDE_DIR=$deps/include
  cmake -S . -B build-device-py -DCMAKE_BUILD_TYPE=Release -DINTFA_BUILD_TESTS=OFF \
    -DINTFA_BUILD_PYTHON=ON -DPython_EXECUTABLE="$(command -v python3)" \
    -Dpybind11_DIR="$deps/pybind11/share/cmake/pybind11" $xxhash &&
    cmake --build build-device-py --target _intfa -j "${1:-$(nproc)}"
}

# install_wheels LIMIT_S WHEELS...: carried pure-Python wheels (PyPI downloads in .whl, say) into
# /tmp/site, offline and without their dependencies (those the device has), as the step "wheels".
install_wheels() {
  local limit=$1
  shift
  TAIL_LINES=4 timed wheels "$limit" python3 -m pip install -q --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target /tmp/site "$@"
}

# The issue rates of the softmax's instruction kinds on one SM (bench/pipe_rates.cu).
pipe_rates() {
  nvcc -O3 -arch=sm_90a -o "$logs/pipe_rates" bench/pipe_rates.cu > "$logs/pipe_rates_build.log" 2>&1 &&
    TAIL_LINES=6 timed pipe_rates 30 "$logs/pipe_rates"
}


nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$logs/gpu.txt"
$bin/intfa info 2>&1 | tee "$logs/info.txt"
note "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ)"

# Prints the summary; each script calls it last.
finish() {
  echo; echo "=== summary ($(( $(date +%s) - started )) s) ==="
  cat "$summary"
}
