#!/usr/bin/env bash
# diverged.sh - a run whose loss stops being finite: exit 6 and "diverged" in its report, alike on 1 and N ranks; the validator, matrix, claims and plots never read it as a good loss; an infinite gradient under an FP8 wire diverges at fp32's step; a --trace that cannot be written keeps the report
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
BIN=$(realpath "$BIN")

TINY=(--device cpu --layers 784,32,10 --train-samples 512 --eval-samples 128 --steps 6)
BOOM=(--lr 1e20) # the MLP's first update overflows its logits: the loss is NaN from step 1 on

# ---- 1. one rank and N ranks on the same global batch (48) diverge alike ------------------------
expect_status "1 rank (--sync none): a diverged run exits 6" 6 "$BIN" train --sync none "${TINY[@]}" "${BOOM[@]}" --batch 48 --report "$T/one.json"
if grep -q "the run diverged: the global training loss is nan at step 1 " "$T/last.log"; then ok "  ... and says so, naming the step"
else bad "  ... the message" "$(tail -n 3 "$T/last.log")"; fi
expect_status "3 ring ranks: exit 6" 6 "$BIN" train -n 3 --sync ring "${TINY[@]}" "${BOOM[@]}" --batch 16 --report "$T/ring3.json"
expect_status "2 ps ranks: exit 6" 6 "$BIN" train -n 2 --sync ps "${TINY[@]}" "${BOOM[@]}" --batch 24 --report "$T/ps2.json"
expect_status "a run that stays finite exits 0" 0 "$BIN" train --sync none "${TINY[@]}" --batch 48 --report "$T/fine.json"

if $PY - "$T" >"$T/py.log" 2>&1 <<'EOF'
import json, math, sys
d = sys.argv[1]
def strict(path):  # JSON proper: a bare NaN/Infinity token is refused
    def bare(tok):
        raise ValueError("%s: bare %s token" % (path, tok))
    return json.load(open(path), parse_constant=bare)
reps = {n: strict("%s/%s.json" % (d, n)) for n in ("one", "ring3", "ps2", "fine")}
steps = set()
for n in ("one", "ring3", "ps2"):
    s = reps[n]["summary"]
    assert s["diverged"] is True, (n, s["diverged"])
    k = s["diverged_step"]
    steps.add(k)
    assert s["final_loss"] in ("nan", "inf", "-inf"), (n, s["final_loss"])
    pts = [p[1] for p in s["loss_curve"]]
    assert all(isinstance(v, str) for v in pts[k:]), (n, "a number after the divergence (0 was the old lie)", pts)
    assert all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in pts[:k]), (n, pts)
    assert abs(pts[0] - reps["one"]["summary"]["loss_curve"][0][1]) < 1e-4 * pts[0], (n, pts[0])
assert steps == {1}, ("the same first step on 1, 2 and 3 ranks", steps)
f = reps["fine"]["summary"]
assert f["diverged"] is False and f["diverged_step"] is None and isinstance(f["final_loss"], float) and f["final_loss"] > 0, f
print("ok")
EOF
then ok "1, 2 and 3 ranks: diverged, the same first step (1), \"nan\" from there on (never 0), valid JSON"
else bad "the diverged reports" "$(tail -n 5 "$T/py.log")"; fi

check "the validator takes the four reports" $PY tests/validate_report.py "$T/one.json" "$T/ring3.json" "$T/ps2.json" "$T/fine.json"
# ... and refuses what a reader would misread: a bare NaN, a NaN curve not marked diverged, zeros in its place
$PY - "$T" <<'EOF'
import json, sys
d = sys.argv[1]
r = json.load(open(d + "/ring3.json"))
open(d + "/bare.json", "w").write(json.dumps(r).replace('"nan"', "NaN"))
r["summary"]["diverged"], r["summary"]["diverged_step"] = False, None
json.dump(r, open(d + "/unmarked.json", "w"))
r = json.load(open(d + "/ring3.json"))
r["summary"]["loss_curve"] = [[p[0], 0] if isinstance(p[1], str) else p for p in r["summary"]["loss_curve"]]
r["summary"]["final_loss"] = 0
json.dump(r, open(d + "/zeros.json", "w"))
EOF
for bad_one in bare unmarked zeros; do
    if ! $PY tests/validate_report.py "$T/$bad_one.json" >"$T/v.log" 2>&1; then ok "the validator refuses $bad_one.json: $(head -n 1 "$T/v.log" | sed 's/^[^:]*: //' | cut -c1-90)"
    else bad "the validator takes $bad_one.json" "$(cat "$T/v.log")"; fi
done

# ---- 2. the matrix: status diverged, its report kept, no final loss, and --resume keeps it so ------
cat >"$T/div.json" <<'EOF'
{"name": "div", "base": {"device": "cpu", "layers": "784,32,10", "steps": 6, "train-samples": 512, "eval-samples": 128,
                         "sync": "ring", "ranks": 2, "batch": 24},
 "axes": {"lr": [0.05, 1e20]}, "timeout_s": 60}
