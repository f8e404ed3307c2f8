#!/usr/bin/env bash
# tree_vs_ring.sh - the tree against the ring under emulated links, both regimes, N = 2..8: measured comm per step beside the alpha-beta prediction (the validation table of docs/benchmarks.md)
# usage: experiments/benchmarks/tree_vs_ring.sh [BIN]   (REPS=3 repeats, medians; --transport ipc for both;
#        LAYER=direct runs both on the direct message layer, --msg-layer direct; default zeromq)
#
# Two models beside each measurement, both experiments/predict.h's alpha-beta: alpha = the link's
# latency + the software's cost a message, which is 50 us in predict.h (PREDICT_EMULATED_ALPHA_S)
# and, in the second, that cost measured on this machine, transport and layer: `ringside fit`'s
# alpha from bench sweeps of the ring and the tree at N = 4 and 8 over ipc without a link (1 KiB
# to 256 KiB), printed with the fit.
set -euo pipefail
bin=${1:-build/ringside}; reps=${REPS:-3}; layer=${LAYER:-zeromq}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
cat >"$out/tree.json" <<JSON
{"name": "tree-validation",
 "base": {"device": "cpu", "data": "synthetic", "batch": 16, "steps": 14, "warmup": 3, "seed": 1, "transport": "ipc", "msg-layer": "$layer",
          "eval-every": 0, "train-samples": 2048, "eval-samples": 256},
 "axes": {"ranks": [2, 3, 4, 6, 8],
          "variants": {"ring-latency": {"sync": "ring", "layers": "64,16,10", "link": "1gbit,200us"},
                       "tree-latency": {"sync": "tree", "layers": "64,16,10", "link": "1gbit,200us"},
                       "ring-bandwidth": {"sync": "ring", "layers": "784,1024,1024,10", "link": "300mbit", "bucket-mb": 1},
                       "tree-bandwidth": {"sync": "tree", "layers": "784,1024,1024,10", "link": "300mbit", "bucket-mb": 1}}},
 "exclude": [{"variant": "ring-bandwidth", "ranks": 6}, {"variant": "tree-bandwidth", "ranks": 6},
             {"variant": "ring-bandwidth", "ranks": 8}, {"variant": "tree-bandwidth", "ranks": 8}],
 "repeats": $reps, "timeout_s": 300}
JSON
t0=$SECONDS
"$bin" matrix "$out/tree.json" --out "$out/m" >/dev/null
echo "# $(( SECONDS - t0 )) s for the matrix ($reps repeats), $(nproc) cores, --msg-layer $layer"
# the software's cost a message on this transport and layer, fitted from sweeps without a link
for s in ring tree; do
    for n in 4 8; do
        "$bin" bench -n $n --sync $s --transport ipc --msg-layer "$layer" -b 1K -e 256K -f 4 -w 5 -i 30 \
            --report "$out/fit-$s-$n.json" >/dev/null
    done
done
"$bin" fit "$out"/fit-*.json --report "$out/fit.json" | sed 's/^\([^#]\)/# \1/'
sw=$(python3 -c 'import json, sys; print(list(json.load(open(sys.argv[1]))["links"].values())[0]["alpha_s"])' "$out/fit.json")
python3 - "$out/m" "$sw" <<'PY'
import glob, json, os, statistics, sys
sys.path.insert(0, "tests")
from validate_report import tree_links
d, sw = sys.argv[1], float(sys.argv[2])
print("# software alpha: 50 us (predict.h) and %.1f us (the fit above); x: measured over the model" % (sw * 1e6))
def depth(n):
    w = 0
    for t in (0, 1):
        for r in range(n):
            x, k = r, 0
            while tree_links(n, x, t)[0] >= 0:
                x, k = tree_links(n, x, t)[0], k + 1
            w = max(w, k)
    return w
def busiest(n):
    return max(max(sum(len(tree_links(n, r, t)[1]) for t in (0, 1)), sum(tree_links(n, r, t)[0] >= 0 for t in (0, 1))) for r in range(n))
def model(sync, n, g, bucket, lat, bw, soft):  # experiments/predict.h, DDP's buckets: the first at most 1 MiB
    a, b = lat + soft, 1 / bw
    sizes, left, first = [], g, True
    while left > 0:
        s = min(left, min(bucket, 1 << 20) if first else bucket)
        sizes.append(s); left -= s; first = False
    t = 0
    for s in sizes:
        t += 2 * (n - 1) * a + 2 * (n - 1) / n * s * b if sync == "ring" else 2 * depth(n) * a + busiest(n) * s * b
    return t
rows = {}
for f in glob.glob(os.path.join(d, "*.json")):
    r = json.load(open(f))
    if r.get("schema") != "ringside.report/1":
        continue
    c = r["config"]
    w = [e for e in r["ranks"] if e.get("role", "worker") == "worker"]
    comm = sum(e["time_s"]["phases"]["comm_total"] for e in w) / len(w)
    regime = "latency" if c["link"].endswith("200us") else "bandwidth"
    rows.setdefault((regime, c["ranks"], c["sync"]), []).append((comm, r))
print("| regime | N | ring measured (ms) | ring model | x | model, fitted | x | tree measured (ms) | tree model | x | model, fitted | x | faster |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for regime in ("latency", "bandwidth"):
    for n in sorted({k[1] for k in rows if k[0] == regime}):
        cells, meas = [], {}
        for sync in ("ring", "tree"):
            runs = rows.get((regime, n, sync), [])
            if not runs:
                cells += ["-"] * 5; continue
            m = statistics.median(x[0] for x in runs)
            c = runs[0][1]["config"]
            g = runs[0][1]["ranks"][0]["memory"]["by_tag"]["params"]
            bw = 125e6 if regime == "latency" else 37.5e6
            lat = 200e-6 if regime == "latency" else 0
            p = model(sync, n, g, c["bucket-mb"] * 1048576, lat, bw, 50e-6)
            q = model(sync, n, g, c["bucket-mb"] * 1048576, lat, bw, sw)
            meas[sync] = m
            cells += ["%.2f" % (m * 1e3), "%.2f" % (p * 1e3), "%.2f" % (m / p), "%.2f" % (q * 1e3), "%.2f" % (m / q)]
        fast = min(meas, key=meas.get) if len(meas) == 2 else "-"
        print("| %s | %d | %s | %s |" % (regime, n, " | ".join(cells), fast))
PY
