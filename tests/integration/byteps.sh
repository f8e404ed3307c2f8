#!/usr/bin/env bash
# byteps.sh - --sync byteps (BytePS's split over every worker's shard and k CPU servers): equivalence to one rank, exact traffic and key split, bf16, refusals
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.." || exit 1
SMALL="--layers 64,128,10 --train-samples 2048 --eval-samples 256 --seed 3"

# ---- equivalence: N = 3 workers scattering a global batch of 96 = one rank with 96, for k = 0, 1, 3 ----
$BIN train -n 1 --sync none --batch 96 --steps 30 $SMALL -q --report $T/one.json --save-params $T/one.bin >$T/one.log 2>&1 \
    || bad "one rank, batch 96" "$(tail -n 3 $T/one.log)"
for k in 0 1 3; do
    if $BIN train -n 3 --sync byteps --ps-servers $k --global-batch 96 --steps 30 $SMALL -q \
        --report $T/k$k.json --save-params $T/k$k.bin >$T/k$k.log 2>&1; then
        check "equivalence: byteps n = 3, k = $k == one rank" \
            $PY tests/compare_runs.py $T/one.json $T/k$k.json --params $T/one.bin $T/k$k.bin --tol 1e-5
        $PY -c "import json,sys; r=json.load(open('$T/k$k.json')); h={e['params_hash'] for e in r['ranks'] if e.get('role', 'worker') == 'worker'}; sys.exit(len(h) != 1)" \
            && ok "same params_hash on every rank (k = $k)" || bad "same params_hash on every rank (k = $k)" "differ"
    else
        bad "byteps n = 3, k = $k" "$(tail -n 3 $T/k$k.log)"
    fi
done
# k = 0 is the sharded ps, k = n the dedicated ps with n servers: the same keys on the same servers, the same bits
$BIN train -n 3 --sync ps --ps-placement sharded --global-batch 96 --steps 30 $SMALL -q --report $T/sh.json \
    --save-params $T/sh.bin >$T/sh.log 2>&1 && cmp -s $T/sh.bin $T/k0.bin \
    && ok "k = 0: bitwise the sharded ps's parameters" || bad "k = 0 against sharded" "$(tail -n 3 $T/sh.log)"
$BIN train -n 3 --sync ps --ps-placement dedicated --ps-servers 3 --global-batch 96 --steps 30 $SMALL -q \
    --report $T/de.json --save-params $T/de.bin >$T/de.log 2>&1 && cmp -s $T/de.bin $T/k3.bin \
    && ok "k = n: bitwise the dedicated ps's parameters (3 servers)" || bad "k = n against dedicated" "$(tail -n 3 $T/de.log)"
# several buckets: each split over the servers in the weights' proportions; the same bits again
$BIN train -n 3 --sync ps --ps-placement sharded --global-batch 96 --steps 30 --bucket-mb 0.01 $SMALL -q \
    --report $T/shb.json --save-params $T/shb.bin >$T/shb.log 2>&1 || bad "sharded, split buckets" "$(tail -n 3 $T/shb.log)"
$BIN train -n 3 --sync ps --ps-placement dedicated --ps-servers 3 --global-batch 96 --steps 30 --bucket-mb 0.01 $SMALL -q \
    --report $T/deb.json --save-params $T/deb.bin >$T/deb.log 2>&1 || bad "dedicated, split buckets" "$(tail -n 3 $T/deb.log)"
for k in 0 1 3; do
    $BIN train -n 3 --sync byteps --ps-servers $k --global-batch 96 --steps 30 --bucket-mb 0.01 $SMALL -q \
        --report $T/kb$k.json --save-params $T/kb$k.bin >$T/kb.log 2>&1 \
        && $PY tests/compare_runs.py $T/one.json $T/kb$k.json --params $T/one.bin $T/kb$k.bin --tol 1e-5 >$T/c.log 2>&1 \
        && ok "equivalence: byteps n = 3, k = $k, buckets of 0.01 MiB == one rank" \
        || bad "byteps n = 3, k = $k, buckets of 0.01 MiB" "$(tail -n 3 $T/kb.log $T/c.log)"
done
cmp -s $T/shb.bin $T/kb0.bin && ok "k = 0, split buckets: bitwise the sharded ps's" || bad "k = 0, split buckets" "not sharded's bits"
cmp -s $T/deb.bin $T/kb3.bin && ok "k = n, split buckets: bitwise the dedicated ps's" || bad "k = n, split buckets" "not dedicated's bits"

