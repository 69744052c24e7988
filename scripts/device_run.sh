#!/usr/bin/env bash
# The whole GPU check on the lent device (see ../shared/device/README.md): GPU tests, the demo,
# compute-sanitizer, the Python binding, then the timings (tuner, JIT path, accuracy, numerics
# options, INT4, ncu, tile sweep, the side-by-side SDPA benchmark). Expects a Release build
# carried in build/ (built on the project machine); writes under $OUT.
#   usage: scripts/device_run.sh [quick|bench|extra|compare|ab|hopper|full]
#     quick: checks only; bench: JIT, tune, accuracy, numerics options, INT4, compare_sdpa;
#     hopper: the wgmma kernel's tests, SASS, sanitizers, speed against SDPA, JIT and call
#       overhead, tuner time, the Python tests and ncu;
#     extra: K smoothing's cost, INT4 accuracy; compare: tile sweep, ncu;
#     ab: the template variants in .variants/ (hand-made, or scripts/make_ablations.py) against
#       templates/, and the Python tests; optional: AB_BENCH_ARGS (the bench's problem and config
#       options instead of d=64,128, N=4k,16k, causal off and on), AB_TESTS (a gtest filter run
#       with each variant, not with the embedded templates),
#       AB_SKIP_PYTHON=1;
#     probe: where a block's time goes (time per wave against tiles per block, ncu stall samples
#       per SASS instruction); optional: PROBE_TESTS (a gtest filter to run first),
#       PROBE_AB_BUILD (a second carried build folder timed on the same shapes), PROBE_COMPARE=1
#       (compare_sdpa), PROBE_SOURCE_SEQ (the ncu source run's N, 1024);
#     runs: the same bench with several builds or environments, for host-side changes (launch
#       grid, ...); RUNS is a ';'-separated list of "NAME BUILD_DIR [VAR=VALUE ...]", timed in
#       that order and again reversed (a kernel timed right after another can run slower);
#       optional: AB_BENCH_ARGS, RUNS_TESTS (a gtest filter to run first), RUNS_SANITIZE (a
#       ';'-separated list of "[VAR=VALUE ...] intfa run options" run under memcheck and
#       racecheck);
#     limits: ncu's instruction and issue counts of the heuristic's kernels (d=64 and 128, N=4k
#       and 16k), the speed those instructions allow with every issue slot busy
#       (scripts/issue_bound.py), then compare_sdpa;
#     full: all of them (more than one 10-minute call holds).
# At most 8 files come back from $OUT, so the details go into logs.tgz, which is rewritten after
# every step: a call stopped at its time limit still returns what was done. Each step runs under
# its own time limit, cut to what is left of INTFA_DEADLINE_S (default 570 s from the start).
set -u
mode=${1:-full}
OUT=${OUT:-/tmp/intfa-out}
logs=$OUT/logs
mkdir -p "$logs"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda-13.0/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export INTFA_CACHE_DIR=/tmp/intfa-cache
export PATH=/usr/local/cuda/bin:$PATH
export PYTHONUNBUFFERED=1
unset INTFA_ARCH INTFA_TUNE_DB INTFA_DEPLOY_CACHE
# INTFA_BUILD: the carried build folder (default build/); INTFA_BUILT_AT: the source path it was
# configured at on the project machine (the tests' recorded paths point there).
build=${INTFA_BUILD:-build}
bin=$build/bin
built_at=${INTFA_BUILT_AT:-/work/main}
[ -e "$built_at" ] || { mkdir -p "$(dirname "$built_at")" && ln -s "$PWD" "$built_at"; }
summary=$OUT/summary.txt
: > "$summary"
started=$(date +%s)
deadline=$(( started + ${INTFA_DEADLINE_S:-570} ))

note() { echo "$*" | tee -a "$summary"; }
checkpoint() {
  cp "$summary" "$logs/" 2>/dev/null
  tar czf "$OUT/.logs.tgz" -C "$OUT" logs && mv "$OUT/.logs.tgz" "$OUT/logs.tgz"
}
trap checkpoint EXIT

