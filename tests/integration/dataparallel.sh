#!/usr/bin/env bash
# dataparallel.sh - --ps-mode dataparallel end to end: equivalence, exact traffic, the gather memory on rank 0, idle ranks, refusals, killed peers
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.." || exit 1
SMALL="--layers 64,128,10 --train-samples 2048 --eval-samples 256 --seed 3"
DP="--sync ps --ps-mode dataparallel"

# ---- exact traffic and the gather tag (docs/report-schema.md, ps/client.c) ---------------------
# dp_check NAME REPORT: every worker's bytes and messages equal the formulas; rank 0's by_tag.gather
# is 4 B (2C + 1) (B = --global-batch, C = classes), every other rank's 0; nothing dropped
dp_check() {
    $PY - "$2" <<'EOF' >$T/dpc.log 2>&1 && ok "$1 ($(cat $T/dpc.log))" || bad "$1" "$(cat $T/dpc.log)"
import json, math, sys
r = json.load(open(sys.argv[1]))
c, S, N = r["config"], r["summary"]["steps"], r["run"]["world"]
layers = c["layers"]
D, C = layers[0], layers[-1]
n = sum(a * b + b for a, b in zip(layers, layers[1:]))
H, P = 56, 4 * n
nb = math.ceil(n / max(1, int(c["bucket-mb"] * 1048576 / 4)))
G, data = c["global-batch"], c["train-samples"]
spe = math.ceil(data / G)
def chunk(B, k):                      # DataParallel's scatter: chunks of ceil(B/N)
    per = math.ceil(B / N)
    return min(per, max(0, B - k * per))
rows = [min(G, data - (s % spe) * G) for s in range(S)]
want = {}
for k in range(1, N):
    lens = [chunk(B, k) for B in rows]
    sent = H + S * (P + nb * H) + sum(H + 4 * L * C for L in lens)              # PULL, pushes, logits
    recv = sum((H + P) + (H + 4 * L * (D + 1)) + (H + 4 * L * C) for L in lens)  # replicate, batch, dlogits
    want[k] = (sent, recv, 1 + S * (nb + 1), 3 * S)
want[0] = tuple(sum(want[k][i] for k in range(1, N)) for i in (1, 0, 3, 2))
bad = []
for e in r["ranks"]:
    t = e["traffic"]
    got = (t["bytes_sent"], t["bytes_received"], t["messages_sent"], t["messages_received"])
    if got != want[e["rank"]] or t["dropped"]:
        bad.append("rank %d: sent/received/messages %s, want %s, dropped %d" % (e["rank"], got, want[e["rank"]], t["dropped"]))
    g = e["memory"]["by_tag"]["gather"]
    wg = 4 * G * (2 * C + 1) if e["rank"] == 0 else 0
    if g != wg:
        bad.append("rank %d: gather %d bytes, want %d" % (e["rank"], g, wg))
assert not bad, "; ".join(bad)
print("rank 0 sent %d received %d, gather %d" % (want[0][0], want[0][1], 4 * G * (2 * C + 1)))
EOF
}

# ---- equivalence: N ranks, global batch 96 = one rank with a batch of 96 = --sync ps --global-batch 96
$BIN train -n 1 --sync none --batch 96 --steps 30 $SMALL -q --report $T/one.json --save-params $T/one.bin >$T/one.log 2>&1 \
    || bad "one rank, batch 96" "$(tail -n 3 $T/one.log)"
