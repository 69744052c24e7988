#!/usr/bin/env bash
# On the GPU machine: the first intfa.attention call of a fresh process on a fresh kernel cache
# (issue 49, item 7: at most 1.0 s), B=1, H=8, N=1024, d=128, FP16, default numerics, timed with
# its compiles and synchronised, and the second call (bench/cold_call.py: COLD_RUNS processes per
# setting, default 5, each with its own INTFA_CACHE_DIR; the median and range of each). The
# settings (COLD_SETTINGS, comma-separated environments) default to the call's kernels compiled at
# once (INTFA_PARALLEL_COMPILE=1) and one after another (=0, as before), alternating run by run;
# NVRTC's time per kernel comes from INTFA_LOG's lines. The Python extension is built here first,
# as verify.sh builds it (build_python_extension).
#   usage: scripts/device/cold_call.sh
#          carry: a slim build with bin/ and lib/ (INTFA_BUILD, default build-dev) and .deps
#          (scripts/prepare_device_deps.sh)
# Logs and cold_call.json under $OUT/logs; the table last.
export INTFA_BUILD=${INTFA_BUILD:-build-dev}
export INTFA_DEADLINE_S=${INTFA_DEADLINE_S:-500}
source "$(dirname "$0")/common.sh"

# `timeout` runs commands, not shell functions: the function goes to a shell of its own.
jobs=$(( $(nproc) > 3 ? $(nproc) - 2 : 1 ))
TAIL_LINES=3 timed python_build 300 bash -c \
  "$(declare -f build_python_extension); build_python_extension $jobs"
compgen -G "build-device-py/python/intfa/_intfa*.so" > /dev/null ||
  { note "python build: FAILED (logs/python_build.log)"; finish; exit 1; }
export PYTHONPATH=$PWD/build-device-py/python
# torch may load its own libnvrtc.so.13 first; NVRTC still gets the toolkit's headers.
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
note "host: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'))"
TAIL_LINES=8 timed cold_call 240 python3 bench/cold_call.py --runs "${COLD_RUNS:-5}" \
  --settings "${COLD_SETTINGS:-INTFA_PARALLEL_COMPILE=1,INTFA_PARALLEL_COMPILE=0}" \
  --json "$logs/cold_call.json"
sed -n '/^First and second/,$p' "$logs/cold_call.log" >> "$summary"
finish