# timed NAME LIMIT_S COMMAND...: runs COMMAND (stdout+stderr to $logs/NAME.log, its tail echoed)
# under min(LIMIT_S, time left) seconds; notes its exit status and time, then checkpoints.
timed() {
  local name=$1 limit=$2; shift 2
  local left=$(( deadline - $(date +%s) - 10 ))
  if [ "$left" -lt 15 ]; then note "$name: SKIPPED (no time left)"; return 0; fi
  [ "$limit" -gt "$left" ] && limit=$left
  echo; echo "=== $name (limit ${limit} s) ==="
  local start=$(date +%s)
  timeout --kill-after=5 "$limit" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  tail -n "${TAIL_LINES:-15}" "$logs/$name.log"
  local verdict="exit $rc"
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && verdict="TIMED OUT after $limit s"
  note "$name: $verdict in $(( $(date +%s) - start )) s"
  checkpoint
  return 0
}

# sanitize TOOL LIMIT_S ARGS...: `intfa run ARGS` once under compute-sanitizer's TOOL, as a step
# named after the tool and the arguments.
sanitize() {
  local tool=$1 limit=$2; shift 2
  TAIL_LINES=2 timed "${tool}_$(echo "$*" | tr -c 'a-z0-9\n' '_')" "$limit" \
    compute-sanitizer --tool "$tool" --error-exitcode 9 $bin/intfa run "$@" --repeats 1
}

# gtests NAME LIMIT_S FILTER: intfa_tests with a gtest filter, as a step; its verdict lines go to
# the summary.
gtests() {
  timed "$1" "$2" $bin/intfa_tests --gtest_filter="$3"
  grep -E "^\[  FAILED|tests? ran|PASSED|SKIPPED \]" "$logs/$1.log" | tail -8 | tee -a "$summary"
}

# The issue rates of the softmax's instruction kinds on one SM (bench/pipe_rates.cu).
pipe_rates() {
  nvcc -O3 -arch=sm_90a -o "$logs/pipe_rates" bench/pipe_rates.cu > "$logs/pipe_rates_build.log" 2>&1 &&
    TAIL_LINES=6 timed pipe_rates 30 "$logs/pipe_rates"
}

checks=false; timings=false; extras=false; comparison=false; hopper=false
case $mode in
  quick) checks=true ;;
  hopper) hopper=true ;;
  bench) timings=true ;;
  extra) extras=true ;;
  compare) comparison=true ;;
  full) checks=true; timings=true; extras=true; comparison=true ;;
  ab|probe|runs|limits) ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$logs/gpu.txt"
$bin/intfa info 2>&1 | tee "$logs/info.txt"
note "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ)"

if $checks; then
  timed gpu_tests 180 $bin/intfa_tests --gtest_filter='*Gpu*'
  grep -E "^\[  FAILED|tests? ran|PASSED|SKIPPED \]" "$logs/gpu_tests.log" | tail -15 | tee -a "$summary"
  TAIL_LINES=3 timed cpu_tests 150 $bin/intfa_tests --gtest_filter='-*Gpu*'
  grep -E "^\[  FAILED|tests? ran|PASSED" "$logs/cpu_tests.log" | tail -8 | tee -a "$summary"
  timed demo 60 $bin/intfa run --seq 4096 --heads 16
  timed sass 60 python3 scripts/dump_sass.py "$INTFA_CACHE_DIR" "$logs/sass" \
    "attention_wgmma sm_90a d128"
  TAIL_LINES=25 timed python 240 scripts/device_python.sh "$logs"
  for args in "--seq 200 --heads 2 --causal" "--seq 77 --seq-kv 300 --heads 4 --heads-kv 2 --variant half" \
              "--seq 130 --head-dim 64 --p-scale tile --v-scale block" "--seq 65 --head-dim 256 --causal" \
              "--seq 90 --qk-bits 4 --v-scale tensor --p s8 --p-scale running" \
              "--seq 100 --head-dim 64 --causal --smooth-k"; do
    sanitize memcheck 60 $args
  done
  # Varlen: the packed sequences of the GPU test (empty and length-1 neighbours, GQA, INT4).
  for tool in memcheck racecheck; do
    TAIL_LINES=2 timed "${tool}_varlen" 120 compute-sanitizer --tool $tool --error-exitcode 9 \
      $bin/intfa_tests --gtest_filter='Cases/VarlenGpu.*'
  done
  for tool in racecheck synccheck; do
    for args in "--seq 200 --heads 1" "--seq 130 --head-dim 64 --causal --variant half" \
                "--seq 90 --qk-bits 4 --smooth-k --v-scale block --causal"; do
      sanitize $tool 90 $args
    done
  done
fi

