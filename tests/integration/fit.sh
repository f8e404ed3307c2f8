#!/usr/bin/env bash
# fit.sh - `ringside fit`: alpha and beta recovered from exact sweeps per transport, the fit's quality, a real bench, bad input
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh

# exact sweeps: t = alpha A + beta B with the model's A, B (experiments/predict.h):
#   ring on 2 ranks over shm: A = 2, B = S;  ps colocated on 3 ranks over tcp: A = 4, B = 4 S
$PY - "$T" <<'EOF'
import json, os, sys
d = sys.argv[1]
def bench(name, sync, n, transport, a, b, coeff, sizes, extra=None):
    rows = [{"size_bytes": s, "time_us": (coeff(s)[0] * a + coeff(s)[1] * b) * 1e6} for s in sizes]
    cfg = {"sync": sync, "ranks": n, "transport": transport}
    cfg.update(extra or {})
    json.dump({"schema": "ringside.bench/1", "config": cfg, "rows": rows, "summary": {"wrong": 0}}, open(os.path.join(d, name), "w"))
sizes = [1024 << (2 * k) for k in range(7)]          # 1K .. 4M, factor 4
bench("ring-shm.json", "ring", 2, "shm", 2e-5, 3e-10, lambda s: (2, s), sizes)
bench("ps-tcp.json", "ps", 3, "tcp", 7e-5, 8e-10, lambda s: (4, 4 * s), sizes)
bench("ring4-shm.json", "ring", 4, "shm", 2e-5, 3e-10, lambda s: (6, 1.5 * s), sizes[:4])   # pooled with ring-shm
bench("one-size.json", "ring", 2, "ipc", 2e-5, 3e-10, lambda s: (2, s), [4096, 4096])
bench("one-rank.json", "ring", 1, "", 0, 0, lambda s: (0, 0), sizes)
bench("pigeon.json", "carrier-pigeon", 2, "tcp", 2e-5, 3e-10, lambda s: (2, s), sizes)
json.dump({"schema": "ringside.report/1", "config": {}}, open(os.path.join(d, "train.json"), "w"))
EOF

check "fit on two transports exits 0" "$BIN" fit "$T/ring-shm.json" "$T/ps-tcp.json" "$T/ring4-shm.json" --report "$T/fit.json"
cp "$T/last.log" "$T/fit.log"
if $PY - "$T/fit.json" "$T/fit.log" <<'EOF'
import json, sys
f = json.load(open(sys.argv[1]))
assert f["schema"] == "ringside.fit/1", f["schema"]
L = f["links"]
assert sorted(L) == ["shm", "tcp"], sorted(L)
for k, a, b, n in (("shm", 2e-5, 3e-10, 11), ("tcp", 7e-5, 8e-10, 7)):
    x = L[k]
    assert abs(x["alpha_s"] - a) <= 1e-9 * a and abs(x["beta_s_per_byte"] - b) <= 1e-9 * b, (k, x)
    assert x["points"] == n and x["r2"] > 1 - 1e-9 and abs(x["worst_relative_residual"]) < 1e-6, (k, x)
    assert x["min_bytes"] == 1024 and x["max_bytes"] == 4 << 20, x
assert sorted(L["shm"]["sources"]) == sorted([sys.argv[1].replace("fit.json", s) for s in ("ring-shm.json", "ring4-shm.json")])
text = open(sys.argv[2]).read()
lines = [l for l in text.splitlines() if not l.startswith("#")]
assert len(lines) == 2 and lines[0].split()[0] == "shm" and lines[1].split()[0] == "tcp", lines
assert "20.00" in lines[0] and "0.3000" in lines[0] and "70.00" in lines[1] and "0.8000" in lines[1], lines
EOF
then ok "alpha and beta recovered per transport (pooled over N), R^2 1, worst residual 0, one data line each"
else bad "exact fit" "$(cat "$T/fit.log")"; fi

# a noisy point is the worst residual, named with its size and report
$PY - "$T/ring-shm.json" "$T/noisy.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); r["rows"][3]["time_us"] *= 1.5; json.dump(r, open(sys.argv[2], "w"))
EOF
check "fit on a noisy sweep exits 0" "$BIN" fit "$T/noisy.json"
if grep -qE "^  shm .* -[0-9.]+% at 64K \(.*noisy.json\)" "$T/last.log" && ! grep -qE " 1\.0000 " "$T/last.log"; then
    ok "the worst residual names its size and report; R^2 below 1"; else bad "noisy fit" "$(cat "$T/last.log")"; fi

# the report's placement and servers choose the model: a sharded sweep on 3 ranks (A = 2,
# B = 4/3 S) and a dedicated one on 2 ranks with 2 servers (A = 2, B = 2 S) are recovered exactly
# (read as colocated, A = 4, B = 4 S, they would not be)
$PY - "$T" <<'EOF'
import json, os, sys
d = sys.argv[1]
sizes = [1024 << (2 * k) for k in range(6)]
for name, extra, coeff in (("sharded.json", {"ps_placement": "sharded"}, lambda s: (2, 4 * s / 3)),
                           ("dedicated.json", {"ps_placement": "dedicated", "ps_servers": 2}, lambda s: (2, 2 * s))):
    n = 3 if name == "sharded.json" else 2
    rows = [{"size_bytes": s, "time_us": (coeff(s)[0] * 3e-5 + coeff(s)[1] * 5e-10) * 1e6} for s in sizes]
    cfg = {"sync": "ps", "ranks": n, "transport": "ipc"}
    cfg.update(extra)
    json.dump({"schema": "ringside.bench/1", "config": cfg, "rows": rows, "summary": {"wrong": 0}}, open(os.path.join(d, name), "w"))
