#!/usr/bin/env bash
# On the GPU machine: where one kernel's warps stall, instruction by instruction. ncu samples the
# warps' program counters and stall reasons (its SourceCounters section) over one launch of the
# kernels whose name matches a regex (after NCU_SKIP launches, default 4), clocks left alone; the
# SASS with the samples of each instruction goes to $logs/sass_NAME.csv, and the summary gets the
# samples by opcode and the NCU_TOP (default 40) instructions that stalled most, with their
# leading reasons. Meant to follow another script in the same call, as ncu_kernel.sh is.
#   usage: scripts/device/ncu_sass.sh NAME KERNEL_REGEX COMMAND...
#   e.g.   scripts/device/ncu_sass.sh half128 attention_forward_wgmma \
#            "$PWD/build-dev/bin/intfa" bench --variants half --seq 4k --repeats 2
export INTFA_KEEP_SUMMARY=1
source "$(dirname "$0")/common.sh"
name=$1 regex=$2; shift 2
report=$logs/sass_$name
TAIL_LINES=3 timed "ncu_sass_$name" 150 ncu --clock-control none --kernel-name "regex:$regex" \
  --launch-skip "${NCU_SKIP:-4}" --launch-count 1 --section SourceCounters \
  --section WarpStateStats -f -o "$report" "$@"
if [ -f "$report.ncu-rep" ]; then
  TAIL_LINES=1 timed "ncu_sass_${name}_export" 60 sh -c \
    "ncu --import '$report.ncu-rep' --page source --print-source sass --csv > '$report.csv'"
  # The report itself is large and holds nothing the CSV lacks for this use.
  [ -s "$report.csv" ] && rm -f "$report.ncu-rep"
  python3 - "$report.csv" "$name" "${NCU_TOP:-40}" <<'PY' | tee -a "$summary"
import collections, csv, sys
path, name, top = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = open(path, errors="replace").read().splitlines()
start = next((i for i, l in enumerate(lines) if l.startswith('"#') or l.startswith('"Address')), 0)
rows = list(csv.DictReader(lines[start:]))
if not rows:
    print(f"ncu sass {name}: no rows in {path}")
    sys.exit(0)
columns = list(rows[0].keys())
source = next((c for c in columns if c.strip('"# ') in ("Source", "Sass")), None)
total = next((c for c in columns if c.startswith("Warp Stall Sampling (All")), None)
if source is None or total is None:
    print(f"ncu sass {name}: no SASS or stall sampling column; columns: {columns}")
    sys.exit(0)
# Per-reason sample columns, where this ncu version lists them (stall_* or "... Stall ..."); the
# "(Not Issued)" ones are parts of those.
reasons = [c for c in columns if c != total and "stall" in c.lower() and "Sampling" not in c
           and "Not Issued" not in c]

def number(text):
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return 0.0

by_opcode = collections.Counter()
all_samples = 0.0
for r in rows:
    samples = number(r[total])
    all_samples += samples
    words = [w for w in r[source].split() if not w.startswith("@")]
    by_opcode[words[0] if words else "?"] += samples
print(f"ncu sass {name}: {len(rows)} instructions, {all_samples:.0f} samples")
print("  by opcode (share of samples):")
for opcode, samples in by_opcode.most_common(20):
    print(f"    {opcode:24s} {100 * samples / max(all_samples, 1):5.1f}%")
print(f"  the {top} instructions with most samples (address, share, leading reasons, SASS):")
for r in sorted(rows, key=lambda r: -number(r[total]))[:top]:
    samples = number(r[total])
    leading = sorted(((number(r[c]), c) for c in reasons), reverse=True)[:3]
    why = ", ".join(f"{c.replace('stall_', '')}:{v:.0f}" for v, c in leading if v > 0)
    address = r[columns[0]]
    print(f"    {address:>8s} {100 * samples / max(all_samples, 1):5.2f}%  {why:50.50s} "
          f"{r[source].strip()[:70]}")
PY
fi
checkpoint
