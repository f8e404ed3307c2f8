#!/usr/bin/env bash
# shipped.sh - the matrices we ship that run in under a minute on 2 cores (quick, dataparallel, models, a reduced stragglers, memory at N = 2 and 4; quick-link in link.sh) run, and `claims` on each gives only verdicts about what the folder measured: no FAIL without a measured why
. "$(dirname "$0")/lib.sh"

# run_matrix NAME FILE: the matrix into $T/NAME, then claims; leaves the claims output in $T/NAME.claims
run_matrix() {
    local t0=$SECONDS
    if timeout 300 $BIN matrix "$2" --out "$T/$1" >"$T/$1.log" 2>&1; then ok "$1: every run ok ($((SECONDS - t0)) s)"
    else bad "$1: the matrix" "$(grep -E 'FAILED|TIMEOUT|DIVERGED|DIFFER|error' "$T/$1.log" | head -n 3)"; return 1; fi
    $BIN claims "$T/$1" >"$T/$1.claims" 2>&1
    if $PY tests/claims_explained.py "$T/$1/claims.json" >"$T/$1.why" 2>&1; then
        ok "$1: no FAIL without a measured why$( [ -s "$T/$1.why" ] && echo " ($(tr '\n' ';' <"$T/$1.why"))")"
    else bad "$1: a FAIL nothing explains" "$(cat "$T/$1.why")"; fi
}
# verdict NAME K: claim K's verdict in NAME's claims output
verdict() { grep -E "^$2 +" "$T/$1.claims" | awk '{print $2}'; }

run_matrix quick experiments/matrices/quick.json
for k in 1 2 4 5; do
    [ "$(verdict quick $k)" = PASS ] && ok "quick: claim $k PASS" || bad "quick: claim $k $(verdict quick $k)" "$(grep -A6 -E "^$k " "$T/quick.claims")"
done

# DataParallel's two steps side by side: claim 2 fits each ps series apart (push, dataparallel; per
# global batch), with rank 0's data messages taken out of the dataparallel ones, and every series holds
run_matrix dataparallel experiments/matrices/dataparallel.json
[ "$(verdict dataparallel 2)" != FAIL ] && ok "dataparallel: claim 2 does not FAIL ($(verdict dataparallel 2))" || bad "dataparallel: claim 2 FAILs" "$(grep -A14 -E '^2 ' "$T/dataparallel.claims")"
$PY - "$T/dataparallel/claims.json" <<'PY' && ok "dataparallel: claim 2's four ps series, one law each, each x3 from N = 2 to 4 within 15%" || bad "dataparallel: claim 2's series" "$(grep -A14 -E '^2 ' "$T/dataparallel.claims")"
import json, sys
c = json.load(open(sys.argv[1]))[1]["numbers"]["ps"]
names = sorted(s["series"] for s in c)
assert len(c) == 4 and len(set(names)) == 4, names
assert sum("dataparallel" in n for n in names) == 2 and sum("push" in n for n in names) == 2, names
for s in c:
    assert abs(s["ratio"] / s["expected_ratio"] - 1) <= 0.15, s
    assert ("dp_data_per_step_bytes" in s) == ("dataparallel" in s["series"]), s
PY

# the imbalance by model: claim 2 PASSes with every ps series apart (before: push and dataparallel
# pooled, R^2 0.29 to 0.84)
run_matrix models experiments/matrices/models.json
for k in 1 2 5; do
    [ "$(verdict models $k)" = PASS ] && ok "models: claim $k PASS" || bad "models: claim $k $(verdict models $k)" "$(grep -A8 -E "^$k " "$T/models.claims")"
done

# where a server wins, reduced (ring, ps sync and async; no straggler and one): claim 7 decided;
# claim 8 names the runs outside its conditions (a straggler, async, a server's pipeline fill and drain
# not small beside its line) and, with no k = n pair left, is NOT-RUN saying why
$PY - experiments/matrices/stragglers.json "$T/stragglers.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["axes"]["variants"] = {k: v for k, v in m["axes"]["variants"].items() if k in ("ring", "ps-sync", "ps-async")}
m["axes"]["straggler"] = ["0:0", "3:30"]
m["name"] += "-reduced"
json.dump(m, open(sys.argv[2], "w"))
PY
run_matrix stragglers "$T/stragglers.json"
[ "$(verdict stragglers 7)" = PASS ] && ok "stragglers: claim 7 PASS" || bad "stragglers: claim 7 $(verdict stragglers 7)" "$(grep -A8 -E '^7 ' "$T/stragglers.claims")"
if [ "$(verdict stragglers 8)" = NOT-RUN ] && grep -q "left out non-colocated PS n=4: --straggler 3:30" "$T/stragglers.claims" &&
   grep -q "left out non-colocated PS n=4: --ps-consistency async" "$T/stragglers.claims" &&
   grep -q "left out non-colocated PS n=4: not bandwidth-bound" "$T/stragglers.claims"; then
    ok "stragglers: claim 8 NOT-RUN, each run outside its conditions named with its reason"
else bad "stragglers: claim 8" "$(grep -A12 -E '^8 ' "$T/stragglers.claims")"; fi
# where the state lives, at N = 2 and 4 (N = 8 adds half the runs and nothing the formulas do not say):
# claim 12 PASSes on every ZeRO and DDP run, every claim keeps its line in a table of this many runs,
# and the activation-heavy gpt keeps its activations whatever the stage
$PY - experiments/matrices/memory.json "$T/memory.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["axes"]["ranks"] = [2, 4]
m["name"] += "-reduced"
json.dump(m, open(sys.argv[2], "w"))
PY
run_matrix memory "$T/memory.json"
[ "$(verdict memory 12)" = PASS ] && ok "memory: claim 12 PASS" || bad "memory: claim 12 $(verdict memory 12)" "$(grep -A12 -E '^12 ' "$T/memory.claims")"
[ "$(grep -cE '^[0-9]+ +(PASS|FAIL|NOT-RUN) ' "$T/memory.claims")" = 12 ] && ok "memory: twelve claim lines, each starting its own line" \
    || bad "memory: the claims table" "$(grep -nE '^[0-9]+ ' "$T/memory.claims" | cut -c1-60)"
$PY - "$T/memory/claims.json" <<'PY' && ok "memory: ZeRO's model states fall with N and stage, the ring's stay 16 Psi; the heavy gpt's activations dwarf them" || bad "memory: claim 12's numbers" "$(grep -A12 -E '^12 ' "$T/memory.claims" | head -n 20)"
import json, sys
z = json.load(open(sys.argv[1]))[11]["numbers"]["model_states"]
by = {}
for m in z:
    by.setdefault(m["run"].split(",variant=")[0], {})[(m["architecture"], m["ranks"])] = m
assert len(by) == 4 and all(len(v) == 8 for v in by.values()), sorted(by)
for conf, v in by.items():
    s = lambda a, n: v[(a, n)]["measured_bytes"]["model_states"]
    psi = v[("ring", 2)]["psi"]
    assert s("ring", 2) == s("ring", 4) == 16 * psi, conf
    assert s("zero-3", 4) < s("zero-3", 2) < s("zero-2", 2) < s("zero-1", 2) < s("ring", 2), conf
    assert s("zero-3", 4) < s("zero-2", 4), conf
    assert s("zero-1", 4) < s("zero-1", 2), conf
heavy = [v for conf, v in by.items() if "seq-len=128" in conf][0]
assert all(m["model_states_share"] < 0.07 for m in heavy.values()), heavy
PY
finish
