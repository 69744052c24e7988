#!/usr/bin/env bash
# On the GPU machine, in one call: what changed since the last GPU run, checked and measured.
# Steps (VERIFY_STEPS, comma-separated; default all but cost):
#   tests     the C++ GPU tests (VERIFY_TESTS: a gtest filter; default the one-call 16-bit entry
#             point with K smoothing and the rotation, the quantize kernels, accuracy on the input
#             families, the paged KV cache and merge_states, the Hopper kernel's shapes), while
#             the Python extension builds in the background with that machine's Python;
#   examples  the examples/ programs a host app starts from (copied into $INTFA_BUILD/examples);
#   python    the Python GPU tests (VERIFY_PYTESTS: test files; default the clients, the paged
#             ops, the ops with the transforms, context parallelism when present);
#   decode    decode against SDPA cuDNN FP16 on the paged cache's shapes (bench/compare_decode.py,
#             DECODE_ARGS, DECODE_LIMIT_S) and `intfa tune --decode` over the INT4 configs;
#   accuracy  the real kernels per input family and Q/K transform (bench/accuracy.py);
#   e2e       `intfa.attention` and the kernel alone against SDPA (bench/compare_sdpa.py;
#             E2E_HEAD_DIMS, E2E_SEQS, E2E_CAUSAL, E2E_REPEATS, E2E_LIMIT_S; E2E_ARGS: more of
#             its arguments, e.g. --rotate on; E2E_TIMINGS: its
#             --timing, interleaved by default; E2E_ENVS and E2E_ROUNDS: the same again under
#             other environment settings, alternating);
#   host      host time per call, layer by layer (bench/python_overhead.py);
#   kernels   each kernel's time in intfa.attention under each rotation (bench/kernel_times.py,
#             KERNEL_TIMES_ARGS);
#   cost      the end-to-end cost of K smoothing and the rotation (bench/qk_transforms_cost.py;
#             COST_INPUTS: input families, default normal; COST_CAUSAL, default off);
#             ACCURACY_ARGS replace the accuracy step's arguments, ACCURACY_LIMIT_S its limit;
#   ab        `intfa bench AB_ARGS` with the embedded templates and with each of AB_VARIANTS
#             (template folders, e.g. .variants/old) and of AB_ENVS (environment settings, e.g.
#             INTFA_PROGRAMMATIC_LAUNCH=0) and of AB_BINARIES (other builds' `intfa`, e.g. HEAD's
#             built apart and carried as build-old/intfa: its host code with its own embedded
#             templates, whatever INTFA_TEMPLATE_DIR says) and of AB_ARG_SETS (more `intfa bench`
#             arguments with the embedded templates, NAME=ARG:ARG..., e.g.
#             kv_block=--k-scale=block:--v-scale=block), alternating, AB_ROUNDS times
#             (default 2): an A/B of template or runtime changes in one run. AB_ARGS defaults
#             to the paged cache's decode and append (`--decode`, B=8/32, N=32k/4k, INT8 and
#             INT4; the append's GB/s among its columns); `intfa bench`'s own rows carry the
#             quantize passes' time and GB/s. AB_NAME (default ab) prefixes the logs, so that a
#             second run of this script in the same call (with INTFA_KEEP_SUMMARY=1) can time
#             other problems.
#   append    the same as ab (APPEND_VARIANTS, APPEND_ROUNDS and APPEND_ARGS, the decode bench's
#             shape arguments, are the older names).
#   break     the gtest filter BREAK_TESTS with each of BREAK_VARIANTS (template folders broken
#             on purpose): each run should fail, which shows the tests see the break;
#   sanitize  compute-sanitizer racecheck and memcheck over the gtest filter SANITIZE_TESTS;
#   configs   tile configs against each other, `intfa bench` in one order then the other, each
#             entry of CONFIG_RUNS ([TEMPLATE_DIR@]VARIANT:HEAD_DIM:CONFIG;CONFIG;...; default
#             half INT8 at d=128, three stages against two) a table in the summary.
# VERIFY_TESTS_LIMIT_S and VERIFY_PYTESTS_LIMIT_S (default 190 and 150) bound the two test steps;
# VERIFY_TESTS_MORE (with VERIFY_TESTS_MORE_LIMIT_S, default 120) is a second gtest filter run after
# the first, in its own step.
#   usage: INTFA_BUILD=build-dev scripts/device/verify.sh
#          carry: a slim build with bin/ and lib/ (build-dev) and .deps (prepare_device_deps.sh)
# Every step under its own limit, cut to what is left of INTFA_DEADLINE_S; logs under $OUT/logs.
export INTFA_BUILD=${INTFA_BUILD:-build-dev}
export INTFA_DEADLINE_S=${INTFA_DEADLINE_S:-500}
source "$(dirname "$0")/common.sh"
steps=",${VERIFY_STEPS:-tests,examples,python,decode,accuracy,e2e},"
wants() { [[ "$steps" == *",$1,"* ]]; }

