#!/usr/bin/env bash
# bits.sh - same bits on every rank, checked: bench --inputs random and the claims' params_hash catch an all-reduce whose sum order depends on the rank, which exact inputs and the loss curve do not
#
# The culprit is built here, not shipped: lab 5's back end with an all-to-all whose every rank
# adds the others' buffers starting from its own (a different order on every rank), compiled
# against the CPU-only build's library in a folder of its own.
. "$(dirname "$0")/lib.sh"
lib=build/nocuda
[ -f "$lib/libringside.a" ] && [ -f "$lib/obj/experiments/main.o" ] || { echo "SKIP: no CPU-only build in $lib (make CUDA=0 BUILD=$lib)"; exit 0; }
mkdir -p "$T/src/allreduce"
ln -s "$PWD/common" "$T/src/common"
$PY - allreduce/student.c "$T/src/allreduce/student.c" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
body = '''static int student_allreduce(Student *s, float *buf, size_t count) {
    const int N = s->world, r = s->rank;
    float *mine = malloc(count * sizeof(float) + 1);
    if (!mine) return RS_ERR_RUNTIME;
    memcpy(mine, buf, count * sizeof(float));
    int rc = RS_OK;
    for (int p = 0; p < N && rc == RS_OK; p++)
        if (p != r) rc = student_send(s, p, 0, mine, count);
    /* the others' buffers added starting after this rank: every rank sums in its own order */
    for (int k = 1; k < N && rc == RS_OK; k++) rc = student_recv(s, (r + k) % N, 0, buf, count, STUDENT_ADD);
    free(mine);
    return rc;
}
'''
s2 = re.sub(r"static int student_allreduce\(Student \*s, float \*buf, size_t count\) \{.*?\n\}\n", body, s, count=1, flags=re.S)
assert s2 != s
open(sys.argv[2], "w").write(s2)
PY
cflags=$(pkg-config --cflags libzmq libcjson openblas 2>/dev/null)
libs=$(pkg-config --libs libzmq libcjson openblas zlib 2>/dev/null)
if cc -O2 -std=gnu11 -pthread -I. $cflags -c "$T/src/allreduce/student.c" -o "$T/student.o" 2>"$T/cc.log" &&
   cc -pthread -o "$T/ringside" "$lib/obj/experiments/main.o" "$T/student.o" "$lib/libringside.a" $libs -lm -ldl 2>>"$T/cc.log"; then
    ok "an order-dependent all-reduce builds in place of lab 5's"
else
    bad "building the order-dependent all-reduce" "$(tail -n 5 "$T/cc.log")"; finish; exit 1
fi
ODD=$T/ringside

# exact inputs cannot see it: every order of small integers gives the exact sum
expect_status "exact inputs: the order-dependent sum passes bench's #wrong" 0 "$ODD" bench -n 3 --sync student -b 4K -e 64K -f 4 --timeout 20
# random inputs can: the ranks' results hash differently
expect_status "random inputs: bench fails (exit 4)" 4 "$ODD" bench -n 3 --sync student --inputs random -b 4K -e 64K -f 4 --timeout 20
grep -q "ranks hold different bits" "$T/last.log" && ok "the error says the ranks hold different bits" || bad "random-inputs message" "$(tail -n 3 "$T/last.log")"
# the project's back ends leave the same bits everywhere
for s in ring ps; do
    expect_status "random inputs: $s leaves the same bits on every rank" 0 $BIN bench -n 3 --sync $s --inputs random -b 4K -e 256K -f 4 --timeout 20
done
# training: the loss curve still matches (claim 5's first half), the hashes do not
M="--layers 784,64,10 --train-samples 1024 --eval-samples 64 --steps 20 --seed 4 --global-batch 96 --quiet --timeout 20"
mkdir -p "$T/runs"
$BIN train --sync none $M --report "$T/runs/none.json" >/dev/null 2>&1
"$ODD" train -n 3 --sync student $M --report "$T/runs/student.json" >"$T/odd.log" 2>&1
$BIN train -n 3 --sync ring $M --report "$T/runs/ring.json" >/dev/null 2>&1
$PY - "$T/runs/student.json" "$T/runs/ring.json" <<'PY' && ok "params_hash: the order-dependent ranks differ, the ring's agree" || bad "params_hash" "$(cat "$T/odd.log")"
import json, sys
odd, ring = (json.load(open(p)) for p in sys.argv[1:])
h = lambda r: {e["params_hash"] for e in r["ranks"]}
assert len(h(odd)) > 1 and len(h(ring)) == 1, (h(odd), h(ring))
PY
$BIN claims "$T/runs" >"$T/claims.log" 2>&1
grep -A12 -E "^5 " "$T/claims.log" | grep -q "other parameters than rank 0" && grep -Eq "^5 +FAIL" "$T/claims.log" &&
    ok "claim 5 FAILs on the order-dependent run, naming the parameters that differ" || bad "claim 5 on params_hash" "$(grep -A12 -E '^5 ' "$T/claims.log")"
finish
