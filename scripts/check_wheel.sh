#!/usr/bin/env bash
# Installs an intfa wheel (scripts/build_wheel.sh) into a fresh venv and uses it with the CUDA
# toolkit hidden, as on a machine with only a driver (and torch):
#
#   scripts/check_wheel.sh WHEEL [--wheels DIR] [--system-site-packages] [--gpu | --no-gpu]
#
#   --wheels DIR             install offline: the wheel's dependencies (nvidia-cuda-nvrtc,
#                            nvidia-cuda-runtime) from DIR or the interpreter's own site-packages,
#                            not PyPI (the GPU machine has no network)
#   --system-site-packages   the venv sees the interpreter's packages (torch, and the nvidia-*
#                            packages torch's CUDA builds install), as a user's venv over torch
#   --gpu / --no-gpu         run, or skip, one intfa.attention call against a float reference
#                            (default: when torch is importable and sees a GPU)
#   PYTHON                   the interpreter the venv is made from (the wheel's cp3XX; python3)
#   CHECK_DIR                where the venv and kernel cache go (default: a new temporary folder)
#
# The toolkit is hidden by running the checks in a private mount namespace (unshare, as root) in
# which an empty folder is mounted over /usr/local/cuda*, CUDA_HOME, nvcc's toolkit and every
# folder in which the loader's cache (ldconfig -p) finds libnvrtc (but not /usr/lib and the like,
# nor one that holds the driver: the toolkit is then hidden only in part, and the script says so),
# with the environment cleared
# (no PATH, LD_LIBRARY_PATH, CUDA_HOME, CUDA_PATH beyond the venv and /usr/bin:/bin). Proof that
# it was: the loader alone can no longer open libnvrtc.so.<major>. Then `intfa info` must name
# NVRTC from "PyPI package nvidia-cuda-nvrtc" in a site-packages folder, the process that imports
# intfa and compiles must have mapped NVRTC from there and nothing from the hidden folders, and a
# precompile for sm_90a (no GPU needed) must compile into the fresh cache (where the wheel's own
# kernels are in use: a shape it ships must come from them, one it does not ship must compile).
# With a GPU, one call against float attention, then the first call of a fresh process on a fresh
# cache, timed (no NVRTC compile where the shipped kernels serve it). Where unshare is not
# allowed the toolkit stays visible: the script says so and relies on those last checks.
# Exit status 0 when every check passed; the last line says what was checked.
set -euo pipefail

usage() { sed -n '6,7p' "$0" | sed 's/^# *//' >&2; exit 2; }
[ $# -ge 1 ] || usage
wheel=$(realpath "$1"); shift
wheels_dir="" system_site="" gpu=auto
while [ $# -gt 0 ]; do
  case "$1" in
    --wheels) wheels_dir=$(realpath "$2"); shift 2 ;;
    --system-site-packages) system_site=--system-site-packages; shift ;;
    --gpu) gpu=yes; shift ;;
    --no-gpu) gpu=no; shift ;;
    *) usage ;;
  esac
