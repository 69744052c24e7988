#!/usr/bin/env bash
# On the GPU machine: the FP8 peers' attention kernels and intfa's under ncu at issue 44's shapes
# (bench/peer_profile.py): per kernel its warp instructions per 32 scores, the share of issue
# slots busy, warps per scheduler and the pipes' shares, one call each, clocks left alone; then
# the issue share each intfa kernel would need to be PEER_TARGET (default 1.1) times the best
# FP8 peer. The peers come from the wheels carried in .whl (scripts/device/peers.sh says how to
# fetch them); intfa's kernels run through ctypes from the carried build (INTFA_BUILD).
#   usage: scripts/device/peer_limits.sh ["D N on|off" ...]   (default: issue 44's shapes)
#          carry: .whl and the build
source "$(dirname "$0")/common.sh"

if compgen -G ".whl/*.whl" > /dev/null; then
  install_wheels 150 .whl/*.whl
else
  note "peer_limits: no wheels in .whl: FA3 and cuDNN FP8 will be missing"
fi
export PYTHONPATH=/tmp/site:${PYTHONPATH:-}

# The metrics this ncu knows, of those bench/peer_profile.py reads.
# shellcheck disable=SC2046  # the metrics are words
metrics=$(known_ncu_metrics $(python3 -c "import sys; sys.path.insert(0, 'bench'); \
import peer_profile; print(' '.join(peer_profile.METRICS))"))

if [ -z "$metrics" ]; then note "peer_limits: ncu knows none of the metrics"; finish; exit 1; fi

shapes=("$@")
[ ${#shapes[@]} -gt 0 ] || shapes=("128 16384 off" "128 4096 off" "128 16384 on" "64 16384 off" \
  "64 4096 off")
for shape in "${shapes[@]}"; do
  set -- $shape
  name="peer_ncu_d$1_n$2_$3"
  causal=()
  [ "$3" = on ] && causal=(--causal)
  TAIL_LINES=6 timed "$name" 150 ncu --nvtx --nvtx-include "profile/" --clock-control none --csv \
    --metrics "$metrics" --log-file "$logs/$name.csv" \
    python3 bench/peer_profile.py run --head-dim "$1" --seq "$2" "${causal[@]}" \
    --lib "$build/lib/libintfa.so"
done
python3 bench/peer_profile.py table "$logs"/peer_ncu_*.csv --target "${PEER_TARGET:-1.1}" \
  | tee -a "$summary"
checkpoint
finish
