#!/usr/bin/env bash
# On the GPU machine: the toolkit-free wheel (issue 49, item 6) installed into a fresh venv and
# used with the CUDA toolkit hidden (scripts/check_wheel.sh): `intfa info` must name NVRTC from
# PyPI's nvidia-cuda-nvrtc, a precompile for sm_90a must compile, and one intfa.attention call
# must match float attention. That machine has no network, so the venv sees the system's packages
# (--system-site-packages: torch, and the nvidia-cuda-nvrtc / nvidia-cuda-runtime packages torch's
# CUDA 13 builds install) and pip installs offline from the carried folder.
#   usage: scripts/device/wheel_check.sh [WHEEL_DIR]     (default build/wheel/device)
#          carry: WHEEL_DIR, made on the project machine by scripts/prepare_wheel_check.sh: the
#          cp312 wheel and nvidia-cuda-runtime 13.0's (4 MB); with --with-nvrtc also a slim
#          nvidia-cuda-nvrtc 13.0 (45 MB), used only where the device's torch did not install one
#          (pip takes an installed package first; the summary's first line lists them)
# Logs under $OUT/logs; the summary last.
export INTFA_DEADLINE_S=${INTFA_DEADLINE_S:-400}
source "$(dirname "$0")/common.sh"
wheels=${1:-build/wheel/device}

note "python3: $(python3 --version 2>&1); installed: $(python3 -m pip list 2>/dev/null |
  grep -i -E '^(torch|nvidia-cuda-nvrtc|nvidia-cuda-runtime) ' | tr -s ' ' | tr '\n' ';')"
wheel=$(ls "$wheels"/intfa-*-cp"$(python3 -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')"-*.whl 2>/dev/null | head -n1)
if [ -z "$wheel" ]; then
  note "wheel_check: no intfa wheel for this python in $wheels ($(ls "$wheels" 2>&1 | tr '\n' ' '))"
  finish; exit 1
fi
TAIL_LINES=30 timed wheel_check 300 env CHECK_DIR=/tmp/intfa-wheel-check \
  scripts/check_wheel.sh "$wheel" --wheels "$wheels" --system-site-packages --gpu
grep -E '^\[check_wheel|FAIL|  (nvrtc_|cuda_|GPU|precompile|NVRTC)|^NVRTC|^CUDA headers' \
  "$logs/wheel_check.log" >> "$summary"
finish
