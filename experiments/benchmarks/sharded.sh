#!/usr/bin/env bash
# sharded.sh - ring against the three parameter-server placements (colocated, sharded, dedicated) at N = 4 under an emulated 1 Gbit/s link: comm per step, traffic per rank, server memory
# usage: experiments/benchmarks/sharded.sh [BIN]   (784-256-10, one batch of 64 scattered, --transport ipc for all, REPS=3)
set -euo pipefail
bin=${1:-build/ringside}; reps=${REPS:-3}; link=${LINK:-1gbit}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
cat >"$out/sharded.json" <<JSON
{"name": "sharded", "base": {"device": "cpu", "data": "synthetic", "layers": "784,256,10", "steps": 30, "warmup": 5,
  "global-batch": 64, "transport": "ipc", "seed": 1, "ranks": 4, "link": "$link"},
 "axes": {"variants": {"ring": {"sync": "ring"}, "ps-colocated": {"sync": "ps"},
                       "ps-sharded": {"sync": "ps", "ps-placement": "sharded"},
                       "ps-dedicated": {"sync": "ps", "ps-placement": "dedicated"}}},
 "repeats": $reps, "timeout_s": 300,
 "links": {"ipc": {"alpha_s": 5.4e-05, "beta_s_per_byte": 8.7e-10}}}
JSON
t0=$SECONDS
"$bin" matrix "$out/sharded.json" --out "$out/m" >/dev/null
echo "# $(( SECONDS - t0 )) s for the matrix ($reps repeats, link $link)"
python3 - "$out/m" <<'PY'
import glob, json, os, sys
rows = json.load(open(os.path.join(sys.argv[1], "summary.json")))["runs"]
order = ["ring", "ps-colocated", "ps-sharded", "ps-dedicated"]
print("| back end | comm per step, measured (ms) | predicted (ms) | step (ms) | bytes sent per step: rank 0 / max other worker (x gradient) | `server` bytes per worker |")
print("| --- | --- | --- | --- | --- | --- |")
for v in order:
    same = [r for r in rows if r["axes"]["variant"] == v]
    if not same:
        continue
    med = lambda f: sorted(x[f] for x in same if x.get(f) is not None)[len(same) // 2]
    rep = json.load(open(os.path.join(sys.argv[1], same[0]["report"]))) if "report" in same[0] else None
    if rep is None:
        cands = [json.load(open(p)) for p in glob.glob(os.path.join(sys.argv[1], "**", "*.json"), recursive=True)]
        rep = next(c for c in cands if c.get("schema") == "ringside.report/1" and c["config"].get("sync") == ("ring" if v == "ring" else "ps")
                   and (v == "ring" or c["config"]["ps-placement"] == v[3:]))
    w = [e for e in rep["ranks"] if e.get("role", "worker") == "worker"]
    G = w[0]["memory"]["by_tag"]["params"]
    S = rep["summary"]["steps"]
    sent = [e["traffic"]["bytes_sent"] / S / G for e in w]
    srv = [e["memory"]["by_tag"]["server"] for e in w]
    print("| %s | %.2f | %.2f | %.2f | %.2f / %.2f | %s |" % (v, med("comm_total_s") * 1e3, med("predicted_comm_s") * 1e3,
          med("step_time_median_s") * 1e3, sent[0], max(sent[1:]), " ".join("%.2f MB" % (x / 1e6) for x in srv)))
PY
