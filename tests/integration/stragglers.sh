#!/usr/bin/env bash
# stragglers.sh - ps under --ps-consistency async and ssp:S: loss near sync's, ssp:0 = sync bit for bit, staleness within S, async past a straggling ring, --time-budget, bad input, a straggler started by hand ends with the job
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.." || exit 1
SMALL="--layers 64,128,10 --train-samples 2048 --eval-samples 256 --seed 3 --batch 32"
# the documented margin (docs/report-schema.md, staleness): the mean loss of the last 10 steps
# within 0.05 of sync's (measured on this model: 0.000 to 0.02 at N = 3 with or without a straggler)
MARGIN=0.05

run() { # NAME ARGS...: a training run whose report is $T/NAME.json, checked by the validator
    local n=$1; shift
    if timeout 300 "$BIN" train "$@" -q --report "$T/$n.json" >"$T/$n.log" 2>&1 \
        && $PY tests/validate_report.py "$T/$n.json" >"$T/$n.val" 2>&1; then return 0; fi
    bad "$n" "$(tail -n 3 "$T/$n.log" "$T/$n.val" 2>/dev/null)"
    return 1
}
py() { $PY - "$@" >"$T/py.log" 2>&1; }

# ---- loss near sync's, ssp:0 exactly sync -------------------------------------------------------
run sync -n 3 --sync ps --steps 60 $SMALL --straggler 2:5
for c in async ssp:2 ssp:0; do run "$c" -n 3 --sync ps --ps-consistency $c --steps 60 $SMALL --straggler 2:5; done
for c in async ssp:2; do
    py "$T/sync.json" "$T/$c.json" "$MARGIN" <<'PY' && ok "$c at N = 3: loss within $MARGIN of sync's ($(cat $T/py.log))" || bad "$c loss" "$(cat $T/py.log)"
import json, sys
tail = lambda p: sum(x[1] for x in json.load(open(p))["summary"]["loss_curve"][-10:]) / 10
a, b, m = tail(sys.argv[1]), tail(sys.argv[2]), float(sys.argv[3])
print("sync %.4f, %.4f" % (a, b))
assert len(json.load(open(sys.argv[2]))["summary"]["loss_curve"]) == 60
assert b <= a + m and b >= a - m, "differs by %.4f" % (b - a)
PY
done
py "$T/sync.json" "$T/ssp:0.json" <<'PY' && ok "ssp:0 reproduces sync: the same loss curve and parameters, bit for bit" || bad "ssp:0 = sync" "$(cat $T/py.log)"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a["summary"]["loss_curve"] == b["summary"]["loss_curve"], "loss curves differ"
assert [e["params_hash"] for e in a["ranks"]] == [e["params_hash"] for e in b["ranks"]], "parameters differ"
assert "staleness" not in b["summary"]
PY

# ---- staleness within S, with a straggler making it matter --------------------------------------
run ssp1 -n 3 --sync ps --ps-consistency ssp:1 --steps 40 $SMALL --straggler 2:20
run ssp3 -n 3 --sync ps --ps-consistency ssp:3 --steps 40 $SMALL --straggler 2:20 --ps-placement dedicated --ps-servers 2
for spec in "ssp1 1" "ssp3 3" "ssp:2 2"; do
    set -- $spec
    py "$T/$1.json" "$2" <<'PY' && ok "ssp:$2: staleness never above $2, and reached ($(cat $T/py.log))" || bad "ssp:$2 staleness" "$(cat $T/py.log)"
import json, sys
r, S = json.load(open(sys.argv[1])), int(sys.argv[2])
w = [e for e in r["ranks"] if e["role"] == "worker"]
mx = [e["staleness"]["max"] for e in w]
print("per worker max %s, mean %s" % (mx, ["%.2f" % e["staleness"]["mean"] for e in w]))
assert max(mx) <= S and r["summary"]["staleness"]["max"] <= S
assert max(mx) >= 1, "the straggler never made a worker wait"
steps = [e["staleness"]["steps"] for e in w]
assert len(set(steps)) > 1 or S == 0, "every worker took the same steps: %s" % steps
PY
done
py "$T/async.json" <<'PY' && ok "async: pushes per step sum to N, every worker's steps counted ($(cat $T/py.log))" || bad "async pushes" "$(cat $T/py.log)"
import json, sys
r = json.load(open(sys.argv[1]))
st = r["summary"]["staleness"]
rows = st["pushes_per_step"]
assert len(rows) == 60 and all(sum(x) == 3 for x in rows[:-1]), rows[:5]
print("staleness max %d, mean %.2f" % (st["max"], st["mean"]))
PY

