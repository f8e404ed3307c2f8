#!/usr/bin/env bash
# nodes_claims.sh - claims 10 and 11 measured: the flat ring, the hierarchical ring and (on 2 nodes) the trees over nodes, benched on M nodes of G ranks behind one emulated NIC each, interleaved repeats into one folder, then `ringside claims` on it
#
#   experiments/benchmarks/nodes_claims.sh [BIN] [OUT] [REPEATS]    (default build/ringside, results/nodes-claims, 3)
#   CONFIGS="N:M ..." the jobs (default 4:2 6:3 8:4: G = 2 on 2, 3 and 4 nodes)
#   LINK the nodes' NIC (default 200mbit); SIZES the bench's "-b MIN -e MAX -f F" (default 1K to 16M, x4)
# Each bench report is OUT/bench-SYNC-nN-mM-rK.json; repeats of one configuration are merged by
# the claims (the median time at each size). The claims' verdicts are printed last (exit 4 on a FAIL).
set -uo pipefail
bin=${1:-build/ringside} out=${2:-results/nodes-claims} reps=${3:-3}
configs=${CONFIGS:-"4:2 6:3 8:4"}
link=${LINK:-200mbit}
sizes=${SIZES:-"-b 1K -e 16M -f 4"}
mkdir -p "$out"
for rep in $(seq 1 "$reps"); do
    for c in $configs; do
        IFS=: read -r n m <<<"$c"
        forms="ring ring-hier"
        [ "$m" = 2 ] && forms="$forms tree-hier"
        for form in $(shuf -e $forms); do
            case $form in
                ring) opt="--sync ring" ;;
                ring-hier) opt="--sync ring --hierarchical" ;;
                tree-hier) opt="--sync tree --hierarchical" ;;
            esac
            f="$out/bench-$form-n$n-m$m-r$rep.json"
            echo "# $form -n $n --nodes $m --link $link (repeat $rep)"
            # shellcheck disable=SC2086
            "$bin" bench -n "$n" --nodes "$m" $opt --link "$link" $sizes -w 1 -i 3 --timeout 120 --report "$f" >/dev/null \
                || { echo "nodes_claims.sh: $form -n $n --nodes $m failed" >&2; exit 1; }
        done
    done
done
"$bin" claims "$out"
