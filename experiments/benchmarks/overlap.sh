#!/usr/bin/env bash
# overlap.sh - ring training step time at N = 2 and 4 with and without overlapping communication with backward
# usage: experiments/benchmarks/overlap.sh [BIN]   (784-1024-1024-10, batch 64 per rank, 4 MiB buckets; REPS=3, interleaved)
set -euo pipefail
bin=${1:-build/ringside}; reps=${REPS:-3}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
for rep in $(seq "$reps"); do
    for n in 2 4; do
        for mode in overlap no-overlap; do
            opt=$([ $mode = no-overlap ] && echo --no-overlap || true)
            "$bin" train -n "$n" --sync ring --device cpu --layers 784,1024,1024,10 --batch 64 --bucket-mb 4 \
                --steps 30 --warmup 3 $opt --quiet --report "$out/$mode-n$n-r$rep.json"
        done
    done
done
python3 - "$out" <<'PY'
import glob, json, statistics, sys
d = sys.argv[1]
print("| N | mode | step time median (ms) | comm_total (ms/step) | comm_exposed (ms/step) |")
print("| --- | --- | --- | --- | --- |")
for n in (2, 4):
    for mode in ("overlap", "no-overlap"):
        rs = [json.load(open(f)) for f in sorted(glob.glob(f"{d}/{mode}-n{n}-r*.json"))]
        step = statistics.median(r["summary"]["step_time_s"] for r in rs) * 1e3
        ph = lambda k: statistics.median(statistics.mean(x["time_s"]["phases"][k] for x in r["ranks"]) for r in rs) * 1e3
        print(f"| {n} | {mode} | {step:.1f} | {ph('comm_total'):.1f} | {ph('comm_exposed'):.1f} |")
PY
