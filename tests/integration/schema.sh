#!/usr/bin/env bash
# schema.sh - real train reports of every back end this build has, validated against docs/report-schema.md
set -uo pipefail
cd "$(dirname "$0")/../.."
BIN=${RINGSIDE_BIN:-build/ringside}
PY=${PYTHON:-python3}
pass=0; fail=0; skip=0
ok()   { pass=$((pass+1)); echo "ok   $*"; }
bad()  { fail=$((fail+1)); echo "FAIL $*"; }
skipped() { skip=$((skip+1)); echo "SKIP $*"; }

[ -x "$BIN" ] || { echo "FAIL $BIN is not built (set RINGSIDE_BIN)"; echo "0 passed, 1 failed"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$BIN" train --help >"$tmp/options.txt" || { bad "train --help"; }
SMALL=(--layers 784,32,10 --steps 12 --warmup 2 --batch 16 --train-samples 1024 --eval-samples 256 --timeout 30 -q)

# A back end or option this build does not have yet fails at once with one of these messages.
unavailable() { grep -qiE "not in this build|unknown \(this build has|unknown option|not (yet )?implemented|not supported" "$1"; }

# case NAME EXPECTS -- train options...: runs one job, validates its report
case_run() {
    local name=$1 expects=$2; shift 3
    local rep="$tmp/$name.json" log="$tmp/$name.log"
    timeout 120 "$BIN" train "$@" "${SMALL[@]}" --report "$rep" >"$log" 2>&1; local rc=$?
    if [ "$rc" != 0 ]; then
        if unavailable "$log"; then skipped "$name: not in this build: $(grep -m1 -iE 'error' "$log")"; return; fi
        bad "$name: ringside train $* exited $rc"; tail -n 5 "$log" | sed 's/^/    | /'; return
    fi
    local args=(--options "$tmp/options.txt")
    for e in $expects; do args+=(--expect "$e"); done
    if "$PY" tests/validate_report.py "${args[@]}" "$rep" >"$log.v" 2>&1; then ok "$name: report valid"
    else bad "$name: report invalid"; sed 's/^/    | /' "$log.v"; fi
}

echo "# real reports from $BIN"
case_run none          "world=1 sync=none servers=0" -- --sync none
case_run ring-2        "world=2 sync=ring servers=0" -- -n 2 --sync ring
case_run ring-3-idle   "world=3 sync=ring servers=0" -- -n 3 --sync ring --global-batch 2
case_run ps-2          "world=2 sync=ps servers=0"   -- -n 2 --sync ps
case_run ps-3-dedicated "world=3 sync=ps servers=1"  -- -n 3 --sync ps --ps-placement dedicated
case_run ps-2-2servers "world=2 sync=ps servers=2"   -- -n 2 --sync ps --ps-placement dedicated --ps-servers 2
case_run ps-3-dataparallel "world=3 sync=ps servers=0" -- -n 3 --sync ps --ps-mode dataparallel --global-batch 32
case_run ring-2-eval   "world=2 sync=ring servers=0" -- -n 2 --sync ring --eval-every 4 --no-overlap

# bench report, matrix summary and claims, where this build has the commands
if "$BIN" bench --help >/dev/null 2>&1; then
    if timeout 120 "$BIN" bench -n 2 --sync ring -b 1K -e 64K -f 4 -w 1 -i 3 --timeout 30 --report "$tmp/bench.json" \
        >"$tmp/bench.log" 2>&1; then
        if "$PY" tests/validate_report.py --expect world=2 --expect sync=ring "$tmp/bench.json" >"$tmp/bench.v" 2>&1
        then ok "bench-ring-2: report valid"; else bad "bench-ring-2: report invalid"; sed 's/^/    | /' "$tmp/bench.v"; fi
    else bad "bench -n 2 --sync ring failed"; tail -n 5 "$tmp/bench.log" | sed 's/^/    | /'; fi
else
    skipped "bench: no \`ringside bench\` in this build"
fi
if "$BIN" matrix --help >/dev/null 2>&1 && "$BIN" claims --help >/dev/null 2>&1; then
    cat >"$tmp/m.json" <<'JSON'
{"name": "schema-test", "base": {"layers": "784,32,10", "steps": 8, "batch": 16, "train-samples": 512,
 "eval-samples": 128, "timeout": 30}, "axes": {"sync": ["ring", "ps"], "ranks": [1, 2]}, "repeats": 1,
 "timeout_s": 60, "alpha_s": 5e-5, "beta_s_per_byte": 1e-9}
JSON
    if timeout 300 "$BIN" matrix "$tmp/m.json" --out "$tmp/matrix" >"$tmp/matrix.log" 2>&1; then
        "$BIN" claims "$tmp/matrix" >"$tmp/claims.log" 2>&1
        for f in "$tmp/matrix"/*.json; do
            n=$(basename "$f")
            if "$PY" tests/validate_report.py --options "$tmp/options.txt" "$f" >"$f.v" 2>&1; then ok "matrix/$n valid"
            else bad "matrix/$n invalid"; sed 's/^/    | /' "$f.v"; fi
        done
        [ -f "$tmp/matrix/claims.json" ] || bad "ringside claims wrote no claims.json"
        cp "$tmp/matrix/summary.json" "$tmp/summary.json"
    else bad "ringside matrix failed"; tail -n 5 "$tmp/matrix.log" | sed 's/^/    | /'; fi
else
    skipped "matrix and claims: not in this build"
fi

# the validator must refuse broken reports: each mutation of a real report names its field
mutate() { # name source.json field-in-message python-statement-on-r
    local name=$1 src="$tmp/$2.json" want=$3 stmt=$4 out="$tmp/mut-$1.json"
    [ -f "$src" ] || { skipped "validator refuses $name: no $2 report"; return; }
    "$PY" - "$src" "$out" "$stmt" <<'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(r, open(sys.argv[2], "w"))
PYEOF
    local msg; msg=$("$PY" tests/validate_report.py --options "$tmp/options.txt" "$out" 2>&1); local rc=$?
    if [ "$rc" = 1 ] && grep -qF -- "$want" <<<"$msg"; then ok "validator refuses $name"
    else bad "validator refuses $name (rc $rc, wanted '$want')"; sed 's/^/    | /' <<<"$msg" | head -n 5; fi
}
echo "# the validator on broken reports"
mutate samples-sum  ring-2 "summary.samples"          'r["summary"]["samples"] += 1'
mutate curve-length none   "summary.loss_curve"       'r["summary"]["loss_curve"].pop()'
mutate tag-above-peak none "by_tag.params"            'm = r["ranks"][0]["memory"]; m["by_tag"]["params"] = m["peak_bytes"] + 1'
mutate median-above-max ring-2 "median"               's = r["ranks"][1]["time_s"]["step"]; s["median"] = 2 * s["max"]'
mutate negative-phase none "phases.forward"           'r["ranks"][0]["time_s"]["phases"]["forward"] = -1e-3'
mutate imbalance-below-1 ps-2 "summary.imbalance.memory" 'r["summary"]["imbalance"]["memory"] = 0.5'
mutate imbalance-recomputed ps-2 "max/mean over the worker ranks" 'r["summary"]["imbalance"]["memory"] = 1.0'
mutate duplicate-rank ring-2 "worker ranks"           'r["ranks"][1]["rank"] = 0'
mutate other-version none "readers refuse other versions" 'r["schema"] = "ringside.report/2"'
mutate missing-world none "run.world: missing"        'del r["run"]["world"]'
mutate step-in-ms ring-2 "seconds?"                   '[e["time_s"]["step"].update({k: v * 1000 for k, v in e["time_s"]["step"].items()}) for e in r["ranks"]]'
mutate traffic-in-kib ring-2 "below the"              '[e["traffic"].update(bytes_sent=e["traffic"]["bytes_sent"] // 1024) for e in r["ranks"]]'
mutate missing-option none "missing: lr"              'del r["config"]["lr"]'
mutate server-steps ps-3-dedicated "time_s.steps"     'r["ranks"][-1]["time_s"]["steps"] += 1'
mutate lost-server ps-3-dedicated "server entries"    'r["ranks"].pop()'
mutate internal-key none "internal keys"              'r["ranks"][0]["_curve"] = {}'
mutate bench-busbw bench "busbw_gbps"                 'r["rows"][0]["busbw_gbps"] *= 2'
mutate transport-unknown ring-2 "traffic.transport"    'r["ranks"][0]["traffic"]["transport"] = "carrier-pigeon"'
mutate transport-none-moved ring-2 "nothing moved"   'r["ranks"][0]["traffic"]["transport"] = ""'
mutate received-unknown ring-2 "traffic.transport_received" 'r["ranks"][0]["traffic"]["transport_received"] = "carrier-pigeon"'
mutate received-none ring-2 "nothing received"      'r["ranks"][0]["traffic"]["transport_received"] = ""'
mutate transport-not-slowest ps-3-dedicated "summary.transport" 'r["summary"]["transport"] = "shm"'
mutate bench-transport bench "config.transport"       'r["config"]["transport"] = "nccl"'
mutate matrix-failed summary "runs_failed"            'r["runs_failed"] += 1'
mutate matrix-null-column summary "missing (null when unknown)" 'del r["runs"][0]["final_loss"]'

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
