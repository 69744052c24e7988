#!/usr/bin/env bash
# The toolkit-free wheel, as CI checks it (no GPU): scripts/build_wheel.sh builds and repairs it,
# then scripts/check_wheel.sh installs it with its nvidia-* dependencies from PyPI into a fresh venv
# and, with the CUDA toolkit hidden, checks that `intfa info` and intfa.cache_info() name NVRTC from
# PyPI's nvidia-cuda-nvrtc and that a kernel precompiles for sm_90a (compile-only: --no-gpu).
#   tests/packaging/wheel_test.sh WORK_DIR      (PYTHON: the interpreter the wheel is for)
set -euo pipefail
work=$(realpath -m "$1")
cd "$(dirname "$0")/../.."
rm -rf "$work/dist" "$work/check"
WHEEL_WORK_DIR=$work/build scripts/build_wheel.sh "$work/dist" | tee "$work.build.log"
wheel=$(tail -n1 "$work.build.log")
CHECK_DIR=$work/check scripts/check_wheel.sh "$wheel" --no-gpu
