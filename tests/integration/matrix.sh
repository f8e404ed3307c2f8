#!/usr/bin/env bash
# matrix.sh - `ringside matrix` end to end: runs, a failing cell, summary files, resume, dry-run, --only, validation, timeout, Ctrl-C, a full disk
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
BIN=$(realpath "$BIN")

# a tiny matrix: three cells that work and one that fails on purpose (no such data directory)
cat >"$T/tiny.json" <<'EOF'
{
  "name": "tiny",
  "base": {"device": "cpu", "layers": "784,16,10", "steps": 6, "warmup": 1, "train-samples": 512, "eval-samples": 128},
  "axes": {"sync": ["none", "ring"], "ranks": [1, 2], "data": ["synthetic", "/nonexistent"]},
  "exclude": [{"sync": "none", "ranks": 2}, {"sync": "ring", "data": "/nonexistent"}],
  "timeout_s": 60,
  "alpha_s": 1e-4,
  "beta_s_per_byte": 1.6e-9
}
EOF
O="$T/out"
expect_status "a matrix with a failing cell exits 1" 1 "$BIN" matrix "$T/tiny.json" --out "$O"
cp "$T/last.log" "$T/first.log"

$PY - "$O" >"$T/py.log" 2>&1 <<'EOF'
import csv, json, os, sys
out = sys.argv[1]
s = json.load(open(os.path.join(out, "summary.json")))
rows = s["runs"]
assert s["schema"] == "ringside.matrix/1" and s["complete"] and not s["interrupted"], s
assert len(rows) == 4, [r["cell"] for r in rows]
by = {r["cell"]: r for r in rows}
bad = by["sync=none,ranks=1,data=_nonexistent"]
assert bad["status"] == "failed" and bad["exit_code"] != 0 and "nonexistent" in bad["error"], bad
assert bad["throughput_samples_per_s"] is None and bad["report"] == ""
for cell in ("sync=none,ranks=1,data=synthetic", "sync=ring,ranks=1,data=synthetic", "sync=ring,ranks=2,data=synthetic"):
    r = by[cell]
    assert r["status"] == "ok" and r["exit_code"] == 0 and r["error"] == "", r
    assert r["throughput_samples_per_s"] > 0 and r["step_time_median_s"] > 0 and r["final_loss"] > 0, r
    assert r["mem_peak_max_bytes"] >= r["mem_peak_mean_bytes"] >= r["mem_peak_min_bytes"] > 0, r
    rep = json.load(open(os.path.join(out, r["report"])))
    assert rep["schema"] == "ringside.report/1"
    if cell.startswith("sync=ring,ranks=2"):
        # the alpha-beta prediction beside the measured comm time, in the row and in the report
        n = 4 * (784 * 16 + 16 + 16 * 10 + 10)
        want = 2 * 1e-4 + n * 1.6e-9
        assert abs(r["predicted_comm_s"] - want) < 1e-12, (r["predicted_comm_s"], want)
        assert r["comm_total_s"] > 0 and abs(r["comm_ratio"] - r["comm_total_s"] / want) < 1e-9
        assert abs(rep["summary"]["prediction"]["step_comm_s"] - want) < 1e-12
assert not os.path.exists(os.path.join(out, "sync=none,ranks=1,data=_nonexistent-r1.json"))
lines = list(csv.reader(open(os.path.join(out, "summary.csv"))))
assert len(lines) == 5, lines
head = lines[0]
for col in ("cell", "repeat", "sync", "ranks", "data", "status", "exit_code", "error", "throughput_samples_per_s",
            "step_time_median_s", "step_time_p95_s", "comm_exposed_s", "mem_peak_max_bytes", "mem_peak_min_bytes",
            "mem_peak_mean_bytes", "rank0_peak_bytes", "imbalance_memory", "final_loss", "final_accuracy",
            "predicted_comm_s", "comm_total_s"):
    assert col in head, col
assert {l[head.index("status")] for l in lines[1:]} == {"ok", "failed"}
print("summary ok")
EOF
if [ $? = 0 ]; then ok "summary.json and summary.csv: one row per run, the failure recorded, predictions"; else bad "summary files" "$(tail -n 5 "$T/py.log")"; fi
if grep -q "FAILED" "$T/first.log" && grep -q "nonexistent" "$T/first.log"; then ok "progress names the failed cell and its error"; else bad "progress" "$(cat "$T/first.log")"; fi

