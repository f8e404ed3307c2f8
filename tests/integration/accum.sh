#!/usr/bin/env bash
# accum.sh - --accum-steps K: N ranks x K micro-batches compute what one rank computes on the whole batch, for every synchronous back end; bytes per step unchanged, samples per step K times; refusals
. "$(dirname "$0")/lib.sh"
M="--layers 784,64,10 --train-samples 2048 --eval-samples 64 --steps 12 --seed 5 --quiet"
$BIN train --sync none --global-batch 96 $M --report $T/one.json --save-params $T/one.bin >$T/one.log 2>&1 \
    || { bad "N=1 baseline" "$(tail -n 3 $T/one.log)"; finish; exit 1; }

# equal to one rank's batch of 96: the loss curve and the parameters within 1e-5, every rank's
# parameters rank 0's bit for bit (train exits 7 otherwise), and the report's counts
same() { # NAME N K OPTS...
    local name=$1 n=$2 k=$3; shift 3
    if $BIN train -n $n --global-batch 96 --accum-steps $k $M "$@" --report $T/a.json --save-params $T/a.bin >$T/run.log 2>&1; then
        check "$name N=$n K=$k == one rank, batch 96" $PY tests/compare_runs.py $T/one.json $T/a.json --params $T/one.bin $T/a.bin --tol 1e-5
        check "  ... micro_steps = 12 x $k, 96 samples a step, the report validates" $PY - $T/a.json $k <<'EOF'
import json, subprocess, sys
r = json.load(open(sys.argv[1])); k = int(sys.argv[2]); s = r["summary"]
assert r["config"]["accum-steps"] == k and s["steps"] == 12 and s["micro_steps"] == 12 * k, (s["steps"], s["micro_steps"])
assert s["samples"] == 12 * 96, s["samples"]
assert s.get("params_agree") in (True, None), s.get("params_agree")
subprocess.run([sys.executable, "tests/validate_report.py", sys.argv[1]], check=True)
EOF
    else
        bad "$name N=$n K=$k" "run failed: $(tail -n 3 $T/run.log)"
    fi
}
same "none" 1 4 --sync none
same "ring" 1 2 --sync ring
same "ring" 3 2 --sync ring
same "ring" 3 4 --sync ring --no-overlap
same "ring (tcp, 3 buckets)" 3 2 --sync ring --transport tcp --bucket-mb 0.07
same "tree" 3 2 --sync tree
same "ps" 1 2 --sync ps
same "ps" 3 4 --sync ps
same "ps dedicated x2" 3 2 --sync ps --ps-placement dedicated --ps-servers 2
same "ps sharded" 3 2 --sync ps --ps-placement sharded
same "byteps k=1" 3 2 --sync byteps --ps-servers 1

# K micro-batches, one synchronisation: a step's bytes are the same for K = 1 and K = 4, its
# samples 4 times as many (per-rank batches: 2 x 32 x 4 = 256 a step; 1024 samples a rank, so
# step 8 begins the second epoch)
for s in ring ps; do
    $BIN train -n 2 --sync $s --batch 32 $M --report $T/k1.json >$T/k1.log 2>&1 \
        && $BIN train -n 2 --sync $s --batch 32 --accum-steps 4 $M --report $T/k4.json >$T/k4.log 2>&1 \
        && check "$s: K=4 sends rank by rank the bytes K=1 sends, with 4x the samples a step" $PY - $T/k1.json $T/k4.json <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for ea, eb in zip(a["ranks"], b["ranks"]):
    ta, tb = ea["traffic"], eb["traffic"]
    assert (ta["bytes_sent"], ta["bytes_received"]) == (tb["bytes_sent"], tb["bytes_received"]), (ea["rank"], ta, tb)
assert a["summary"]["samples"] == 12 * 64 and b["summary"]["samples"] == 12 * 256, (a["summary"]["samples"], b["summary"]["samples"])
c = b["summary"]["loss_curve"]; assert c[-1][1] < c[0][1], c
EOF
    [ -f $T/k4.json ] || bad "$s K=1 / K=4 pair" "$(tail -n 3 $T/k1.log $T/k4.log)"
done

# asynchronous servers accumulate too: each worker pushes once per K micro-batches
check "ps async N=2 K=3 trains" $BIN train -n 2 --sync ps --ps-consistency async --batch 16 --accum-steps 3 $M --report $T/async.json
check "  ... its report validates, micro_steps 3x steps" $PY -c "
import json, subprocess, sys
r = json.load(open('$T/async.json')); s = r['summary']
assert s['micro_steps'] == 3 * s['steps'], s
subprocess.run([sys.executable, 'tests/validate_report.py', '$T/async.json'], check=True)"

# refusals: exit 2 naming why, no report left
refuse() { # NAME WORDS OPTS...
    local name=$1 words=$2; shift 2
    rm -f $T/no.json
    $BIN train "$@" --steps 2 --quiet --report $T/no.json >$T/no.log 2>&1; local rc=$?
    if [ $rc = 2 ] && grep -q -- "$words" $T/no.log && [ ! -e $T/no.json ]; then ok "refused: $name"
    else bad "refused: $name" "exit $rc, report $( [ -e $T/no.json ] && echo left || echo none): $(head -n 2 $T/no.log)"; fi
}
refuse "--accum-steps 0" "--accum-steps 0: must be at least 1" --accum-steps 0
refuse "--accum-steps -2" "--accum-steps -2: must be at least 1" --accum-steps -2
refuse "--accum-steps x" "--accum-steps 'x': not an integer" --accum-steps x
refuse "--accum-steps 1000000 (a step is never cut short by --time-budget)" "--accum-steps 1000000: at most 1024 micro-batches a step" --accum-steps 1000000 --time-budget 2
refuse "--global-batch 100 --accum-steps 3" "must split into 3 equal micro-batches" --global-batch 100 --accum-steps 3
refuse "DataParallel's step" "DataParallel has no no_sync" -n 2 --sync ps --ps-mode dataparallel --global-batch 64 --accum-steps 2
finish