for n in 2 3 4; do
    if ! $BIN train -n $n $DP --global-batch 96 --steps 30 $SMALL -q --report $T/dp$n.json --save-params $T/dp$n.bin \
        >$T/dp.log 2>&1; then
        bad "dataparallel, $n ranks" "$(tail -n 3 $T/dp.log)"
        continue
    fi
    $PY tests/compare_runs.py $T/one.json $T/dp$n.json --params $T/one.bin $T/dp$n.bin --tol 1e-5 >$T/c.log 2>&1 \
        && ok "$n ranks = one rank with batch 96 ($(tr '\n' ' ' <$T/c.log))" || bad "$n ranks = one rank" "$(cat $T/c.log)"
    if $BIN train -n $n --sync ps --global-batch 96 --steps 30 $SMALL -q --report $T/ps$n.json --save-params $T/ps$n.bin \
        >$T/ps.log 2>&1; then
        $PY tests/compare_runs.py $T/ps$n.json $T/dp$n.json --params $T/ps$n.bin $T/dp$n.bin --tol 1e-5 >$T/c.log 2>&1 \
            && ok "$n ranks = --sync ps --global-batch 96 ($(tr '\n' ' ' <$T/c.log))" || bad "$n ranks = push mode" "$(cat $T/c.log)"
    else
        bad "--sync ps --global-batch 96, $n ranks" "$(tail -n 3 $T/ps.log)"
    fi
    dp_check "traffic and gather: $n ranks, global batch 96" $T/dp$n.json
done
# several buckets, an uneven scatter (96 over 5: 20, 20, 20, 20, 16)
$BIN train -n 5 $DP --global-batch 96 --bucket-mb 0.01 --steps 12 $SMALL -q --report $T/b.json >$T/b.log 2>&1 \
    && dp_check "traffic and gather: 5 ranks, buckets of 0.01 MiB" $T/b.json || bad "5 ranks, small buckets" "$(tail -n 3 $T/b.log)"

# ---- global batch 4 on 8 ranks: ranks 4-7 get nothing, still take part -------------------------
$BIN train -n 1 --sync none --batch 4 --steps 10 $SMALL -q --report $T/one4.json >$T/one4.log 2>&1 \
    || bad "one rank, batch 4" "$(tail -n 3 $T/one4.log)"
if $BIN train -n 8 $DP --global-batch 4 --steps 10 $SMALL -q --report $T/idle.json >$T/idle.log 2>&1; then
    $PY - $T/idle.json <<'EOF' >$T/i.log 2>&1 && ok "global batch 4 on 8 ranks: $(cat $T/i.log)" || bad "global batch 4 on 8 ranks" "$(cat $T/i.log)"
import json, sys
r = json.load(open(sys.argv[1]))
s = [e["samples"] for e in r["ranks"]]
assert s == [10] * 4 + [0] * 4, "samples per rank %s" % s
print("samples %s" % s)
EOF
    $PY tests/compare_runs.py $T/one4.json $T/idle.json --tol 1e-5 >$T/c.log 2>&1 \
        && ok "global batch 4 on 8 ranks = one rank with batch 4" || bad "global batch 4 on 8 ranks = one rank" "$(cat $T/c.log)"
    dp_check "traffic and gather: 8 ranks, global batch 4 (empty chunks)" $T/idle.json
else
    bad "global batch 4 on 8 ranks" "$(tail -n 3 $T/idle.log)"
fi

# ---- memory: rank 0 carries the server and the gathered outputs, which grow with B x classes ----
for C in 10 100; do
    $BIN train -n 4 $DP --global-batch 96 --steps 5 --layers 784,64,$C --train-samples 1024 --eval-samples 128 -q \
        --report $T/mem$C.json >$T/mem.log 2>&1 || bad "memory run, $C classes" "$(tail -n 3 $T/mem.log)"
done
$PY - $T/mem10.json $T/mem100.json <<'EOF' >$T/m.log 2>&1 && ok "rank 0 carries server + gather, gather grows with B x classes ($(cat $T/m.log))" || bad "dataparallel memory" "$(cat $T/m.log)"
import json, sys
a, b = (json.load(open(p))["ranks"] for p in sys.argv[1:3])
for r, C in ((a, 10), (b, 100)):
    z, others = r[0]["memory"], [e["memory"] for e in r[1:]]
    g, srv = z["by_tag"]["gather"], z["by_tag"]["server"]
    assert g == 4 * 96 * (2 * C + 1) and srv > 0, "classes %d: gather %d, server %d" % (C, g, srv)
    assert all(o["by_tag"]["gather"] == 0 and o["by_tag"]["server"] == 0 for o in others)
    gap = z["peak_bytes"] - max(o["peak_bytes"] for o in others)
    assert gap >= g + srv, "classes %d: rank 0 %d, others %s, server %d + gather %d" % (
        C, z["peak_bytes"], [o["peak_bytes"] for o in others], srv, g)