# --resume: finished reports are kept untouched; the failed cell runs again
stat -c '%n %Y %s' "$O"/*-r1.json >"$T/mtimes.before"
sleep 1.1
expect_status "--resume still exits 1 (the failing cell fails again)" 1 "$BIN" matrix "$T/tiny.json" --out "$O" --resume
stat -c '%n %Y %s' "$O"/*-r1.json >"$T/mtimes.after"
if cmp -s "$T/mtimes.before" "$T/mtimes.after" && [ "$(grep -c 'kept (report exists)' "$T/last.log")" = 3 ]; then
    ok "--resume skips the 3 finished runs (reports unchanged)"
else bad "--resume" "$(diff "$T/mtimes.before" "$T/mtimes.after"; cat "$T/last.log")"; fi
if $PY -c "import json,sys; r=json.load(open(sys.argv[1]))['runs']; assert sum(x['resumed'] for x in r)==3 and len(r)==4" "$O/summary.json"; then
    ok "the resumed summary still has every run"; else bad "resumed summary" "$(head -c 400 "$O/summary.json")"; fi

# --resume after an option changed: every kept report is compared with its cell's options; the
# three made with 6 steps run again, and the driver says how many and why
sed 's/"steps": 6/"steps": 7/' "$T/tiny.json" >"$T/tiny7.json"
expect_status "--resume with base.steps changed exits 1 (the failing cell fails again)" 1 "$BIN" matrix "$T/tiny7.json" --out "$O" --resume
if grep -q "resume: 0 reports kept; 3 made with other options, run again:" "$T/last.log" \
   && grep -q "3 x steps (6 in the report, 7 in the cell)" "$T/last.log" && ! grep -q "kept (report exists)" "$T/last.log" \
   && $PY -c "import json,sys; r=json.load(open(sys.argv[1]))['runs']; assert not any(x['resumed'] for x in r); assert all(json.load(open(sys.argv[2]+'/'+x['report']))['config']['steps']==7 for x in r if x['report'])" "$O/summary.json" "$O"; then
    ok "--resume reruns the 3 reports made with 6 steps and says why"
else bad "--resume with a changed option" "$(cat "$T/last.log")"; fi
expect_status "--resume again keeps them" 1 "$BIN" matrix "$T/tiny7.json" --out "$O" --resume
if grep -q "resume: 3 reports kept; 0 made with other options" "$T/last.log"; then ok "--resume keeps reports made with the cell's options"
else bad "--resume keeps matching reports" "$(cat "$T/last.log")"; fi

# --dry-run lists the runs, checks every cell by starting it for one step, and writes nothing:
# the cell whose data directory does not exist is refused with its rank's error
expect_status "--dry-run with a cell that cannot run exits 2" 2 "$BIN" matrix "$T/tiny.json" --out "$T/dry" --dry-run
if [ "$(grep -c 'ringside train' "$T/last.log")" = 4 ] && [ ! -e "$T/dry" ] && [ "$(grep -c '^# REFUSED' "$T/last.log")" = 1 ] \
   && grep -q "^# REFUSED sync=none,ranks=1,data=_nonexistent: .*nonexistent" "$T/last.log"; then
    ok "--dry-run lists 4 runs, refuses the one that cannot run, creates nothing"
else bad "--dry-run" "$(cat "$T/last.log")"; fi
expect_status "--dry-run of the runnable cells exits 0" 0 "$BIN" matrix "$T/tiny.json" --dry-run --only data=synthetic
grep -q "every cell passed its ranks' checks" "$T/last.log" || bad "--dry-run says the cells passed" "$(cat "$T/last.log")"
# a refusal only a rank makes (the colocated server is one thread: no --ps-servers 2): the dry run
# catches it, and a real run records that rank's error line, not the launcher's "exited" line
cat >"$T/k2.json" <<'EOF'
{"name": "k2", "base": {"device": "cpu", "layers": "64,16,10", "steps": 3, "train-samples": 256, "sync": "ps", "ranks": 2},
 "axes": {"ps-servers": [1, 2]}, "timeout_s": 60}
EOF
expect_status "--dry-run refuses colocated ps with --ps-servers 2" 2 "$BIN" matrix "$T/k2.json" --dry-run
if grep -q "^# REFUSED ps-servers=2: .*--ps-servers 2 needs --ps-placement dedicated" "$T/last.log" && ! grep -q "REFUSED ps-servers=1" "$T/last.log"; then
    ok "the dry run names the cell and the rank's reason"; else bad "dry run refusal" "$(cat "$T/last.log")"; fi
expect_status "the real run of that matrix exits 1" 1 "$BIN" matrix "$T/k2.json" --out "$T/k2"
if $PY -c "
import json,sys
r={x['cell']: x for x in json.load(open(sys.argv[1]))['runs']}
e=r['ps-servers=2']['error']
assert '--ps-servers 2 needs --ps-placement dedicated' in e and 'exited' not in e, e
" "$T/k2/summary.json" && tail -n 1 "$T/k2/ps-servers=2-r1.log" | grep -q "rank [01] failed first (exit status 2); its own error is the first line marked \[rank [01]\]"; then
    ok "a failed cell records the first error line of the rank that failed first; the launcher's last line names it"
else bad "failed cell's error" "$(cat "$T/k2/ps-servers=2-r1.log")"; fi

# --only runs a subset
expect_status "--only sync=ring,ranks=2 exits 0" 0 "$BIN" matrix "$T/tiny.json" --out "$T/only" --only sync=ring,ranks=2
if $PY -c "import json,sys; r=json.load(open(sys.argv[1]))['runs']; assert [x['cell'] for x in r]==['sync=ring,ranks=2,data=synthetic']" "$T/only/summary.json"; then
    ok "--only ran one cell"; else bad "--only" "$(cat "$T/last.log")"; fi
# --only on a finished folder merges into its summary; a second --only merges into that
expect_status "--only sync=ring,ranks=1 on the finished folder exits 0" 0 "$BIN" matrix "$T/tiny7.json" --out "$O" --only sync=ring,ranks=1
grep -q "merging into .*summary.json: 3 rows of other cells kept" "$T/last.log" || bad "--only says what it merges" "$(cat "$T/last.log")"
expect_status "a second --only (data=synthetic,sync=none) exits 0" 0 "$BIN" matrix "$T/tiny7.json" --out "$O" --only sync=none,data=synthetic
if $PY - "$O" <<'EOF'
import csv, json, os, sys
s = json.load(open(os.path.join(sys.argv[1], "summary.json")))
cells = [r["cell"] for r in s["runs"]]
assert cells == ["sync=none,ranks=1,data=synthetic", "sync=none,ranks=1,data=_nonexistent",
                 "sync=ring,ranks=1,data=synthetic", "sync=ring,ranks=2,data=synthetic"], cells
assert s["runs_done"] == 4 and s["runs_planned"] == 4 and s["runs_failed"] == 1 and s["complete"], s
assert s["only"] == "sync=none,data=synthetic"
assert len(list(csv.reader(open(os.path.join(sys.argv[1], "summary.csv"))))) == 5
EOF
then ok "two --only runs merge into the 4-row summary (matrix order, CSV too)"; else bad "--only merge" "$(cat "$T/last.log")"; fi
expect_status "--only with an unknown option exits 2" 2 "$BIN" matrix "$T/tiny.json" --out "$T/only2" --only colour=red
expect_status "--only matching nothing exits 2" 2 "$BIN" matrix "$T/tiny.json" --out "$T/only2" --only ranks=64

# validation: a clear one-line error naming the key, exit 2, nothing run or written
invalid() { # NAME JSON WANT_SUBSTRING
    local name=$1 want=$3
    printf '%s\n' "$2" >"$T/bad.json"
    "$BIN" matrix "$T/bad.json" --out "$T/never" >"$T/last.log" 2>&1; local rc=$?
    if [ "$rc" = 2 ] && grep -q -- "$want" "$T/last.log" && [ ! -e "$T/never" ]; then ok "invalid: $name"
    else bad "invalid: $name" "exit $rc, want 2 and '$want': $(cat "$T/last.log")"; fi
}
invalid "unknown top-level key" '{"axes": {"sync": ["ring"]}, "axis": {}}' "unknown key 'axis'"
invalid "unknown option in base" '{"base": {"colour": "red"}, "axes": {"sync": ["ring"]}}' "base.colour: unknown option 'colour'"
invalid "unknown option as an axis" '{"axes": {"bogus-opt": [1, 2]}}' "axes.bogus-opt\[0\]: unknown option"
invalid "empty axis" '{"axes": {"ranks": []}}' "axes.ranks: empty list"
invalid "wrong type" '{"axes": {"ranks": ["two"]}}' "axes.ranks\[0\]: expected a number"
invalid "bad value (train's own check)" '{"base": {"batch": 0}, "axes": {"sync": ["ring"]}}' "batch 0: must be at least 1"
invalid "bool for a valued option" '{"base": {"steps": true}}' "base.steps: expected a number"
invalid "unknown back end" '{"axes": {"sync": ["carrier-pigeon"]}}' "carrier-pigeon"
invalid "report is the driver's" '{"base": {"report": "x.json"}}' "base.report: the driver sets --report"
invalid "repeats not an integer" '{"repeats": 1.5, "axes": {"sync": ["ring"]}}' "repeats: expected an integer"
invalid "alpha without beta" '{"alpha_s": 1e-5, "axes": {"sync": ["ring"]}}' "give alpha_s and beta_s_per_byte together"
invalid "missing bench report" '{"bench": "/nonexistent/bench.json"}' "bench: cannot open"
invalid "a link for no transport" '{"links": {"carrier-pigeon": {"alpha_s": 1e-5, "beta_s_per_byte": 1e-9}}}' "links: unknown transport 'carrier-pigeon'"
invalid "a link without beta" '{"links": {"shm": {"alpha_s": 1e-5}}}' "links.shm: give alpha_s and beta_s_per_byte together"
invalid "a negative link" '{"links": {"tcp": {"alpha_s": -1, "beta_s_per_byte": 1e-9}}}' "links.tcp.alpha_s: expected a number >= 0"
invalid "a link of the wrong type" '{"links": {"shm": 3}}' "links.shm: expected {alpha_s, beta_s_per_byte}"
invalid "an option that does not apply to a variant's back end" '{"axes": {"variants": {"ring": {"sync": "ring", "ps-placement": "dedicated"}}}}' "axes.variants.ring.ps-placement: option 'ps-placement' does not apply to --sync ring"
invalid "a ps option in base carried into ring cells" '{"base": {"ps-servers": 2}, "axes": {"sync": ["ring", "ps"]}}' "base.ps-servers: option 'ps-servers' does not apply to --sync ring (cell sync=ring)"
invalid "a ps option as an axis beside ring" '{"axes": {"sync": ["ring", "ps"], "ps-placement": ["colocated", "dedicated"]}}' "axes.ps-placement: option 'ps-placement' does not apply to --sync ring"
invalid "a variant's option that is also an axis" '{"axes": {"variants": {"r": {"sync": "ring", "ranks": 2}}, "ranks": [2]}}' "axes.variants.r.ranks: 'ranks' is also an axis"
invalid "a variant name with a space" '{"axes": {"variants": {"a b": {"sync": "ring"}}}}' "variant name 'a b'"
invalid "variants not an object" '{"axes": {"variants": ["ring"]}}' "axes.variants: expected a non-empty object"
invalid "exclude names no variant" '{"axes": {"variants": {"r": {"sync": "ring"}}}, "exclude": [{"variant": "x"}]}' "exclude\[0\].variant: expected the name of a variant"
# every top-level number key, property-style: a negative number, a string, a list and null are
# each refused naming the key (a negative timeout_s fell back to the default and a negative
# alpha_s predicted 0: the check's status was positive where its callers tested < 0)
for key in timeout_s alpha_s beta_s_per_byte repeats; do
    other=""
    case $key in alpha_s) other=', "beta_s_per_byte": 1e-9' ;; beta_s_per_byte) other=', "alpha_s": 1e-5' ;; esac
    for v in -1 '"5"' '[1]' null -1e-300; do
        [ "$key" = repeats ] && [ "$v" = -1e-300 ] && v=0
        invalid "$key: $v" "{\"$key\": $v$other, \"axes\": {\"sync\": [\"ring\"]}}" "$key: expected"
    done
done
printf '{\n  "name": "x",\n  "axes": {"sync": ["ring"],}\n}\n' >"$T/bad.json"
"$BIN" matrix "$T/bad.json" --out "$T/never" >"$T/last.log" 2>&1; rc=$?
if [ "$rc" = 2 ] && grep -q "bad.json:3:[0-9]*: malformed JSON" "$T/last.log" && [ ! -e "$T/never" ]; then ok "malformed JSON names file:line:col"
else bad "malformed JSON" "exit $rc: $(cat "$T/last.log")"; fi
expect_status "missing --out exits 2" 2 "$BIN" matrix "$T/tiny.json"
expect_status "unknown driver option exits 2" 2 "$BIN" matrix "$T/tiny.json" --out "$T/x" --fast

# alpha/beta fitted from a bench report's sweep (t = 2(N-1) a + 2(N-1)/N S b on 2 ranks: t = 2a + S b)
$PY - "$T/bench.json" <<'EOF'
import json, sys
a, b = 5e-5, 2e-9
rows = [{"size_bytes": s, "time_us": (2 * a + s * b) * 1e6} for s in (1024, 8192, 65536, 1 << 20, 1 << 23)]
json.dump({"schema": "ringside.bench/1", "config": {"sync": "ring", "ranks": 2}, "rows": rows}, open(sys.argv[1], "w"))
EOF
printf '{"bench": "bench.json", "base": {"layers": "784,16,10", "steps": 4}, "axes": {"ranks": [2]}}\n' >"$T/withbench.json"
expect_status "a bench report's sweep gives the prediction" 0 "$BIN" matrix "$T/withbench.json" --dry-run
if grep -q "alpha 5e-05 s, beta 2e-09 s/byte" "$T/last.log"; then ok "alpha and beta fitted from the bench sweep"; else bad "bench fit" "$(cat "$T/last.log")"; fi
# a link per transport: a bench report that says it ran over tcp cannot stand for shm
$PY - "$T/bench.json" "$T/bench-tcp.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); r["config"]["transport"] = "tcp"; json.dump(r, open(sys.argv[2], "w"))
EOF
invalid "a bench report of another transport" '{"links": {"shm": "'"$T"'/bench-tcp.json"}}' "bench-tcp.json measured the tcp transport, not shm"
printf '{"alpha_s": 1e-4, "beta_s_per_byte": 1e-9, "links": {"tcp": "bench-tcp.json"}, "axes": {"ranks": [2]}}\n' >"$T/links.json"
expect_status "links: a bench report for tcp beside the default" 0 "$BIN" matrix "$T/links.json" --dry-run
if grep -q "alpha-beta, default: alpha 0.0001 s" "$T/last.log" && grep -q "alpha-beta, tcp: alpha 5e-05 s, beta 2e-09 s/byte" "$T/last.log"; then
    ok "each link printed with its source"; else bad "links" "$(cat "$T/last.log")"; fi
# each run is predicted over the link it moved on: the ring over shm, ps over a Unix socket (ipc)
cat >"$T/perlink.json" <<'EOF'
{"name": "perlink", "base": {"device": "cpu", "layers": "64,16,10", "steps": 6, "train-samples": 256},
 "axes": {"sync": ["ring", "ps"], "ranks": [2]},
 "alpha_s": 1e-4, "beta_s_per_byte": 1e-9, "links": {"shm": {"alpha_s": 2e-5, "beta_s_per_byte": 3e-10}}}
EOF
expect_status "a matrix with a link per transport runs" 0 "$BIN" matrix "$T/perlink.json" --out "$T/perlink"
$PY - "$T/perlink" <<'EOF' && ok "ring predicted over shm, ps over the default (it moved over ipc, which the matrix gives no link)" || bad "per-link predictions" "$(cat "$T/last.log")"
import json, sys, os
d = sys.argv[1]
ring = json.load(open(os.path.join(d, "sync=ring,ranks=2-r1.json")))["summary"]
ps = json.load(open(os.path.join(d, "sync=ps,ranks=2-r1.json")))["summary"]
n = 4 * (64 * 16 + 16 + 16 * 10 + 10)
assert ring["transport"] == "shm" and ring["prediction"]["link"] == "shm", ring["prediction"]
assert abs(ring["prediction"]["step_comm_s"] - (2 * 2e-5 + n * 3e-10)) < 1e-12, ring["prediction"]
assert ps["transport"] == "ipc" and ps["prediction"]["link"] == "ipc" and ps["prediction"]["alpha_s"] == 1e-4, ps["prediction"]
assert "default link" in ps["prediction"]["source"]
summ = json.load(open(os.path.join(d, "summary.json")))
rows = {r["cell"]: r for r in summ["runs"]}
assert rows["sync=ring,ranks=2"]["transport"] == "shm" and rows["sync=ps,ranks=2"]["transport"] == "ipc"
links = summ["prediction"]["links"]
assert links["shm"]["alpha_s"] == 2e-5 and links["default"]["alpha_s"] == 1e-4 and links["default"]["source"] == "matrix file", links
assert rows["sync=ring,ranks=2"]["prediction_link"] == "shm" and rows["sync=ps,ranks=2"]["prediction_link"] == "default"
EOF

# named variants: an axis of option sets, labelled by name in cell ids, rows and the CSV
cat >"$T/variants.json" <<'EOF'
{"name": "variants", "base": {"device": "cpu", "layers": "64,16,10", "steps": 4, "train-samples": 256},
 "axes": {"variants": {"ps-colocated": {"sync": "ps"}, "ps-K2": {"sync": "ps", "ps-placement": "dedicated", "ps-servers": 2},
                       "ring": {"sync": "ring"}},
          "ranks": [2, 3]},
 "exclude": [{"variant": "ps-K2", "ranks": 3}], "timeout_s": 60}
EOF
expect_status "a matrix of named variants runs" 0 "$BIN" matrix "$T/variants.json" --out "$T/variants"
$PY - "$T/variants" <<'EOF' && ok "variants: cells, rows and CSV carry the variant's name; only its options reach train" || bad "variants" "$(cat "$T/last.log")"
import csv, json, os, sys
d = sys.argv[1]
s = json.load(open(os.path.join(d, "summary.json")))
assert s["axes"] == ["variant", "ranks"], s["axes"]
cells = [r["cell"] for r in s["runs"]]
assert cells == ["variant=ps-colocated,ranks=2", "variant=ps-colocated,ranks=3", "variant=ps-K2,ranks=2",
                 "variant=ring,ranks=2", "variant=ring,ranks=3"], cells
for r in s["runs"]:
    assert r["status"] == "ok" and r["axes"]["variant"] == r["cell"].split(",")[0].split("=")[1], r
    cfg = json.load(open(os.path.join(d, r["report"])))["config"]
    want = {"ps-colocated": ("ps", "colocated", 1), "ps-K2": ("ps", "dedicated", 2), "ring": ("ring", "colocated", 1)}[r["axes"]["variant"]]
    assert (cfg["sync"], cfg["ps-placement"], cfg["ps-servers"]) == want, (r["cell"], cfg)
rows = list(csv.DictReader(open(os.path.join(d, "summary.csv"))))
assert [x["variant"] for x in rows] == ["ps-colocated", "ps-colocated", "ps-K2", "ring", "ring"], rows
# the columns a study needs: idle, the servers' memory and traffic, parameters, buckets, transport
by = {r["cell"]: r for r in s["runs"]}
for r in s["runs"]:
    assert r["params"] == 64 * 16 + 16 + 16 * 10 + 10 and r["buckets"] == 1 and r["idle_s"] is not None, r
k2, col, ring = by["variant=ps-K2,ranks=2"], by["variant=ps-colocated,ranks=2"], by["variant=ring,ranks=2"]
assert k2["servers"] == 2 and k2["server_peak_max_bytes"] > 0 and k2["server_traffic_max_bytes"] > 0, k2
assert k2["imbalance_traffic_with_servers"] >= k2["imbalance_traffic"] > 0, k2
assert col["servers"] == 0 and col["server_peak_max_bytes"] is None and col["imbalance_traffic_with_servers"] is None, col
assert ring["transport"] == "shm" and col["transport"] == "ipc" and ring["link"] == "", ring
for c in ("idle_s", "servers", "server_peak_max_bytes", "server_traffic_max_bytes", "imbalance_memory_with_servers",
          "imbalance_traffic_with_servers", "params", "buckets", "variant", "link", "prediction_link", "transport"):
    assert c in rows[0], c
EOF
expect_status "--only variant=ring picks a variant by name" 0 "$BIN" matrix "$T/variants.json" --dry-run --only variant=ring
if [ "$(grep -c 'ringside train' "$T/last.log")" = 2 ] && grep -q "^variant=ring,ranks=3 r1" "$T/last.log"; then ok "--only variant=ring: its 2 runs"
else bad "--only variant=" "$(cat "$T/last.log")"; fi

# "links": "auto": before the cells, a short bench per back end the cells use, fitted per
# transport on this machine; the fit is recorded in the summary and predicts the runs
cat >"$T/auto.json" <<'EOF'
{"name": "auto", "base": {"device": "cpu", "layers": "64,16,10", "steps": 4, "train-samples": 256},
 "axes": {"sync": ["ring", "ps"], "ranks": [2]}, "links": "auto", "timeout_s": 60}
EOF
expect_status "a matrix with links auto runs" 0 "$BIN" matrix "$T/auto.json" --out "$T/auto"
cp "$T/last.log" "$T/auto.log"
"$BIN" fit "$T/auto/links-bench-ring.json" "$T/auto/links-bench-ps.json" --report "$T/auto-fit.json" >/dev/null 2>&1
$PY - "$T/auto" "$T/auto-fit.json" <<'EOF' && ok "links auto: benches kept in OUT, one fit per transport (as ringside fit), in the summary, predicting the runs" || bad "links auto" "$(cat "$T/auto.log")"
import json, os, sys
d = sys.argv[1]
s = json.load(open(os.path.join(d, "summary.json")))
links = s["prediction"]["links"]
fit = json.load(open(sys.argv[2]))["links"]
assert sorted(links) == ["ipc", "shm"] == sorted(fit), (links, fit)
for t, l in links.items():
    # the fit's quality is the machine's (a busy machine's small sizes can give R^2 < 0): only its form
    assert l["source"].startswith("auto: fitted on this machine") and isinstance(l["r2"], (int, float)) \
        and l["r2"] <= 1 and "worst_relative_residual" in l and l["alpha_s"] >= 0 and l["beta_s_per_byte"] >= 0, l
    assert l["alpha_s"] == fit[t]["alpha_s"] and l["beta_s_per_byte"] == fit[t]["beta_s_per_byte"], (l, fit[t])
for r in s["runs"]:
    assert r["predicted_comm_s"] > 0 and r["prediction_link"] == r["transport"], r
for b in ("ring", "ps"):
    rep = json.load(open(os.path.join(d, "links-bench-%s.json" % b)))
    assert rep["config"]["sync"] == b and rep["config"]["max_bytes"] >= 65536 and rep["summary"]["wrong"] == 0, rep["config"]
EOF
expect_status "links auto with --resume keeps the benches" 0 "$BIN" matrix "$T/auto.json" --out "$T/auto" --resume
if [ "$(grep -c 'links: auto: kept' "$T/last.log")" = 2 ]; then ok "--resume keeps the links benches"; else bad "links auto resume" "$(cat "$T/last.log")"; fi
# a `ringside fit --report` file names a link per transport: a matrix's links take it
printf '{"links": {"shm": "%s", "ipc": "%s"}, "axes": {"ranks": [2]}, "base": {"layers": "64,16,10"}}\n' "$T/auto-fit.json" "$T/auto-fit.json" >"$T/withfit.json"
expect_status "links from a fit file" 0 "$BIN" matrix "$T/withfit.json" --dry-run --only ranks=2
a=$($PY -c "import json,sys; print('%.3g' % json.load(open(sys.argv[1]))['links']['ipc']['alpha_s'])" "$T/auto-fit.json")
if grep -q "alpha-beta, ipc: alpha $a s" "$T/last.log"; then ok "a fit file's ipc link read by transport"; else bad "fit file as link" "$(cat "$T/last.log")"; fi
invalid "a fit file without the transport" '{"links": {"tcp": "'"$T"'/auto-fit.json"}}' "holds no fit for tcp (it has: shm, ipc)"
invalid "links neither auto nor an object" '{"links": "manual"}' "links: expected \"auto\" or an object"

# a run past timeout_s is killed (its whole process group) and recorded as a timeout
cat >"$T/slow.json" <<'EOF'
{"name": "slow", "base": {"device": "cpu", "layers": "784,64,10", "steps": 10000000, "train-samples": 512},
 "axes": {"ranks": [2]}, "timeout_s": 1.5}
EOF
expect_status "a timed-out run makes the matrix exit 1" 1 "$BIN" matrix "$T/slow.json" --out "$T/slow"
sleep 0.5
if $PY -c "import json,sys; r=json.load(open(sys.argv[1]))['runs'][0]; assert r['status']=='timeout' and 'timed out' in r['error'], r" "$T/slow/summary.json" \
   && ! pgrep -f -- "--report $T/slow/" >/dev/null; then ok "timeout recorded, no process left behind"
else bad "timeout" "$(cat "$T/last.log"; pgrep -af -- "--report $T/slow/")"; fi

# Ctrl-C: the running cell stops, finished ones stay, the summary says what finished, exit 130
cat >"$T/int.json" <<'EOF'
{"name": "int", "base": {"device": "cpu", "layers": "784,16,10", "train-samples": 512},
 "axes": {"steps": [3, 10000000, 4], "ranks": [2]}, "timeout_s": 120}
EOF
"$BIN" matrix "$T/int.json" --out "$T/int" >"$T/int.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do [ -e "$T/int/steps=3,ranks=2-r1.json" ] && break; sleep 0.1; done
sleep 1
kill -INT "$pid"
wait "$pid"; rc=$?
sleep 0.5
if [ "$rc" = 130 ] && [ -e "$T/int/steps=3,ranks=2-r1.json" ] && [ ! -e "$T/int/steps=4,ranks=2-r1.json" ] \
   && $PY -c "import json,sys; s=json.load(open(sys.argv[1])); assert s['interrupted'] and not s['complete'] and [r['cell'] for r in s['runs']]==['steps=3,ranks=2'], s" "$T/int/summary.json" \
   && ! pgrep -f -- "--report $T/int/" >/dev/null; then ok "Ctrl-C: exit 130, finished run kept and summarised, nothing left running"
else bad "Ctrl-C" "exit $rc: $(cat "$T/int.log"; pgrep -af -- "--report $T/int/")"; fi

# ---- a full disk: each run says so naming the log it could not write, and no summary is claimed ----
# --out on a 64 KiB tmpfs with one page left (the driver's lock takes it), in a mount namespace of
# its own; skipped where one cannot be made. Before: "exited without a message", and the last line
# named summary.json and summary.csv, which were never written.
cat >"$T/full.json" <<'EOF'
{"name": "full", "base": {"device": "cpu", "layers": "64,16,10", "steps": 3, "train-samples": 256, "eval-samples": 64,
                         "sync": "ring", "ranks": 2, "batch": 16},
 "axes": {"lr": [0.05, 0.1]}, "timeout_s": 60}
EOF
mkdir -p "$T/full"
ns=-m; [ "$(id -u)" = 0 ] || ns=-rm
if unshare $ns true 2>/dev/null; then
    unshare $ns sh -c 'mount -t tmpfs -o size=64k tmpfs "$1" || exit 99; mkdir "$1/out" && head -c 60000 /dev/zero >"$1/filler" &&
        "$2" matrix "$3" --out "$1/out"; echo "exit $?"; ls "$1/out"' sh "$T/full" "$BIN" "$T/full.json" >"$T/full.log" 2>&1
    if grep -q "^exit 99" "$T/full.log" || ! grep -q "^exit" "$T/full.log"; then
        echo "SKIP a full disk: cannot mount a tmpfs here ($(head -n 1 "$T/full.log"))"
    elif grep -q "^exit 1$" "$T/full.log" &&
        grep -q "r1: FAILED (exit 1) after .*: exited without a message: its log $T/full/out/lr=0.05-r1.log could not be written: No space left on device" "$T/full.log" &&
        grep -q "^# done: 2 runs, 0 ok, 2 failed in .*; NO summary written (report $T/full/out/summary.json: write failed: No space left on device)" "$T/full.log" &&
        ! grep -q "summary: $T/full/out/summary.json" "$T/full.log" && ! grep -q "^summary" "$T/full.log"; then
        ok "a full disk: each run names the log it could not write (No space left on device), no summary claimed, exit 1"
    else bad "a full disk" "$(cat "$T/full.log")"; fi
else
    echo "SKIP a full disk: no mount namespace here (unshare $ns)"
fi

finish
