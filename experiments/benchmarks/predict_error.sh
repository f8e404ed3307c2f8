#!/usr/bin/env bash
# predict_error.sh - the alpha-beta models against this machine: bench reports of the flat ring and tree at N = 2..16, and of the flat ring and the machine-aware forms on machines of 2 ranks (N = 4..16) behind an emulated NIC, then `ringside predict --check` on them (the geometric mean error per N and architecture)
#
#   experiments/benchmarks/predict_error.sh [BIN] [OUT]     (default build/ringside, results/predict-error)
#   LINK the NIC (default 200mbit); SIZES the bench's sizes (default -b 64K -e 4M -f 4); NS the flat N (default 2 4 8 16);
#   MS the machines of 2 (default 2 4 8)
set -uo pipefail
bin=${1:-build/ringside} out=${2:-results/predict-error}
link=${LINK:-200mbit}
sizes=${SIZES:-"-b 64K -e 4M -f 4"}
mkdir -p "$out"
run() { # NAME ARGS...: one bench report OUT/NAME.json
    local name=$1; shift
    echo "# $name"
    # shellcheck disable=SC2086
    "$bin" bench "$@" --link "$link" $sizes -w 1 -i 3 --timeout 120 --report "$out/$name.json" >/dev/null \
        || { echo "predict_error.sh: $name failed" >&2; exit 1; }
}
for n in ${NS:-2 4 8 16}; do
    run "ring-n$n" -n "$n" --sync ring --transport ipc
    [ "$n" -ge 3 ] && run "tree-n$n" -n "$n" --sync tree --transport ipc
done
for m in ${MS:-2 4 8}; do
    n=$((2 * m))
    run "ring-n$n-m$m" -n "$n" --nodes "$m" --sync ring
    run "ring-hier-n$n-m$m" -n "$n" --nodes "$m" --sync ring --hierarchical
    run "tree-hier-n$n-m$m" -n "$n" --nodes "$m" --sync tree --hierarchical
    run "byteps-hier-n$n-m$m" -n "$n" --nodes "$m" --sync byteps --ps-servers 1 --hierarchical
done
"$bin" predict --link "$link" --grad-bytes 4M --ranks 4..16 --per-node 2 --check "$out" --report "$out/forecast.json" \
    | sed -n '/the model against/,$p'
