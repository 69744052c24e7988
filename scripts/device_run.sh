#!/usr/bin/env bash
# The whole GPU check in one call on the lent device (see ../shared/device/README.md): GPU tests,
# the demo, compute-sanitizer, a tile-config sweep and the side-by-side SDPA benchmark. Expects a
# Release build carried in build/ (built on the project machine); writes logs under $OUT.
#   usage: scripts/device_run.sh [quick|bench|full]   (quick: checks; bench: timings; full: both)
# At most 8 files come back from $OUT: everything detailed goes into logs.tgz.
set -u
mode=${1:-full}
OUT=${OUT:-/tmp/intfa-out}
mkdir -p "$OUT" "$OUT/logs"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export INTFA_CACHE_DIR=/tmp/intfa-cache
export PATH=/usr/local/cuda/bin:$PATH
# INTFA_BUILD: the carried build folder (default build/); INTFA_BUILT_AT: the source path it was
# configured at on the project machine (the tests' recorded paths point there).
build=${INTFA_BUILD:-build}
bin=$build/bin
built_at=${INTFA_BUILT_AT:-/work/main}
[ -e "$built_at" ] || { mkdir -p "$(dirname "$built_at")" && ln -s "$PWD" "$built_at"; }
summary=$OUT/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
step() { echo; echo "=== $* ==="; }

