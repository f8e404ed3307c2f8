#!/usr/bin/env bash
# nodes_hier.sh - each flat algorithm (ring, tree; SYNCS) against its hierarchical form on M nodes of G ranks behind one shared NIC each: training step times (medians of interleaved repeats) and each NIC's bytes a step, beside the byte ratio the hierarchy promises; MODE=bench the collective alone, against another build and the NIC's bound
#
#   experiments/benchmarks/nodes_hier.sh [BIN] [REPEATS]     (default build/ringside, 3)
#   CONFIGS="N:M:LINK ..." overrides the set (default 4:2:200mbit 6:2:200mbit 6:3:200mbit 4:2:1gbit)
#   SYNCS="ring tree" the back ends (default ring)
#   MODE=bench: the collective alone instead (bench, 1 warm-up and 3 timed calls a run), the trees
#     over nodes, the flat trees and the hierarchical ring, and the flat ring, each a run of its
#     own in a shuffled order, with BASE=another build's binary beside BIN (the same runs, "before"
#     columns; the flat ring BIN's only), CONFIGS="N:M:LINK:SIZE ..." (default 4:2:200mbit:16M
#     6:3:200mbit:16M 8:4:200mbit:16M 4:2:1gbit:16M 4:2:200mbit:4M); medians of the bench times,
#     beside each NIC's bound: the trees over nodes' busiest node's bytes each way (its edges of the
#     flat trees over M ranks, in and out, n/2 each, both phases at once) over the rate
set -euo pipefail
bin=${1:-build/ringside} reps=${2:-3}
if [ "${MODE:-train}" = bench ]; then
    configs=${CONFIGS:-"4:2:200mbit:16M 6:3:200mbit:16M 8:4:200mbit:16M 4:2:1gbit:16M 4:2:200mbit:4M"}
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    bins="new"; [ -n "${BASE:-}" ] && bins="new old"
    for rep in $(seq 1 "$reps"); do
        for c in $configs; do
            IFS=: read -r n m link size <<<"$c"
            runs=""
            for b in $bins; do runs="$runs $b:tree-hier $b:tree $b:ring-hier"; done
            # shellcheck disable=SC2086
            for run in $(shuf -e $runs new:ring); do
                b=${run%%:*} form=${run#*:} exe=$bin
                [ "$b" = old ] && exe=$BASE
                opt="--sync ${form%-hier}"; [ "$form" != "${form%-hier}" ] && opt="$opt --hierarchical"
                # shellcheck disable=SC2086
                "$exe" bench -n "$n" --nodes "$m" $opt --link "$link" -b "$size" -e "$size" -w 1 -i 3 --timeout 120 \
                    | awk '/^ +[0-9]/ {print $4 / 1000}' >"$tmp/$c-$b-$form-$rep"
            done
        done
    done
    python3 - "$tmp" "$configs" "$reps" "$bins" <<'PY'
import os, statistics, sys
sys.path.insert(0, "tests")
from validate_report import tree_links
tmp, configs, reps, bins = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), sys.argv[4].split()
def med(c, b, form):
    return statistics.median(float(open(os.path.join(tmp, "%s-%s-%s-%d" % (c, b, form, r))).read()) for r in range(1, reps + 1))
def rate(link):  # bytes per second of "200mbit", "1gbit"
    for u, mult in (("gbit", 1e9 / 8), ("mbit", 1e6 / 8)):
        if link.endswith(u):
            return float(link[: -len(u)]) * mult
def size(s):
    return float(s[:-1]) * {"K": 2**10, "M": 2**20}[s[-1]] if s[-1] in "KM" else float(s)
head = "%-22s %8s" % ("N:M:link:size", "bound")
for b in bins:
    head += "".join(" %11s" % x for x in (("trees/nodes", "flat tree", "hier ring") if b == "new" else ("before t/n", "before flat", "before hr")))
print(head + " %10s %8s" % ("flat ring", "/bound"))
for c in configs:
    n, m, link, sz = c.split(":")
    M, nb = int(m), size(sz)
    # the trees over nodes: a node's NIC each way, both phases at once: its edges across (in + out) x n/2
    busiest = max(sum((tree_links(M, x, t)[0] >= 0) + len(tree_links(M, x, t)[1]) for t in (0, 1)) for x in range(M))
    bound = busiest * nb / 2 / rate(link) * 1e3
    row = "%-22s %8.0f" % (c, bound)
    for b in bins:
        row += "".join(" %11.0f" % med(c, b, f) for f in ("tree-hier", "tree", "ring-hier"))
    print(row + " %10.0f %8.2f" % (med(c, "new", "ring"), med(c, "new", "tree-hier") / bound))
print("(ms: medians of %d interleaved runs, each bench's time (the median of its timed calls, the maximum over ranks); "
      "bound: the trees over nodes' busiest NIC one way over its rate; /bound: the trees over nodes over it)" % reps)
PY
    exit 0
fi
configs=${CONFIGS:-"4:2:200mbit 6:2:200mbit 6:3:200mbit 4:2:1gbit"}
syncs=${SYNCS:-ring}
model="--layers 784,1024,10 --steps 14 --warmup 4 --quiet"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for sync in $syncs; do
for c in $configs; do
    IFS=: read -r n m link <<<"$c"
    for rep in $(seq 1 "$reps"); do
        for form in $(shuf -e flat hier); do
            opt=""; [ $form = hier ] && opt="--hierarchical"
            # shellcheck disable=SC2086
            "$bin" train -n "$n" --nodes "$m" --sync $sync $opt $model --link "$link" --report "$tmp/$sync-$c-$form-$rep.json" >/dev/null
        done
    done
done
done
python3 - "$tmp" "$configs" "$reps" "$syncs" <<'PY'
import json, os, statistics, sys
tmp, configs, reps, syncs = sys.argv[1], sys.argv[2].split(), int(sys.argv[3]), sys.argv[4].split()
print("%-19s %10s %10s %7s   %12s %12s %7s %7s" % ("sync N:M:link", "flat ms", "hier ms", "ratio", "flat NIC MB", "hier NIC MB", "bytes", "ring's"))
for sync, c in ((s, c) for s in syncs for c in configs):
    n, m, link = c.split(":"); n, m = int(n), int(m)
    t, nic = {}, {}
    for form in ("flat", "hier"):
        rs = [json.load(open(os.path.join(tmp, "%s-%s-%s-%d.json" % (sync, c, form, r)))) for r in range(1, reps + 1)]
        t[form] = statistics.median(r["summary"]["step_time_s"] for r in rs) * 1e3
        # a NIC's bytes sent a step: the least of the nodes' (the last node forwards none of the initial
        # broadcast, in either form)
        per = {}
        for x in rs[0]["ranks"]:
            per[x["node"]] = per.get(x["node"], 0) + x["traffic"]["by_link"]["network"]["bytes_sent"]
        nic[form] = min(per.values()) / 14 / 1e6
    ideal = (n - 1) * m / (n * (m - 1))  # flat 2(N-1)/N over hierarchical 2(M-1)/M
    print("%-19s %10.1f %10.1f %7.2f   %12.2f %12.2f %7.2f %7.2f" % (sync + " " + c, t["flat"], t["hier"], t["flat"] / t["hier"],
          nic["flat"], nic["hier"], nic["flat"] / nic["hier"], ideal))
print("(step time: median of %d interleaved runs each; ratio: flat over hierarchical; bytes: a NIC's a step, flat over "
      "hierarchical; ring's: (N-1)M / (N(M-1)), the NIC bytes' ratio the hierarchical ring promises)" % reps)
PY
