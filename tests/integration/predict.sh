#!/usr/bin/env bash
# predict.sh - `ringside predict`: on a fixed fit file its numbers are the hand-computed alpha-beta values of every architecture; the measured range, the crossovers, the model from a report; refusals
. "$(dirname "$0")/lib.sh"

cat >$T/fit.json <<'EOF'
{"schema": "ringside.fit/1", "links": {
  "ipc": {"transport": "ipc", "link": "", "alpha_s": 1e-5, "beta_s_per_byte": 1e-9, "min_ranks": 2, "max_ranks": 8,
          "min_bytes": 1024, "max_bytes": 16777216},
  "tcp": {"transport": "tcp", "link": "", "alpha_s": 2e-5, "beta_s_per_byte": 2e-9},
  "ipc@1gbit": {"transport": "ipc", "link": "1gbit", "alpha_s": 9e-5, "beta_s_per_byte": 8e-9}}}
EOF

# ---- 1. the numbers, by hand: alpha 10 us, beta 1 ns/B, n = 4 MB in one bucket, N = 4, k = N ----
#   ring 6a + 1.5nb; tree (depth 2, rank 2: two children and two parents) 4a + 2nb; ps colocated
#   6a + 6nb; sharded 2a + 1.5nb; dedicated 2a + 2 max(n, Nn/k) b; byteps (W = 24, y = 0, x = 1/4)
#   2a + 2nb. --serial: sharded 2(N-1) rounds, dedicated 2 max(N, k), byteps 2 max(N-1+k, N).
run_case() { # NAME EXTRA... : the forecast at N = 4 and 16 into $T/NAME.json and .csv
    local name=$1; shift
    $BIN predict --links $T/fit.json --transport ipc --grad-bytes 4000000 --compute-ms 10 --bucket-mb 0 --ranks 4,16 \
        --report $T/$name.json --csv $T/$name.csv "$@" >$T/$name.log 2>&1
}
run_case plain || bad "predict runs" "$(tail -n 3 $T/plain.log)"
run_case serial --serial || bad "predict --serial runs" "$(tail -n 3 $T/serial.log)"
check "every architecture's comm and step at N = 4 are the hand-computed values" $PY - $T/plain.json $T/serial.json <<'EOF'
import json, sys
a, b, n = 1e-5, 1e-9, 4e6
want = {"ring": 6 * a + 1.5 * n * b, "tree": 4 * a + 2 * n * b, "ps-colocated": 6 * a + 6 * n * b,
        "ps-sharded": 2 * a + 1.5 * n * b, "ps-dedicated": 2 * a + 2 * n * b, "byteps": 2 * a + 2 * n * b}
serial = dict(want, **{"ps-sharded": 6 * a + 1.5 * n * b, "ps-dedicated": 8 * a + 2 * n * b, "byteps": 14 * a + 2 * n * b})
for path, w in zip(sys.argv[1:], (want, serial)):
    f = json.load(open(path))
    assert f["schema"] == "ringside.predict/1", f["schema"]
    rows = {r["architecture"]: r for r in f["rows"] if r["ranks"] == 4}
    assert set(rows) == set(w), sorted(rows)
    for k, v in w.items():
        r = rows[k]
        assert abs(r["comm_s"] - v) <= 1e-12 * v, (path, k, r["comm_s"], v)
        assert abs(r["step_s"] - (0.010 + v)) <= 1e-12, (path, k, r["step_s"])
        assert r["servers"] == (4 if k in ("ps-dedicated", "byteps") else 0), r
    assert f["link"]["alpha_s"] == a and f["link"]["measured_ranks"] == [2, 8], f["link"]
    assert all(r["measured"] == (r["ranks"] == 4) for r in f["rows"]), "N = 4 in the fit's 2..8, N = 16 not"
    assert len(f["assumptions"]) >= 5 and all(isinstance(x, str) for x in f["assumptions"])
EOF
check "the CSV has the JSON's rows" $PY - $T/plain.json $T/plain.csv <<'EOF'
import csv, json, sys
f, rows = json.load(open(sys.argv[1])), list(csv.DictReader(open(sys.argv[2])))
assert len(rows) == len(f["rows"]) == 12, len(rows)
for r, j in zip(rows, f["rows"]):
    assert int(r["ranks"]) == j["ranks"] and r["architecture"] == j["architecture"], (r, j)
    assert abs(float(r["comm_s"]) - j["comm_s"]) <= 1e-8 * j["comm_s"] and int(r["measured"]) == j["measured"]
EOF
# at N = 4 the sharded server's one round beats the ring's six (same bytes); at N = 16 the tree
# (2 x 4 rounds) is still slower than the ring by bytes: crossovers name the first N of --ranks
check "the crossovers and winners follow the numbers" $PY - $T/plain.json <<'EOF'
import json, sys
f = json.load(open(sys.argv[1]))
assert f["crossovers"]["ps-sharded"] == 4 and f["crossovers"]["tree"] is None and f["crossovers"]["ps-colocated"] is None, f["crossovers"]
w = {(x["ranks"], x["grad_bytes"]): x["architecture"] for x in f["winners"]}
assert w[(4, 4e6)] == "ps-sharded", w
EOF
check "the forecast validates" $PY tests/validate_report.py $T/plain.json $T/serial.json
grep -q "^# measured: the link at N = 2..8" $T/plain.log && ok "the text names where the link was measured" || bad "measured range in the text" "$(grep measured $T/plain.log)"
grep -q "^ *4\* " $T/plain.log && grep -q "^ *16  " $T/plain.log && ok "measured rows starred, the others not" || bad "starred rows" "$(cat $T/plain.log)"

