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
#   2a + 2nb; zero-3 1.5x the ring's. --serial: sharded 2(N-1) rounds, dedicated 2 max(N, k), byteps 2 max(N-1+k, N).
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
        "ps-sharded": 2 * a + 1.5 * n * b, "ps-dedicated": 2 * a + 2 * n * b, "byteps": 2 * a + 2 * n * b,
        "zero-3": 1.5 * (6 * a + 1.5 * n * b)}
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
assert len(rows) == len(f["rows"]) == 14, len(rows)
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
    check "plots: the forecast drawn, 7 architectures" $PY -c "
import json, sys
m = json.load(open(sys.argv[1]))['forecast']
assert m['status'] == 'drawn' and m['series'] == 7, m" $T/fig/figures.json
else echo "SKIP plots: no python3 with matplotlib (bash plots/find_python.sh says how to get one)"; fi

# ---- 3b. machines of G ranks behind one NIC (--per-node), and the models held to bench reports (--check) ----
$BIN predict --link 1gbit --grad-bytes 8M --ranks 2..16 --per-node 2 --servers 1 --report $T/mach.json >$T/mach.log 2>&1
check "--per-node 2: the machine-aware forms priced, the flat ring's NIC a rank's, the hierarchical ring's 2(M-1)/M n" $PY - $T/mach.json <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1]))
rows = {(x["ranks"], x["architecture"]): x["comm_s"] for x in r["rows"]}
assert r["options"]["per_node"] == 2 and sorted({x["ranks"] for x in r["rows"]}) == [4, 8, 16], sorted({x["ranks"] for x in r["rows"]})
n, B, a = 8 * 1048576, 125e6, 50e-6
# one bucket (--bucket-mb 25 holds the 8 MiB): the formula's rounds and bytes once
for N in (4, 8, 16):
    M, G = N // 2, 2
    ring = 2 * (N - 1) * a + 2 * (N - 1) / N * n / B
    hier = 2 * (M - 1) * a + 2 * (G - 1) * 50e-6 + 2 * (M - 1) / M * n / B
    assert abs(rows[(N, "ring")] - ring) < 1e-9, (N, rows[(N, "ring")], ring)
    assert abs(rows[(N, "ring-hierarchical")] - hier) < 1e-9, (N, rows[(N, "ring-hierarchical")], hier)
    assert (N, "byteps-hierarchical") in rows and (N, "tree-hierarchical") in rows
EOF2
grep -q "N = 2 left out (not 2 or more machines of 2)" $T/mach.log && ok "--per-node: an N of one machine is named, left out" \
    || bad "--per-node N = 2" "$(head -n 3 $T/mach.log)"
$BIN predict --link 1gbit --grad-bytes 8M --ranks 8 --per-node 2 --intra-link 10gbit --report $T/fab.json >/dev/null 2>&1
check "--intra-link: the fabric's time on top of the unpaced one, the flat forms unchanged" $PY - $T/mach.json $T/fab.json <<'EOF2'
import json, sys
a, b = ({(x["ranks"], x["architecture"]): x["comm_s"] for x in json.load(open(f))["rows"]} for f in sys.argv[1:])
assert b[(8, "ring")] == a[(8, "ring")]
extra = b[(8, "ring-hierarchical")] - a[(8, "ring-hierarchical")]
assert abs(extra - 2 * (8 * 1048576) / 2 / 1.25e9) < 1e-9, extra  # 2(G-1)/G n over 10 Gbit/s
EOF2
# --check: bench reports at 1.1x the model's time: every size 10% off, the geomean 9.1%
mkdir -p $T/chk
$PY - $T/chk <<'EOF2'
import json, os, sys
B, a, n = 25e6, 50e-6, 4 << 20
for N, M, arch in ((4, 2, "ring"), (4, 2, "ring-hierarchical")):
    rows = []
    for size in (1 << 20, 4 << 20):
        t = (2 * (N - 1) * a + 2 * (N - 1) / N * size / B) if arch == "ring" else (2 * (M - 1) * a + 2 * 50e-6 + 2 * (M - 1) / M * size / B)
        rows.append({"size_bytes": size, "time_us": t / 1.1 * 1e6})
    json.dump({"schema": "ringside.bench/1", "config": {"ranks": N, "nodes": M, "wire": "fp32",
               "link": {"text": "200mbit", "bandwidth_bytes_per_s": B, "latency_s": 0}},
               "backend": {"architecture": arch, "servers": 0}, "env": {"cores": 2}, "rows": rows},
              open(os.path.join(sys.argv[1], arch + ".json"), "w"))
