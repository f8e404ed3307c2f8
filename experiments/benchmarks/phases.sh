#!/usr/bin/env bash
# phases.sh - the one timeline side by side: ring, ps (colocated, dedicated), DataParallel, with and without a straggler; phases, comm memory per rank
# usage: experiments/benchmarks/phases.sh [BIN]   (N=${N:-3}, 784-1024-1024-10, batch 64 per rank, REPS=3 repeats interleaved, STRAGGLER=1:20)
set -euo pipefail
bin=${1:-build/ringside}; reps=${REPS:-3}; steps=${STEPS:-20}; n=${N:-3}; slow=${STRAGGLER:-1:20}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
configs=("ring:--sync ring" "ps-colocated:--sync ps" "ps-dedicated:--sync ps --ps-placement dedicated"
         "dataparallel:--sync ps --ps-mode dataparallel --global-batch $((64 * n))")
for rep in $(seq "$reps"); do
    for c in "${configs[@]}"; do
        name=${c%%:*}; opts=${c#*:}
        for s in none "$slow"; do
            extra=(); [ "$s" = none ] || extra=(--straggler "$s")
            "$bin" train -n "$n" $opts --device cpu --layers 784,1024,1024,10 --batch 64 --steps "$steps" --warmup 3 \
                --timeout 300 --quiet "${extra[@]}" --report "$out/$name-${s/:/_}-r$rep.json"
        done
    done
done
python3 - "$out" "$reps" "$slow" <<'PY'
import json, statistics, sys, glob
d, reps, slow = sys.argv[1], int(sys.argv[2]), sys.argv[3]
P = ["data", "forward", "backward", "optimizer", "comm_exposed", "idle", "other"]
print("Mean ms per timed step over the workers (median of %d repeats); comm_total overlaps the others." % reps)
print()
print("| back end | straggler | step | " + " | ".join(P) + " | comm_total | rank 0 server_busy | comm MiB rank 0 / others |")
print("| --- | --- | --- | " + " | ".join("---" for _ in P) + " | --- | --- | --- |")
for name in ["ring", "ps-colocated", "ps-dedicated", "dataparallel"]:
    for s in ["none", slow]:
        rs = [json.load(open(f)) for f in sorted(glob.glob("%s/%s-%s-r*.json" % (d, name, s.replace(":", "_"))))]
        def med(f):
            return statistics.median(f(r) for r in rs) * 1e3
        def wmean(r, k):
            w = [e for e in r["ranks"] if e.get("role") == "worker"]
            return statistics.mean(e["time_s"]["phases"][k] for e in w)
        cells = [med(lambda r: r["summary"]["step_time_s"])] + [med(lambda r, k=k: wmean(r, k)) for k in P]
        cells.append(med(lambda r: wmean(r, "comm_total")))
        sb = med(lambda r: r["ranks"][0]["time_s"].get("server_busy", 0))
        w = [e for e in rs[0]["ranks"] if e.get("role") == "worker"]
        c0 = w[0]["memory"]["by_tag"]["comm"] / 2**20
        co = max((e["memory"]["by_tag"]["comm"] for e in w[1:]), default=0) / 2**20
        print("| %s | %s | " % (name, s) + " | ".join("%.2f" % x for x in cells) + " | %.2f | %.1f / %.1f |" % (sb, c0, co))
PY