done
[ -f "$wheel" ] || { echo "check_wheel: no wheel at $wheel" >&2; exit 2; }
python=${PYTHON:-python3}
check_dir=${CHECK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/intfa-wheel-check.XXXXXX")}
check_dir=$(realpath -m "$check_dir")
started=$(date +%s)
step() { echo "[check_wheel $(( $(date +%s) - started ))s] $*"; }

step "fresh venv in $check_dir/venv ($("$python" --version)${system_site:+, with the system site-packages})"
rm -rf "$check_dir/venv" "$check_dir/cache" "$check_dir/bundle" "$check_dir/gpu_call.txt"
mkdir -p "$check_dir/cache" "$check_dir/empty"
"$python" -m venv $system_site "$check_dir/venv"
venv_python=$check_dir/venv/bin/python
export PIP_DISABLE_PIP_VERSION_CHECK=1
if [ -n "$wheels_dir" ]; then
  step "pip install $(basename "$wheel"), offline (dependencies from $wheels_dir)"
  "$venv_python" -m pip install --quiet --no-index --find-links "$wheels_dir" "$wheel"
else
  step "pip install $(basename "$wheel") (dependencies from PyPI)"
  "$venv_python" -m pip install --quiet "$wheel"
fi
if [ -n "$system_site" ]; then
  # A venv sees its base interpreter's site-packages only: not the user's (~/.local), nor those
  # of a venv the interpreter itself belongs to (the GPU machine's python3 is /opt/torch/.venv's,
  # where torch is). A .pth file adds the interpreter's own and the user's after the venv's own,
  # so the venv's nvidia-* packages still come first; written after the install, so that pip
  # does not take torch's nvidia-* packages for the wheel's dependencies.
  venv_site=$("$venv_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  for extra in "$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
               "$("$python" -m site --user-site 2> /dev/null || true)"; do
    if [ -n "$extra" ] && [ -d "$extra" ] && [ "$extra" != "$venv_site" ]; then
      echo "$extra" >> "$venv_site/check_wheel_outer_site.pth"
      echo "  the venv also sees, after its own: $extra"
    fi
  done
fi
"$venv_python" -m pip list 2>/dev/null | grep -i -E '^(intfa|nvidia-cuda-[a-z]+|torch) ' | sed 's/^/  /'

# The folders to hide: the toolkit wherever this machine has it, but never one that holds the
# driver the loader opens (libcuda.so.1 in ldconfig's cache: the GPU call needs it; a toolkit's
# compat/libcuda.so.1 that the loader does not use does not count).
driver_dirs=()
while read -r library; do
  driver_dirs+=("$(dirname "$(realpath "$library")")")
done < <(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 / {print $NF}')
candidates=(/usr/local/cuda /usr/local/cuda-*)
for variable in CUDA_HOME CUDA_PATH CUDAToolkit_ROOT; do
  [ -n "${!variable:-}" ] && candidates+=("${!variable}")
done
if nvcc=$(command -v nvcc); then candidates+=("$(dirname "$(dirname "$nvcc")")"); fi
while read -r library; do
  candidates+=("$(dirname "$library")")
done < <(ldconfig -p 2>/dev/null | awk '/libnvrtc/ {print $NF}')
hide=() unhidden=()
while read -r folder; do
  [ -n "$folder" ] || continue
  for hidden in "${hide[@]+"${hide[@]}"}"; do
    case "$folder/" in "$hidden"/*) continue 2 ;; esac  # inside one already hidden
  done
  for driver in "${driver_dirs[@]+"${driver_dirs[@]}"}"; do
    case "$driver/" in "$folder"/*)
      echo "  not hiding $folder: it holds the driver ($driver/libcuda.so.1)"
      unhidden+=("$folder"); continue 2 ;; esac
  done
  case "$folder" in /lib | /lib/* | /lib64 | /lib64/* | /usr/lib | /usr/lib/* | /usr/lib64 | /usr/lib64/*)
    echo "  not hiding $folder: a system library folder (a distribution's NVRTC there stays visible)"
    unhidden+=("$folder"); continue ;;
  esac
  hide+=("$folder")
done < <(for folder in "${candidates[@]}"; do
           [ -d "$folder" ] && realpath "$folder"
         done | sort -u | awk '{print length, $0}' | sort -n | cut -d' ' -f2-)
purelib=$("$venv_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
nvrtc_major=$(sed -n 's/^CUDA_MAJOR = \([0-9]*\).*/\1/p' "$purelib/intfa/_build_config.py")
[ -n "$nvrtc_major" ] || { echo "check_wheel: $purelib/intfa/_build_config.py names no CUDA_MAJOR" >&2; exit 1; }

# What runs with the toolkit hidden (arguments: check_dir, gpu, whether hidden, hidden folders).
cat > "$check_dir/inside.sh" <<'EOF'
set -euo pipefail
check_dir=$1 gpu=$2 hidden=$3 major=$4; shift 4
venv=$check_dir/venv
echo "  environment: PATH=$PATH LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} CUDA_HOME=${CUDA_HOME:-}"
if [ "$hidden" = yes ]; then
  for folder in "$@"; do
    if [ -n "$(ls -A "$folder")" ]; then echo "FAIL: $folder is still visible" >&2; exit 1; fi
  done
  if "$venv/bin/python" -c "import ctypes; ctypes.CDLL('libnvrtc.so.$major')" 2>/dev/null; then
    echo "FAIL: the loader still finds a libnvrtc.so.$major of its own: the toolkit is not hidden" >&2
    exit 1
  fi
  echo "  the loader alone finds no libnvrtc.so.$major: the toolkit is hidden ($*)"
elif [ "$hidden" = partly ]; then
  echo "  the toolkit is hidden where it could be ($*); the loader may still find another NVRTC"
fi
echo "$ intfa info"
"$venv/bin/intfa" info | tee "$check_dir/info.txt" | sed 's/^/  /'
grep -E '^NVRTC .*/(site|dist)-packages/nvidia/cu[0-9]+/lib/libnvrtc[^ ]* \(PyPI package nvidia-cuda-nvrtc\)$' \
  "$check_dir/info.txt" >/dev/null ||
  { echo "FAIL: intfa info does not report NVRTC from PyPI's nvidia-cuda-nvrtc in site-packages" >&2; exit 1; }
echo "$ intfa precompile --arch sm_90a --head-dims 64 --variants full (a bundle: the tool's own NVRTC)"
"$venv/bin/intfa" precompile --out "$check_dir/bundle" --arch sm_90a --head-dims 64 --variants full \
  -j 2 > "$check_dir/precompile.txt" 2>&1 || { cat "$check_dir/precompile.txt" >&2; exit 1; }
tail -n 2 "$check_dir/precompile.txt" | sed 's/^/  /'
echo "$ python: import intfa, precompile for sm_90a${gpu:+ (GPU call: $gpu)}"
INTFA_CHECK_GPU=$gpu "$venv/bin/python" - "$@" <<'PY'
import os, sys, time
hidden = sys.argv[1:]
import intfa

info = intfa.cache_info()
for key in ("nvrtc_version", "nvrtc_library", "nvrtc_source", "cuda_include_dir",
            "cuda_headers_source", "gpu"):
    print(f"  {key}: {info[key]}")
failures = []
if info["nvrtc_source"] != "PyPI package nvidia-cuda-nvrtc":
    failures.append(f"NVRTC came from {info['nvrtc_source']} ({info['nvrtc_library']})")
site = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
if not any(info["nvrtc_library"].startswith(os.path.realpath(p) + "/") for p in site):
    failures.append(f"NVRTC {info['nvrtc_library']} is outside this venv's site-packages {site}")
include_dir = info["cuda_include_dir"]
if include_dir and any(os.path.realpath(include_dir).startswith(h + "/") for h in hidden):
    failures.append(f"the CUDA headers came from the hidden toolkit: {include_dir}")

# The kernels the wheel ships (python/CMakeLists.txt): used when this NVRTC built them.
packaged = info["packaged_kernels"]
manifest = os.path.join(os.path.dirname(intfa.__file__), "kernels", "manifest.json")
shipped = None
if os.path.isfile(manifest):
    import json
    with open(manifest) as stream:
        shipped = json.load(stream)["nvrtc_version"]  # "major.minor"
print(f"  packaged kernels: {packaged or 'none'}"
      + (f" (the wheel ships NVRTC {shipped}'s; this process runs {info['nvrtc_version']})"
         if shipped else ""))
if shipped and not packaged:
    built, running = (tuple(map(int, v.split("."))) for v in (shipped, info["nvrtc_version"]))
    if built[0] == running[0] and built[1] <= running[1]:
        failures.append(f"the shipped kernels (NVRTC {shipped}) are not in use with NVRTC "
                        f"{info['nvrtc_version']}")


def precompiled(head_dims):
    started = time.monotonic()
    result = intfa.precompile(head_dims=head_dims, variants="full_int8", dtypes="float16",
                              causal=False, arch="sm_90a", jobs=2)
    print(f"  precompile sm_90a d={head_dims}: {result['kernels']} kernels, "
          f"{result['compiled_now']} compiled now in {time.monotonic() - started:.1f} s")
    return result["compiled_now"]


# A shape the wheel ships comes from its kernels when they are used; one it does not ship (or
# any, when none are used) compiles into the fresh cache with PyPI's NVRTC.
if packaged and precompiled(128) != 0:
    failures.append("a shipped kernel was compiled although the shipped kernels are in use")
if precompiled(256 if packaged else 128) == 0:
    failures.append("precompile compiled nothing into the fresh cache")

want_gpu = os.environ["INTFA_CHECK_GPU"]
ran_gpu = False
if want_gpu != "no":
    why_not = ""
    try:
        import torch
        have_gpu = torch.cuda.is_available()
        if not have_gpu:
            try:
                torch.cuda.init()  # says why
            except Exception as error:  # noqa: BLE001 (any reason is worth printing)
                why_not = f"{type(error).__name__}: {error}"
            why_not = f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU " \
                f"{why_not}"
    except ImportError as error:
        torch, have_gpu, why_not = None, False, f"import torch: {error}"
    if want_gpu == "yes" and not have_gpu:
        failures.append(f"--gpu: {why_not}")
    elif have_gpu:
        import torch.nn.functional as F
        intfa.set_fallback("error")  # a silent fall back to SDPA would prove nothing
        torch.manual_seed(0)
        q, k, v = (torch.randn(1, 8, 1024, 128, dtype=torch.float16, device="cuda")
                   for _ in range(3))
        out = intfa.attention(q, k, v, is_causal=True)
        torch.cuda.synchronize()
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
        error = ((out.float() - ref).norm() / ref.norm()).item()
        counters = intfa.cache_info()
        print(f"  GPU call on {torch.cuda.get_device_name()}: intfa.attention, relative L2 error "
              f"{error:.4f} against float attention; {counters['nvrtc_compiles']} NVRTC compiles")
        ran_gpu = True
        if not error < 0.05:
            failures.append(f"intfa.attention is off: relative L2 error {error:.4f}")
        if intfa.fallback_stats():
            failures.append(f"intfa.attention fell back: {intfa.fallback_stats()}")
        # The first call of a fresh process on a fresh kernel cache (issue 49, item 7), timed with
        # its compiles (none where the shipped kernels serve it) and synchronised.
        import subprocess
        import tempfile
        first = subprocess.run(
            [sys.executable, "-c",
             "import time, torch, intfa\n"
             "q, k, v = (torch.randn(1, 8, 1024, 128, dtype=torch.float16, device='cuda')"
             " for _ in range(3))\n"
             "torch.cuda.synchronize(); started = time.perf_counter()\n"
             "intfa.attention(q, k, v); torch.cuda.synchronize()\n"
             "print(time.perf_counter() - started, intfa.cache_info()['nvrtc_compiles'])"],
            env=dict(os.environ, INTFA_CACHE_DIR=tempfile.mkdtemp(prefix="intfa-first-call-")),
            capture_output=True, text=True)
        if first.returncode != 0:
            failures.append(f"the first-call process failed: {first.stderr[-2000:]}")
        else:
            seconds, compiles = first.stdout.split()[-2:]
            print(f"  first call of a fresh process on a fresh cache: {float(seconds):.3f} s, "
                  f"{compiles} NVRTC compiles")
            if packaged and int(compiles) != 0:
                failures.append(f"the first call compiled {compiles} kernels with the shipped "
                                "kernels in use")

# Every NVRTC the process mapped, and nothing of the hidden toolkit.
mapped = set()
with open("/proc/self/maps") as maps:
    for line in maps:
        fields = line.split()
        if len(fields) >= 6 and fields[5].startswith("/"):
            mapped.add(fields[5])
nvrtc = sorted(p for p in mapped if "libnvrtc" in os.path.basename(p))
print(f"  NVRTC mapped by this process: {', '.join(nvrtc)}")
if not nvrtc or any("/nvidia/cu" not in p for p in nvrtc):
    failures.append(f"NVRTC was mapped from outside the PyPI packages: {nvrtc}")
toolkit = sorted(p for p in mapped for h in hidden if p.startswith(h + "/"))
if toolkit:
    failures.append(f"files of the hidden toolkit were mapped: {toolkit}")
for failure in failures:
    print("FAIL:", failure, file=sys.stderr)
print("  GPU call:", "checked" if ran_gpu else "not run")
with open(os.path.join(os.environ["HOME"], "gpu_call.txt"), "w") as note:
    note.write("GPU call checked" if ran_gpu and not failures else "compile-only")
sys.exit(1 if failures else 0)
PY
EOF

environment=(env -i HOME="$check_dir" LANG=C.UTF-8 PATH="$check_dir/venv/bin:/usr/bin:/bin"
             INTFA_CACHE_DIR="$check_dir/cache" PYTHONDONTWRITEBYTECODE=1 PYTHONNOUSERSITE=1)
# The driver's device selection, if the caller set one.
[ -n "${CUDA_VISIBLE_DEVICES:-}" ] && environment+=(CUDA_VISIBLE_DEVICES="$CUDA_VISIBLE_DEVICES")
inside=(bash "$check_dir/inside.sh" "$check_dir" "$gpu")
if [ "${#hide[@]}" -gt 0 ] && unshare --mount --propagation private true 2>/dev/null; then
  mode=yes
  [ "${#unhidden[@]}" -eq 0 ] || mode=partly
  step "checks with the toolkit hidden (private mount namespace over: ${hide[*]})"
  unshare --mount --propagation private bash -c '
    set -e; empty=$1; shift; n=$1; shift
    for ((i = 0; i < n; i++)); do mount --bind "$empty" "$1"; shift; done
    exec "$@"' _ "$check_dir/empty" "${#hide[@]}" "${hide[@]}" \
    "${environment[@]}" "${inside[@]}" "$mode" "$nvrtc_major" "${hide[@]}"
  hidden="toolkit hidden (${hide[*]})"
  [ "$mode" = yes ] || hidden="toolkit hidden in part (${hide[*]}; not ${unhidden[*]})"
else
  if [ "${#hide[@]}" -eq 0 ]; then
    step "checks (no toolkit on this machine: nothing to hide)"
    hidden="no toolkit on this machine"
  else
    step "checks WITHOUT hiding the toolkit (unshare --mount is not allowed here): the environment is cleared, and the mapped NVRTC must come from site-packages"
    hidden="toolkit NOT hidden (no unshare); environment cleared"
  fi
  "${environment[@]}" "${inside[@]}" no "$nvrtc_major" "${hide[@]+"${hide[@]}"}"
fi
step "PASSED: $(basename "$wheel") in a fresh venv, $hidden; NVRTC from PyPI; sm_90a compiles; $(cat "$check_dir/gpu_call.txt")"
