#!/usr/bin/env bash
# On the GPU machine: ncu's instruction, issue and memory counters of the kernels whose name
# matches a regex, over a few launches of any command (after the first NCU_SKIP launches, default
# 4: warm caches and JIT compiles), clocks left alone. Meant to follow another script in the
# same call: it keeps that one's summary and adds its table.
#   usage: scripts/device/ncu_kernel.sh NAME KERNEL_REGEX COMMAND...
#   e.g.   scripts/device/ncu_kernel.sh append paged_append build-dev/bin/intfa bench --decode
export INTFA_KEEP_SUMMARY=1
source "$(dirname "$0")/common.sh"
name=$1 regex=$2; shift 2
metrics=gpu__time_duration.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active
metrics=$metrics,sm__warps_active.avg.pct_of_peak_sustained_active
metrics=$metrics,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum
metrics=$metrics,lts__t_bytes.sum,launch__registers_per_thread,launch__grid_size
metrics=$metrics,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum
metrics=$metrics,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum${NCU_METRICS:+,$NCU_METRICS}
# NCU_SECTIONS: more ncu sections (e.g. "WarpStateStats ComputeWorkloadAnalysis"), their
# metrics listed too.
sections=()
for section in ${NCU_SECTIONS:-}; do sections+=(--section "$section"); done
TAIL_LINES=3 timed "ncu_$name" 120 ncu --clock-control none --csv --kernel-name "regex:$regex" \
  --launch-skip "${NCU_SKIP:-4}" --launch-count "${NCU_COUNT:-2}" --metrics "$metrics" \
  "${sections[@]}" --log-file "$logs/ncu_$name.csv" "$@"
python3 - "$logs/ncu_$name.csv" "$name" <<'PY' | tee -a "$summary"
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
launches = {}
for r in rows:
    launches.setdefault((r["ID"], r["Kernel Name"][:50]), {})[r["Metric Name"]] = (
        r["Metric Value"], r["Metric Unit"])
# With sections the same metric can come twice; the last one stands.
print(f"ncu {sys.argv[2]}:")
for (launch, kernel), metrics in launches.items():
    print(f"  {launch} {kernel}")
    for metric, (value, unit) in sorted(metrics.items()):
        print(f"    {metric:60s} {value:>16s} {unit}")
PY
checkpoint