step info
checks=true; timings=true
[ "$mode" = bench ] && checks=false
[ "$mode" = quick ] && timings=false
[ "$mode" = ab ] && { checks=false; timings=false; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
$bin/intfa info 2>&1 | tee "$OUT/info.txt"
python3 -c "import sysconfig, os; p = sysconfig.get_paths()['include']; print('Python.h:', p, os.path.exists(p + '/Python.h'))" 2>&1 | tee -a "$OUT/info.txt"

if $checks; then
step "GPU tests"
start=$(date +%s)
$bin/intfa_tests --gtest_filter='*Gpu*' > "$OUT/gpu_tests.log" 2>&1
status=$?
grep -E "^\[  (PASSED|FAILED)|^\[==|FAILED|SKIPPED" "$OUT/gpu_tests.log" | tail -40
note "gpu tests: exit $status in $(( $(date +%s) - start )) s"

step "all CPU tests on the device too"
$bin/intfa_tests --gtest_filter='-*Gpu*' > "$OUT/cpu_tests.log" 2>&1
note "cpu tests: exit $?"
tail -3 "$OUT/cpu_tests.log"

step "SASS of the attention kernels the tests compiled"
python3 scripts/dump_sass.py "$INTFA_CACHE_DIR" /tmp/sass "attention sm_90a d128 m128 n64 w8 s2" 2>&1 | cut -c1-400
mkdir -p "$OUT/logs" && cp -r /tmp/sass "$OUT/logs/" 2>/dev/null

step demo
$bin/intfa run --seq 4096 --heads 16 2>&1 | tee "$OUT/demo.txt"
note "demo: exit ${PIPESTATUS[0]}"

step "Python binding (built on the device for its Python)"
scripts/device_python.sh "$OUT/logs" 2>&1 | tail -30
note "python binding: exit ${PIPESTATUS[0]} (0 ok, 1 tests/bench failed, 2 build failed, 3 no Python.h)"

step "compute-sanitizer memcheck (small shapes)"
for args in "--seq 200 --heads 2 --causal" "--seq 77 --seq-kv 300 --heads 4 --heads-kv 2 --variant half" \
            "--seq 130 --head-dim 64 --p-scale tile --v-scale block" "--seq 65 --head-dim 256 --causal"; do
  compute-sanitizer --tool memcheck --error-exitcode 9 $bin/intfa run $args --repeats 1 \
    > "$OUT/memcheck.log" 2>&1
  rc=$?
  note "memcheck [$args]: exit $rc $(grep -c 'Invalid' "$OUT/memcheck.log") invalid accesses"
done
for tool in racecheck synccheck; do
  for args in "--seq 200 --heads 1" "--seq 130 --head-dim 64 --causal --variant half"; do
    compute-sanitizer --tool $tool --error-exitcode 9 $bin/intfa run $args --repeats 1 \
      > "$OUT/$tool.log" 2>&1
    note "$tool [$args]: exit $? $(grep -E 'SUMMARY' "$OUT/$tool.log")"
  done
done
fi

if [ "$mode" = ab ]; then
  # Template variants (.variants/<name>/, a full copy of templates/ with one change) against the
  # embedded templates, same problems, same process setup.
  for dir in embedded .variants/*; do
    name=$(basename "$dir")
    step "A/B: $name"
    if [ "$dir" = embedded ]; then unset INTFA_TEMPLATE_DIR; else export INTFA_TEMPLATE_DIR=$PWD/$dir; fi
    $bin/intfa bench --head-dims 64,128 --seq 4096,16384 --causal off,on --repeats 15 \
      --configs "128,64,8,2;64,128,4,2;128,128,8,2" --json "$OUT/logs/ab_$name.json" 2>&1 \
      | grep -v "^bench:" | tee "$OUT/logs/ab_$name.txt"
  done
  unset INTFA_TEMPLATE_DIR
fi

if $timings; then
  step "intfa tune: one (head dim, causal) bucket set (d=128, non-causal, N buckets 1k, 4k, 16k)"
  start=$(date +%s)
  $bin/intfa tune --head-dims 128 --causal off --tuning-db "$OUT/tuning.json" --json "$OUT/tune.json" \
    2>&1 | tee "$OUT/tune.txt" | grep -v "^tune: \[" | tail -20
  note "tune d128 non-causal: exit ${PIPESTATUS[0]} in $(( $(date +%s) - start )) s"
  step "JIT path: cold compile, disk hit to launchable, per-call overhead"
  $bin/intfa bench --jit --repeats 5 --json "$OUT/jit.json" 2>&1 | tee "$OUT/jit.txt"
  step "accuracy vs float64 of the original inputs (every numerics option)"
  python3 bench/accuracy.py --lib $build/lib/libintfa.so --numerics all --out-dir "$OUT" 2>&1 \
    | grep -v '^{' | tail -120
  step "speed of each numerics option (picks the defaults: issue 4)"
  for numerics in "s8 running tensor" "u8 running tensor" "u8 tile tensor" "u8 tile channel" \
                  "u8 running block" "u8 tile block"; do
    set -- $numerics
    $bin/intfa bench --head-dims 64,128 --seq 8192,16384 --causal off,on --repeats 15 \
      --p $1 --p-scale $2 --v-scale $3 --json "$OUT/numerics_$1_$2_$3.json" 2>&1 | grep -v "^bench:"
  done
  step "INT4 Q.K on this GPU (emulated on Hopper: speed reported, not targeted)"
  $bin/intfa bench --head-dims 128 --seq 4096 --causal off --variants full,half --qk-bits 4 \
    --repeats 5 --json "$OUT/int4.json" 2>&1 | grep -v "^bench:"
  step "ncu: limiter of the d=128 full INT8 kernel (N=8192, B=4, H=32)"
  ncu --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section InstructionStats -k regex:attention \
    --launch-skip 3 --launch-count 1 $bin/intfa bench --seq 8192 --repeats 1 \
    > "$OUT/ncu.txt" 2>&1
  grep -E "Throughput|Registers|Occupancy|Stall|Issue|Warp Cycles|Eligible|Active Warps|Pipe" \
    "$OUT/ncu.txt" | head -40
  step "tile-config sweep (N=4096, B=4, H=32)"
  $bin/intfa bench --head-dims 64,128 --seq 4096 --causal off,on --variants full,half --configs all \
    --repeats 10 --json "$OUT/sweep.json" 2>&1 | tee "$OUT/sweep.txt"
  python3 scripts/dump_sass.py "$INTFA_CACHE_DIR" "$OUT/logs/sass" "attention sm_90a d128 m128 n64 w8 s2 full_int8 qk8 f16->f16 p=u8/running_max v=tensor" > /dev/null 2>&1
  step "side-by-side with PyTorch SDPA"
  python3 bench/compare_sdpa.py --lib $build/lib/libintfa.so --out-dir "$OUT" 2>&1 | tail -25
fi
step summary
cat "$summary"
cd "$OUT" && for f in *.log *.txt *.json sass; do [ -e "$f" ] && [ "$f" != summary.txt ] && mv "$f" logs/ 2>/dev/null; done
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
