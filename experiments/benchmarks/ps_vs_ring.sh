#!/usr/bin/env bash
# ps_vs_ring.sh - step time and per-rank peak memory of ps (colocated, dedicated, K=2) and ring at N = 1, 2, 4, 8, side by side
# usage: experiments/benchmarks/ps_vs_ring.sh [BIN]   (784-1024-1024-10, batch 64 per rank; REPS=3 repeats, interleaved)
set -euo pipefail
bin=${1:-build/ringside}; reps=${REPS:-3}; steps=${STEPS:-20}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
configs=("ring:--sync ring" "ps-colocated:--sync ps" "ps-dedicated:--sync ps --ps-placement dedicated" "ps-K2:--sync ps --ps-placement dedicated --ps-servers 2")
for rep in $(seq "$reps"); do
    for n in 1 2 4 8; do
        for c in "${configs[@]}"; do
            name=${c%%:*}; opts=${c#*:}
            "$bin" train -n "$n" $opts --device cpu --layers 784,1024,1024,10 --batch 64 --steps "$steps" --warmup 3 \
                --timeout 300 --quiet --report "$out/$name-n$n-r$rep.json"
        done
    done
done
python3 - "$out" "$reps" <<'PY'
import json, statistics, sys, glob
d, reps = sys.argv[1], int(sys.argv[2])
print("| back end | N | transport | step time median (ms) | rank 0 peak (MB) | other ranks' peak (MB, max) | server entries' peak (MB) |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for name in ["ring", "ps-colocated", "ps-dedicated", "ps-K2"]:
    for n in [1, 2, 4, 8]:
        rs = [json.load(open(f)) for f in sorted(glob.glob(f"{d}/{name}-n{n}-r*.json"))]
        step = statistics.median(r["summary"]["step_time_s"] for r in rs) * 1e3
        r = rs[0]
        w = [k for k in r["ranks"] if k.get("role", "worker") == "worker"]
        s = [k for k in r["ranks"] if k.get("role") == "server"]
        r0 = w[0]["memory"]["peak_bytes"] / 1e6
        oth = max((k["memory"]["peak_bytes"] for k in w[1:]), default=0) / 1e6
        srv = max((k["memory"]["peak_bytes"] for k in s), default=0) / 1e6
        how = r["summary"].get("transport") or "-"
        print(f"| {name} | {n} | {how} | {step:.1f} | {r0:.1f} | {oth:.1f} | {srv:.1f} |")
PY