python=$(command -v python3)
build_python_extension "$(( $(nproc) - 2 ))" > "$logs/python_build.log" 2>&1 &
python_build=$!

if wants tests; then
  gtests gpu_tests "${VERIFY_TESTS_LIMIT_S:-190}" "${VERIFY_TESTS:-Attention16bit*:*QuantizeRowsGpu*:*AccuracyOnReal*:*PagedServingGpu*:*PagedDecodeGpu*:*PagedAppendGpu*:*MergeStatesGpu*:Shapes/WgmmaGpu.*}"
  # A second filter in its own step, for tests that matter less than the first's: a time limit
  # that cuts it leaves the first step's verdicts whole.
  if [ -n "${VERIFY_TESTS_MORE:-}" ]; then
    gtests gpu_tests_more "${VERIFY_TESTS_MORE_LIMIT_S:-120}" "$VERIFY_TESTS_MORE"
  fi
fi

# A template folder the caller chose for the whole run; the steps that try others put it back.
caller_templates=${INTFA_TEMPLATE_DIR:-}
use_templates() {
  if [ -n "$1" ]; then export INTFA_TEMPLATE_DIR=$1; else unset INTFA_TEMPLATE_DIR; fi
}

if wants break && [ -z "${BREAK_TESTS:-}" ]; then
  note "break: SKIPPED (BREAK_TESTS, the gtest filter to run on each variant, is not set)"
elif wants break; then
  for dir in ${BREAK_VARIANTS:-}; do
    INTFA_TEMPLATE_DIR=$PWD/$dir gtests "break_$(basename "$dir")" 120 "$BREAK_TESTS"
    note "  (broken on purpose with $dir: a failure above is the expected outcome)"
  done
fi

if wants sanitize && [ -z "${SANITIZE_TESTS:-}" ]; then
  note "sanitize: SKIPPED (SANITIZE_TESTS, the gtest filter to run, is not set)"
elif wants sanitize; then
  for tool in racecheck memcheck; do
    TAIL_LINES=3 timed "sanitize_$tool" 150 compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$bin/intfa_tests" --gtest_filter="$SANITIZE_TESTS"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$logs/sanitize_$tool.log" | tail -3 \
      | tee -a "$summary"
  done
fi

