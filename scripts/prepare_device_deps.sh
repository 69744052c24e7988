#!/usr/bin/env bash
# On this (project) machine: puts into .deps/ (ignored by git) what a build ON the GPU machine needs
# and that machine lacks, so that a device call carrying ".deps" can build there:
#   .deps/include/xxhash.h   header-only xxHash (Debian's libxxhash-dev)
#   .deps/pybind11/          pybind11's headers and CMake config (PyPI's package; for the Python
#                            extension, which scripts/device_python.sh builds there)
# Idempotent; about 2 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps/include
cp /usr/include/xxhash.h .deps/include/xxhash.h
if [ ! -f .deps/pybind11/share/cmake/pybind11/pybind11Config.cmake ]; then
  staging=.deps/pybind11-download
  rm -rf "$staging" .deps/pybind11
  "${PYTHON:-python3}" -m pip install --quiet --no-deps --target "$staging" "pybind11>=2.12,<4"
  mv "$staging/pybind11" .deps/pybind11
  rm -rf "$staging"
fi
echo "prepared: .deps/include/xxhash.h, .deps/pybind11 ($(du -sh .deps | cut -f1)); carry \".deps\""
