#!/usr/bin/env bash
# demo.sh - the main job on an embedded default (CPU, synthetic data): the quick matrices (under an emulated network and as the machine is), the claims, the plots
set -uo pipefail
bin=${1:-build/ringside}
out=${RINGSIDE_DEMO_OUT:-results/demo}
cd "$(dirname "$0")/.."
py=$(bash plots/find_python.sh 2>/dev/null) || py=""
mrc=0
# name | matrix | what it shows
while IFS='|' read -r name matrix what; do
    dir=$out${name:+-$name}
    echo
    echo "# ringside demo: $what -> $dir"
    "$bin" matrix "experiments/matrices/$matrix" --out "$dir" || mrc=1
    if "$bin" claims "$dir"; then
        echo "# every claim held on $dir"
    else
        echo "# a claim FAILed on $dir: its 'why' and 'on ...' lines above say what the measurement shows and where (the demo itself ran)"
    fi
    if [ -n "$py" ]; then "$py" plots/plot.py "$dir" >/dev/null && echo "# figures: $dir/index.html"; fi
done <<'LIST'
link|quick-link.json|ps and ring at N = 1, 2, 4, 8 under an emulated 1 Gbit/s link per process, where the network sets the pace
|quick.json|ps and ring at N = 1, 2, 4 as this machine is (no emulated link: on few cores, core contention is in the times too)
LIST
[ -n "$py" ] || bash plots/find_python.sh   # says how to get matplotlib
echo "# reports: $out-link/ and $out/ (summary.csv, claims.json in each)"
exit $mrc
