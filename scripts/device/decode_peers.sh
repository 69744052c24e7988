#!/usr/bin/env bash
# On the GPU machine: intfa's paged INT8/INT4 decode against cuDNN's FP16 SDPA and FA3's FP8
# decode (bench/compare_decode.py: CUDA-graph replays and back-to-back calls, interleaved, with
# each one's accuracy against float32), issue 47's table by default. Installs the fa3-fwd wheel
# carried in .whl into /tmp/site (scripts/device/peers.sh says how to fetch it); without it FA3 is
# reported missing and the rest still run.
#   usage: INTFA_BUILD=.dbuild scripts/device/decode_peers.sh [compare_decode.py arguments]
#          carry: a build with lib/libintfa.so, and .whl
# Comes back in $OUT: compare_decode.json, summary.txt (the tables) and logs.tgz.
export INTFA_BUILD=${INTFA_BUILD:-build-dev}
export INTFA_DEADLINE_S=${INTFA_DEADLINE_S:-570}
source "$(dirname "$0")/common.sh"
if compgen -G ".whl/fa3*.whl" > /dev/null; then
  install_wheels 120 .whl/fa3*.whl
else
  note "wheels: no fa3-fwd wheel in .whl: FA3 FP8 will be reported missing"
fi
export PYTHONPATH=/tmp/site:$PWD/bench
TAIL_LINES=30 timed compare_decode "${DECODE_PEERS_LIMIT_S:-400}" python3 bench/compare_decode.py \
  --lib "$build/lib/libintfa.so" --out-dir "$OUT" "$@"
grep "^missing" "$logs/compare_decode.log" >> "$summary"
sed -n '/^timing/,$p' "$logs/compare_decode.log" >> "$summary"
finish
