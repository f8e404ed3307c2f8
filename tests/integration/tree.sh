#!/usr/bin/env bash
# tree.sh - --sync tree, the double binary tree all-reduce: exact sums at N = 2..7, the same bits on every rank, and both under an emulated link (flat and over nodes), its bytes per rank against its formula, training equal to one rank, a killed rank named, refusals
. "$(dirname "$0")/lib.sh"

# ---- 1. exact sums, N = 2..7 (powers of two and not), over one chunk and many (2 MiB is 4 chunks
# of 256 KiB per half; 32 KiB, 2 of 16 KiB) ----------------------------------------------------------
for n in 2 3 4 5 6 7; do
    if $BIN bench -n $n --sync tree -b 4 -e 2M -f 8 -w 1 -i 2 --timeout 30 >$T/b$n.log 2>&1 && grep -q '^# wrong elements : 0 OK' $T/b$n.log; then
        ok "N=$n: every element of every size the exact sum"
    else bad "N=$n: exact sums" "$(grep -E 'wrong|error' $T/b$n.log | tail -n 3)"; fi
done

# ---- 2. the same bits on every rank: random inputs (a full mantissa: any order difference shows),
# on fp32 and on a 16-bit wire (the roots round their own sums as they send them) -----------------
for run in "5:fp32" "6:fp32" "4:bf16" "3:fp16"; do
    n=${run%%:*} wire=${run#*:}
    if $BIN bench -n $n --sync tree --wire $wire --inputs random -b 4 -e 1M -f 16 -w 1 -i 2 --timeout 30 >$T/r.log 2>&1 &&
        grep -q "^# ranks with other bits than rank 0's : 0 OK" $T/r.log; then ok "N=$n --wire $wire, random inputs: every rank rank 0's bits"
    else bad "N=$n --wire $wire, random inputs" "$(grep -E 'other bits|error' $T/r.log | tail -n 3)"; fi
done

# ---- 2b. under an emulated link the messages come in out of the order a rank asks for them and
# each rank runs both trees and both phases as they come (tree_run's data flow): the flat trees and
# the trees over nodes, one element (half 1 empty) to many chunks, exact sums and rank 0's bits ----
for run in "5::" "6:3:--hierarchical" "8:4:--hierarchical"; do
    IFS=: read -r n m h <<<"$run"
    nodes=""; [ -n "$m" ] && nodes="--nodes $m"
    # shellcheck disable=SC2086
    if $BIN bench -n $n $nodes --sync tree $h --link 1gbit -b 4 -e 4M -f 16 -w 1 -i 2 --timeout 30 >$T/l.log 2>&1 &&
        grep -q '^# wrong elements : 0 OK' $T/l.log &&
        $BIN bench -n $n $nodes --sync tree $h --link 1gbit --inputs random -b 4 -e 4M -f 16 -w 1 -i 2 --timeout 30 >$T/l.log 2>&1 &&
        grep -q "^# ranks with other bits than rank 0's : 0 OK" $T/l.log; then
        ok "N=$n ${m:+on $m nodes $h }over --link 1gbit: exact sums, every rank rank 0's bits"
    else bad "N=$n ${m:+on $m nodes $h }over --link 1gbit" "$(grep -E 'wrong|other bits|error' $T/l.log | tail -n 3)"; fi
done

# ---- 3. bytes per rank, exactly: every call moves half of the buffer per tree, once per neighbour
# in that tree, each way, in 16 chunks of 16 to 256 KiB, each with a 40-byte header -------------
for n in 3 4 7; do
    $BIN bench -n $n --sync tree -b 1K -e 4M -f 64 -w 1 -i 2 --timeout 30 --report $T/t$n.json >$T/t.log 2>&1 || bad "N=$n bench report" "$(tail -n 2 $T/t.log)"
    check "N=$n: every rank's bytes and messages are the tree's formula" $PY - $T/t$n.json <<'EOF'
import json, sys
sys.path.insert(0, "tests")
from validate_report import tree_degree
r = json.load(open(sys.argv[1]))
n, calls, H = r["config"]["ranks"], r["config"]["warmup_iters"] + r["config"]["iters"], 40
def chunk(c):  # allreduce/tree.h: a half in 16 chunks of 16 to 256 KiB (fp32: 4096 to 65536 floats)
    return min(max(-(-((c + 1) // 2) // 16), 4096), 65536)
for e in r["summary"]["traffic"]:
    deg, want_b, want_m = tree_degree(n, e["rank"]), 0, 0
    for row in r["rows"]:
        c = row["count"]
        for t, h in enumerate(((c + 1) // 2, c // 2)):
            chunks = -(-h // chunk(c))
            want_b += calls * deg[t] * (4 * h + H * chunks)
            want_m += calls * deg[t] * chunks
    got = (e["bytes_sent"], e["bytes_received"], e["messages_sent"], e["messages_received"])
    assert got == (want_b, want_b, want_m, want_m), (e["rank"], got, want_b, want_m)
    assert e["transport"] == "ipc", e
EOF
done
check "bench report validates" $PY tests/validate_report.py $T/t7.json

# ---- 4. training: N ranks on a scattered global batch compute what one rank computes on the whole
# batch (the sum's order differs from one rank's: within fp32 rounding), every rank ends with rank
# 0's parameters, and the report validates (the tree's per-rank traffic floors among its checks) ---
M="--layers 784,64,10 --train-samples 2048 --eval-samples 64 --steps 20 --seed 3 --quiet"
$BIN train --sync none --batch 96 $M --report $T/one.json --save-params $T/one.bin >$T/one.log 2>&1 || bad "N=1 baseline" "$(tail -n 2 $T/one.log)"
for n in 3 4; do
    if $BIN train -n $n --sync tree --global-batch 96 $M --report $T/tr$n.json --save-params $T/tr$n.bin >$T/tr.log 2>&1; then
        check "train N=$n == N=1 (loss curve and parameters within 1e-5)" $PY tests/compare_runs.py $T/one.json $T/tr$n.json \
            --params $T/one.bin $T/tr$n.bin --tol 1e-5
        check "train N=$n: report validates" $PY tests/validate_report.py $T/tr$n.json
        check "train N=$n: backend tree, family allreduce, replicas agree" $PY -c "
import json, sys
r = json.load(open(sys.argv[1]))
assert r['backend'] == {'name': 'tree', 'family': 'allreduce', 'architecture': 'tree', 'servers': 0, 'lockstep': True}, r['backend']
assert r['summary']['params_agree'] is True and r['summary']['transport'] == 'ipc', r['summary']" $T/tr$n.json
    else bad "train N=$n" "$(tail -n 3 $T/tr.log)"; fi
done
mkdir -p $T/claims && cp $T/one.json $T/tr4.json $T/claims/
$BIN claims $T/claims >$T/claims.log 2>&1
# claim 5 holds the tree to the ring's rule (its verdict wants a ps run too: the line is the check)
if grep -Eq "^#     tree N=4 +vs 1 rank batch 96: max rel diff [0-9.e+-]+ at step [0-9]+ over 20 steps  \[tr4 vs one\]$" $T/claims.log; then
    ok "claims: claim 5 compares the tree with one rank, within its rule"
else bad "claims: claim 5 on the tree" "$(grep -A6 '^5 ' $T/claims.log)"; fi

# ---- 5. a rank killed mid-training: the job ends, the launcher naming it ------------------------
$BIN train -n 4 --sync tree --layers 784,32,10 --steps 1000000 --timeout 3 --train-samples 512 -q >$T/kill.log 2>&1 &
job=$!
t0=$SECONDS
victim=""
while [ -z "$victim" ] && [ $((SECONDS - t0)) -lt 30 ]; do
    victim=$(ps -o pid= --ppid $job 2>/dev/null | sed -n 3p | tr -d ' ')   # the third rank started: rank 2
    sleep 0.5
done
sleep 2
[ -n "$victim" ] && kill -9 "$victim"
t0=$SECONDS
while kill -0 $job 2>/dev/null && [ $((SECONDS - t0)) -lt 20 ]; do sleep 0.2; done
if kill -0 $job 2>/dev/null; then kill -9 $job; bad "killed rank: the job ends" "still running 20 s after the kill"
elif wait $job; then bad "killed rank: the job fails" "exit 0"
elif grep -q "rank 2 was killed by signal 9" $T/kill.log; then ok "killed rank: the job fails naming rank 2"
else bad "killed rank: named" "$(tail -n 3 $T/kill.log)"; fi

# ---- 6. refusals ---------------------------------------------------------------------------------
expect_status "--transport shm: refused (no shared-memory path), exit 2" 2 $BIN train -n 2 --sync tree --transport shm --steps 1
grep -q "only the ring has a shared-memory path" $T/last.log && ok "--transport shm: says why" || bad "--transport shm: says why" "$(cat $T/last.log)"
expect_status "--ps-consistency async: refused, exit 2" 2 $BIN train -n 2 --sync tree --ps-consistency async --steps 1
expect_status "--nccl-algo bush: refused, exit 2" 2 $BIN train --nccl-algo bush --steps 1
grep -q "nccl-algo 'bush': expected ring or tree" $T/last.log && ok "--nccl-algo bush: names the value" || bad "--nccl-algo bush: names the value" "$(cat $T/last.log)"
expect_status "--nccl-algo tree with --sync ring: refused, exit 2" 2 $BIN train -n 2 --sync ring --nccl-algo tree --steps 1
grep -q "the algorithm is --sync nccl's" $T/last.log && ok "--nccl-algo tree with the ring: says whose it is" || bad "--nccl-algo with the ring" "$(cat $T/last.log)"
finish
