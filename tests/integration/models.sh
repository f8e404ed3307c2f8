#!/usr/bin/env bash
# models.sh - lenet and gpt on every back end: N ranks with a global batch = one rank with that batch, DataParallel's gather of B T V logits to the byte, AdamW's moments on the process that updates, refusals
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.." || exit 1
LENET="--model lenet --train-samples 512 --eval-samples 64 --seed 3"
GPT="--model gpt --vocab 64 --n-layer 2 --n-head 2 --n-embd 32 --seq-len 16 --train-samples 512 --eval-samples 32 --seed 3 --optimizer adamw --lr 0.003"
G=32 # a global batch 3 does not divide: chunks of 11, 11, 10

# ---- equivalence: 3 ranks with --global-batch 32 = one rank with --batch 32, 20 steps -------------
# The parameters' tolerance: gpt's are smooth in the sum order (1e-4, as the loss curves); lenet's
# max-pools and ReLUs are not: a last-bit difference between one rank's gradient sum and three
# ranks' can flip which of two near-equal inputs a pool keeps (or the sign of a pre-activation),
# which moves that input's whole gradient, and 20 steps carry it into thousands of parameters
# (measured over seeds 1-4: up to 4.1e-4, while the loss curves agree to 3.4e-6), so 2e-3 for lenet.
for m in lenet gpt; do
    M=$LENET ptol=2e-3; [ $m = gpt ] && M=$GPT ptol=1e-4
    if ! $BIN train --sync none --batch $G --steps 20 $M -q --report $T/$m-one.json --save-params $T/$m-one.bin \
        >$T/one.log 2>&1; then
        bad "$m: one rank, batch $G" "$(tail -n 3 $T/one.log)"
        continue
    fi
    for v in "ring:--sync ring" "ps:--sync ps" "ps-dedicated:--sync ps --ps-placement dedicated" \
        "dataparallel:--sync ps --ps-mode dataparallel"; do
        name=${v%%:*} opts=${v#*:}
        if $BIN train -n 3 $opts --global-batch $G --steps 20 $M -q --report $T/$m-$name.json \
            --save-params $T/$m-$name.bin >$T/run.log 2>&1; then
            $PY tests/compare_runs.py $T/$m-one.json $T/$m-$name.json --params $T/$m-one.bin $T/$m-$name.bin --tol 1e-4 \
                --params-tol $ptol \
                >$T/c.log 2>&1 && ok "$m, $name, 3 ranks = one rank ($(tr '\n' ' ' <$T/c.log))" \
                || bad "$m, $name, 3 ranks = one rank" "$(cat $T/c.log)"
        else
            bad "$m, $name, 3 ranks" "$(tail -n 3 $T/run.log)"
        fi
    done
done

# ---- DataParallel with gpt: rank 0 gathers B T V logits, their gradient and B T labels ------------
# gather = 4 B T (2 V + 1) bytes on rank 0, 0 elsewhere; every message's bytes by formula (H = 56:
# a rank with L rows sends its logits 4 L T V and receives its batch 4 L (T + T), tokens and labels)
$PY - $T/gpt-dataparallel.json <<'EOF' >$T/g.log 2>&1 && ok "gpt dataparallel: $(cat $T/g.log)" || bad "gpt dataparallel gather and traffic" "$(cat $T/g.log)"
import json, math, sys
r = json.load(open(sys.argv[1]))
c, S, N = r["config"], r["summary"]["steps"], r["run"]["world"]
B, T, V, C, L = c["global-batch"], c["seq-len"], c["vocab"], c["n-embd"], c["n-layer"]
n = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C
H, P = 56, 4 * n
nb = math.ceil(n / max(1, int(c["bucket-mb"] * 1048576 / 4)))
spe = math.ceil(c["train-samples"] / B)
rows = [min(B, c["train-samples"] - (s % spe) * B) for s in range(S)]
def chunk(R, k):
    per = math.ceil(R / N)
    return min(per, max(0, R - k * per))
want = {}
for k in range(1, N):
    lens = [chunk(R, k) for R in rows]
    sent = H + S * (P + nb * H) + sum(H + 4 * l * T * V for l in lens)
    recv = sum((H + P) + (H + 4 * l * (T + T)) + (H + 4 * l * T * V) for l in lens)
    want[k] = (sent, recv)
want[0] = (sum(want[k][1] for k in range(1, N)), sum(want[k][0] for k in range(1, N)))
bad = []
for e in r["ranks"]:
    k, t = e["rank"], e["traffic"]
    g = e["memory"]["by_tag"]["gather"]
    wg = 4 * B * T * (2 * V + 1) if k == 0 else 0
    if g != wg:
        bad.append("rank %d: gather %d bytes, want 4 B T (2V + 1) = %d" % (k, g, wg))
    if (t["bytes_sent"], t["bytes_received"]) != want[k] or t["dropped"]:
        bad.append("rank %d: sent/received %s, want %s" % (k, (t["bytes_sent"], t["bytes_received"]), want[k]))
assert not bad, "; ".join(bad)
print("gather %d = 4 x %d x %d x (2 x %d + 1) bytes on rank 0; traffic of every rank by formula" % (4 * B * T * (2 * V + 1), B, T, V))
EOF

# ---- AdamW's two moments (8 bytes a parameter) under "optimizer" where the update runs --------------
# ring: on every worker; ps colocated: on rank 0 (the server's thread), none on the others;
# ps dedicated: on the server process, none on the workers. SGD under ps: no worker keeps momentum.
for v in "ring:--sync ring" "ps:--sync ps" "ps-dedicated:--sync ps --ps-placement dedicated" "ps-sgd:--sync ps --optimizer sgd"; do
    name=${v%%:*} opts=${v#*:}
    if ! $BIN train -n 2 $GPT $opts --batch 8 --steps 3 -q --report $T/opt-$name.json >$T/opt.log 2>&1; then
        bad "optimizer state, $name" "$(tail -n 3 $T/opt.log)"
        continue
    fi
    $PY - $T/opt-$name.json $name <<'EOF' >$T/o.log 2>&1 && ok "optimizer state, $name: $(cat $T/o.log)" || bad "optimizer state, $name" "$(cat $T/o.log)"
import json, sys
r, name = json.load(open(sys.argv[1])), sys.argv[2]
P = r["ranks"][0]["memory"]["by_tag"]["params"]
got = [(e.get("role", "worker"), e["memory"]["by_tag"]["optimizer"]) for e in r["ranks"]]
want = {"ring": [("worker", 2 * P)] * 2, "ps": [("worker", 2 * P), ("worker", 0)],
        "ps-dedicated": [("worker", 0), ("worker", 0), ("server", 2 * P)], "ps-sgd": [("worker", 0), ("worker", 0)]}[name]
assert got == want, "optimizer bytes %s, want %s (P = %d bytes of parameters)" % (got, want, P)
if name == "ps-sgd":  # the server's momentum stays under "server": (N + 3) P on rank 0
    s = r["ranks"][0]["memory"]["by_tag"]["server"]
    assert s == 5 * P, "server %d, want (N + 3) P = %d" % (s, 5 * P)
print(", ".join("%s %d" % g for g in got))
EOF
done

# ---- refusals: exit 2 naming the option or file, no report ------------------------------------------
printf 'a short text' >$T/short.txt
: >$T/empty.txt
expect_status "--n-embd not divisible by --n-head" 2 $BIN train -n 2 --model gpt --n-embd 30 --n-head 4 --steps 1 -q --report $T/r.json
grep -q -- "--n-embd 30" $T/last.log && ok "names --n-embd" || bad "names --n-embd" "$(cat $T/last.log)"
expect_status "text shorter than two sequences (ranks refuse)" 2 $BIN train -n 2 --model gpt --data text:$T/short.txt --seq-len 8 --steps 1 -q --report $T/r.json
grep -q "short.txt" $T/last.log && ok "names the file" || bad "names the file" "$(cat $T/last.log)"
expect_status "--seq-len longer than the text" 2 $BIN train --model gpt --data text:$T/short.txt --seq-len 64 --steps 1 -q --report $T/r.json
grep -q -- "--seq-len 64" $T/last.log && ok "names --seq-len" || bad "names --seq-len" "$(cat $T/last.log)"
expect_status "empty text" 2 $BIN train --model gpt --data text:$T/empty.txt --steps 1 -q --report $T/r.json
expect_status "unreadable text" 2 $BIN train --model gpt --data text:$T/none.txt --steps 1 -q --report $T/r.json
expect_status "lenet on 100 inputs" 2 $BIN train --model lenet --layers 100,10 --steps 1 -q --report $T/r.json
expect_status "unknown --model" 2 $BIN train --model rnn --steps 1 -q --report $T/r.json
expect_status "unknown --optimizer" 2 $BIN train --optimizer adam --steps 1 -q --report $T/r.json
[ ! -e $T/r.json ] && ok "no report after refusals" || bad "no report after refusals" "written"
finish