EOF
expect_status "a matrix with a diverging cell exits 1" 1 "$BIN" matrix "$T/div.json" --out "$T/m"
if grep -q "lr=1e+20 r1: DIVERGED (exit 6)" "$T/last.log"; then ok "  ... its progress line says DIVERGED (exit 6)"
else bad "  ... progress" "$(cat "$T/last.log")"; fi
summary_check() { # DIR RESUMED
    $PY - "$1" "$2" <<'EOF'
import csv, json, os, sys
out, resumed = sys.argv[1], sys.argv[2] == "1"
s = json.load(open(os.path.join(out, "summary.json")))
assert s["runs_failed"] == 1 and s["runs_diverged"] == 1, (s["runs_failed"], s["runs_diverged"])
by = {r["cell"]: r for r in s["runs"]}
d, f = by["lr=1e+20"], by["lr=0.05"]
assert d["status"] == "diverged" and d["exit_code"] == 6 and d["resumed"] == resumed, d
assert d["final_loss"] is None and d["final_accuracy"] is None and d["diverged_step"] == 1, d
assert d["report"] and json.load(open(os.path.join(out, d["report"])))["summary"]["diverged"] is True
assert f["status"] == "ok" and f["final_loss"] > 0 and f["diverged_step"] is None, f
rows = list(csv.DictReader(open(os.path.join(out, "summary.csv"))))
c = {r["cell"]: r for r in rows}["lr=1e+20"]
assert c["status"] == "diverged" and c["final_loss"] == "" and c["diverged_step"] == "1", c
EOF
}
check "  ... its row: status diverged, exit 6, final_loss null (CSV: empty), diverged_step 1, the report kept" summary_check "$T/m" 0
check "  ... the summary validates" $PY tests/validate_report.py "$T/m/summary.json" "$T/m/lr=1e+20-r1.json"
expect_status "--resume: still exits 1" 1 "$BIN" matrix "$T/div.json" --out "$T/m" --resume
check "  ... and keeps the diverged run diverged (not ok)" summary_check "$T/m" 1

# ---- 3. claims: a diverged run never counts as a good loss ---------------------------------------
mkdir -p "$T/c5a" "$T/c5b" "$T/c7a" "$T/c7b"
cp "$T/one.json" "$T/ring3.json" "$T/ps2.json" "$T/c5a/"
cp "$T/ring3.json" "$T/ps2.json" "$T/c5b/"
$PY - "$T" <<'EOF'
import json, sys
d = sys.argv[1]
one, ring = json.load(open(d + "/one.json")), json.load(open(d + "/ring3.json"))
fine = json.load(open(d + "/fine.json"))["summary"]["loss_curve"]
def finite(rep):  # the same configuration, its loss finite all along
    rep = json.loads(json.dumps(rep))
    rep["summary"].update(loss_curve=fine, final_loss=fine[-1][1], diverged=False, diverged_step=None)
    return rep
json.dump(finite(one), open(d + "/c5b/one.json", "w"))  # claim 5: a sound baseline, diverged ps and ring runs
def slow(rep, how=None):  # claim 7: a straggler; the async server twice the ring's throughput
    rep = json.loads(json.dumps(rep))
    rep["config"]["straggler"] = "1:5"
    if how:
        rep["config"].update({"sync": "ps", "ps-consistency": how})
        rep["backend"].update({"name": "ps", "family": "ps", "architecture": "ps-colocated", "lockstep": False})
        rep["summary"]["throughput_samples_per_s"] *= 2
    return rep
json.dump(slow(ring, "async"), open(d + "/c7a/async.json", "w"))   # async diverged
json.dump(slow(finite(ring)), open(d + "/c7a/ring.json", "w"))
json.dump(slow(finite(ring), "async"), open(d + "/c7b/async.json", "w"))
json.dump(slow(ring), open(d + "/c7b/ring.json", "w"))             # the ring diverged
EOF
verdict() { $PY -c "import json,sys; print(json.load(open(sys.argv[1]))[int(sys.argv[2]) - 1]['verdict'])" "$1/claims.json" "$2"; }
claims_case() { # NAME DIR CLAIM WANT_VERDICT WANT_TEXT
    "$BIN" claims "$2" >"$T/claims.log" 2>&1
    local v; v=$(verdict "$2" "$3" 2>/dev/null)
    if [ "$v" = "$4" ] && grep -q -- "$5" "$T/claims.log"; then ok "$1: claim $3 $v, \"$5\""
    else bad "$1" "claim $3: $v, want $4 with \"$5\": $(grep -A4 "^$3 " "$T/claims.log" | head -n 6)"; fi
}
claims_case "claims: ps and ring diverged beside a diverged 1-rank baseline: left out, never PASS" "$T/c5a" 5 NOT-RUN "left out, its 1-rank baseline diverged"
claims_case "claims: ps and ring diverged beside a sound baseline: FAIL" "$T/c5b" 5 FAIL "<- diverged"
claims_case "claims: async diverged beside a sound ring: FAIL, not the best loss there is" "$T/c7a" 7 FAIL "async diverged: its loss stopped being finite at step 1"
claims_case "claims: the ring diverged: the pair is left out" "$T/c7b" 7 NOT-RUN "left out, the ring run diverged"
check "claims.json validates (no bare NaN)" $PY tests/validate_report.py "$T/c7a/claims.json"