if $hopper; then
  gtests gpu_tests 200 '*Gpu*:-*Wgmma*'
  timed wgmma_tests 200 $bin/intfa_tests --gtest_filter='*Wgmma*'
  grep -E "^\[  FAILED|tests? ran|PASSED|SKIPPED \]|relative L2" "$logs/wgmma_tests.log" | tail -12 |
    tee -a "$summary"
  timed demo 60 $bin/intfa run --seq 4096 --heads 16
  pipe_rates
  timed sass 60 python3 scripts/dump_sass.py "$INTFA_CACHE_DIR" "$logs/sass" "attention_wgmma sm_90a"
  note "  GMMA instructions in the wgmma cubins: $(cat "$logs"/sass/*.sass 2>/dev/null | grep -c GMMA)"
  # Each shape has more key tiles than stages, so slots are reused (the producer's copies into a
  # slot the consumers have released).
  for tool in memcheck racecheck; do
    for args in "--seq 500 --heads 2 --causal" "--seq 300 --heads 2" \
                "--seq 400 --head-dim 64 --v-scale block" \
                "--seq 300 --head-dim 256 --causal --p s8 --p-scale running"; do
      sanitize $tool 60 $args
    done
  done
  # The Hopper kernel's tile configs (the heuristic's choice comes from this sweep).
  TAIL_LINES=30 timed wgmma_sweep_d64 120 $bin/intfa bench --head-dims 64 --seq 4096,16384 \
    --causal off,on --repeats 10 --json "$logs/wgmma_sweep_d64.json" \
    --configs "128,64,12,2;128,128,12,2;128,128,12,3;192,64,16,2;192,128,16,2"
  TAIL_LINES=30 timed wgmma_sweep_d128 120 $bin/intfa bench --head-dims 128 --seq 4096,16384 \
    --causal off,on --repeats 10 --json "$logs/wgmma_sweep_d128.json" \
    --configs "128,64,12,2;128,128,12,2;128,128,12,3;192,128,16,2;192,128,16,3"
  TAIL_LINES=40 timed compare_sdpa 200 python3 bench/compare_sdpa.py --lib $build/lib/libintfa.so \
    --out-dir "$logs"
  # The JIT and call-overhead targets of issue 2 on the Hopper path (which encodes three tensor
  # maps per call), and the tuner's time with the Hopper candidates.
  timed jit 60 $bin/intfa bench --jit --repeats 5 --json "$logs/jit.json"
  timed tune 120 $bin/intfa tune --head-dims 128 --causal off --tuning-db "$logs/tuning.json" \
    --json "$logs/tune.json"
  TAIL_LINES=25 timed python 240 scripts/device_python.sh "$logs"
  timed ncu 90 ncu --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section InstructionStats -k regex:attention \
    --launch-skip 3 --launch-count 1 $bin/intfa bench --seq 8192 --repeats 1
fi

