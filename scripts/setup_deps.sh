#!/usr/bin/env bash
# Installs what building intfa needs on Debian 12 and Ubuntu 22.04 / 24.04, as root or as a user
# with sudo: CMake >= 3.25, Ninja, g++, xxHash, GoogleTest, pkg-config, and Python's headers,
# pybind11 >= 2.10 and venv (the Python package). With --tests, also clang and its sanitizer
# runtimes (the sanitize workflow). Both set-up commands of README.md start with it, and so does
# .ci/run.
#
# Not installed here: the CUDA 13 toolkit (nvcc, NVRTC, cuda.h), which comes from NVIDIA's
# packages (cuda-toolkit-13-0) or the nvidia-cuda-* wheels; CMake finds it under /usr/local/cuda,
# through nvcc on PATH, or at CUDAToolkit_ROOT.
set -euo pipefail

with_tests=0
for argument in "$@"; do
  case "$argument" in
    --tests) with_tests=1 ;;
    *) echo "usage: $0 [--tests]" >&2; exit 2 ;;
  esac
done

SUDO=()
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "$0: installs packages with apt-get: run it as root, or install sudo" >&2
    exit 1
  fi
  SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
apt_install() { "${SUDO[@]}" apt-get install -y -q --no-install-recommends "$@"; }

"${SUDO[@]}" apt-get update -q
apt_install ca-certificates cmake ninja-build g++ make libxxhash-dev libgtest-dev pkg-config \
  python3-dev python3-pybind11 python3-venv python3-pip

# Whether version $1 is at least $2 (dotted numbers).
at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

# Ubuntu 22.04 has CMake 3.22 and pybind11 2.9: newer ones from PyPI (its Python allows a system
# pip install; Debian 12 and Ubuntu 24.04 need none).
cmake_version=$(cmake --version | head -n1 | awk '{print $3}')
if ! at_least "$cmake_version" 3.25; then
  "${SUDO[@]}" /usr/bin/python3 -m pip install -q "cmake>=3.25,<4"
  hash -r
fi
pybind11_version=$(dpkg-query -W -f='${Version}' pybind11-dev 2>/dev/null || echo 0)
if ! at_least "${pybind11_version%%-*}" 2.10; then
  "${SUDO[@]}" /usr/bin/python3 -m pip install -q "pybind11>=2.10"
fi

if [ "$with_tests" = 1 ]; then
  apt_install clang
  # The ASan/UBSan and libFuzzer runtimes of the default clang: their own package from LLVM 14's
  # Debian packaging on, part of libclang-common-N-dev (a clang dependency) before.
  clang_major=$(clang -dumpversion | cut -d. -f1)
  if apt-cache show "libclang-rt-${clang_major}-dev" >/dev/null 2>&1; then
    apt_install "libclang-rt-${clang_major}-dev"
  fi
fi

if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ] && [ -z "${CUDAToolkit_ROOT:-}" ]; then
  echo "$0: note: no CUDA toolkit found (nvcc on PATH, /usr/local/cuda, CUDAToolkit_ROOT);" \
       "intfa needs CUDA 13 (NVRTC and cuda.h) to build" >&2
fi
