#!/usr/bin/env bash
# nodes_hier.sh - each flat algorithm (ring, tree; SYNCS) against its hierarchical form on M nodes of G ranks behind one shared NIC each: training step times (medians of interleaved repeats) and each NIC's bytes a step, beside the byte ratio the hierarchy promises
#
#   experiments/benchmarks/nodes_hier.sh [BIN] [REPEATS]     (default build/ringside, 3)
#   CONFIGS="N:M:LINK ..." overrides the set (default 4:2:200mbit 6:2:200mbit 6:3:200mbit 4:2:1gbit)
#   SYNCS="ring tree" the back ends (default ring)
set -euo pipefail
bin=${1:-build/ringside} reps=${2:-3}
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
