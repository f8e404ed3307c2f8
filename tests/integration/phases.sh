#!/usr/bin/env bash
# phases.sh - one timeline for every back end: a straggler shows up as idle on the others, the phases add up to the step, comm memory is what each back end allocates, traces carry every back end's spans
#
# For ring, ps colocated, ps dedicated and DataParallel at N = 3: a run with --straggler 1:40
# (rank 1 sleeps 40 ms after its forward every step) and one without. Ranks 0 and 2 must report
# idle within 30% of 40 ms per step, and their comm_exposed may not grow by more than 20% of 40 ms;
# the straggler itself waits for nobody. On every rank of every run the seven phases add up to the
# mean step within 2%. The comm tag's peak equals a formula per back end, on the CPU and on
# "cpu-async" (the CPU with a GPU's staging). --trace files hold every back end's spans.
. "$(dirname "$0")/lib.sh"
M="--layers 784,64,10 --train-samples 4096 --eval-samples 64 --steps 16 --warmup 4 --seed 7 --quiet --timeout 30"
run() { # NAME OPTS...: one job, report in $T/NAME.json
    local name=$1
    shift
    if ! timeout 300 $BIN train $M "$@" --report "$T/$name.json" >"$T/$name.log" 2>&1; then
        bad "$name" "run failed: $(tail -n 3 "$T/$name.log")"
        return 1
    fi
}

while IFS='|' read -r name opts; do
    [ -n "$name" ] || continue
    run "$name-base" -n 3 $opts || continue
    run "$name-slow" -n 3 $opts --straggler 1:40 || continue
    out=$($PY - "$T/$name-base.json" "$T/$name-slow.json" <<'EOF'
import json, sys
base, slow = (json.load(open(p)) for p in sys.argv[1:3])
def workers(r):
    return {e["rank"]: e for e in r["ranks"] if e.get("role") == "worker"}
B, S = workers(base), workers(slow)
msgs, ok = [], True
for r in (0, 2):
    idle = S[r]["time_s"]["phases"]["idle"]
    grow = S[r]["time_s"]["phases"]["comm_exposed"] - B[r]["time_s"]["phases"]["comm_exposed"]
    msgs.append("rank %d idle %.1f ms, comm_exposed %+.1f ms" % (r, idle * 1e3, grow * 1e3))
    ok &= 0.028 <= idle <= 0.052 and grow <= 0.008
idle1 = S[1]["time_s"]["phases"]["idle"]
msgs.append("rank 1 (the straggler) idle %.1f ms" % (idle1 * 1e3))
ok &= idle1 <= 0.012
print("; ".join(msgs))
sys.exit(0 if ok else 1)
EOF
)
    if [ $? = 0 ]; then ok "$name N=3 --straggler 1:40: $out"; else bad "$name N=3 --straggler 1:40" "$out"; fi
    out=$($PY - "$T/$name-base.json" "$T/$name-slow.json" <<'EOF'
import json, sys
worst = 0
for p in sys.argv[1:]:
    for e in json.load(open(p))["ranks"]:
        if e.get("role") != "worker":
            continue
        ph, step = e["time_s"]["phases"], e["time_s"]["step"]["mean"]
        total = sum(ph[k] for k in ("data", "forward", "backward", "optimizer", "comm_exposed", "idle", "other"))
        worst = max(worst, abs(total - step) / step)
print("worst %.3f%% off the mean step" % (worst * 100))
sys.exit(0 if worst <= 0.02 else 1)
EOF
)
    if [ $? = 0 ]; then ok "$name: the phases add up to the step on every rank ($out)"; else bad "$name: phases" "$out"; fi
done <<'EOF'
ring|--sync ring
ps colocated|--sync ps
ps dedicated|--sync ps --ps-placement dedicated
dataparallel|--sync ps --ps-mode dataparallel --global-batch 96
EOF

