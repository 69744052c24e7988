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
bin=build/bin
# The tests were built on the project machine with paths under /work/main.
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
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

step "compute-sanitizer memcheck (small shapes)"
for args in "--seq 200 --heads 2 --causal" "--seq 77 --seq-kv 300 --heads 4 --heads-kv 2 --variant half" \
            "--seq 130 --head-dim 64 --p-scale tile --v-scale block" "--seq 65 --head-dim 256 --causal"; do
  compute-sanitizer --tool memcheck --error-exitcode 9 $bin/intfa run $args --repeats 1 \
    > "$OUT/memcheck.log" 2>&1
  rc=$?
  note "memcheck [$args]: exit $rc $(grep -c 'Invalid' "$OUT/memcheck.log") invalid accesses"
done
compute-sanitizer --tool racecheck --error-exitcode 9 $bin/intfa run --seq 200 --heads 1 --repeats 1 \
  > "$OUT/racecheck.log" 2>&1
note "racecheck: exit $? $(grep -E 'RACECHECK SUMMARY' "$OUT/racecheck.log")"
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
  step "tile-config sweep (N=4096, B=4, H=32)"
  $bin/intfa bench --head-dims 64,128 --seq 4096 --causal off,on --variants full,half --configs all \
    --repeats 10 --json "$OUT/sweep.json" 2>&1 | tee "$OUT/sweep.txt"
  python3 scripts/dump_sass.py "$INTFA_CACHE_DIR" "$OUT/logs/sass" "attention sm_90a d128 m128 n64 w8 s2 full_int8 qk8 f16->f16 p=u8/running_max v=tensor" > /dev/null 2>&1
  step "side-by-side with PyTorch SDPA"
  python3 bench/compare_sdpa.py --lib build/lib/libintfa.so --out-dir "$OUT" 2>&1 | tail -25
fi
step summary
cat "$summary"
cd "$OUT" && for f in *.log *.txt *.json sass; do [ -e "$f" ] && [ "$f" != summary.txt ] && mv "$f" logs/ 2>/dev/null; done
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
