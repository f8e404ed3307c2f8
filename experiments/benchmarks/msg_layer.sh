#!/usr/bin/env bash
# msg_layer.sh - two ringside binaries side by side (before and after a change to the data plane): ps, ring and tree over a Unix socket, 16 KiB to 4 MiB, in a shuffled order each repeat; prints the median algbw per size
#
#   experiments/benchmarks/msg_layer.sh BEFORE AFTER [REPEATS]     (default 9)
set -euo pipefail
before=$1 after=$2 reps=${3:-9}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
bins=("$before" "$after")
for rep in $(seq 1 "$reps"); do
    for sync in ps ring tree; do
        for i in $(shuf -i 0-1); do
            line=$("${bins[$i]}" bench -n 2 --sync $sync --transport ipc -b 16K -e 4M -f 2 -w 3 -i 20 2>/dev/null |
                grep -E '^ +[0-9]+ ' | awk '{print $1":"$5}' | paste -sd' ')
            echo "$i $sync $line" >>"$out"
        done
    done
done
python3 - "$out" "$reps" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    for kv in f[2:]:
        k, v = kv.split(":")
        d[(f[1], int(f[0]), int(k))].append(float(v))
for sync in ("ps", "ring", "tree"):
    print("%-5s %9s %9s %9s %6s   (algbw GB/s, medians of %s)" % (sync, "size", "before", "after", "ratio", sys.argv[2]))
    for s in sorted({k[2] for k in d if k[0] == sync}):
        a, b = statistics.median(d[(sync, 0, s)]), statistics.median(d[(sync, 1, s)])
        print("%-5s %9d %9.3f %9.3f %6.2f" % ("", s, a, b, b / a if a else float("nan")))
PY
