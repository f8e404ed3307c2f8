#!/usr/bin/env bash
# wire.sh - what a 16- or 8-bit wire buys: ring, colocated ps and sharded ps at N = 4 with --wire fp32 / bf16 (WIRES: fp8e4m3, fp8e5m2 too) under emulated 1 and 10 Gbit/s links: step time, comm per step, bytes per rank, final loss
# usage: experiments/benchmarks/wire.sh [BIN]   (784-1024-1024-10, global batch 128, --transport ipc, 30 steps, REPS=3 interleaved;
#        WIRES="fp32 bf16", VARIANTS="ring ps-colocated ps-sharded", LINKS="1gbit 10gbit")
set -euo pipefail
bin=${1:-build/ringside}; reps=${REPS:-3}; links=${LINKS:-"1gbit 10gbit"}; wires=${WIRES:-"fp32 bf16"}
variants=${VARIANTS:-"ring ps-colocated ps-sharded"}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
link_list=$(printf '"%s",' $links); link_list="[${link_list%,}]"
wire_list=$(printf '"%s",' $wires); wire_list="[${wire_list%,}]"
declare -A vdef=([ring]='"ring": {"sync": "ring"}' [ps-colocated]='"ps-colocated": {"sync": "ps"}'
                 [ps-sharded]='"ps-sharded": {"sync": "ps", "ps-placement": "sharded"}')
var_list=""; for v in $variants; do var_list="$var_list${var_list:+, }${vdef[$v]}"; done
cat >"$out/wire.json" <<JSON
{"name": "wire", "base": {"device": "cpu", "data": "synthetic", "layers": "784,1024,1024,10", "steps": 30, "warmup": 5,
  "global-batch": 128, "transport": "ipc", "seed": 1, "ranks": 4},
 "axes": {"link": $link_list,
          "variants": {$var_list},
          "wire": $wire_list},
 "repeats": $reps, "timeout_s": 300,
 "links": {"ipc": {"alpha_s": 5.4e-05, "beta_s_per_byte": 8.7e-10}}}
JSON
t0=$SECONDS
"$bin" matrix "$out/wire.json" --out "$out/m" >/dev/null
echo "# $(( SECONDS - t0 )) s for the matrix ($reps repeats; links: $links; $(nproc) cores; commit $(git rev-parse --short HEAD 2>/dev/null || echo ?))"
python3 - "$out/m" "$wires" <<'PY'
import json, os, statistics, sys
rows = json.load(open(os.path.join(sys.argv[1], "summary.json")))["runs"]
def med(rs, f):
    v = [r[f] for r in rs if r.get(f) is not None]
    return statistics.median(v) if v else float("nan")
print("| link | back end | wire | step (ms) | comm per step (ms) | predicted (ms) | bytes sent per step, max rank (MB) | final loss |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
keys = sorted({(r["axes"]["link"], r["axes"]["variant"]) for r in rows}, key=lambda k: (k[0], ["ring", "ps-colocated", "ps-sharded"].index(k[1])))
for link, v in keys:
    base = None
    for w in sys.argv[2].split():
        rs = [r for r in rows if r["axes"]["link"] == link and r["axes"]["variant"] == v and r["axes"]["wire"] == w]
        if not rs:
            continue
        rep = json.load(open(os.path.join(sys.argv[1], rs[0]["report"])))
        S = rep["summary"]["steps"]
        sent = max(e["traffic"]["bytes_sent"] for e in rep["ranks"]) / S / 1e6
        step = med(rs, "step_time_median_s") * 1e3
        note = "" if base is None else " (x%.2f)" % (step / base)
        base = step if base is None else base
        print("| %s | %s | %s | %.1f%s | %.1f | %.1f | %.2f | %.4f |" % (link, v, w, step, note, med(rs, "comm_total_s") * 1e3,
              med(rs, "predicted_comm_s") * 1e3, sent, rep["summary"]["final_loss"]))
PY