ga, gb = a[0]["memory"]["by_tag"]["gather"], b[0]["memory"]["by_tag"]["gather"]
assert gb - ga == 4 * 96 * 2 * 90, (ga, gb)
print("rank 0 %d B (gather %d), others %d B at 10 classes; gather %d B at 100" % (
    a[0]["memory"]["peak_bytes"], ga, max(e["memory"]["peak_bytes"] for e in a[1:]), gb))
EOF

# ---- refusals: exit 2 with the reason, no report ---------------------------------------------------
expect_status "dedicated placement refused" 2 $BIN train -n 2 $DP --ps-placement dedicated --global-batch 32 $SMALL \
    --steps 2 -q --report $T/r.json
grep -q "no dedicated server" $T/last.log && ok "dedicated refusal says why" || bad "dedicated refusal says why" "$(cat $T/last.log)"
expect_status "missing --global-batch refused" 2 $BIN train -n 2 $DP $SMALL --steps 2 -q --report $T/r.json
grep -q -- "needs --global-batch" $T/last.log && ok "missing --global-batch named" || bad "missing --global-batch named" "$(cat $T/last.log)"
expect_status "one rank without --global-batch refused" 2 $BIN train $DP $SMALL --steps 2 -q --report $T/r.json
[ ! -e $T/r.json ] && ok "no report after refusals" || bad "no report after refusals" "written"

# ---- a rank killed mid-run ------------------------------------------------------------------------
$BIN train -n 3 $DP --global-batch 48 --steps 1000000 $SMALL --timeout 3 -q --report $T/k.json >$T/k.log 2>&1 & L=$!
sleep 2
pid=""
for p in $(pgrep -P $L); do grep -qz '^RANK=2$' /proc/$p/environ 2>/dev/null && pid=$p; done
if [ -n "$pid" ]; then
    t0=$(date +%s); kill -9 $pid; wait $L; rc=$?; t1=$(date +%s)
    [ $rc != 0 ] && [ $((t1 - t0)) -le 8 ] && [ "$(pgrep -P $L | wc -l)" = 0 ] && [ ! -e $T/k.json ] \
        && ok "rank 2 killed: exit $rc after $((t1 - t0)) s" || bad "rank 2 killed" "exit $rc after $((t1 - t0)) s: $(tail -n 3 $T/k.log)"
else
    bad "rank 2 killed" "no process for rank 2"; kill $L; wait $L
fi
# without a supervising launcher rank 0 names the missing rank, everyone ends within the timeouts
port=$(free_port)
for r in 0 1 2; do
    RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RINGSIDE_JOB_TOKEN=abcd0123abcd0123 \
        $BIN train $DP --global-batch 48 --steps 1000000 $SMALL --timeout 3 -q --report $T/z.json >$T/z$r.log 2>&1 &
    eval "q$r=$!"
done
sleep 2; t0=$(date +%s); kill -9 $q2; wait $q2 2>/dev/null
wait $q0; r0=$?; wait $q1; r1=$?; t1=$(date +%s)
grep -qE "no (push|logits) from rank 2 for step [0-9]+ within 3 s|to rank 2: it is gone" $T/z0.log && [ $r0 = 3 ] && [ $r1 = 3 ] && [ $((t1 - t0)) -le 10 ] \
    && ok "unsupervised: rank 0 names rank 2, all exit 3 in $((t1 - t0)) s" \
    || bad "unsupervised kill" "exit $r0/$r1 after $((t1 - t0)) s: $(tail -n 2 $T/z0.log $T/z1.log)"

finish