# The template A/Bs time the GPU alone, so they run while the Python extension builds.
if wants ab || wants append; then
  variants=${AB_VARIANTS:-${APPEND_VARIANTS:-}}
  binaries=()
  for path in ${AB_BINARIES:-}; do binaries+=("binary:$path"); done
  for set in ${AB_ARG_SETS:-}; do binaries+=("args:$set"); done
  for round in $(seq "${AB_ROUNDS:-${APPEND_ROUNDS:-2}}"); do
    for dir in embedded $variants ${AB_ENVS:-} "${binaries[@]}"; do
      name=$(basename "$dir")
      setting=()
      extra=()
      binary=$bin/intfa
      if [ "$dir" = embedded ]; then
        use_templates "$caller_templates"
      elif [[ "$dir" == args:* ]]; then  # more bench arguments, with the embedded templates
        set_text=${dir#args:}
        name=${set_text%%=*}
        IFS=: read -r -a extra <<< "${set_text#*=}"
      elif [[ "$dir" == binary:* ]]; then  # another build's intfa, with its own templates
        binary=${dir#binary:}
        [[ "$binary" == /* ]] || binary=$PWD/$binary
        if [ ! -f "$binary" ] || [ ! -x "$binary" ]; then
          note "ab: SKIPPED $binary (an AB_BINARIES entry that is not an executable here: carried?)"
          continue
        fi
        unset INTFA_TEMPLATE_DIR
        name=${dir#binary:}; name=${name#/}; name=${name//[^A-Za-z0-9_-]/_}
      elif [[ "$dir" == *=* ]]; then  # an environment setting, with the embedded templates
        use_templates "$caller_templates"; setting=("$dir"); name=${dir//[^A-Za-z0-9_]/_}
      else
        use_templates "$PWD/$dir"
      fi
      # shellcheck disable=SC2086  # AB_ARGS is a list of arguments
      TAIL_LINES=6 timed "${AB_NAME:-ab}_${name}_$round" 90 env "${setting[@]}" "$binary" bench \
        ${AB_ARGS:---decode ${APPEND_ARGS:---batch 8,32 --seq 32k,4k --q-len 1 --bits 8,4 --repeats 30}} \
        "${extra[@]}" --json "$logs/${AB_NAME:-ab}_${name}_$round.json"
      grep -E "^(B[0-9]|full |half )" "$logs/${AB_NAME:-ab}_${name}_$round.log" \
        | sed "s|^|$name $round: |" \
        | tee -a "$summary"
    done
  done
  use_templates "$caller_templates"
fi

if wants configs; then
  # Each entry of CONFIG_RUNS: [TEMPLATE_DIR@]VARIANT:HEAD_DIM:CONFIG;CONFIG;... (default: half
  # INT8 at d=128 with three stages, P.V one tile behind Q.K^T, against two), timed over
  # CONFIG_SEQS (1k,4k,16k), causal off and on, in the listed order and then reversed.
  index=0
  for entry in ${CONFIG_RUNS:-half:128:128,128,12,3;128,128,12,2}; do
    index=$((index + 1))
    dir=""; spec=$entry
    if [[ "$entry" == *@* ]]; then dir=${entry%%@*}; spec=${entry#*@}; fi
    variant=${spec%%:*}; rest=${spec#*:}; head_dim=${rest%%:*}; configs=${rest#*:}
    reversed=$(echo "$configs" | tr ';' '\n' | tac | paste -sd ';')
    for order in forward reversed; do
      list=$configs; [ "$order" = reversed ] && list=$reversed
      name=configs_${index}_$order
      if [ -n "$dir" ]; then use_templates "$PWD/$dir"; else use_templates "$caller_templates"; fi
      TAIL_LINES=4 timed "$name" 90 "$bin/intfa" bench --variants "$variant" \
        --head-dims "$head_dim" --configs "$list" --seq "${CONFIG_SEQS:-1k,4k,16k}" \
        --causal off,on --repeats 10 --json "$logs/$name.json"
      echo "$entry" > "$logs/$name.entry"
    done
  done
  use_templates "$caller_templates"
  "$python" - "$logs" <<'PY' | tee -a "$summary"
import glob, json, re, sys
tables = {}
for path in sorted(glob.glob(sys.argv[1] + "/configs_*_*.json")):
    entry = open(path[:-5] + ".entry").read().strip()
    for row in json.load(open(path)):
        config = ",".join(re.search(name + r"=(\d+)", row["config"]).group(1)
                          for name in ("block_m", "block_n", "warps", "stages"))
        table = tables.setdefault(entry, {})
        table.setdefault((row["seq"], row["causal"]), {}).setdefault(config, []).append(row["tops"])
for entry, table in tables.items():
    configs = list(dict.fromkeys(c for by in table.values() for c in by))
    print(f"\n{entry} (TOPS, both orders; last column: best of each over the first config's)")
    print("| N | causal | " + " | ".join(configs) + " | best / first |")
    print("| --- | --- | " + " | ".join("---" for _ in configs) + " | --- |")
    for (seq, causal), by in sorted(table.items()):
        cells = [" / ".join(f"{t:.0f}" for t in by.get(c, [])) for c in configs]
        first = max(by.get(configs[0], [float("nan")]))
        best = max(max(v) for v in by.values())
        print(f"| {seq} | {'on' if causal else 'off'} | " + " | ".join(cells) +
              f" | {best / first:.3f} |")
PY
fi

if wants examples; then
  for example in attend_static attend_c; do
    [ -x "$build/examples/$example" ] || continue
    TAIL_LINES=4 timed "example_$example" 40 env LD_LIBRARY_PATH="$PWD/$build/lib:$LD_LIBRARY_PATH" \
      "$build/examples/$example"
    grep -E "relative L2" "$logs/example_$example.log" | tee -a "$summary"
  done
fi

wait "$python_build"
note "python build: exit $? ($(tail -1 "$logs/python_build.log"))"
export PYTHONPATH=$PWD/build-device-py/python:$PWD/bench INTFA_TEST_REPORT=$logs/python_report.txt
: > "$INTFA_TEST_REPORT"

if wants kernels; then
  # KERNEL_TIMES_TEMPLATES: template folders to time too, after the embedded templates.
  for dir in "" ${KERNEL_TIMES_TEMPLATES:-}; do
    name=kernel_times${dir:+_$(basename "$dir")}
    use_templates "${dir:+$PWD/$dir}"
    # shellcheck disable=SC2086  # KERNEL_TIMES_ARGS is a list of arguments
    TAIL_LINES=40 timed "$name" "${KERNEL_TIMES_LIMIT_S:-90}" "$python" bench/kernel_times.py \
      ${KERNEL_TIMES_ARGS:-}
    echo "$name:" >> "$summary"
    grep -E "^d=|rotate=" "$logs/$name.log" | tee -a "$summary" > /dev/null
  done
  use_templates "$caller_templates"
fi

if wants python; then
  default_tests="python/tests/test_clients.py python/tests/test_paged_gpu.py"
  default_tests="$default_tests python/tests/test_paged_arguments.py python/tests/test_gpu.py"
  for extra in python/tests/test_distributed*.py; do
    [ -f "$extra" ] && default_tests="$default_tests $extra"
  done
  TAIL_LINES=25 timed python_tests "${VERIFY_PYTESTS_LIMIT_S:-150}" "$python" -m pytest -q -rs -p no:cacheprovider \
    ${VERIFY_PYTESTS:-$default_tests}
  grep -E "passed|failed" "$logs/python_tests.log" | tail -2 | tee -a "$summary"
  grep -E "^FAILED" "$logs/python_tests.log" | head -20 | tee -a "$summary"
  tee -a "$summary" < "$INTFA_TEST_REPORT"
fi

if wants decode; then
  TAIL_LINES=24 timed compare_decode "${DECODE_LIMIT_S:-120}" "$python" bench/compare_decode.py \
    --lib "$build/lib/libintfa.so" --out-dir "$logs" ${DECODE_ARGS:-}
  grep -E "^\||device copy|^timing" "$logs/compare_decode.log" | tee -a "$summary"
  TAIL_LINES=8 timed tune_int4 60 "$bin/intfa" tune --decode --batch 8,32 --seq 4k,32k --q-len 1 \
    --bits 4 --configs all --repeats 10 --json "$logs/tune_int4.json"
  grep -E "^B[0-9]" "$logs/tune_int4.log" | tee -a "$summary"
fi

if wants accuracy; then
  # shellcheck disable=SC2086  # ACCURACY_ARGS is a list of arguments
  TAIL_LINES=4 timed accuracy "${ACCURACY_LIMIT_S:-60}" "$python" bench/accuracy.py \
    --lib "$build/lib/libintfa.so" \
    ${ACCURACY_ARGS:---inputs all --options plain,smooth,rotate,smooth+rotate,default --numerics issue --head-dims 64,128 --seqs 1024,4096} \
    --out-dir "$logs/accuracy"
  if [ -f "$logs/accuracy/accuracy.md" ]; then
    awk '/relative L2/{on=1} /cosine/{on=0} on' "$logs/accuracy/accuracy.md" | grep "^|" \
      | tee -a "$summary" > /dev/null
  fi
fi

if wants e2e; then
  # E2E_ENVS: environment settings (e.g. INTFA_PROGRAMMATIC_LAUNCH=0) each run also gets, after
  # the default, E2E_ROUNDS times (default 1) alternating; each run's table in the summary.
  # E2E_TIMINGS: compare_sdpa.py's --timing, each in turn (default interleaved; "interleaved
  # orders" for both); the logs of any but interleaved are named after it.
  read -ra timings <<< "${E2E_TIMINGS:-interleaved}"
  for round in $(seq "${E2E_ROUNDS:-1}"); do
    for setting in default ${E2E_ENVS:-}; do
      for timing in "${timings[@]}"; do
        name=compare_sdpa; settings=()
        if [ "$setting" != default ]; then
          settings=("$setting"); name=compare_sdpa_${setting//[^A-Za-z0-9_]/_}
        fi
        [ "$timing" != interleaved ] && name=${name}_$timing
        [ "${E2E_ROUNDS:-1}" -gt 1 ] && name=${name}_$round
        mkdir -p "$logs/$name"
        # shellcheck disable=SC2086  # E2E_ARGS is a list of arguments
        TAIL_LINES=30 timed "$name" "${E2E_LIMIT_S:-200}" env "${settings[@]}" "$python" \
          bench/compare_sdpa.py --intfa binding --head-dims "${E2E_HEAD_DIMS:-128}" \
          --seqs "${E2E_SEQS:-1024,4096,16384}" --causal "${E2E_CAUSAL:-off}" \
          --repeats "${E2E_REPEATS:-10}" --timing "$timing" --out-dir "$logs/$name" \
          ${E2E_ARGS:-}
        echo "$name:" >> "$summary"
        grep -E "^\|" "$logs/$name.log" | tee -a "$summary" > /dev/null
      done
    done
  done
fi

if wants host; then
  TAIL_LINES=12 timed python_overhead 90 "$python" bench/python_overhead.py \
    --json "$logs/python_overhead.json"
  grep -E "us|µs" "$logs/python_overhead.log" | tee -a "$summary" > /dev/null
fi

if wants cost; then
  # COST_INPUTS: the input families timed, one run each (bench/accuracy.py's names).
  for inputs in ${COST_INPUTS:-normal}; do
    TAIL_LINES=30 timed "qk_transforms_cost_$inputs" "${COST_LIMIT_S:-120}" "$python" \
      bench/qk_transforms_cost.py --head-dims 64,128 --seqs 1024,4096,16384 --shapes 4x32 \
      --causal "${COST_CAUSAL:-off}" --variants full_int8 --repeats 10 --inputs "$inputs" \
      --out-dir "$logs/cost_$inputs"
    [ -f "$logs/cost_$inputs/qk_transforms_cost.md" ] && \
      grep "^|" "$logs/cost_$inputs/qk_transforms_cost.md" | tee -a "$summary" > /dev/null
  done
fi
finish