# ---- a straggler: async's throughput >= 1.5x the ring's under an emulated link ------------------
LINK="--link 1gbit,100us"
run ring-slow -n 3 --sync ring --steps 40 $SMALL --straggler 2:30 $LINK
run async-slow -n 3 --sync ps --ps-consistency async --steps 40 $SMALL --straggler 2:30 $LINK
py "$T/ring-slow.json" "$T/async-slow.json" <<'PY' && ok "--straggler 2:30 at N = 3 under --link: async >= 1.5x the ring's throughput ($(cat $T/py.log))" || bad "async vs ring throughput" "$(cat $T/py.log)"
import json, sys
a, b = (json.load(open(p))["summary"]["throughput_samples_per_s"] for p in sys.argv[1:3])
print("ring %.0f, async %.0f samples/s: x%.1f" % (a, b, b / a))
assert b >= 1.5 * a
PY

# ---- --time-budget: every back end stops at the same moment -------------------------------------
run tb-ring -n 3 --sync ring --steps 100000 --time-budget 1 $SMALL --straggler 1:10
run tb-ps -n 3 --sync ps --steps 100000 --time-budget 1 $SMALL --straggler 1:10 --ps-placement dedicated
run tb-async -n 3 --sync ps --ps-consistency async --steps 100000 --time-budget 1 $SMALL --straggler 1:10
for n in tb-ring tb-ps tb-async; do
    py "$T/$n.json" <<'PY' && ok "$n: --time-budget 1 ends the run after about 1 s ($(cat $T/py.log))" || bad "$n time budget" "$(cat $T/py.log)"
import json, sys
r = json.load(open(sys.argv[1]))
S, wall = r["summary"]["steps"], r["run"]["wall_s"]
print("%d steps, %.2f s" % (S, wall))
assert 0 < S < 100000
assert wall < 1 + 8, wall
PY
done

# ---- bad input: exit 2 naming the value, no report ----------------------------------------------
for spec in "ssp:-1|--ps-consistency ssp:-1" "ssp:1.5|--ps-consistency ssp:1.5" "ssp:|--ps-consistency ssp:" \
            "async with ring|--ps-consistency async --sync ring" "stale|--ps-consistency stale --sync ps" \
            "async with dataparallel|--ps-consistency async --sync ps --ps-mode dataparallel --global-batch 32" \
            "time budget|--time-budget -1" "a lockstep straggler past --timeout|--straggler 1:6000 --timeout 5 --sync ring"; do
    name=${spec%%|*}; args=${spec#*|}
    "$BIN" train -n 2 $args --steps 2 --report "$T/bad.json" >"$T/bad.log" 2>&1; rc=$?
    if [ "$rc" = 2 ] && [ ! -e "$T/bad.json" ] && grep -q -- "${args%% *}" "$T/bad.log"; then ok "refused: $name (exit 2, named)"
    else bad "refused: $name" "exit $rc: $(head -n 2 "$T/bad.log")"; fi
done
# a worker more than --timeout behind under ssp: named, non-zero exit, bounded
timeout 60 "$BIN" train -n 3 --sync ps --ps-consistency ssp:1 --steps 20 $SMALL --straggler 2:3000 --timeout 1 \
    --report "$T/behind.json" >"$T/behind.log" 2>&1; rc=$?
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "rank 2 fell more than 1 s behind under --ps-consistency ssp:1" "$T/behind.log"; then
    ok "a worker --timeout behind under ssp: exit $rc naming rank 2"
else bad "worker behind" "exit $rc: $(grep error "$T/behind.log" | head -n 3)"; fi

# ---- a straggler of a job started by hand ends with the job -----------------------------------------
# torchrun-style variables, no launcher to stop it: rank 0 gives up on it after --timeout 2 and
# closes its control plane; rank 1, asleep for 30 s a step, must notice within a few seconds
port=$(free_port)
for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RINGSIDE_JOB_TOKEN=5eed0123abcd4567 \
        timeout 25 "$BIN" train --sync ps --ps-consistency async --steps 4 $SMALL --straggler 1:30000 --timeout 2 -q \
        --report "$T/byhand.json" >"$T/byhand$r.log" 2>&1 &
    eval "p$r=$!"
done
t0=$SECONDS
wait $p0; r0=$?
wait $p1; r1=$?
if [ "$r0" != 0 ] && [ "$r1" != 0 ] && [ "$r1" != 124 ] && [ $((SECONDS - t0)) -le 10 ] &&
    grep -q "rank 0 ended the job during --straggler's sleep (step 0" "$T/byhand1.log"; then
    ok "a by-hand async straggler ends with the job (exit $r0/$r1 within $((SECONDS - t0)) s, not 30)"
else bad "a by-hand straggler" "exit $r0/$r1 after $((SECONDS - t0)) s: $(cat "$T/byhand0.log" "$T/byhand1.log" | tail -n 3)"; fi

finish
