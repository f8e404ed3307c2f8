#!/usr/bin/env bash
# bucket_sweep.sh - DDP's bucket size under a 10 Gbit/s link: 1 MB against 25 MB buckets, the ring at N = 2, 4, 8, step times' p50/p75/p95 beside the cost model's extra messages x alpha
# usage: experiments/benchmarks/bucket_sweep.sh [BIN [REPEATS]]   (default build/ringside, 3; every step after the warm-up of every repeat pooled)
set -euo pipefail
bin=$(readlink -f "${1:-build/ringside}")
reps=${2:-3}
out=$(mktemp -d /tmp/bucket_sweep-XXXXXX)
trap 'rm -rf "$out"' EXIT
model=(--layers 784,1024,1024,10 --batch 32 --train-samples 8192 --eval-samples 64 --eval-every 0 --steps 45 --warmup 5 --seed 1 --quiet --timeout 120)
echo "# bucket_sweep: commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $reps repeats, $(date -u +%FT%TZ)"
echo "# ringside train -n N --sync ring --link 10gbit --bucket-mb B ${model[*]}; B = 1 and 25, in an order that alternates with the repeat"
for rep in $(seq "$reps"); do
    for n in 2 4 8; do
        order="1 25"; [ $((rep % 2)) = 0 ] && order="25 1"
        for b in $order; do
            "$bin" train -n "$n" --sync ring --link 10gbit --bucket-mb "$b" "${model[@]}" --report "$out/n$n-b$b-r$rep.json" \
                >"$out/n$n-b$b-r$rep.log" 2>&1 || echo "# N=$n B=$b repeat $rep failed: $(tail -n 2 "$out/n$n-b$b-r$rep.log")"
        done
    done
done
python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
d = sys.argv[1]
steps, info = {}, {}
for f in glob.glob(os.path.join(d, "*.json")):
    n, b, _ = os.path.basename(f)[:-5].split("-")
    r = json.load(open(f))
    warm = r["config"]["warmup"]
    t = [x[1] for x in r["summary"]["time_curve"]]
    steps.setdefault((int(n[1:]), int(b[1:])), []).extend(t[i] - t[i - 1] for i in range(max(1, warm), len(t)))
    info[(int(n[1:]), int(b[1:]))] = r
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]
ALPHA = 50e-6  # the model's software cost a message (experiments/predict.h, PREDICT_EMULATED_ALPHA_S: no latency given)
def nbuckets(r, mb):  # DDP's buckets as the cost model cuts them: the first at most 1 MiB, then mb MiB each
    L = r["config"]["layers"]
    left = 4 * sum(L[i] * L[i + 1] + L[i + 1] for i in range(len(L) - 1))
    k, first = 0, True
    while left > 0:
        left -= min(mb << 20, 1 << 20) if first else mb << 20
        k, first = k + 1, False
    return k
print("| N | buckets (1 MB / 25 MB) | p50 1 MB | p50 25 MB | p75 1 MB | p75 25 MB | p95 1 MB | p95 25 MB | penalty p50 / p75 / p95 | model: extra messages x alpha |")
print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
for n in (2, 4, 8):
    if (n, 1) not in steps or (n, 25) not in steps:
        continue
    a, b = steps[(n, 1)], steps[(n, 25)]
    ka, kb = nbuckets(info[(n, 1)], 1), nbuckets(info[(n, 25)], 25)
    extra = (ka - kb) * 2 * (n - 1)  # the ring's 2(N-1) messages a bucket, a rank
    p = [(pct(a, q), pct(b, q)) for q in (50, 75, 95)]
    pen = " / ".join(f"{100 * (x / y - 1):+.1f}%" for x, y in p)
    print(f"| {n} | {ka} / {kb} | " + " | ".join(f"{1e3 * x:.2f}" for pair in p for x in pair)
          + f" | {pen} | +{1e3 * extra * ALPHA:.2f} ms ({100 * extra * ALPHA / p[0][1]:+.1f}%) |")
print("# ms per step (rank 0's steps after the warm-up, every repeat pooled); penalty: 1 MB over 25 MB at each percentile;")
print("# model: the extra buckets x the ring's 2(N-1) messages each x 50 us, against the 25 MB p50")
PY