# ---- 2. a link given, and many ranks ---------------------------------------------------------------
check "--link 10gbit,5us: alpha is its latency plus 50 us of software, beta 1/BW" $PY - <<EOF
import json, subprocess, sys
subprocess.run(["$BIN", "predict", "--link", "10gbit,5us", "--grad-bytes", "100M", "--ranks", "2..10000", "-q",
                "--report", "$T/big.json"], check=True)
f = json.load(open("$T/big.json"))
assert abs(f["link"]["alpha_s"] - 55e-6) < 1e-12 and abs(f["link"]["beta_s_per_byte"] - 8 / 10e9) < 1e-20, f["link"]
ns = sorted({r["ranks"] for r in f["rows"]})
assert ns[0] == 2 and ns[-1] == 10000 and 8192 in ns and len(ns) == 14, ns
assert f["link"]["measured_ranks"] is None and not any(r["measured"] for r in f["rows"])
EOF

# ---- 3. the model from a report: its gradient and rank 0's compute per step -------------------
$BIN train --sync none --layers 64,32,10 --train-samples 512 --eval-samples 64 --steps 6 -q --report $T/one.json >$T/one.log 2>&1 \
    || bad "one-rank report" "$(tail -n 2 $T/one.log)"
$BIN predict --alpha 1e-5 --beta 1e-9 --model $T/one.json --ranks 2,8 --report $T/m.json -q >$T/m.log 2>&1 || bad "predict --model" "$(tail -n 2 $T/m.log)"
check "--model: the report's by_tag.params and time_s.busy" $PY - $T/one.json $T/m.json <<'EOF'
import json, sys
r, f = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
e = r["ranks"][0]
assert f["model"]["grad_bytes"] == e["memory"]["by_tag"]["params"] == 4 * (64 * 32 + 32 + 32 * 10 + 10), f["model"]
assert abs(f["model"]["compute_s"] - e["time_s"]["busy"]) < 1e-15, f["model"]
EOF

# ---- 3b. the figure: plots/plot.py draws a folder's forecast, a line per architecture -------------
PLOTPY=$(bash plots/find_python.sh 2>/dev/null)
if [ -n "$PLOTPY" ]; then
    mkdir -p $T/fig && cp $T/plain.json $T/fig/forecast.json
    "$PLOTPY" plots/plot.py $T/fig >$T/fig.log 2>&1
    check "plots: the forecast drawn, 6 architectures" $PY -c "
import json, sys
m = json.load(open(sys.argv[1]))['forecast']
assert m['status'] == 'drawn' and m['series'] == 6, m" $T/fig/figures.json
else echo "SKIP plots: no python3 with matplotlib (bash plots/find_python.sh says how to get one)"; fi

# ---- 4. refusals: exit 2, a message naming why, nothing written --------------------------------------
refused() { # NAME PATTERN ARGS...
    local name=$1 pat=$2; shift 2
    rm -f $T/no.json
    $BIN predict "$@" --report $T/no.json >$T/r.log 2>&1; local rc=$?
    if [ $rc = 2 ] && grep -q -- "$pat" $T/r.log && [ ! -e $T/no.json ]; then ok "$name: exit 2, says '$pat', nothing written"
    else bad "$name" "exit $rc: $(cat $T/r.log)"; fi
}
refused "no link" "no link: give --links" --grad-bytes 1M
refused "two links" "one link" --link 1gbit --alpha 1e-5 --beta 1e-9 --grad-bytes 1M
refused "a fit without the transport asked for" "has no link for transport shm" --links $T/fit.json --transport shm --grad-bytes 1M
refused "a fit of several links, none picked" "say which with --transport" --links $T/fit.json --grad-bytes 1M
refused "a file that is no fit" "not a fit file" --links $T/one.json --grad-bytes 1M
refused "ranks below 2" "outside 2..1000000" --alpha 1e-5 --beta 1e-9 --grad-bytes 1M --ranks 1,4
refused "ranks above 10^6" "outside 2..1000000" --alpha 1e-5 --beta 1e-9 --grad-bytes 1M --ranks 2..2000000
refused "a model that is not a report" "not a train report" --alpha 1e-5 --beta 1e-9 --model $T/fit.json
refused "no model" "one model" --alpha 1e-5 --beta 1e-9
refused "a beta of 0" "expected seconds per byte" --alpha 1e-5 --beta 0 --grad-bytes 1M
refused "an unknown option" "unknown option '--frobnicate'" --alpha 1e-5 --beta 1e-9 --grad-bytes 1M --frobnicate
finish
