#!/usr/bin/env bash
# zero_steps.sh - ZeRO's stages against the ring, step by step: step time, comm_total and comm_exposed, bytes a step and model-state bytes per rank, with and without an emulated link; and stage 3 with and without its prefetch (interleaved repeats, medians)
#
#   experiments/benchmarks/zero_steps.sh [BIN]     (default build/ringside)
#   N ranks (default 4); LINK the emulated NIC (default 1gbit; "" leaves the link runs out); REPS (default 3);
#   MODEL the options of the model (default the 784-1024-1024-10 MLP, 1.86 M parameters, AdamW)
set -euo pipefail
bin=${1:-build/ringside}
n=${N:-4} link=${LINK-1gbit} reps=${REPS:-3}
model=${MODEL:-"--layers 784,1024,1024,10 --optimizer adamw --lr 0.001"}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
variants="ring zero-1 zero-2 zero-3 zero-3-noprefetch"
for rep in $(seq "$reps"); do
    for l in none ${link:+$link}; do
        for v in $variants; do
            opts="--sync ring" env=""
            case $v in
            zero-3-noprefetch) opts="--sync zero --zero-stage 3" env="RINGSIDE_ZERO_PREFETCH=0" ;;
            zero-*) opts="--sync zero --zero-stage ${v#zero-}" ;;
            esac
            lk=$([ "$l" = none ] || echo "--link $l")
            # shellcheck disable=SC2086
            env $env "$bin" train -n "$n" $opts $model $lk --device cpu --batch 32 --steps 16 --warmup 3 \
                --train-samples 4096 --eval-samples 64 --quiet --report "$out/$v-$l-r$rep.json"
        done
    done
done
python3 - "$out" "$n" "$variants" none ${link:+$link} <<'PY'
import glob, json, statistics, sys
d, n, variants, links = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4:]
print(f"N = {n}; medians over repeats of the mean over ranks; bytes a step: rank 1's, less the start's broadcast")
print("| link | variant | step (ms) | comm_total (ms) | comm_exposed (ms) | MB sent a step | params + grads + optimizer (MB, rank 1) | comm (MB, rank 1) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
ring = json.load(open(sorted(glob.glob(f"{d}/ring-none-r*.json"))[0]))
p4 = ring["ranks"][0]["memory"]["by_tag"]["params"]  # 4P: the whole model's parameters
for l in links:
    for v in variants:
        rs = [json.load(open(f)) for f in sorted(glob.glob(f"{d}/{v}-{l}-r*.json"))]
        if not rs:
            continue
        ph = lambda k: statistics.median(statistics.mean(x["time_s"]["phases"][k] for x in r["ranks"]) for r in rs) * 1e3
        step = statistics.median(r["summary"]["step_time_s"] for r in rs) * 1e3
        r1 = [x for x in rs[0]["ranks"] if x["rank"] == 1][0]
        steps = rs[0]["summary"]["steps"]
        # rank 1's bytes less the start's broadcast (it forwards the parameters, 4P) and, under
        # stage 3, the end's gather of every layer ((N-1)/N of 4P): what the steps moved
        extra = p4 + (p4 * (n - 1) / n if v.startswith("zero-3") else 0)
        sent = statistics.median([x for x in r["ranks"] if x["rank"] == 1][0]["traffic"]["bytes_sent"] - extra for r in rs)
        t = r1["memory"]["by_tag"]
        states = (t["params"] + t["grads"] + t["optimizer"]) / 1e6
        print(f"| {l} | {v} | {step:.1f} | {ph('comm_total'):.1f} | {ph('comm_exposed'):.1f} | {sent / steps / 1e6:.2f} | "
              f"{states:.2f} | {t['comm'] / 1e6:.2f} |")
PY
