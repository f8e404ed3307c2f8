#!/usr/bin/env bash
# demo.sh - the main job on an embedded default (CPU, synthetic data): the quick matrix, the claims, the plots
set -uo pipefail
bin=${1:-build/ringside}
out=${RINGSIDE_DEMO_OUT:-results/demo}
cd "$(dirname "$0")/.."
echo "# ringside demo: ps and ring at N = 1, 2, 4 on the CPU with synthetic data -> $out"
"$bin" matrix experiments/matrices/quick.json --out "$out"
mrc=$?
"$bin" claims "$out"
[ $? = 0 ] || echo "# a claim FAILed on this machine: its 'why' lines above say what the measurement shows (the demo itself ran)"
if py=$(bash plots/find_python.sh 2>/dev/null); then
    "$py" plots/plot.py "$out" && echo "# figures: $out/index.html"
else
    bash plots/find_python.sh   # says how to get matplotlib
fi
echo "# reports: $out/   summary: $out/summary.csv   claims: $out/claims.json"
exit $mrc
