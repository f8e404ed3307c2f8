#!/usr/bin/env bash
# cpu_rank.sh - one rank on the CPU, builds side by side (#15): interleaved runs, medians, outliers, phases, peak RSS and the BLAS roof
#
# usage: experiments/benchmarks/cpu_rank.sh [VARIANT...]
#   VARIANT   LABEL=BINARY[:VAR=VALUE,...]   (default: cpu=build/nocuda/ringside cuda=build/ringside)
#   REPS=20 THREADS=2 LAYERS=784,1024,1024,10 BATCH=128 STEPS=60
#   MODEL="--model gpt --batch 16 --optimizer adamw" (instead of the MLP of LAYERS and BATCH; no
#   roof then: blas_roof.c knows the MLP's GEMMs only)
#
# Every repeat runs the BLAS roof program (blas_roof.c, built here) and then each variant once,
# in an order rotated by the repeat, so that what else the machine does falls on all of them
# alike. A run's time is its report's mean step; "slow" counts runs above 1.3x the median, each
# listed after the table with the CPU time the hypervisor took from the VM during it (steal).
set -euo pipefail
reps=${REPS:-20}; threads=${THREADS:-2}; layers=${LAYERS:-784,1024,1024,10}; batch=${BATCH:-128}
steps=${STEPS:-60}; model=${MODEL:-}
shape="--layers $layers --batch $batch"; [ -z "$model" ] || shape=$model
[ $# -gt 0 ] || set -- cpu=build/nocuda/ringside cuda=build/ringside
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
mkdir -p build/bench
cc -O2 -o build/bench/blas_roof experiments/benchmarks/blas_roof.c $(pkg-config --cflags --libs openblas)
echo "# $(nproc) CPUs: $(lscpu | sed -n 's/^Model name: *//p'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# train --sync none $shape --threads $threads --steps $steps --warmup 5, $reps repeats"
nv=$#
# the time the hypervisor gave this VM's CPUs to others (/proc/stat's steal, in USER_HZ ticks, all
# CPUs): a slow run with steal is the machine's, not the program's
steal() { awk '/^cpu /{print $9}' /proc/stat; }
hz=$(getconf CLK_TCK)
for r in $(seq "$reps"); do
    if [ -z "$model" ]; then build/bench/blas_roof "$layers" "$batch" "$threads" 20 > "$out/roof-$r.txt"
    else : > "$out/roof-$r.txt"; fi
    for k in $(seq 0 $((nv - 1))); do
        i=$(( (k + r) % nv + 1 )); v=${!i}
        label=${v%%=*}; rest=${v#*=}; bin=${rest%%:*}; envs=""
        [[ "$rest" == *:* ]] && envs=${rest#*:}
        s0=$(steal)
        # shellcheck disable=SC2086
        env ${envs//,/ } /usr/bin/time -f %M -o "$out/$label-$r.rss" "$bin" train --device cpu --sync none \
            $shape --threads "$threads" --steps "$steps" --warmup 5 --quiet --report "$out/$label-$r.json"
        echo $(( $(steal) - s0 )) > "$out/$label-$r.steal"
    done
done
python3 - "$out" "$reps" "$hz" "$@" <<'PY'
import json, statistics as st, sys
d, n, hz, variants = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
def q(xs, p): xs = sorted(xs); return xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))]
roof = [float(l.split()[1]) for r in range(1, n + 1) for l in open(f"{d}/roof-{r}.txt") if l.startswith("roof_")]
by_threads = {}
for r in range(1, n + 1):
    for l in open(f"{d}/roof-{r}.txt"):
        if l.startswith("threads"):
            f = l.split()
            by_threads.setdefault(f[1], []).append((float(f[3]), float(f[7])))
if roof:
    print(f"BLAS roof: {st.median(roof):.0f} samples/s, median of {n} (the better of: " + "; ".join(
        f"OpenBLAS on {k} thread(s) {st.median(x[1] for x in v):.0f} samples/s, GEMM {st.median(x[0] for x in v):.2f} ms a step"
        for k, v in by_threads.items()) + ")")
else:
    print("BLAS roof: not run (MODEL: the roof program knows the MLP only; experiments/benchmarks/rest_alone.c bounds the others)")
print(f"{'variant':<12} {'samples/s':>10} {'IQR':>13} {'step ms':>8} {'max/med':>8} {'slow':>5} "
      f"{'fwd':>6} {'bwd':>6} {'opt':>6} {'gemm':>6} {'RSS MiB':>8} {'roof':>6} {'vs 1st':>7} {'steal ms':>9}")
base = None
slow_lines = []
for v in variants:
    label = v.split("=", 1)[0]
    rs = [json.load(open(f"{d}/{label}-{r}.json")) for r in range(1, n + 1)]
    rss = [int(open(f"{d}/{label}-{r}.rss").read().split()[-1]) / 1024 for r in range(1, n + 1)]
    thr = [r["summary"]["throughput_samples_per_s"] for r in rs]
    t = [r["ranks"][0]["time_s"] for r in rs]
    mean = [x["step"]["mean"] for x in t]
    med = st.median(mean)
    ph = lambda k: 1e3 * st.median(x["phases"][k] for x in t)
    gemm = 1e3 * st.median(x.get("gemm", 0) for x in t)
    steal = [1e3 * int(open(f"{d}/{label}-{r}.steal").read()) / hz for r in range(1, n + 1)]
    for r in range(n):
        if mean[r] > 1.3 * med:
            slow_lines.append(f"# slow: {label} run {r + 1}: {1e3 * mean[r]:.2f} ms a step ({mean[r] / med:.2f}x the median), "
                              f"steal {steal[r]:.0f} ms during it (the variant's median run: {st.median(steal):.0f} ms)")
    m = st.median(thr)
    rf = f"{m / st.median(roof):.0%}" if roof else "-"
    base = base or m
    print(f"{label:<12} {m:>10.0f} {q(thr, .25):>6.0f}-{q(thr, .75):<6.0f} {1e3 * med:>8.2f} {max(mean) / med:>8.2f} "
          f"{sum(x > 1.3 * med for x in mean):>5} {ph('forward'):>6.2f} {ph('backward'):>6.2f} {ph('optimizer'):>6.2f} "
          f"{gemm:>6.2f} {st.median(rss):>8.1f} {rf:>6} {m / base:>6.2f}x {st.median(steal):>9.0f}")
if slow_lines: print("\n".join(slow_lines))
PY