if [ "$mode" = ab ]; then
  pipe_rates
  # Template variants (.variants/<name>/, a full copy of templates/ with one change) against the
  # embedded templates: same problems and configs (default: the heuristic's), same process setup.
  for dir in embedded .variants/*/; do
    name=$(basename "$dir")
    if [ "$dir" = embedded ]; then unset INTFA_TEMPLATE_DIR; else export INTFA_TEMPLATE_DIR=$PWD/$dir; fi
    [ "$dir" != embedded ] && [ -n "${AB_TESTS:-}" ] && gtests "ab_tests_$name" 200 "$AB_TESTS"
    # shellcheck disable=SC2086 # AB_BENCH_ARGS is a list of options
    timed "ab_$name" 150 $bin/intfa bench ${AB_BENCH_ARGS:---head-dims 64,128 --seq 4096,16384 \
      --causal off,on} --repeats 15 --json "$logs/ab_$name.json"
    TAIL_LINES=4 timed "ab_accuracy_$name" 30 $bin/intfa run --seq 4096 --heads 8
  done
  unset INTFA_TEMPLATE_DIR
  [ -z "${AB_SKIP_PYTHON:-}" ] && TAIL_LINES=25 timed python 240 scripts/device_python.sh "$logs"
fi

if [ "$mode" = runs ]; then
  [ -n "${RUNS_TESTS:-}" ] && gtests gpu_tests 240 "$RUNS_TESTS"
  IFS=';' read -r -a sanitize_runs <<< "${RUNS_SANITIZE:-}"
  for run in "${sanitize_runs[@]}"; do
    assignments=$(tr ' ' '\n' <<< "$run" | grep '=')
    options=$(tr ' ' '\n' <<< "$run" | grep -v '=')
    for tool in memcheck racecheck; do
      # shellcheck disable=SC2086 # lists of assignments and options
      ( [ -n "$assignments" ] && export $assignments; sanitize $tool 120 $options )
    done
  done
  IFS=';' read -r -a runs <<< "${RUNS:?RUNS names the builds and environments to time}"
  order=("${runs[@]}")
  for ((i = ${#runs[@]} - 1; i >= 0; --i)); do order+=("${runs[i]}"); done
  round=1
  for ((i = 0; i < ${#order[@]}; ++i)); do
    [ "$i" -eq "${#runs[@]}" ] && round=2
    set -- ${order[i]}
    name=$1 run_build=$2; shift 2
    # shellcheck disable=SC2086 # AB_BENCH_ARGS is a list of options
    TAIL_LINES=14 timed "run_${name}_round${round}" 150 env "$@" $run_build/bin/intfa bench \
      ${AB_BENCH_ARGS:---head-dims 64,128 --seq 1024,4096,16384 --causal off,on} --repeats 15 \
      --json "$logs/run_${name}_round${round}.json"
  done
fi

if [ "$mode" = limits ]; then
  # ncu leaves the clocks alone (--clock-control none), so its SM clock is the one the timings
  # ran at. Metrics this ncu does not know are left out rather than failing the run.
  ncu --query-metrics > "$logs/ncu_query_metrics.log" 2>&1
  metrics=""
  for metric in gpu__time_duration.sum sm__cycles_elapsed.avg.per_second smsp__inst_executed.sum \
                smsp__issue_active.avg.pct_of_peak_sustained_active \
                smsp__warps_active.avg.per_cycle_active \
                sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active \
                sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active \
                sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active; do
    if grep -q "^${metric%%.*} " "$logs/ncu_query_metrics.log"; then
      metrics=${metrics:+$metrics,}$metric
    else
      note "  ncu does not know ${metric%%.*}"
    fi
  done
  for shape in "64 4096 off" "64 16384 off" "128 4096 off" "128 16384 off" "128 16384 on"; do
    set -- $shape
    name="limits_d$1_n$2_$3"
    TAIL_LINES=3 timed "$name" 120 ncu --clock-control none --csv --metrics "$metrics" \
      -k regex:attention --launch-skip 3 --launch-count 1 --log-file "$logs/$name.csv" \
      $bin/intfa bench --head-dims "$1" --seq "$2" --causal "$3" --repeats 1
  done
  # Why the slots stay idle: warps stalled per issued instruction, by reason.
  for d in 64 128; do
    TAIL_LINES=2 timed "stalls_d${d}_n16384_off" 120 ncu --clock-control none --csv \
      --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
      -k regex:attention --launch-skip 3 --launch-count 1 \
      --log-file "$logs/stalls_d${d}_n16384_off.csv" \
      $bin/intfa bench --head-dims $d --seq 16384 --causal off --repeats 1
  done
  python3 scripts/issue_bound.py "$logs"/limits_*.csv "$logs"/stalls_*.csv | tee -a "$summary"
  TAIL_LINES=30 timed compare_sdpa 240 python3 bench/compare_sdpa.py --lib $build/lib/libintfa.so \
    --out-dir "$logs"
fi

if [ "$mode" = probe ]; then
  [ -n "${PROBE_TESTS:-}" ] && gtests gpu_tests 240 "$PROBE_TESTS"
  # B=1, H=33: 33 * N / 128 blocks of N / 128 tiles, a whole number of waves on 132 SMs, so the
  # time per wave against the tiles per block separates a block's fixed cost from a tile's. A
  # second build (PROBE_AB_BUILD, e.g. the same source with one host change) runs the same shapes.
  for build_dir in $build ${PROBE_AB_BUILD:-}; do
    for d in 128 64; do
      TAIL_LINES=12 timed "waves_d${d}_$(basename "$build_dir")" 90 $build_dir/bin/intfa bench \
        --batch 1 --heads 33 --head-dims $d --seq 1024,2048,4096,8192,16384 --causal off \
        --repeats 15 --json "$logs/waves_d${d}_$(basename "$build_dir").json"
    done
  done
  TAIL_LINES=12 timed reference_shapes 90 $bin/intfa bench --head-dims 128 --seq 1024,4096,16384 \
    --causal off --repeats 15 --json "$logs/reference_shapes.json"
  # Where the warps wait, per SASS instruction (stall samples); at 1k the prologue and epilogue
  # weigh most.
  timed ncu_source 150 ncu --section WarpStateStats --section SourceCounters -k regex:attention \
    --launch-skip 3 --launch-count 1 -o "$logs/source" \
    $bin/intfa bench --batch 1 --heads 33 --seq ${PROBE_SOURCE_SEQ:-1024} --repeats 1
  timed ncu_source_csv 60 ncu -i "$logs/source.ncu-rep" --page source --csv --print-source sass
  gzip -f "$logs/ncu_source_csv.log"
  TAIL_LINES=25 timed stall_samples 30 python3 scripts/stall_samples.py "$logs/ncu_source_csv.log.gz"
  if [ -n "${PROBE_COMPARE:-}" ]; then
    TAIL_LINES=30 timed compare_sdpa 240 python3 bench/compare_sdpa.py --lib $build/lib/libintfa.so \
      --out-dir "$logs"
  fi
fi

if $timings; then
  timed jit 60 $bin/intfa bench --jit --repeats 5 --json "$logs/jit.json"
  # One bucket set of the tuner (d=128, non-causal, N buckets 1k, 4k, 16k), into its own database.
  timed tune 120 $bin/intfa tune --head-dims 128 --causal off --tuning-db "$logs/tuning.json" \
    --json "$logs/tune.json"
  timed accuracy 120 python3 bench/accuracy.py --lib $build/lib/libintfa.so --numerics all \
    --out-dir "$logs"
  # The speed of each numerics option picks the defaults (issue 4).
  for numerics in "s8 running tensor" "u8 running tensor" "u8 tile tensor" "u8 tile channel" \
                  "u8 running block" "u8 tile block"; do
    set -- $numerics
    TAIL_LINES=10 timed "numerics_$1_$2_$3" 60 $bin/intfa bench --head-dims 64,128 --seq 16384 \
      --causal off,on --repeats 15 --p $1 --p-scale $2 --v-scale $3 \
      --json "$logs/numerics_$1_$2_$3.json"
  done
  # INT4 Q.K: emulated on Hopper (no INT4 tensor cores), so its speed is reported, not targeted.
  timed int4 60 $bin/intfa bench --head-dims 128 --seq 4096 --causal off --variants full,half \
    --qk-bits 4 --repeats 5 --json "$logs/int4.json"
  TAIL_LINES=40 timed compare_sdpa 240 python3 bench/compare_sdpa.py --lib $build/lib/libintfa.so \
    --out-dir "$logs"
fi

if $extras; then
  # The default numerics at N=16k (B=4, H=32) against RESULTS.md's table: a change of the kernel's
  # addressing (varlen) must not cost the dense kernels.
  TAIL_LINES=6 timed dense_speed 60 $bin/intfa bench --head-dims 64,128 --seq 16384 --causal off,on \
    --repeats 15 --json "$logs/dense_speed.json"
  # K smoothing's cost (its mean pass is in the quantize columns), against plain K in the same run.
  for smoothing in "" --smooth-k; do
    TAIL_LINES=6 timed "quantize${smoothing:+_smooth_k}" 60 $bin/intfa bench --head-dims 64,128 \
      --seq 4096,16384 --repeats 10 $smoothing --json "$logs/quantize${smoothing:+_smooth_k}.json"
  done
  # INT4 Q.K: its error against float64 of the original inputs (intfa run checks it too).
  for variant in full half; do
    for d in 64 128; do
      for n in 1024 4096; do
        for dist in normal uniform; do
          TAIL_LINES=0 timed "int4_${variant}_d${d}_n${n}_${dist}" 60 $bin/intfa run --qk-bits 4 \
            --variant $variant --head-dim $d --seq $n --heads 8 --dist $dist --repeats 5
          note "  $(grep -m1 'relative L2' "$logs/int4_${variant}_d${d}_n${n}_${dist}.log")"
        done
      done
    done
  done
fi

if $comparison; then
  timed sweep 150 $bin/intfa bench --head-dims 64,128 --seq 4096 --causal off,on --variants full,half \
    --configs all --repeats 10 --json "$logs/sweep.json"
  # The limiter of the d=128 full INT8 kernel (N=8192, B=4, H=32).
  timed ncu 90 ncu --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section InstructionStats -k regex:attention \
    --launch-skip 3 --launch-count 1 $bin/intfa bench --seq 8192 --repeats 1
  grep -E "Throughput|Registers|Occupancy|Stall|Issue|Warp Cycles|Eligible|Active Warps|Pipe" \
    "$logs/ncu.log" | head -40
fi

echo; echo "=== summary ($(( $(date +%s) - started )) s) ==="
cat "$summary"