EOF2
$BIN predict --link 200mbit --grad-bytes 4M --ranks 4 --per-node 2 --check $T/chk --report $T/chk.json >$T/chk.log 2>&1
check "--check: the model held to bench reports, per N and architecture, printed and in the report" $PY - $T/chk.json $T/chk.log <<'EOF2'
import json, sys
c = json.load(open(sys.argv[1]))["check"]["rows"]
assert sorted(x["architecture"] for x in c) == ["ring", "ring-hierarchical"], c
assert all(abs(x["geomean_error"] - 0.1) < 1e-6 and x["sizes"] == 2 and x["nodes"] == 2 for x in c), c
log = open(sys.argv[2]).read()
assert "ASTRA-sim publishes 2.8-20.6%" in log and "ring-hierarchical" in log.split("geometric mean")[1], log[-600:]
EOF2

# ---- --software: the cost a message adds to --link's latency, a time or a fit's alpha ----------------
#   the ring at N = 4 in one bucket is 6 rounds: 6 x (200 + S) us + 1.5 n / 125 MB/s
soft() { # S: the ring's seconds at N = 4 for 4 MB under --link 1gbit,200us with --software S (and --transport ipc for a file)
    $BIN predict --link 1gbit,200us --software "$@" --grad-bytes 4000000 --bucket-mb 0 --ranks 4 --csv $T/soft.csv -q >$T/soft.log 2>&1 &&
        $PY -c "import csv, sys; print([r for r in csv.DictReader(open(sys.argv[1])) if r['architecture'] == 'ring'][0]['comm_s'])" $T/soft.csv
}
a=$(soft 100us); b=$(soft 50us); c=$(soft $T/fit.json --transport ipc)
$PY -c "
import sys
a, b, c = map(float, sys.argv[1:])
want = lambda s: 6 * (200e-6 + s) + 1.5 * 4e6 / 125e6
assert abs(a - want(100e-6)) < 1e-9 and abs(b - want(50e-6)) < 1e-9 and abs(c - want(10e-6)) < 1e-9, (a, b, c)
" "$a" "$b" "$c" && ok "--software: the ring's 6 rounds at 200 us + 100 us, + 50 us and + the fit's 10 us (by hand)" \
    || bad "--software" "ring $a / $b / $c s: $(cat $T/soft.log)"

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
refused "--software without --link" "give --link" --alpha 1e-5 --beta 1e-9 --software 10us --grad-bytes 1M
refused "--software not a time or a fit" "--software 'fast'" --link 1gbit --software fast --grad-bytes 1M
refused "a fit without the transport asked for" "has no link for transport shm" --links $T/fit.json --transport shm --grad-bytes 1M
refused "a fit of several links, none picked" "say which with --transport" --links $T/fit.json --grad-bytes 1M
refused "a file that is no fit" "not a fit file" --links $T/one.json --grad-bytes 1M
refused "ranks below 2" "outside 2..1000000" --alpha 1e-5 --beta 1e-9 --grad-bytes 1M --ranks 1,4
refused "ranks above 10^6" "outside 2..1000000" --alpha 1e-5 --beta 1e-9 --grad-bytes 1M --ranks 2..2000000
refused "a model that is not a report" "not a train report" --alpha 1e-5 --beta 1e-9 --model $T/fit.json
refused "no model" "one model" --alpha 1e-5 --beta 1e-9
refused "a beta of 0" "expected seconds per byte" --alpha 1e-5 --beta 0 --grad-bytes 1M
refused "an unknown option" "unknown option '--frobnicate'" --alpha 1e-5 --beta 1e-9 --grad-bytes 1M --frobnicate
refused "--per-node 0" "expected ranks a machine" --link 1gbit --grad-bytes 1M --per-node 0
refused "--per-node with no whole machines" "no N of --ranks 2,3 is 2 or more machines of 4" --link 1gbit --grad-bytes 1M --ranks 2,3 --per-node 4
refused "--intra-link without --per-node" "without --per-node G > 1" --link 1gbit --grad-bytes 1M --intra-link 10gbit
refused "--intra-link malformed" "--intra-link fast" --link 1gbit --grad-bytes 1M --per-node 2 --intra-link fast
refused "--check on a folder that is not there" "cannot read the folder" --link 1gbit --grad-bytes 1M --check $T/nowhere
finish
