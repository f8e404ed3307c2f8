#!/usr/bin/env bash
# gemm_share.sh - how much of one rank's step is GEMM, for lenet and for gpt at several widths: what bounds the BLAS roof's share
#
# usage: experiments/benchmarks/gemm_share.sh [BIN]       (default build/nocuda/ringside)
#   REPS=7 THREADS=2 STEPS=40 WIDTHS="64 128 256 512" (gpt's --n-embd; --n-head 4, --seq-len 64, batch 16, AdamW)
#
# A step's GEMMs at the BLAS rate are its roof, so the share of the step spent inside GEMM calls
# (the report's time_s.gemm over its median step) is the most of the roof a step reaches: the
# rest (LayerNorm, GELU, the softmaxes, AdamW, im2col, pooling) is memory-bound or exp-bound work
# that grows with the activations (B T C), while GEMM grows with B T C^2. The widths are run
# interleaved, REPS times each; medians.
set -euo pipefail
bin=${1:-build/nocuda/ringside}
reps=${REPS:-7}; threads=${THREADS:-2}; steps=${STEPS:-40}; widths=${WIDTHS:-64 128 256 512}
[ -x "$bin" ] || { echo "gemm_share.sh: no $bin (make CUDA=0 BUILD=build/nocuda first)" >&2; exit 2; }
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
echo "# $(nproc) CPUs: $(lscpu | sed -n 's/^Model name: *//p'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $bin train --sync none --threads $threads --steps $steps --warmup 5, $reps interleaved repeats"
runs="lenet"
for w in $widths; do runs="$runs gpt$w"; done
for r in $(seq "$reps"); do
    for x in $runs; do
        case $x in
            lenet) opts="--model lenet --batch 64" ;;
            gpt*) opts="--model gpt --batch 16 --optimizer adamw --n-embd ${x#gpt}" ;;
        esac
        # shellcheck disable=SC2086
        "$bin" train $opts --sync none --threads "$threads" --steps "$steps" --warmup 5 --eval-samples 16 --quiet \
            --report "$out/$x-$r.json"
    done
done
python3 - "$out" "$reps" "$runs" <<'PY'
import json, statistics, sys
d, reps, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
print(f"{'model':<10} {'params':>10} {'step ms':>9} {'gemm ms':>9} {'rest ms':>9} {'gemm share':>11}")
for x in runs:
    rs = [json.load(open(f"{d}/{x}-{r}.json"))["ranks"][0] for r in range(1, reps + 1)]
    step = statistics.median(r["time_s"]["step"]["median"] for r in rs)
    gemm = statistics.median(r["time_s"]["gemm"] for r in rs)
    share = statistics.median(r["time_s"]["gemm"] / r["time_s"]["step"]["median"] for r in rs)
    name = x if x == "lenet" else f"gpt C={x[3:]}"
    print(f"{name:<10} {rs[0]['memory']['by_tag']['params'] // 4:>10,} {1e3 * step:>9.2f} {1e3 * gemm:>9.2f} "
          f"{1e3 * (step - gemm):>9.2f} {100 * share:>10.0f}%")
PY
