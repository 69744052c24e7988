#!/usr/bin/env bash
# On the GPU machine: the kernels one `intfa.attention` call launches, each with its time and
# DRAM bytes (ncu over the NVTX range of the last call of bench/call_passes.py, after its warm-up
# calls), against the minimum a call must move; then the host time per call, layer by layer.
#   usage: INTFA_BUILD=build-dev scripts/device/passes.sh   carry: build-dev and .deps
#   PASSES_SHAPES: "d:N[:causal]" items (default "128:4096 64:4096 128:1024")
#   PASSES_VARIANTS: default "full_int8 half_int8"; PASSES_ENVS: environment settings (e.g.
#   INTFA_ONE_LAUNCH_KV=0) each shape and variant is also profiled under; PASSES_HOST=0 skips the
#   host time
source "$(dirname "$0")/common.sh"
build_python_extension "$(( $(nproc) - 2 ))" > "$logs/python_build.log" 2>&1
note "python build: exit $? ($(tail -1 "$logs/python_build.log"))"
export PYTHONPATH=$PWD/build-device-py/python:$PWD/bench
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
metrics=$metrics,dram__throughput.avg.pct_of_peak_sustained_elapsed
for item in ${PASSES_SHAPES:-128:4096 64:4096 128:1024}; do
  IFS=: read -r d n causal <<< "$item"
  flags="--head-dim $d --seq $n ${causal:+--causal}"
  for variant in ${PASSES_VARIANTS:-full_int8 half_int8}; do
  for setting in default ${PASSES_ENVS:-}; do
    settings=()
    [ "$setting" != default ] && settings=("$setting")
    name="passes_d${d}_n${n}${causal:+_causal}_${variant}"
    [ "$setting" != default ] && name="${name}_${setting//[^A-Za-z0-9]/_}"
    TAIL_LINES=2 timed "$name" 90 env "${settings[@]}" ncu --clock-control none --csv --metrics "$metrics" \
      --nvtx --nvtx-include "intfa_call/" --log-file "$logs/$name.csv" \
      python3 bench/call_passes.py $flags --variant $variant --calls 3
    python3 - "$logs/$name.csv" "$name" <<'PY' | tee -a "$summary"
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
kernels = {}
for r in rows:
    key = (r["ID"], r["Kernel Name"][:60])
    value = float(r["Metric Value"].replace(",", ""))
    unit = r["Metric Unit"]
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1, "usecond": 1, "ms": 1e3, "msecond": 1e3,
             "byte": 1e-6, "Kbyte": 1e-3,
             "Mbyte": 1, "Gbyte": 1e3, "%": 1}.get(unit, 1)
    kernels.setdefault(key, {})[r["Metric Name"]] = value * scale
print(f"{sys.argv[2]}: kernel, us, MB read, MB written, % of DRAM peak")
total_us = total_mb = 0
for (_, name), m in kernels.items():
    us = m.get("gpu__time_duration.sum", 0)
    read, write = m.get("dram__bytes_read.sum", 0), m.get("dram__bytes_write.sum", 0)
    total_us += us
    total_mb += read + write
    print(f"  {name:60s} {us:9.1f} {read:9.1f} {write:9.1f} "
          f"{m.get('dram__throughput.avg.pct_of_peak_sustained_elapsed', 0):5.1f}")
print(f"  total {total_us:.1f} us, {total_mb:.1f} MB")
PY
  done
  done
done
[ "${PASSES_HOST:-1}" = 0 ] && finish && exit 0
TAIL_LINES=12 timed python_overhead 90 python3 bench/python_overhead.py \
  --json "$logs/python_overhead.json"
grep -E "  |us per call" "$logs/python_overhead.log" | tee -a "$summary" > /dev/null
finish
