#!/usr/bin/env bash
# On a machine of 2 or more GPUs (nvidia-h200-x2, -x4), in one call: context parallelism checked
# and measured (issue 48).
#   1. the C++ tests of the shard quantize passes (CP_TESTS, a gtest filter), while the Python
#      extension builds for the machine's python3;
#   2. the one-GPU context-parallel tests (the simulated ring, a NCCL group of one), unless
#      CP_ONE_GPU=0 (a call that only repeats the multi-GPU tests);
#   3. the multi-GPU tests under torchrun on every GPU, CP_TEST_RUNS times in a row (default 1);
#   4. CP_BREAK (a sed expression over intfa/distributed.py as the tests import it, the copy in
#      the built package, e.g. one that skips the all-reduce of the sequence's statistics), when
#      set: steps 2 and 3 again on the broken copy, which should fail (the tests see the break);
#      the file is restored after;
#   5. bench/context_parallel.py on every GPU for each LENGTH:causal or LENGTH:non-causal of
#      CP_RUNS (default "131072:causal"), with CP_BENCH_ARGS; then for the first of them again
#      under each environment setting of CP_ENVS (';'-separated, e.g. "NCCL_MIN_P2P_NCHANNELS=32")
#      with CP_ENV_ARGS (e.g. "--transfer-only --no-single-gpu"): the ring's transfer under NCCL's
#      settings.
# CP_WHEELS: a folder of pure-Python wheels to install first (e.g. diffusers, which the
# multi-GPU tests drive when it imports).
#   usage: INTFA_BUILD=.dbuild scripts/device/context_parallel.sh
#          carry: a slim build (bin/, lib/) and .deps (scripts/prepare_device_deps.sh)
# Multicast stays off, as ../shared/device/README.md says for these machines.
export INTFA_BUILD=${INTFA_BUILD:-build-dev}
export INTFA_DEADLINE_S=${INTFA_DEADLINE_S:-570}
source "$(dirname "$0")/common.sh"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gpus=$(nvidia-smi -L | wc -l)
note "GPUs: $gpus; $(nvidia-smi topo -m 2>/dev/null | sed -n 2p | tr -s ' \t' ' ')"

build_python_extension "$(( $(nproc) - 2 ))" > "$logs/python_build.log" 2>&1 &
python_build=$!
gtests shard_tests "${CP_TESTS_LIMIT_S:-90}" "${CP_TESTS:-*QuantizeShards*}"
wait "$python_build" || { note "python extension: build FAILED"; tail -20 "$logs/python_build.log"; finish; exit 0; }
export PYTHONPATH=$PWD/build-device-py/python:$PWD/bench
if [ -n "${CP_WHEELS:-}" ] && compgen -G "$CP_WHEELS/*.whl" > /dev/null; then
  install_wheels 120 "$CP_WHEELS"/*.whl
  export PYTHONPATH=$PYTHONPATH:/tmp/site
fi

pytests() {  # NAME: the one-GPU tests, then the multi-GPU ones CP_TEST_RUNS times
  if [ "${CP_ONE_GPU:-1}" != 0 ]; then
    TAIL_LINES=6 timed "$1_one_gpu" "${CP_PYTEST_LIMIT_S:-150}" \
      python3 -m pytest -q -p no:cacheprovider -s python/tests/test_distributed_gpu.py
    grep -E "passed|failed" "$logs/$1_one_gpu.log" | tail -1 | tee -a "$summary"
  fi
  for run in $(seq "${CP_TEST_RUNS:-1}"); do
    TAIL_LINES=4 timed "$1_multigpu_$run" "${CP_MULTIGPU_LIMIT_S:-120}" \
      torchrun --nproc-per-node "$gpus" -m pytest -q -p no:cacheprovider -s \
      python/tests/test_distributed_multigpu.py
    grep -E "passed|failed" "$logs/$1_multigpu_$run.log" | tail -"$gpus" | tee -a "$summary"
  done
}
pytests tests
if [ -n "${CP_BREAK:-}" ]; then
  imported=$(python3 -c "import intfa.distributed as d; print(d.__file__)")
  cp "$imported" "$logs/distributed.py.orig"
  sed -i "$CP_BREAK" "$imported"
  diff "$logs/distributed.py.orig" "$imported" > "$logs/break.diff"
  note "$imported broken on purpose ($(grep -c '^>' "$logs/break.diff") lines): these should fail"
  CP_TEST_RUNS=1 pytests broken
  cp "$logs/distributed.py.orig" "$imported"
fi

bench() {  # LABEL LENGTH CAUSALITY ARGS [ENV=VALUE...]
  local label=$1 seq=$2 causal=$3 arguments=$4 flags=""
  shift 4
  [ "$causal" = non-causal ] && flags=--non-causal
  local name="bench_${label}_${seq}_${causal}"
  TAIL_LINES=8 timed "$name" "${CP_BENCH_LIMIT_S:-150}" \
    env "$@" torchrun --nproc-per-node "$gpus" bench/context_parallel.py --seq "$seq" $flags \
    $arguments
  grep -E "GPUs,|one GPU:|ring|ulysses|default" "$logs/$name.log" | sed "s/^/  /" |
    tee -a "$summary"
}
read -r -a runs <<< "${CP_RUNS:-131072:causal}"
for run in "${runs[@]}"; do
  bench default "${run%%:*}" "${run##*:}" "${CP_BENCH_ARGS:-}"
done
IFS=';' read -r -a settings <<< "${CP_ENVS:-}"
for setting in "${settings[@]}"; do
  [ -n "$setting" ] && bench "$(echo "$setting" | tr -c 'A-Za-z0-9\n' '_')" \
    "${runs[0]%%:*}" "${runs[0]##*:}" "${CP_ENV_ARGS:-}" $setting
done
finish
