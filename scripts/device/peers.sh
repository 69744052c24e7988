#!/usr/bin/env bash
# On the GPU machine: intfa against its strongest peers in one process (bench/compare_peers.py,
# issue 44 item 4): SDPA cuDNN FP16, FlashAttention-3 BF16 and FP8 (PyPI fa3-fwd), cuDNN's FP8
# SDPA (PyPI nvidia-cudnn-frontend), intfa's kernel alone (full and half INT8) and
# `intfa.attention` (default numerics and k_granularity="block"), timed interleaved, with each
# one's accuracy against float64. Installs the peers' wheels carried in .whl into /tmp/site while
# the Python extension builds (build-device-py, from .deps, as verify.sh builds it), then runs
# compare_peers.py under PEERS_LIMIT_S (default 420 s) with PEERS_ARGS and this script's
# arguments. A peer that does not import is reported missing and the rest still run; without the
# extension, intfa's kernel alone runs through ctypes when a build with lib/libintfa.so is carried
# (INTFA_BUILD, default build/).
#   usage: scripts/device/peers.sh [compare_peers.py arguments]
#          carry: .whl and .deps (scripts/prepare_device_deps.sh)
#   the wheels, on the project machine in the repo root (.whl is ignored; about 38 MB):
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
#       --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
#       --platform manylinux2014_x86_64 -d .whl fa3-fwd==0.0.3 nvidia-cudnn-frontend==1.32.0
#     (their other requirements are on the device already: torch, einops, packaging, ninja; the
#     frontend's nvidia-cutlass-dsl and apache-tvm-ffi serve its Python (FROST) engines only,
#     which have no FP8 forward for sm_90: its sdpa_fp8 graph runs cuDNN's own engines there)
# Comes back in $OUT: compare_peers.md and .json, summary.txt and logs.tgz (every log); a
# summary last.
export INTFA_DEADLINE_S=${INTFA_DEADLINE_S:-570}
source "$(dirname "$0")/common.sh"

build_python_extension "$(( $(nproc) - 2 ))" > "$logs/python_build.log" 2>&1 &
python_build=$!

if compgen -G ".whl/*.whl" > /dev/null; then
  ls -l .whl/*.whl | tee "$logs/wheels.txt"
  install_wheels 150 .whl/*.whl
else
  note "wheels: none in .whl (carry .whl): FA3 and cuDNN FP8 will be reported missing"
fi

wait "$python_build"
note "python build: exit $? ($(tail -1 "$logs/python_build.log"))"
export PYTHONPATH=$PWD/build-device-py/python:/tmp/site
lib_args=()
[ -f "$build/lib/libintfa.so" ] && lib_args=(--lib "$build/lib/libintfa.so")

mkdir -p "$logs/peers"
# shellcheck disable=SC2086  # PEERS_ARGS is a list of arguments
TAIL_LINES=30 timed compare_peers "${PEERS_LIMIT_S:-420}" python3 bench/compare_peers.py \
  "${lib_args[@]}" --out-dir "$logs/peers" ${PEERS_ARGS:-} "$@"
cp "$logs/peers/compare_peers.md" "$logs/peers/compare_peers.json" "$OUT/" 2> /dev/null
grep -E "^(seed|device|missing)" "$logs/compare_peers.log" | tee -a "$summary" > /dev/null
sed -n '/^=== peers/,$p' "$logs/compare_peers.log" | tee -a "$summary" > /dev/null
checkpoint
finish
# Everything is in logs.tgz: leave $OUT with four files (summary.txt, logs.tgz and the two
# tables), all under the limit of what comes back.
trap - EXIT
rm -rf "$logs"
