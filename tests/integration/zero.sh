#!/usr/bin/env bash
# zero.sh - --sync zero (ZeRO stages 1-3): stages 1 and 2 the ring's parameters bit for bit (mlp, lenet, gpt; SGD, AdamW; N = 1..4; a bf16 wire; accumulation; nodes), stage 3 at N = 2 too and one rank's within 1e-5 at N = 3, 4; every rank's parameters, optimizer state and gradients by the formulas; the ring's bytes (stage 3: 1.5x); the refusals (exit 2, no report)
. "$(dirname "$0")/lib.sh"
SMALL="--train-samples 512 --eval-samples 64 --batch 16 --steps 4 --device cpu --threads 1 --quiet --timeout 30"
MLP="--model mlp --layers 784,64,10"
LENET="--model lenet"
GPT="--model gpt --n-layer 2 --n-embd 32 --n-head 2 --seq-len 16 --vocab 64"

# same NAME OPTS...: the ring, ZeRO-1 and ZeRO-2 on the same options end with the same parameters on
# every rank; their reports are kept as $T/<tag>-{ring,z1,z2}.json (tag: the options' checksum)
same() {
    local name=$1; shift
    local tag
    tag=$(echo "$*" | cksum | cut -d' ' -f1)
    $BIN train $SMALL "$@" --sync ring --report $T/$tag-ring.json >$T/run.log 2>&1 || { bad "$name: the ring" "$(tail -n 3 $T/run.log)"; return; }
    for st in 1 2; do
        $BIN train $SMALL "$@" --sync zero --zero-stage $st --report $T/$tag-z$st.json >$T/run.log 2>&1 \
            || { bad "$name: zero-$st" "$(tail -n 3 $T/run.log)"; return; }
    done
    if $PY - $T/$tag-ring.json $T/$tag-z1.json $T/$tag-z2.json <<'EOF'
import json, subprocess, sys
runs = [json.load(open(f)) for f in sys.argv[1:]]
hashes = [{e["params_hash"] for e in r["ranks"]} for r in runs]
assert len(hashes[0]) == 1 and hashes[0] == hashes[1] == hashes[2], hashes
assert [r["backend"]["architecture"] for r in runs] == ["ring", "zero-1", "zero-2"]
assert runs[1]["summary"]["loss_curve"] == runs[0]["summary"]["loss_curve"] == runs[2]["summary"]["loss_curve"]
subprocess.run([sys.executable, "tests/validate_report.py"] + sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
EOF
    then ok "$name: zero-1 and zero-2 end on the ring's parameters bit for bit, on every rank"
    else bad "$name" "see above"; fi
}

same "mlp sgd -n 1" $MLP -n 1
same "mlp sgd -n 2" $MLP -n 2
same "mlp sgd -n 3, buckets of 16 KiB" $MLP -n 3 --bucket-mb 0.015625
same "mlp adamw -n 4, buckets of 16 KiB" $MLP -n 4 --optimizer adamw --weight-decay 0.01 --bucket-mb 0.015625
same "lenet adamw -n 3" $LENET -n 3 --optimizer adamw
same "lenet sgd -n 4" $LENET -n 4
same "gpt adamw -n 2" $GPT -n 2 --optimizer adamw --lr 0.001
same "gpt sgd -n 3, buckets of 32 KiB" $GPT -n 3 --bucket-mb 0.03125
same "mlp sgd -n 3, --wire bf16 (gradients bf16, parameters fp32)" $MLP -n 3 --wire bf16
same "mlp sgd -n 2, --accum-steps 2" $MLP -n 2 --accum-steps 2
same "mlp sgd -n 4 --nodes 2 --link 1gbit" $MLP -n 4 --nodes 2 --link 1gbit

# memory by tag, every rank: the shards partition the parameters (each rank holds the ring's chunk
# (r+1) % N of every bucket: floor or ceil of 1/N of it), the optimizer's state 4 (SGD) or 8 (AdamW)
# bytes an element of the shard; zero-1 keeps the whole gradient, zero-2 the shard's pages (plus
# the pages a chunk shares with its neighbours) under grads and the buckets in flight under comm;
# the parameters and activations are the ring's; bytes on the wire: the ring's exactly (fp32)
memory() {
    local name=$1 tag=$2 k=$3 mb=$4
    if $PY - $T/$tag-ring.json $T/$tag-z1.json $T/$tag-z2.json $k $mb <<'EOF'
import json, sys
ring, z1, z2 = (json.load(open(f)) for f in sys.argv[1:4])
k, mb, page = int(sys.argv[4]), float(sys.argv[5]), 4096
N = ring["run"]["world"]
P = ring["ranks"][0]["memory"]["by_tag"]["params"] // 4
per = max(1, int(mb * 1048576 / 4)); first = min(max(1, 1048576 // 4), per)
buckets, hi = [], P  # engine/sync.c's plan: from the end, the first at most 1 MiB
while hi > 0:
    cap = first if not buckets else per
    buckets.append((max(0, hi - cap), hi)); hi = max(0, hi - cap)
def chunk(n, c):  # the ring's chunk c of n over N
    q, r = divmod(n, N)
    lo = c * q + min(c, r)
    return lo, lo + q + (1 if c < r else 0)
total = 0
for r in range(N):
    shard = sum(chunk(hi - lo, (r + 1) % N)[1] - chunk(hi - lo, (r + 1) % N)[0] for lo, hi in buckets)
    total += shard
    a, b, c = (x["ranks"][r]["memory"]["by_tag"] for x in (ring, z1, z2))
    for t in ("params", "activations"):
        assert a[t] == b[t] == c[t], (r, t, a[t], b[t], c[t])
    assert a["optimizer"] == k * 4 * P and b["optimizer"] == c["optimizer"] == k * 4 * shard, (r, a, b, shard)
    assert b["grads"] == 4 * P, (r, b)
    lo_b = shard * 4
    assert lo_b <= c["grads"] <= lo_b + 2 * page * len(buckets) + page, (r, c["grads"], lo_b, len(buckets))
    assert c["comm"] > a["comm"] - 1, (r, c["comm"], a["comm"])  # the ring's lanes and the buckets in flight
    assert c["comm"] <= a["comm"] + 4 * P + page * (len(buckets) + 1), (r, c["comm"], a["comm"])
    ta, tb, tc = (x["ranks"][r]["traffic"] for x in (ring, z1, z2))
    assert ta["bytes_sent"] == tb["bytes_sent"] == tc["bytes_sent"], (r, ta["bytes_sent"], tb["bytes_sent"], tc["bytes_sent"])
    assert ta["bytes_received"] == tb["bytes_received"] == tc["bytes_received"], r
assert total == P, (total, P)
print("N=%d: %d buckets, shards %s of %d" % (N, len(buckets), [x["memory"]["by_tag"]["optimizer"] // (4 * k) for x in z1["ranks"]], P))
EOF
    then ok "$name: optimizer and gradients by the formulas on every rank, the ring's bytes"
    else bad "$name: memory by tag" "see above"; fi
}
memory "mlp sgd -n 3, 16 KiB buckets" "$(echo "$MLP -n 3 --bucket-mb 0.015625" | cksum | cut -d' ' -f1)" 1 0.015625
memory "mlp adamw -n 4, 16 KiB buckets" "$(echo "$MLP -n 4 --optimizer adamw --weight-decay 0.01 --bucket-mb 0.015625" | cksum | cut -d' ' -f1)" 2 0.015625
memory "gpt adamw -n 2, one bucket" "$(echo "$GPT -n 2 --optimizer adamw --lr 0.001" | cksum | cut -d' ' -f1)" 2 25

# the bf16 wire: the gradients' reduce-scatter in 2 bytes an element, the parameters' all-gather in 4
tag=$(echo "$MLP -n 3 --wire bf16" | cksum | cut -d' ' -f1)
check "--wire bf16: the reduce-scatter in bf16, the all-gather in fp32 (3/4 of fp32's bytes, headers aside)" $PY - $T/$tag-z1.json "$(echo "$MLP -n 3" | cksum | cut -d' ' -f1)" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
P, N, steps = r["ranks"][0]["memory"]["by_tag"]["params"] // 4, 3, 4
for e in r["ranks"]:
    want = (N - 1) / N * P * (2 + 4) * steps + (4 * P if e["rank"] < N - 1 else 0)  # and the start's broadcast
    assert want <= e["traffic"]["bytes_sent"] <= 1.02 * want, (e["rank"], e["traffic"]["bytes_sent"], want)
EOF

# over TCP at N = 2 (where the ring's fp32 all-reduce takes one exchange): the same bits and bytes
check "tcp -n 2: zero-2 the ring's bits and bytes" $PY - "$BIN" "$SMALL $MLP -n 2 --transport tcp" $T <<'EOF'
import json, subprocess, sys
b, opts, t = sys.argv[1], sys.argv[2].split(), sys.argv[3]
subprocess.run([b, "train"] + opts + ["--sync", "ring", "--report", t + "/tr.json"], check=True)
subprocess.run([b, "train"] + opts + ["--sync", "zero", "--zero-stage", "2", "--report", t + "/tz.json"], check=True)
a, z = (json.load(open(t + f)) for f in ("/tr.json", "/tz.json"))
assert {e["params_hash"] for e in a["ranks"]} == {e["params_hash"] for e in z["ranks"]}
assert z["summary"]["transport"] == "tcp", z["summary"]["transport"]
for x, y in zip(a["ranks"], z["ranks"]):
    assert x["traffic"]["bytes_sent"] == y["traffic"]["bytes_sent"], (x["traffic"], y["traffic"])
EOF

# bench: the collective (a reduce-scatter, then the owners' chunks all-gathered) exact on every rank
check "bench -n 3 --sync zero: exact sums, a valid report naming zero-1" sh -c "$BIN bench -n 3 --sync zero -b 4 -e 1M -f 16 --report $T/bench.json && $PY tests/validate_report.py $T/bench.json && grep -q '\"zero-1\"' $T/bench.json"

# stage 3 (FSDP's FULL_SHARD): every layer gathered before its forward and its backward. At N = 2 a
# sum of two is the same bits in any order: the ring's parameters exactly; at N = 3 and 4 the layers
# are the buckets (another summation order than the ring's DDP buckets): one rank's with the
# global batch within 1e-5, as equivalence.sh holds the ring
for m in "mlp:$MLP" "lenet:$LENET" "gpt:$GPT"; do
    name=${m%%:*}; opts=${m#*:}
    for opt in sgd adamw; do
        $BIN train $SMALL $opts -n 2 --optimizer $opt --lr 0.01 --sync ring --report $T/s3r.json >$T/run.log 2>&1 &&
            $BIN train $SMALL $opts -n 2 --optimizer $opt --lr 0.01 --sync zero --zero-stage 3 --report $T/s3z.json >>$T/run.log 2>&1 &&
            $PY - $T/s3r.json $T/s3z.json <<'EOF' && ok "$name $opt -n 2: zero-3 the ring's parameters bit for bit" || bad "$name $opt -n 2 zero-3" "$(tail -n 3 $T/run.log)"
import json, subprocess, sys
a, z = (json.load(open(f)) for f in sys.argv[1:])
assert {e["params_hash"] for e in a["ranks"]} == {e["params_hash"] for e in z["ranks"]}, "parameters differ"
assert z["backend"]["architecture"] == "zero-3" and z["summary"]["params_agree"] is True
subprocess.run([sys.executable, "tests/validate_report.py", sys.argv[2]], check=True, stdout=subprocess.DEVNULL)
EOF
    done
done
EQ="--layers 784,64,10 --train-samples 2048 --eval-samples 64 --steps 12 --seed 3 --quiet --device cpu --threads 1"
$BIN train --sync none --batch 96 $EQ --report $T/one.json --save-params $T/one.bin >$T/run.log 2>&1 || bad "one rank" "$(tail -n 3 $T/run.log)"
for n in 3 4; do
    for opt in sgd adamw; do
        if $BIN train -n $n --sync zero --zero-stage 3 --optimizer $opt --global-batch 96 $EQ --report $T/z3.json --save-params $T/z3.bin >$T/run.log 2>&1; then
            [ $opt = sgd ] && check "zero-3 -n $n sgd == one rank (1e-5)" $PY tests/compare_runs.py $T/one.json $T/z3.json --params $T/one.bin $T/z3.bin --tol 1e-5
            [ $opt = adamw ] && check "zero-3 -n $n adamw: every rank the same parameters" $PY -c "import json,sys; r=json.load(open('$T/z3.json')); sys.exit(not r['summary']['params_agree'])"
        else bad "zero-3 -n $n $opt" "$(tail -n 3 $T/run.log)"; fi
    done
done

# stage 3 under accumulation (FSDP's no_sync: the micro-batches' gradients whole, gathers every pass)
# and on nodes: one rank's parameters
for extra in "--accum-steps 2" "--nodes 2 --link 1gbit"; do
    if $BIN train -n 4 --sync zero --zero-stage 3 --global-batch 96 $EQ $extra --report $T/z3x.json --save-params $T/z3x.bin >$T/run.log 2>&1; then
        check "zero-3 -n 4 $extra == one rank (1e-5)" $PY tests/compare_runs.py $T/one.json $T/z3x.json --params $T/one.bin $T/z3x.bin --tol 1e-5
    else bad "zero-3 -n 4 $extra" "$(tail -n 3 $T/run.log)"; fi
done

# stage 3's memory and bytes, every rank: parameters and gradients the shard's pages (each layer's
# chunk (r+1) % N), the optimizer's state K bytes an element of it; each layer gathered twice a
# step (gpt's embedding, kept gathered through the step, once) and reduce-scattered once: with
# the start's broadcast, the bytes are exactly the ring's reduce-scatter plus the gathers, headers aside
check "zero-3 -n 3 gpt adamw: the shard's pages, 1.5x the ring's bytes less the kept embedding's second gather" $PY - "$BIN" "$SMALL $GPT -n 3 --optimizer adamw --lr 0.001" $T <<'EOF'
import json, subprocess, sys
b, opts, t = sys.argv[1], sys.argv[2].split(), sys.argv[3]
subprocess.run([b, "train"] + opts + ["--sync", "zero", "--zero-stage", "3", "--report", t + "/g3.json"], check=True)
subprocess.run([b, "train"] + opts + ["--sync", "ring", "--report", t + "/g3r.json"], check=True)
z, r = (json.load(open(t + f)) for f in ("/g3.json", "/g3r.json"))
N, steps, page = 3, 4, 4096
P = r["ranks"][0]["memory"]["by_tag"]["params"] // 4
V, C, T, L = 64, 32, 16, 2  # the gpt of $GPT: layer 0 wte + wpe, L blocks, the final layer norm
blk = 12 * C * C + 13 * C
layers = [V * C + T * C] + [blk] * L + [2 * C]
assert sum(layers) == P, (layers, P)
def chunk(n, c):
    q, m = divmod(n, N)
    return q + (1 if c < m else 0)
for e in z["ranks"]:
    rk, t = e["rank"], e["memory"]["by_tag"]
    shard = sum(chunk(n, (rk + 1) % N) for n in layers)
    assert t["optimizer"] == 8 * shard, (rk, t["optimizer"], shard)
    for tag in ("params", "grads"):
        assert 4 * shard <= t[tag] <= 4 * shard + (2 * len(layers) + 1) * page, (rk, tag, t[tag], 4 * shard)
    # a reduce-scatter sends chunks r, r-1, ..., r-N+2 of a layer; a gather chunks r+1, r, ..., r-N+3
    # (layer 0 gathered once a step, the others twice); each message a 48-byte header
    rs = sum(chunk(n, (rk - s) % N) for n in layers for s in range(N - 1))
    ag1 = [sum(chunk(n, (rk + 1 - s) % N) for s in range(N - 1)) for n in layers]
    payload = 4 * (rs + ag1[0] + 2 * sum(ag1[1:])) * steps + (4 * P if rk < N - 1 else 0)  # and the start's broadcast
    payload += 4 * sum(ag1)  # and the end's gather of every layer (the evaluation, the hash: params_full)
    got, msgs = e["traffic"]["bytes_sent"], e["traffic"]["messages_sent"]
    assert got == payload + 48 * msgs, (rk, got, payload, msgs)
    ring = [x for x in r["ranks"] if x["rank"] == rk][0]["traffic"]
    b = (4 * P if rk < N - 1 else 0) + 4 * sum(ag1)
    print("rank %d: zero-3 %d payload bytes a step, the ring %d: %.3fx" % (rk, (payload - b) / steps, (ring["bytes_sent"] - 48 * ring["messages_sent"] - b + 4 * sum(ag1)) / steps,
          (payload - b) / (ring["bytes_sent"] - 48 * ring["messages_sent"] - b + 4 * sum(ag1))))
EOF

# bad input: exit 2, a message naming why, nothing started, no report
refused() {
    local name=$1 want=$2; shift 2
    rm -f $T/refused.json
    $BIN train $SMALL $MLP "$@" --report $T/refused.json >$T/refused.log 2>&1; local rc=$?
    if [ $rc = 2 ] && grep -q -- "$want" $T/refused.log && [ ! -e $T/refused.json ]; then ok "refused: $name (exit 2)"
    else bad "refused: $name" "exit $rc, want 2 and '$want': $(tail -n 2 $T/refused.log)"; fi
}
refused "--sync zero without --zero-stage" "without --zero-stage" -n 2 --sync zero
refused "--zero-stage 4" "must be 1, 2 or 3" -n 2 --sync zero --zero-stage 4
refused "--zero-stage 0 said outright" "without --zero-stage" -n 2 --sync zero --zero-stage 0
refused "--zero-stage 2 with --sync ring" "the stages are --sync zero's" -n 2 --sync ring --zero-stage 2
refused "--hierarchical with zero" "no machine-aware form" -n 4 --nodes 2 --hierarchical --sync zero --zero-stage 1
refused "--ps-consistency async with zero" "only the parameter server" -n 2 --sync zero --zero-stage 1 --ps-consistency async
finish
