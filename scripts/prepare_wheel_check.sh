#!/usr/bin/env bash
# On this (project) machine: fills build/wheel/device/ (ignored by git) with what
# scripts/device/wheel_check.sh installs on the GPU machine, which has no network:
#   intfa-*-cp312-*.whl           the toolkit-free wheel for its Python 3.12 (scripts/build_wheel.sh
#                                 with that interpreter, built here unless one is there already)
#   nvidia_cuda_runtime-13.*.whl  the CUDA headers (2.5 MB), from PyPI
# and with --with-nvrtc also
#   nvidia_cuda_nvrtc-13.0.*.whl  NVRTC from PyPI, repacked without its .alt. libraries (which
#                                 NVRTC does not open by default): 45 MB instead of 90, so that it
#                                 fits in a device call's 64 MiB carry
# Without it the check takes NVRTC from the nvidia-cuda-nvrtc that the device's torch (cu130)
# installed, which its venv sees (--system-site-packages); pip uses an installed package before a
# file of the folder either way. Prints what to carry.
#   scripts/prepare_wheel_check.sh [--with-nvrtc]
#   PYTHON312   a Python 3.12 interpreter here (default python3.12, then pyenv's)
set -euo pipefail
cd "$(dirname "$0")/.."
with_nvrtc=0
case "${1:-}" in
  --with-nvrtc) with_nvrtc=1 ;;
  "") ;;
  *) echo "usage: $0 [--with-nvrtc]" >&2; exit 2 ;;
esac
out=build/wheel/device
mkdir -p "$out"
python312=""
for candidate in ${PYTHON312:-} python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
  if "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
    python312=$(command -v "$candidate"); break
  fi
done
[ -n "$python312" ] || { echo "prepare_wheel_check: set PYTHON312 to a Python 3.12" >&2; exit 1; }
if ! ls build/wheel/dist/intfa-*-cp312-*manylinux*.whl >/dev/null 2>&1; then
  PYTHON=$python312 scripts/build_wheel.sh build/wheel/dist
fi
rm -f "$out"/*.whl
cp build/wheel/dist/intfa-*-cp312-*manylinux*.whl "$out"/
major=$(sed -n 's/^CUDA_MAJOR = \([0-9]*\).*/\1/p' build/wheel/cp312/cmake/python/intfa/_build_config.py)
major=${major:-13}
download() {
  "$python312" -m pip download --quiet --no-deps --disable-pip-version-check --only-binary=:all: \
    -d "$1" "$2"
}
# The device's driver is CUDA $major.0 (R580): the $major.0 packages, as its torch (cu130) pins them.
download "$out" "nvidia-cuda-runtime==$major.0.*"
if [ "$with_nvrtc" = 1 ]; then
  staging=build/wheel/nvrtc-staging
  rm -rf "$staging" && mkdir -p "$staging/download"
  download "$staging/download" "nvidia-cuda-nvrtc==$major.0.*"
  "$python312" -m zipfile -e "$staging"/download/nvidia_cuda_nvrtc-*.whl "$staging/unpacked"
  find "$staging/unpacked" -name '*.alt.so*' -delete
  # `wheel pack` wants the unpacked tree in a folder named <name>-<version> and rewrites RECORD.
  dist_info=$(basename "$(ls -d "$staging"/unpacked/nvidia_cuda_nvrtc-*.dist-info)")
  mv "$staging/unpacked" "$staging/${dist_info%.dist-info}"
  build/wheel/cp312/tools/bin/python -m wheel pack --dest-dir "$out" "$staging/${dist_info%.dist-info}"
  rm -rf "$staging"
fi
ls -la "$out"
echo "prepared $out ($(du -sh "$out" | cut -f1)); carry \"$out\" and run scripts/device/wheel_check.sh"