# ---- traffic and the key split: measured bytes equal docs/ps-protocol.md's formulas exactly -----------------
# tests/ps_traffic.py has the formulas (servers 0..n-1 the workers' shards of weight n - k, then the
# k CPU servers of weight 2(n - 1); every bucket split by the weights) and the server memory.
traffic() { # NAME REPORT [FP32-REPORT]
    local name=$1; shift
    $PY tests/ps_traffic.py "$@" >$T/t.log 2>&1 && ok "$name ($(cat $T/t.log))" || bad "$name" "$(cat $T/t.log)"
}
for k in 0 1 3; do
    [ -e $T/k$k.json ] && traffic "traffic and key split: n = 3, k = $k" $T/k$k.json
done
$BIN train -n 4 --sync byteps --ps-servers 2 --bucket-mb 0.01 --steps 8 $SMALL -q --report $T/n4.json >$T/n4.log 2>&1 \
    && traffic "traffic and key split: n = 4, k = 2, buckets of 0.01 MiB" $T/n4.json \
    || bad "byteps n = 4, k = 2" "$(tail -n 3 $T/n4.log)"

# ---- --wire bf16 at k = 1: the same formulas with 2 bytes a key, the steps' bytes halved -------------
$BIN train -n 3 --sync byteps --ps-servers 1 --wire bf16 --bucket-mb 0.01 --steps 10 $SMALL -q --report $T/bf.json \
    >$T/bf.log 2>&1 && $BIN train -n 3 --sync byteps --ps-servers 1 --bucket-mb 0.01 --steps 10 $SMALL -q \
    --report $T/f32.json >$T/f32.log 2>&1 \
    && traffic "bf16, k = 1: exact bytes" $T/bf.json $T/f32.json \
    || bad "bf16, k = 1" "$(tail -n 3 $T/bf.log $T/f32.log)"

# ---- bad input: exit 2, naming why, no report --------------------------------------------------------
refused() { # NAME WANT-TEXT ARGS...
    local name=$1 text=$2; shift 2
    expect_status "$name is refused" 2 $BIN train "$@" $SMALL --steps 2 -q --report $T/b.json
    grep -q -- "$text" $T/last.log && ok "$name: says why" || bad "$name: says why" "$(cat $T/last.log)"
}
refused "byteps k = 4 > n = 3" "the formulas cover 0 <= k <= n" -n 3 --sync byteps --ps-servers 4
refused "byteps k = -1" "the formulas cover 0 <= k <= n" -n 3 --sync byteps --ps-servers -1
refused "byteps n = 1, k = 1" "n^2 + kn - 2k is 0" -n 1 --sync byteps --ps-servers 1
refused "byteps with a placement" "placement is implied" -n 3 --sync byteps --ps-placement sharded
refused "byteps with dedicated" "placement is implied" -n 3 --sync byteps --ps-placement dedicated
refused "byteps with dataparallel" "byteps with --ps-mode dataparallel" -n 3 --sync byteps --ps-mode dataparallel \
    --global-batch 48
refused "byteps with async" "byteps with --ps-consistency async" -n 3 --sync byteps --ps-consistency async
refused "byteps with ssp:2" "byteps with --ps-consistency ssp:2" -n 3 --sync byteps --ps-consistency ssp:2
refused "byteps over shm" "--transport shm with --sync byteps" -n 3 --sync byteps --transport shm
refused "sharded --ps-servers 2 at N = 3" "every worker runs one shard" -n 3 --sync ps --ps-placement sharded --ps-servers 2
refused "ps --ps-servers 0" "must be at least 1" -n 3 --sync ps --ps-placement dedicated --ps-servers 0
expect_status "byteps with a server holding no key is refused" 2 $BIN train -n 5 --sync byteps --ps-servers 2 --layers 2,2 \
    --steps 2 -q --report $T/b.json
grep -q -- "would hold no key of the model's 6 parameters" $T/last.log && ok "a server holding no key: says why" \
    || bad "a server holding no key: says why" "$(cat $T/last.log)"
[ ! -e $T/b.json ] && ok "no report after refusals" || bad "no report after refusals" "written"

# ---- one worker, k = 0: its own shard, nothing moves ---------------------------------------------------
$BIN train -n 1 --sync byteps --ps-servers 0 --batch 96 --steps 30 $SMALL -q --report $T/n1.json --save-params $T/n1.bin \
    >$T/n1.log 2>&1 && $PY tests/compare_runs.py $T/one.json $T/n1.json --params $T/one.bin $T/n1.bin --tol 1e-5 >$T/c.log 2>&1 \
    && ok "n = 1, k = 0: one rank's run" || bad "n = 1, k = 0" "$(tail -n 3 $T/n1.log $T/c.log)"

finish
