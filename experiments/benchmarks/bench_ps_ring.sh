#!/usr/bin/env bash
# bench_ps_ring.sh - `bench --sync ps` against `bench --sync ring` (and --secure's cost) at 1, 16 and 64 MiB, side by side
# usage: experiments/benchmarks/bench_ps_ring.sh [BIN] [N]   (REPS=3 repeats, interleaved; busbw medians)
set -euo pipefail
bin=${1:-build/ringside}; n=${2:-2}; reps=${REPS:-3}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
"$bin" keygen "$out/job.key" >/dev/null
for rep in $(seq "$reps"); do
    for c in "ring:--sync ring" "ps:--sync ps" "ring-secure:--sync ring --secure $out/job.key" "ps-secure:--sync ps --secure $out/job.key"; do
        name=${c%%:*}; opts=${c#*:}
        "$bin" bench -n "$n" $opts -b 1M -e 64M -f 4 -w 2 -i 5 --report "$out/$name-r$rep.json" >/dev/null
    done
done
python3 - "$out" "$n" <<'PY'
import glob, json, statistics, sys
d, n = sys.argv[1], sys.argv[2]
names = ["ring", "ps", "ring-secure", "ps-secure"]
bus = {}
for name in names:
    for f in glob.glob(f"{d}/{name}-r*.json"):
        for row in json.load(open(f))["rows"]:
            bus.setdefault((name, row["size_bytes"]), []).append(row["busbw_gbps"])
print(f"| size | " + " | ".join(f"{x} busbw (GB/s)" for x in names) + " |")
print("| --- |" + " --- |" * len(names))
for size in sorted({k[1] for k in bus}):
    print(f"| {size >> 20} MiB | " + " | ".join(f"{statistics.median(bus[(x, size)]):.3f}" for x in names) + " |")
PY
