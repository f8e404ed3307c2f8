#!/usr/bin/env bash
# links.sh - claims 3 and 6 under emulated 1, 10 and 100 Gbit/s links at N = 2, 4, 8: comm per step measured against predicted, ps and ring on one transport; and without a link
# usage: experiments/benchmarks/links.sh [BIN]   (784-256-10, one batch of 64 scattered, --transport ipc for both, REPS=2)
set -euo pipefail
bin=${1:-build/ringside}; reps=${REPS:-2}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
cat >"$out/links.json" <<JSON
{"name": "links", "base": {"device": "cpu", "data": "synthetic", "layers": "784,256,10", "steps": 30, "warmup": 5,
  "global-batch": 64, "transport": "ipc", "seed": 1},
 "axes": {"link": ["", "1gbit", "10gbit", "100gbit"], "sync": ["ps", "ring"], "ranks": [2, 4, 8]},
 "repeats": $reps, "timeout_s": 300,
 "alpha_s": 6.5e-05, "beta_s_per_byte": 7.7e-10,
 "links": {"ipc": {"alpha_s": 5.4e-05, "beta_s_per_byte": 8.7e-10}}}
JSON
t0=$SECONDS
"$bin" matrix "$out/links.json" --out "$out/m" >/dev/null
echo "# $(( SECONDS - t0 )) s for the matrix"
"$bin" claims "$out/m" | grep -E "^[36] |on link|on ipc" || true
python3 - "$out/m/summary.json" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["runs"]
print("| link | back end | N | comm per step, measured (ms) | predicted (ms) | measured / predicted | step (ms) |")
print("| --- | --- | --- | --- | --- | --- | --- |")
key = lambda r: (["", "1gbit", "10gbit", "100gbit"].index(r["axes"]["link"]), r["axes"]["sync"], r["axes"]["ranks"])
seen = set()
for r in sorted(rows, key=key):
    k = key(r)
    if k in seen:
        continue
    seen.add(k)
    same = [x for x in rows if key(x) == k]
    med = lambda f: sorted(x[f] for x in same if x.get(f) is not None)[len(same) // 2] if same else float("nan")
    m, p, s = med("comm_total_s"), med("predicted_comm_s"), med("step_time_median_s")
    print("| %s | %s | %d | %.2f | %.2f | %.2f | %.2f |" % (r["axes"]["link"] or "none", r["axes"]["sync"], r["axes"]["ranks"], m * 1e3, p * 1e3, m / p, s * 1e3))
PY
