#!/usr/bin/env bash
# wire_ps.sh - --wire bf16|fp16 on the parameter server (#14 item 4): every placement the same bits, exact per-rank bytes (56 + 2 per element), loss near fp32's, fp16 with a loss scale, async, DataParallel
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.." || exit 1
SMALL="--layers 64,128,10 --train-samples 2048 --eval-samples 256"
S=30

# run NAME OPTS...: one job at N = 3 on the synthetic data, its report in $T/NAME.json
run() {
    local name=$1; shift
    if $BIN train -n 3 --sync ps --steps $S $SMALL -q --report $T/$name.json "$@" >$T/$name.log 2>&1; then return 0; fi
    bad "run $name ($*)" "$(tail -n 3 $T/$name.log)"
    return 1
}

# ---- (a) every placement gives the same bits: the same rounding, the same rank-order sums -------
# ---- (b) every rank's bytes equal docs/ps-protocol.md's formulas with P = 2 bytes a parameter -----------
# traffic_check NAME REPORT [FP32-REPORT]: each worker's bytes sent and received equal the head
# comment's formula for its placement (P on the wire, P4 = 4 n for the fp32 start); nothing
# dropped; with an fp32 run of the same job, each rank's payload bytes of the steps halve: the
# difference is exactly S x half the fp32 run's step payload.
traffic_check() {
    $PY - "$2" "${3:-}" <<'EOF' >$T/traffic.log 2>&1 && ok "$1 ($(cat $T/traffic.log))" || bad "$1" "$(cat $T/traffic.log)"
import json, sys
def want_bytes(r, el=None, H=56, S=None):
    c = r["config"]
    S = r["summary"]["steps"] if S is None else S
    N = r["run"]["world"]
    el = (4 if c["wire"] == "fp32" else 2) if el is None else el
    n = sum(a * b + b for a, b in zip(c["layers"], c["layers"][1:]))
    per = max(1, int(float(c["bucket-mb"]) * 1048576 / 4))
    buckets, hi = [], n
    while hi > 0:
        buckets.append((max(0, hi - per), hi)); hi -= per
    pl = c["ps-placement"]
    K = N if pl == "sharded" else int(c["ps-servers"]) if pl == "dedicated" else 1
    rng = [(k * (n // K) + min(k, n % K), k * (n // K) + min(k, n % K) + n // K + (k < n % K)) for k in range(K)]
    nsl_k = [sum(1 for lo, hi in buckets if min(hi, b) > max(lo, a)) for a, b in rng]
    nsl = sum(nsl_k)
    P, P4 = el * n, 4 * n
    want = {}
    for k in range(N):
        if pl == "colocated":
            want[k] = (S * (P + nsl * H) + H, S * (P + nsl * H) + P4 + nsl * H)
        elif pl == "dedicated":
            want[k] = ((S * (P + nsl * H) + S * K * H + P4 + nsl * H + K * H, S * (P + nsl * H)) if k == 0 else
                       (S * (P + nsl * H) + 2 * K * H, S * (P + nsl * H) + P4 + nsl * H))
        else:
            Q = [el * (b - a) + H * m for (a, b), m in zip(rng, nsl_k)]
            R = [4 * (b - a) + H * m for (a, b), m in zip(rng, nsl_k)]
            step = sum(Q) - Q[k] + (N - 1) * Q[k]
            if k == 0:
                want[k] = (S * step + S * (N - 1) * H + sum(R) - R[0] + (N - 1) * R[0], S * step + (N - 1) * H)
            else:
                want[k] = (S * step + (N - 1) * H + (N - 2) * R[k], S * step + S * H + R[k] + sum(R) - R[k] + (N - 2) * H)
    if pl == "colocated":  # rank 0 serves the others: what they receive it sends, and the other way
        want[0] = tuple((N - 1) * want[1][i] for i in (1, 0))
    return want
def check(r):
    want, bad = want_bytes(r), []
    for e in r["ranks"]:
        if e.get("role", "worker") != "worker":
            continue
        t = e["traffic"]
        got = (t["bytes_sent"], t["bytes_received"])
        if got != want[e["rank"]] or t["dropped"]:
            bad.append("%s rank %d: sent/received %s, want %s, dropped %d" % (r["config"]["wire"], e["rank"], got, want[e["rank"]], t["dropped"]))
    assert not bad, "; ".join(bad)
    return want
r = json.load(open(sys.argv[1]))
want = check(r)
out = "rank 1 sends %d" % want[1][0]
if sys.argv[2]:
    # headers do not halve, the payloads of the steps do: fp32 - bf16 = the steps' 16-bit payload
    f = json.load(open(sys.argv[2]))
    check(f)
    a, b = want_bytes(r, 2, 0), want_bytes(r, 2, 0, 0)
    for e, g in zip(r["ranks"], f["ranks"]):
        if e.get("role", "worker") != "worker":
            continue
        k = e["rank"]
        for i, key in enumerate(("bytes_sent", "bytes_received")):
            d = g["traffic"][key] - e["traffic"][key]
            assert d == a[k][i] - b[k][i], "rank %d %s: fp32 - bf16 = %d, the steps' bf16 payload %d" % (k, key, d, a[k][i] - b[k][i])
    out += ", fp32 %d: the steps' payload halved on every rank" % f["ranks"][1]["traffic"]["bytes_sent"]
print(out)
EOF
}

hashes=()
for spec in "colocated:" "dedicated:--ps-placement dedicated --ps-servers 2" "sharded:--ps-placement sharded"; do
    pl=${spec%%:*}; opts=${spec#*:}
    run $pl-fp32 --seed 3 $opts || continue
    run $pl-bf16 --seed 3 --wire bf16 $opts || continue
    traffic_check "traffic formula: $pl, bf16, every rank (56 + 2 n per message)" $T/$pl-bf16.json $T/$pl-fp32.json
    hashes+=("$($PY -c "import json; r=json.load(open('$T/$pl-bf16.json')); print(' '.join(sorted({e['params_hash'] for e in r['ranks'] if 'params_hash' in e})))")")
done
# a split plan (several buckets over two servers): the formula's slices
run ded-split --seed 3 --wire bf16 --ps-placement dedicated --ps-servers 2 --bucket-mb 0.01 \
    && traffic_check "traffic formula: dedicated, bf16, buckets of 0.01 MiB" $T/ded-split.json
run sh-split --seed 3 --wire bf16 --ps-placement sharded --bucket-mb 0.01 \
    && traffic_check "traffic formula: sharded, bf16, buckets of 0.01 MiB" $T/sh-split.json
if [ ${#hashes[@]} = 3 ] && [ "${hashes[0]}" = "${hashes[1]}" ] && [ "${hashes[1]}" = "${hashes[2]}" ] && [ "${hashes[0]// /}" = "${hashes[0]}" ]; then
    ok "bf16: colocated, dedicated and sharded give one params_hash on every rank (${hashes[0]})"
else
    bad "bf16: one params_hash over the placements" "${hashes[*]}"
fi
$PY -c "import json,sys; h={json.load(open('$T/%s.json' % p))['ranks'][0]['params_hash'] for p in ('colocated-fp32','colocated-bf16')}; sys.exit(len(h) != 2)" \
    && ok "bf16 is not fp32 (the rounding happened)" || bad "bf16 differs from fp32" "same params_hash"
# a device that is not host memory (cpu-async: a GPU's staging and asynchronous copies): the
# decode and encode through host staging give the same bits (sharded: every rank a server)
for pl in colocated sharded; do
    run $pl-async-dev --seed 3 --wire bf16 --ps-placement $pl --device cpu-async \
        && $PY -c "import json,sys; h={e['params_hash'] for p in ('$pl-bf16','$pl-async-dev') for e in json.load(open('$T/%s.json' % p))['ranks']}; sys.exit(len(h) != 1)" \
        && ok "bf16 $pl on cpu-async == cpu, bitwise" || bad "bf16 $pl on cpu-async == cpu" "params_hash differs"
done

# ---- (c) the loss after 30 steps near fp32's -------------------------------------------------
# Measured (2026-12-01, this script's job: N = 3, 64-128-10, 2048 samples, 30 steps, seeds 1-20):
# the largest |loss(wire) - loss(fp32)| over the 30-step curve was 5.7e-4 under bf16 (seed 14;
# 2.0e-4 at step 29) and 1.5e-4 under fp16 (seed 12; 1.3e-4 at step 29), fp16 with --loss-scale
# 1024 the same bits as fp16 (no gradient here is small enough for the scale to matter); the
# losses themselves are 0.34-0.42. Tolerances: 2e-3 (bf16) and 1e-3 (fp16), 3.5x and 6.8x the worst.
loss_check() { # NAME FP32 WIRE TOL
    $PY - "$2" "$3" "$4" <<'EOF' >$T/loss.log 2>&1 && ok "$1 ($(cat $T/loss.log))" || bad "$1" "$(cat $T/loss.log)"
import json, math, sys
a = json.load(open(sys.argv[1]))["summary"]["loss_curve"]
b = json.load(open(sys.argv[2]))["summary"]["loss_curve"]
tol = float(sys.argv[3])
assert len(a) == len(b) > 0, "%d and %d points" % (len(a), len(b))
d = max(abs(x[1] - y[1]) for x, y in zip(a, b))
assert all(math.isfinite(y[1]) for y in b), "non-finite loss"
assert d <= tol, "largest difference %.3e over the curve, tolerance %g" % (d, tol)
assert b[-1][1] < b[0][1], "no progress: %s .. %s" % (b[0], b[-1])
print("largest |dloss| %.2e <= %g" % (d, tol))
EOF
}
for seed in 3 14; do
    [ $seed = 3 ] || run colocated-fp32-$seed --seed $seed || continue
    f=$T/colocated-fp32.json; [ $seed = 3 ] || f=$T/colocated-fp32-$seed.json
    [ $seed = 3 ] || run colocated-bf16-$seed --seed $seed --wire bf16 || continue
    b=$T/colocated-bf16.json; [ $seed = 3 ] || b=$T/colocated-bf16-$seed.json
    loss_check "bf16 loss within 2e-3 of fp32 (seed $seed)" $f $b 2e-3
    # ---- (d) fp16, with and without a loss scale
    run fp16-$seed --seed $seed --wire fp16 && loss_check "fp16 loss within 1e-3 of fp32 (seed $seed)" $f $T/fp16-$seed.json 1e-3
    run fp16s-$seed --seed $seed --wire fp16 --loss-scale 1024 \
        && loss_check "fp16 --loss-scale 1024 loss within 1e-3 of fp32 (seed $seed)" $f $T/fp16s-$seed.json 1e-3
done
[ -f $T/fp16s-3.json ] && traffic_check "traffic formula: colocated, fp16 --loss-scale 1024" $T/fp16s-3.json

# ---- (e) async under bf16: runs, reports staleness -------------------------------------------
if run async --seed 3 --wire bf16 --ps-consistency async; then
    $PY - $T/async.json <<'EOF' >$T/as.log 2>&1 && ok "async under bf16 runs and reports staleness ($(cat $T/as.log))" || bad "async under bf16" "$(cat $T/as.log)"
import json, math
r = json.load(open(__import__("sys").argv[1]))
st = r["summary"]["staleness"]
w = [e for e in r["ranks"] if e.get("role", "worker") == "worker"]
assert all("staleness" in e for e in w), "a worker without staleness"
assert all(e["traffic"]["dropped"] == 0 for e in r["ranks"]), "dropped"
lc = r["summary"]["loss_curve"]
assert all(math.isfinite(x[1]) for x in lc) and lc[-1][1] < lc[0][1], "loss %s .. %s" % (lc[0], lc[-1])
print("staleness max %s mean %.2f" % (st["max"], st["mean"]))
EOF
fi

# ---- (f) DataParallel under bf16: runs; every rank's bytes equal the formula --------------------
# Per step rank 0 sends (N - 1)(P + 3H) + 4 (B - L_0)(D + 1 + C) and receives
# (N - 1)(P + (nb + 1) H) + 4 (B - L_0) C; once (N - 1) H received (PULL) and (N - 1)(P4 - P) sent
# (the first replicate is the fp32 start).
if run dp --seed 3 --wire bf16 --ps-mode dataparallel --global-batch 96; then
    $PY - $T/dp.json <<'EOF' >$T/dp.log 2>&1 && ok "dataparallel bf16: every rank's bytes equal the formula ($(cat $T/dp.log))" || bad "dataparallel bf16 traffic" "$(cat $T/dp.log)"
import json, math, sys
r = json.load(open(sys.argv[1]))
c, S, N = r["config"], r["summary"]["steps"], r["run"]["world"]
layers = c["layers"]
D, C = layers[0], layers[-1]
n = sum(a * b + b for a, b in zip(layers, layers[1:]))
H, P, P4 = 56, 2 * n, 4 * n
nb = math.ceil(n / max(1, int(c["bucket-mb"] * 1048576 / 4)))
G, data = c["global-batch"], c["train-samples"]
spe = math.ceil(data / G)
rows = [min(G, data - (s % spe) * G) for s in range(S)]
L0 = [min(math.ceil(B / N), B) for B in rows]
sent = sum((N - 1) * (P + 3 * H) + 4 * (B - l) * (D + 1 + C) for B, l in zip(rows, L0)) + (N - 1) * (P4 - P)
recv = sum((N - 1) * (P + (nb + 1) * H) + 4 * (B - l) * C for B, l in zip(rows, L0)) + (N - 1) * H
t = r["ranks"][0]["traffic"]
got = (t["bytes_sent"], t["bytes_received"])
assert got == (sent, recv) and all(e["traffic"]["dropped"] == 0 for e in r["ranks"]), "rank 0 sent/received %s, want %s" % (got, (sent, recv))
def chunk(B, k):
    per = math.ceil(B / N)
    return min(per, max(0, B - k * per))
for e in r["ranks"][1:]:  # rank k > 0: PULL, pushes, logits; replicates (the first fp32), batch, dlogits
    k, lens = e["rank"], [chunk(B, e["rank"]) for B in rows]
    w = (H + S * (P + nb * H) + sum(H + 4 * L * C for L in lens),
         sum((H + P) + (H + 4 * L * (D + 1)) + (H + 4 * L * C) for L in lens) + P4 - P)
    g = (e["traffic"]["bytes_sent"], e["traffic"]["bytes_received"])
    assert g == w, "rank %d sent/received %s, want %s" % (k, g, w)
# rank 0 holds the last update; the others the last replicate (a step behind, as under fp32): equal
assert len({e["params_hash"] for e in r["ranks"] if e["rank"] > 0}) == 1, "the replicas differ"
lc = r["summary"]["loss_curve"]
assert all(math.isfinite(x[1]) for x in lc) and lc[-1][1] < lc[0][1], "loss %s .. %s" % (lc[0], lc[-1])
print("sent %d received %d" % got)
EOF
    run dp-async-dev --seed 3 --wire bf16 --ps-mode dataparallel --global-batch 96 --device cpu-async \
        && $PY -c "import json,sys; h=[[e['params_hash'] for e in json.load(open('$T/%s.json' % p))['ranks']] for p in ('dp','dp-async-dev')]; sys.exit(h[0] != h[1])" \
        && ok "dataparallel bf16 on cpu-async == cpu, bitwise (the replicate decoded through staging)" \
        || bad "dataparallel bf16 on cpu-async == cpu" "params_hash differs"
fi

finish
