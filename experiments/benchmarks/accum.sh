#!/usr/bin/env bash
# accum.sh - --accum-steps K under an emulated 1 Gbit/s link, for the ring and the colocated ps: step time, communication per step and per sample, throughput, against K (docs/benchmarks.md)
# usage: experiments/benchmarks/accum.sh [BIN]   (REPS=3 repeats, medians; N=${RANKS:-2} ranks, batch 32 a micro-batch)
set -euo pipefail
bin=${1:-build/ringside}; reps=${REPS:-3}; ranks=${RANKS:-2}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
cat >"$out/accum.json" <<JSON
{"name": "accum",
 "base": {"device": "cpu", "data": "synthetic", "layers": "784,1024,1024,10", "batch": 32, "steps": 12, "warmup": 2,
          "seed": 1, "link": "1gbit", "eval-every": 0, "train-samples": 4096, "eval-samples": 256, "ranks": $ranks},
 "axes": {"sync": ["ring", "ps"], "accum-steps": [1, 2, 4, 8]},
 "repeats": $reps, "timeout_s": 300}
JSON
t0=$SECONDS
"$bin" matrix "$out/accum.json" --out "$out/m" >/dev/null
echo "# $(( SECONDS - t0 )) s for the matrix ($reps repeats), $ranks ranks, $(nproc) cores"
python3 - "$out/m" <<'PY'
import glob, json, statistics, sys
cells = {}
for p in glob.glob(sys.argv[1] + "/**/*.json", recursive=True):
    try:
        r = json.load(open(p))
    except ValueError:
        continue
    if "ranks" not in r or "summary" not in r or not isinstance(r["ranks"], list):
        continue
    c = r["config"]; s = r["summary"]
    w = [e for e in r["ranks"] if e.get("role", "worker") == "worker"]
    per_step = s["samples"] / s["steps"]
    comm = statistics.mean(e["time_s"]["phases"]["comm_total"] for e in w)
    exposed = statistics.mean(e["time_s"]["phases"]["comm_exposed"] for e in w)
    cells.setdefault((c["sync"], c["accum-steps"]), []).append(
        (s["step_time_s"], comm, exposed, per_step, s["throughput_samples_per_s"]))
print("| sync | K | samples a step | step (ms) | comm_total a step (ms) | comm_exposed a step (ms) | comm a sample (us) | throughput (samples/s) | vs K=1 |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for sync in ("ring", "ps"):
    base = None
    for k in (1, 2, 4, 8):
        v = cells.get((sync, k))
        if not v:
            continue
        med = [statistics.median(x[i] for x in v) for i in range(5)]
        base = base or med[4]
        print(f"| {sync} | {k} | {med[3]:.0f} | {med[0]*1e3:.1f} | {med[1]*1e3:.1f} | {med[2]*1e3:.1f} | {med[1]/med[3]*1e6:.0f} | {med[4]:.0f} | x{med[4]/base:.2f} |")
PY
