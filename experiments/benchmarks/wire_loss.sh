#!/usr/bin/env bash
# wire_loss.sh - what a lossy wire does to the loss: mlp, lenet and gpt at N = 2 (ring and colocated ps) against one rank with the global batch, --wire fp32 / bf16 / fp8e4m3 / fp8e5m2 over seeds: claim 5's mean |loss difference| / mean loss
# usage: experiments/benchmarks/wire_loss.sh [BIN]   (SEEDS="1 2 3", WIRES, SYNCS="ring ps", MODELS="mlp lenet gpt", STEPS=60;
#        lenet trains on MNIST where DATA (default ../shared/data/mnist) has its images (train-*, or t10k-* alone: the first 8,000 train), else on synthetic 28x28 images, said so)
set -uo pipefail
bin=${1:-build/ringside}; seeds=${SEEDS:-"1 2 3"}; wires=${WIRES:-"fp32 bf16 fp8e4m3 fp8e5m2"}
syncs=${SYNCS:-"ring ps"}; models=${MODELS:-"mlp lenet gpt"}; steps=${STEPS:-60}; data=${DATA:-../shared/data/mnist}
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
lenet_data=synthetic
if compgen -G "$data/train-images-idx3-ubyte*" >/dev/null || compgen -G "$data/t10k-images-idx3-ubyte*" >/dev/null; then lenet_data=$data
else echo "# lenet: no MNIST images in $data: synthetic 28x28 images instead"; fi
opts() { # MODEL: the model's options (small enough for 2 cores)
    case $1 in
        mlp) echo "--model mlp --layers 784,256,10 --train-samples 4096 --eval-samples 256" ;;
        lenet) echo "--model lenet --data $lenet_data --train-samples 4096 --eval-samples 256 --optimizer adamw --lr 0.003" ;;
        gpt) echo "--model gpt --n-layer 2 --n-embd 64 --n-head 4 --seq-len 32 --vocab 256 --train-samples 4096 --eval-samples 64 --optimizer adamw --lr 0.003" ;;
    esac
}
t0=$SECONDS
for m in $models; do
    G=$([ "$m" = gpt ] && echo 32 || echo 96)
    for s in $seeds; do
        "$bin" train --sync none --batch $G --steps $steps --seed $s $(opts $m) -q --report $out/$m-none-$s.json >$out/log 2>&1 \
            || { echo "# $m seed $s: the 1-rank run failed: $(tail -n 2 $out/log)"; continue; }
        for y in $syncs; do
            for w in $wires; do
                "$bin" train -n 2 --sync $y --global-batch $G --steps $steps --seed $s --wire $w $(opts $m) -q \
                    --report $out/$m-$y-$w-$s.json >$out/log 2>&1 || echo "# $m $y $w seed $s: exit $?: $(tail -n 2 $out/log)"
            done
        done
    done
done
echo "# $(( SECONDS - t0 )) s; $(nproc) cores; commit $(git rev-parse --short HEAD 2>/dev/null || echo ?); $steps steps, N = 2"
python3 - "$out" "$models" "$syncs" "$wires" "$seeds" <<'PY'
import json, os, sys
out, models, syncs, wires, seeds = sys.argv[1], *(a.split() for a in sys.argv[2:])
def curve(p):
    try:
        return [x[1] for x in json.load(open(p))["summary"]["loss_curve"]]
    except Exception:
        return None
print("| model | back end | wire | mean abs diff / mean loss, per seed | worst | final loss, per seed |")
print("| --- | --- | --- | --- | --- | --- |")
for m in models:
    for y in syncs:
        for w in wires:
            area, fin = [], []
            for s in seeds:
                b, c = curve("%s/%s-none-%s.json" % (out, m, s)), curve("%s/%s-%s-%s-%s.json" % (out, m, y, w, s))
                if not b or not c or len(b) != len(c):
                    area.append(None); fin.append(None); continue
                area.append(sum(abs(x - z) for x, z in zip(c, b)) / sum(abs(z) for z in b))
                fin.append(c[-1])
            ok = [a for a in area if a is not None]
            print("| %s | %s | %s | %s | %s | %s |" % (m, y, w, ", ".join("-" if a is None else "%.2f%%" % (100 * a) for a in area),
                  "%.2f%%" % (100 * max(ok)) if ok else "-", ", ".join("-" if f is None else "%.4f" % f for f in fin)))
PY