# ---- comm memory: what each back end allocates to communicate, by formula --------------------
# P = parameters (784*64+64 + 64*10+10 = 50890 floats); the ring's shared-memory lanes: each rank
# maps its own lane and its right neighbour's (a 4096-byte head + the messages, sized to the job by
# ring.h's rule: lane_bytes below) and, when the left neighbour is another rank than the right, the
# left one's head page (its doorbell).
# On "cpu-async" (a GPU's staging) the engine adds a host mirror of the gradients (ring, ps) and of
# the parameters (ps); DataParallel's channel adds rank 0's parameters and output-gradient staging
# (P floats + G x C floats) and another rank's logits (ceil(G/N) x C floats); rank 0's colocated
# server stages its replies in pinned host memory (P floats, ps and DataParallel alike).
for dev in cpu cpu-async; do
    for n in 2 3; do
        run "mem-ring-$dev-$n" -n $n --sync ring --device $dev --steps 3 --warmup 0 || continue
        run "mem-ps-$dev-$n" -n $n --sync ps --device $dev --steps 3 --warmup 0 || continue
        run "mem-dp-$dev-$n" -n $n --sync ps --ps-mode dataparallel --global-batch 96 --device $dev --steps 3 --warmup 0 || continue
        out=$($PY - "$T" "$dev" "$n" <<'EOF'
import json, math, sys
T, dev, N = sys.argv[1], sys.argv[2], int(sys.argv[3])
P, G, C = 784 * 64 + 64 + 64 * 10 + 10, 96, 10
def lane_bytes(N, most):
    # allreduce/ring.h: two of the largest message the cut makes of a collective of `most` floats
    # (a broadcast of them under ZeroMQ's bounds) and the whole collective, in pages, 64 KiB to 8 MiB + 4 KiB
    foot = lambda n: 64 + -(-4 * n // 64) * 64
    lo, hi = (512 if N == 2 else 256) * 256, 1024 * 256
    seg = min(max(-(-most // 4), lo), hi, most)
    b = max(2 * foot(seg), most // seg * foot(seg) + (foot(most % seg) if most % seg else 0))
    return min(max(-(-b // 4096) * 4096, 64 * 1024), 8 * 1024 * 1024 + 4096)
lane = 4096 + lane_bytes(N, P)
stage = 0 if dev == "cpu" else 4 * P
server = lambda r: stage if r == 0 else 0  # the colocated server's reply staging, rank 0 only
want = {"ring": lambda r: 2 * lane + (4096 if N > 2 else 0) + stage,
        "ps": lambda r: 2 * stage + server(r),
        "dp": lambda r: 2 * stage + server(r) + (0 if dev == "cpu" else (4 * P + 4 * G * C if r == 0 else 4 * math.ceil(G / N) * C))}
# and the received ZeroMQ frames held at once (net/zframe.h): a worker holds one reply, the
# parameters and their 56-byte header; rank 0's colocated server keeps the pushes until their sum,
# between one and N of them at a time (as they arrive), with their header frames
H = 56
def frames_ok(b, r, extra):
    if b == "ring": return extra == 0  # shared-memory lanes, no frames
    if r > 0: return extra == 4 * P + H
    return 4 * P <= extra <= N * 4 * P + 4096
bad = []
for b, f in want.items():
    for e in json.load(open("%s/mem-%s-%s-%d.json" % (T, b, dev, N)))["ranks"]:
        got = e["memory"]["by_tag"]["comm"]
        if not frames_ok(b, e["rank"], got - f(e["rank"])):
            bad.append("%s rank %d: comm %d bytes, formula %d + frames %d" % (b, e["rank"], got, f(e["rank"]), got - f(e["rank"])))
print("; ".join(bad) if bad else "ring, ps and DataParallel at N=%d as the formulas say" % N)
sys.exit(1 if bad else 0)
EOF
)
        if [ $? = 0 ]; then ok "comm bytes on $dev: $out"; else bad "comm bytes on $dev N=$n" "$out"; fi
    done
done

# ---- traces: every back end's communication spans, the server's work, the idle spans ---------
while IFS='|' read -r name want opts; do
    [ -n "$name" ] || continue
    run "trace-$name" -n 3 $opts --steps 6 --warmup 1 --straggler 1:20 --trace "$T/trace-$name.trace" || continue
    out=$($PY - "$T/trace-$name.trace" "$want" <<'EOF'
import json, sys
ev = json.load(open(sys.argv[1]))
names = {}
for e in ev:
    if e.get("ph") == "X":
        names.setdefault(e["name"], set()).add(e["pid"])
want = sys.argv[2].split(",")
missing = [w for w in want if w not in names]
for w in ("forward", "backward", "idle"):
    if w not in names:
        missing.append(w)
pids = names.get("forward", set())
print("spans %s on processes %s%s" % (",".join(sorted(names)), sorted(pids), "; missing " + ", ".join(missing) if missing else ""))
sys.exit(1 if missing or len(pids) < 3 else 0)
EOF
)
    if [ $? = 0 ]; then ok "trace $name: $out"; else bad "trace $name" "$out"; fi
done <<'EOF'
ring|comm|--sync ring
ps colocated|comm,server: reduce+update|--sync ps
ps dedicated|comm,server: reduce+update|--sync ps --ps-placement dedicated
dataparallel|comm,scatter,gather+loss,server: reduce+update|--sync ps --ps-mode dataparallel --global-batch 96
EOF

# ---- bad input: --straggler ----------------------------------------------------------------
expect_status "--straggler 3:40 with -n 3 is exit 2" 2 $BIN train -n 3 --straggler 3:40 $M --report "$T/x.json"
expect_status "--straggler 1:-5 is exit 2" 2 $BIN train -n 3 --straggler 1:-5 $M --report "$T/x.json"
expect_status "--straggler 1:abc is exit 2" 2 $BIN train -n 3 --straggler 1:abc $M --report "$T/x.json"
expect_status "--straggler 40 (no rank) is exit 2" 2 $BIN train -n 3 --straggler 40 $M --report "$T/x.json"
[ ! -e "$T/x.json" ] && ok "no report after a refused --straggler" || bad "refused --straggler" "a report was written"
finish
