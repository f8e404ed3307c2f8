#!/usr/bin/env bash
# single_rank.sh - one-rank throughput of 784-1024-1024-10 at batch 128 and GEMM's share of the step (median of 5)
# usage: experiments/benchmarks/single_rank.sh [BIN] [DEVICE]
set -euo pipefail
bin=${1:-build/ringside}; device=${2:-cpu}; reps=${REPS:-5}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
for i in $(seq "$reps"); do
    "$bin" train --device "$device" --sync none --layers 784,1024,1024,10 --batch 128 --steps 60 --warmup 5 \
        --quiet --report "$out/r$i.json"
done
python3 - "$out" "$reps" "$device" <<'PY'
import json, statistics, sys
d, n, dev = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rs = [json.load(open(f"{d}/r{i}.json")) for i in range(1, n + 1)]
thr = [r["summary"]["throughput_samples_per_s"] for r in rs]
step = [r["ranks"][0]["time_s"]["step"]["median"] for r in rs]
gemm = [r["ranks"][0]["time_s"].get("gemm", 0) / r["ranks"][0]["time_s"]["step"]["mean"] for r in rs]
print(f"# device {dev}: {rs[0]['env']['devices'][-1]['description']}")
print(f"throughput_samples_per_s median {statistics.median(thr):.0f} (min {min(thr):.0f}, max {max(thr):.0f})")
print(f"step_time_ms median {1e3*statistics.median(step):.2f}")
if dev == "cpu":
    print(f"gemm_share median {100*statistics.median(gemm):.1f}%")
PY