EOF
for pl in sharded dedicated; do
    "$BIN" fit "$T/$pl.json" --report "$T/fit-$pl.json" >"$T/last.log" 2>&1
    if $PY -c "
import json, sys
x = json.load(open(sys.argv[1]))['links']['ipc']
assert abs(x['alpha_s'] - 3e-5) < 1e-12 and abs(x['beta_s_per_byte'] - 5e-10) < 1e-18 and x['r2'] > 1 - 1e-9, x
" "$T/fit-$pl.json" 2>>"$T/last.log"; then ok "fit models a $pl bench by its placement (alpha, beta recovered)"
    else bad "fit of a $pl bench" "$(tail -n 3 "$T/last.log")"; fi
done

# bad input: exit 2, one line naming the file and the problem, nothing written
refuse() { # NAME WANT ARGS...
    local name=$1 want=$2; shift 2
    "$BIN" fit "$@" --report "$T/never.json" >"$T/last.log" 2>&1; local rc=$?
    if [ "$rc" = 2 ] && grep -q -- "$want" "$T/last.log" && [ ! -e "$T/never.json" ]; then ok "refused: $name"
    else bad "refused: $name" "exit $rc, want 2 and '$want': $(cat "$T/last.log")"; fi
}
refuse "a train report" "train.json: schema ringside.report/1, expected a bench report" "$T/train.json"
refuse "a bench on one rank" "one-rank.json: a bench on 1 rank moves nothing" "$T/one-rank.json"
refuse "one size only" "transport ipc: 2 rows of 1 size: a fit needs 2 sizes or more" "$T/one-size.json"
refuse "a back end without a model" "pigeon.json: --sync carrier-pigeon (colocated): no alpha-beta model" "$T/pigeon.json"
refuse "a missing file" "nonexistent.json" "$T/nonexistent.json"
expect_status "no reports: exit 2" 2 "$BIN" fit
expect_status "an unknown option: exit 2" 2 "$BIN" fit --fast "$T/ring-shm.json"
check "--help exits 0" "$BIN" fit --help

# a real sweep on this machine: positive constants, a finite R^2
if "$BIN" bench -n 2 --sync ring -b 1K -e 256K -f 4 -w 1 -i 3 --timeout 30 --report "$T/real.json" >"$T/bench.log" 2>&1; then
    check "fit on a real bench report exits 0" "$BIN" fit "$T/real.json" --report "$T/real-fit.json"
    if $PY -c "
import json,sys
L=json.load(open(sys.argv[1]))['links']
assert len(L)==1
x=list(L.values())[0]
assert x['alpha_s']>0 and x['beta_s_per_byte']>=0 and x['r2']<=1 and x['points']==5, x
" "$T/real-fit.json"; then ok "real fit: alpha > 0, 5 points (1K to 256K by 4)"; else bad "real fit" "$(cat "$T/last.log")"; fi
else bad "bench -n 2 --sync ring" "$(tail -n 3 "$T/bench.log")"; fi

# the message layer: one link is one layer's per-message cost, so a fit never mixes two
if "$BIN" bench -n 2 --sync ring --transport tcp --msg-layer direct -b 1K -e 256K -f 4 -w 1 -i 3 --timeout 30 --report "$T/direct.json" >"$T/bd.log" 2>&1 &&
    "$BIN" bench -n 2 --sync ring --transport tcp -b 1K -e 256K -f 4 -w 1 -i 3 --timeout 30 --report "$T/zmq.json" >"$T/bz.log" 2>&1; then
    "$BIN" fit "$T/zmq.json" "$T/direct.json" >"$T/last.log" 2>&1; rc=$?
    [ $rc = 2 ] && grep -q "message layer" "$T/last.log" && ok "fit refuses reports of two message layers for one link (exit 2, says why)" ||
        bad "fit mixing layers" "exit $rc: $(cat "$T/last.log")"
    check "fit on the direct layer's report exits 0" "$BIN" fit "$T/direct.json" --report "$T/direct-fit.json"
    $PY -c "import json,sys; x=list(json.load(open(sys.argv[1]))['links'].values())[0]; sys.exit(0 if x['msg_layer']=='direct' else 1)" "$T/direct-fit.json" &&
        grep -q "tcp/direct" "$T/last.log" && ok "the fit names the layer (msg_layer, tcp/direct)" || bad "fit layer" "$(cat "$T/last.log")"
else bad "bench --msg-layer direct" "$(tail -n 3 "$T/bd.log")"; fi

# the timing rule: calls back to back (--barrier none) overlap, so a fit never mixes the two rules
if "$BIN" bench -n 2 --sync ring --transport tcp --barrier none -b 1K -e 256K -f 4 -w 1 -i 3 --timeout 30 --report "$T/none.json" >"$T/bn.log" 2>&1; then
    "$BIN" fit "$T/zmq.json" "$T/none.json" >"$T/last.log" 2>&1; rc=$?
    [ $rc = 2 ] && grep -q "barrier" "$T/last.log" && ok "fit refuses reports of two timing rules for one link (exit 2, says why)" ||
        bad "fit mixing --barrier rules" "exit $rc: $(cat "$T/last.log")"
    check "fit on a --barrier none report exits 0" "$BIN" fit "$T/none.json" --report "$T/none-fit.json"
    $PY -c "import json,sys; x=list(json.load(open(sys.argv[1]))['links'].values())[0]; sys.exit(0 if x['barrier']=='none' else 1)" "$T/none-fit.json" &&
        ok "the fit records the rule (barrier)" || bad "fit barrier" "$(cat "$T/none-fit.json")"
else bad "bench --barrier none" "$(tail -n 3 "$T/bn.log")"; fi

finish