# ---- 4. plots: drawn up to the divergence and marked, never as loss 0 ----------------------------
if MPY=$(bash plots/find_python.sh 2>/dev/null); then
    mkdir -p "$T/p"
    cp "$T/fine.json" "$T/ring3.json" "$T/p/"
    if "$MPY" plots/plot.py "$T/p" >"$T/plot.log" 2>&1 && $PY - "$T/p" <<'EOF'
import json, sys
d = sys.argv[1]
loss = json.load(open(d + "/figures.json"))["loss"]
assert loss["status"] == "drawn" and loss["series"] == 2, loss
assert len(loss["diverged"]) == 1 and "diverged at step 1" in loss["diverged"][0] and "diverged" in loss["note"], loss
svg = open(d + "/loss.svg").read()
assert svg.count('id="marker-loss-diverged-') == 1, "no divergence marker in loss.svg"
EOF
    then ok "plots: the diverged run's loss line is marked diverged at step 1 (figures.json, loss.svg)"
    else bad "plots" "$(tail -n 5 "$T/plot.log")"; fi
else
    echo "SKIP plots: no python3 with matplotlib"
fi

# ---- 5. an infinite gradient under an FP8 wire diverges as under fp32 ------------------------------
# An FP8 encoder saturates +-Inf to its largest code, so an overflow in backward used to arrive as an
# ordinary gradient and the run went on finite (exit 0). RINGSIDE_TEST_INF_GRAD=1:2 gives rank 1's
# gradient an infinite element at step 2; every wire must then diverge at step 3, fp32's step.
inf_case() { # NAME WANT-WARNING ARGS...
    local n=$1 warn=$2; shift 2
    RINGSIDE_TEST_INF_GRAD=1:2 "$BIN" train -n 2 "${TINY[@]}" --batch 24 -q --report "$T/inf-${n// /-}.json" "$@" >"$T/inf.log" 2>&1
    local rc=$? step
    step=$($PY -c "import json,sys; s=json.load(open(sys.argv[1]))['summary']; print(s['diverged'], s['diverged_step'])" \
        "$T/inf-${n// /-}.json" 2>/dev/null)
    if [ "$rc" = 6 ] && [ "$step" = "True 3" ] && grep -q "the global training loss is nan at step 3 " "$T/inf.log" &&
        { [ "$warn" = 0 ] || grep -q "rank 1: step 2: 1 gradient element is infinite .* sent as NaN" "$T/inf.log"; }; then
        ok "an Inf gradient at step 2, $n: exit 6, diverged at step 3$([ "$warn" = 1 ] && echo ", rank 1 names it")"
    else bad "an Inf gradient at step 2, $n" "exit $rc, diverged/step: $step: $(tail -n 2 "$T/inf.log")"; fi
}
inf_case "ring fp32" 0 --sync ring
inf_case "ring fp8e4m3" 1 --sync ring --wire fp8e4m3
inf_case "tree fp8e5m2" 1 --sync tree --wire fp8e5m2
inf_case "ps fp8e4m3" 1 --sync ps --wire fp8e4m3
inf_case "byteps fp8e5m2" 1 --sync byteps --ps-servers 1 --wire fp8e5m2
check "  ... their reports validate" $PY tests/validate_report.py "$T/inf-ring-fp8e4m3.json" "$T/inf-byteps-fp8e5m2.json"

# ---- 6. a --trace that cannot be written at the end: an error naming it, the report kept ---------
mkdir -p "$T/gone"
"$BIN" train "${TINY[@]}" --steps 40 --straggler 0:25 --report "$T/kept.json" --trace "$T/gone/trace.json" >"$T/trace.log" 2>&1 &
pid=$!
for _ in $(seq 200); do grep -q "^# train:" "$T/trace.log" 2>/dev/null && break; sleep 0.05; done
rmdir "$T/gone" # after the start-up check, about a second before the end
wait "$pid"
rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 6 ] && grep -q "error: --trace $T/gone/trace.json: the trace was not written" "$T/trace.log" &&
    $PY tests/validate_report.py "$T/kept.json" >/dev/null 2>&1; then
    ok "a --trace whose folder vanished: exit $rc naming the file, the report written and valid"
else bad "the vanished --trace folder" "exit $rc: $(tail -n 3 "$T/trace.log"); report: $(ls "$T/kept.json" 2>&1)"; fi

finish
