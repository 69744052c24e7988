#!/usr/bin/env bash
# The GPU checks on the lent device (see ../shared/device/README.md), one script per purpose in
# scripts/device/ (each documents its options); this runs one of them, or several for `full`.
#   usage: scripts/device_run.sh MODE     (carry the Release build in build/, or set INTFA_BUILD)
#     quick    scripts/device/checks.sh   GPU tests, demo, SASS, Python package, compute-sanitizer
#     hopper   scripts/device/hopper.sh   the Hopper kernel's tests, sanitizers, sweep, SDPA, ncu
#     bench    scripts/device/bench.sh    JIT, tuner, accuracy, numerics options, INT4, SDPA table
#     extra    scripts/device/extra.sh    K smoothing's cost, INT4 accuracy
#     compare  scripts/device/compare.sh  tile-config sweep, ncu
#     ab       scripts/device/ab.sh       template variants in .variants/ against templates/
#     runs     scripts/device/runs.sh     builds or environments timed in both orders
#     limits   scripts/device/limits.sh   ncu instruction and issue counts, stall reasons, SDPA
#     probe    scripts/device/probe.sh    where a block's time goes
#     full     quick, bench, extra and compare in turn (more than one 10-minute call holds)
# The end-to-end path (intfa.attention), the KV-cache decode family and the accuracy tables have
# their own scripts: scripts/device/e2e.sh, scripts/device_decode.sh, scripts/device_accuracy.sh.
set -u
here=$(dirname "$0")/device
mode=${1:-full}
case $mode in
  quick) exec bash "$here/checks.sh" ;;
  hopper|bench|extra|compare|ab|runs|limits|probe) exec bash "$here/$mode.sh" ;;
  full) for part in checks bench extra compare; do bash "$here/$part.sh"; done ;;
  *) echo "unknown mode $mode (quick, hopper, bench, extra, compare, ab, runs, limits, probe, full)"
     exit 2 ;;
esac
