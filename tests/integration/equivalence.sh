#!/usr/bin/env bash
# equivalence.sh - N ranks with a scattered global batch compute what one rank computes on the whole batch (ring)
. "$(dirname "$0")/lib.sh"
M="--layers 784,64,10 --train-samples 2048 --eval-samples 64 --steps 30 --seed 3 --quiet"
$BIN train --sync none --batch 96 $M --report $T/one.json --save-params $T/one.bin || { bad "N=1 baseline" "failed"; finish; exit 1; }
for n in 2 3 4; do
    for variant in "overlap:" "no-overlap:--no-overlap" "split-buckets:--bucket-mb 0.05"; do
        name=${variant%%:*}; opts=${variant#*:}
        if $BIN train -n $n --sync ring --global-batch 96 $M $opts --report $T/r.json --save-params $T/r.bin >$T/run.log 2>&1; then
            check "ring N=$n $name == N=1" $PY tests/compare_runs.py $T/one.json $T/r.json --params $T/one.bin $T/r.bin --tol 1e-5
        else
            bad "ring N=$n $name" "run failed: $(tail -n 3 $T/run.log)"
        fi
    done
done
# per-rank batches (DDP): 1920 samples = 20 full steps of 2 x 48 per epoch, so every step has 96;
# the loss must fall
$BIN train -n 2 --sync ring --batch 48 $M --train-samples 1920 --report $T/ddp.json >$T/ddp.log 2>&1 \
  && $PY -c "import json,sys; r=json.load(open('$T/ddp.json')); c=r['summary']['loss_curve']; s=r['summary']['samples']; sys.exit(not (c[-1][1] < c[0][1] and s == 30*96))" \
  && ok "DDP batches: 96 samples per step, loss falls" || bad "DDP batches" "$(tail -n 3 $T/ddp.log)"
finish
