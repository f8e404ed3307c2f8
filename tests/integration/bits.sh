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
for f in base kernels data model net engine; do ln -s "$PWD/$f" "$T/src/$f"; done
ln -s "$PWD/allreduce/student.h" "$T/src/allreduce/student.h"
ln -s "$PWD/allreduce/mesh.h" "$T/src/allreduce/mesh.h"
cflags=$(pkg-config --cflags libzmq libcjson openblas 2>/dev/null)
libs=$(pkg-config --libs libzmq libcjson openblas zlib 2>/dev/null)
# culprit NAME FILE: a ringside whose lab 5 all-reduce is the body of student_allreduce in FILE, as $T/NAME
culprit() {
    $PY - allreduce/student.c "$T/src/allreduce/student.c" "$2" <<'PY'
import re, sys
s = open(sys.argv[1]).read()
body = open(sys.argv[3]).read()
s2 = re.sub(r"int student_allreduce\(Student \*s, float \*buf, size_t count\) \{.*?\n\}\n", lambda m: body, s, count=1, flags=re.S)
assert s2 != s
s2 = s2.replace('#include "student.h"\n', '#include "student.h"\n#include <stdlib.h>\n#include <string.h>\n', 1)
open(sys.argv[2], "w").write(s2)
PY
    cc -O2 -std=gnu11 -pthread -I. $cflags -c "$T/src/allreduce/student.c" -o "$T/$1.o" 2>"$T/cc.log" &&
        cc -pthread -o "$T/$1" "$lib/obj/experiments/main.o" "$T/$1.o" "$lib/libringside.a" $libs -lm -ldl 2>>"$T/cc.log"
}
cat >"$T/odd.c" <<'C'
int student_allreduce(Student *s, float *buf, size_t count) {
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
C
# the same sum in one order everywhere, then elements 0, 1 (one period of the inputs) and the last (in
# the partial period at the end) off by one on every rank
sed -e 's|starting after this rank: every rank sums in its own order|in rank order, every rank alike|' \
    -e 's|rc = student_recv(s, (r + k) % N, 0, buf, count, STUDENT_ADD);|rc = student_recv(s, (r + k) % N, 0, buf, count, STUDENT_ADD);\n    if (rc == RS_OK) { buf[0] += 1.0f; buf[1] += 1.0f; buf[count - 1] += 1.0f; }|' \
    "$T/odd.c" >"$T/off.c"
if culprit ringside "$T/odd.c" && culprit off "$T/off.c"; then
    ok "an order-dependent all-reduce and one with three wrong elements build in place of lab 5's"
else
    bad "building the culprits" "$(tail -n 5 "$T/cc.log")"; finish; exit 1
fi
ODD=$T/ringside

# bench's #wrong counts every wrong element: 3 per call on each of 3 ranks, 4 timed calls
expect_status "three wrong elements a call: bench fails (exit 4)" 4 "$T/off" bench -n 3 --sync student -b 4K -e 64K -f 4 -w 1 -i 4 --timeout 20
$PY - "$T/last.log" <<'PY' && ok "#wrong is 36 in every row (3 elements x 3 ranks x 4 calls)" || bad "#wrong counts" "$(grep -v '^#' "$T/last.log" | head -n 5)"
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip() and l.lstrip()[0].isdigit()]
assert len(rows) == 3 and all(r[6] == "36" for r in rows), rows
PY

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
"$ODD" train -n 3 --sync student $M --report "$T/runs/student.json" >"$T/odd.log" 2>&1; odd_rc=$?
# the job itself fails: exit 7, naming the ranks whose parameters are not rank 0's, the report kept and marked
[ $odd_rc = 7 ] && ok "train -n 3 on the order-dependent all-reduce exits 7" || bad "train -n 3 on the order-dependent all-reduce exits 7" "exit $odd_rc: $(tail -n 3 "$T/odd.log")"
grep -Eq "error: the replicas drifted apart: ranks? [12](, 2)? end" "$T/odd.log" && ok "  ... its error names the ranks that differ" || bad "  ... its error names the ranks that differ" "$(grep error "$T/odd.log")"
$PY - "$T/runs/student.json" <<'PY' && ok "  ... its report says params_agree false and lists the ranks" || bad "  ... its report marks the replicas" "$(head -c 300 "$T/runs/student.json")"
import json, sys
r = json.load(open(sys.argv[1]))
s, h = r["summary"], {e["rank"]: e["params_hash"] for e in r["ranks"]}
assert s["params_agree"] is False, s["params_agree"]
assert s["params_differ_ranks"] == [k for k in sorted(h) if k and h[k] != h[0]] != [], (s["params_differ_ranks"], h)
PY
expect_status "train -n 3 --sync ring: the replicas agree, exit 0" 0 $BIN train -n 3 --sync ring $M --report "$T/runs/ring.json"
$PY - "$T/runs/student.json" "$T/runs/ring.json" <<'PY' && ok "params_hash: the order-dependent ranks differ, the ring's agree" || bad "params_hash" "$(cat "$T/odd.log")"
import json, sys
odd, ring = (json.load(open(p)) for p in sys.argv[1:])
h = lambda r: {e["params_hash"] for e in r["ranks"]}
assert len(h(odd)) > 1 and len(h(ring)) == 1, (h(odd), h(ring))
PY
# a matrix records such a run as "differ", keeps its report, and --resume keeps it so
cat >"$T/odd.json" <<'JSON'
{"name": "odd", "base": {"device": "cpu", "layers": "784,64,10", "train-samples": 1024, "eval-samples": 64, "steps": 10,
 "seed": 4, "global-batch": 96, "ranks": 3}, "axes": {"sync": ["student"]}, "repeats": 1, "timeout_s": 60}
JSON
for pass in first resume; do
    extra=""; [ $pass = resume ] && extra=--resume
    expect_status "matrix ($pass) with the order-dependent all-reduce: exit 1" 1 "$BIN" matrix "$T/odd.json" --out "$T/oddm" --bin "$ODD" $extra
    $PY - "$T/oddm/summary.json" <<'PY' && ok "  ... its row: status differ, exit 7, the report kept, the ranks named" || bad "  ... its row" "$(grep -E 'DIFFER|error' "$T/last.log" | head -n 3)"
import json, os, sys
s = json.load(open(sys.argv[1]))
row, = s["runs"]
assert row["status"] == "differ" and row["exit_code"] == 7 and s["runs_failed"] == 1, row
assert "other parameters than rank 0" in row["error"] and "2" in row["error"], row["error"]
assert os.path.exists(os.path.join(os.path.dirname(sys.argv[1]), row["report"])), row["report"]
PY
done
grep -q "REPLICAS DIFFER (exit 7)" "$T/last.log" && ok "  ... its progress line says REPLICAS DIFFER (exit 7)" || bad "  ... progress line" "$(cat "$T/last.log" | head -n 5)"
$PY tests/validate_report.py "$T/oddm/summary.json" >"$T/v.log" 2>&1 && ok "  ... the summary validates" || bad "  ... the summary validates" "$(tail -n 3 "$T/v.log")"
$BIN claims "$T/runs" >"$T/claims.log" 2>&1
grep -A12 -E "^5 " "$T/claims.log" | grep -q "other parameters than rank 0" && grep -Eq "^5 +FAIL" "$T/claims.log" &&
    ok "claim 5 FAILs on the order-dependent run, naming the parameters that differ" || bad "claim 5 on params_hash" "$(grep -A12 -E '^5 ' "$T/claims.log")"
finish
