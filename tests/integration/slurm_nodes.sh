#!/usr/bin/env bash
# slurm_nodes.sh - a Slurm cluster of 3 nodes on this machine (experiments/slurm/cluster.sh): jobs whose ranks span the nodes (shm inside a node, tcp across), the flat and the hierarchical ring over shaped links held to the links' counters, servers on nodes of their own (and a warning where Slurm put one beside workers), the sbatch script, a matrix spread over the nodes, a node lost mid-job
# Prints SKIP <reason> as its last line (exit 0) where namespaces, Slurm or the cluster are not to be had.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
BIN=$(realpath "$BIN")
CL=experiments/slurm/cluster.sh
for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset MASTER_ADDR MASTER_PORT RINGSIDE_JOB_TOKEN RINGSIDE_SERVERS
D=$(mktemp -d /tmp/ringside-nodes-XXXXXX)
trap 'bash $CL down "$D" >/dev/null 2>&1; rm -rf "$T" "$D"' EXIT
trap 'exit 143' TERM INT
skip() { echo "$passed passed, $failed failed (before the cluster)"; echo "SKIP $1"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root for network namespaces"
command -v slurmd >/dev/null || [ -x /usr/sbin/slurmd ] || skip "Slurm is not installed (make deps-slurm installs slurm-wlm and munge)"
t0=$SECONDS
CLUSTER_UP_S=30 bash $CL up "$D" 3 >"$T/up.log" 2>&1; rc=$?
[ $rc = 0 ] || skip "the cluster did not come up: $(tail -n 2 "$T/up.log" | tr '\n' ' ')"
echo "# $(cat "$T/up.log") ($((SECONDS - t0)) s)"
run() { bash $CL run "$D" "$@"; }   # a command where the controller is (srun, sbatch, squeue)
RUN_S=90
TRAIN=(--device cpu --layers 784,32,10 --steps 20 --warmup 2 --timeout 20 --quiet)
srun_job() { # srun with a fresh port and token; MASTER_ADDR from the allocation (task.sh: the first node's NodeAddr)
    run env MASTER_PORT=$((20000 + RANDOM % 20000)) RINGSIDE_JOB_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n') \
        timeout -k 5 $RUN_S srun --time=5 --kill-on-bad-exit=1 --overcommit "$@"
}
# placed FILE WORKERS SERVERS "HOSTS": the report's workers and servers on the hosts named (rank
# order), transports shm within a node and tcp across where the back end has shm, the validator passes
placed() {
    $PY - "$@" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1])); w, k, hosts = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
got = [e["host"] for e in r["ranks"]]
assert [e["role"] for e in r["ranks"]] == ["worker"] * w + ["server"] * k, [e["role"] for e in r["ranks"]]
assert got == hosts, (got, hosts)
assert r["run"]["host"] == hosts[0] and r["summary"]["params_agree"] is not False, r["summary"].get("params_agree")
c = r["summary"]["loss_curve"]; assert c[-1][1] < c[0][1], c
print(" ".join(sorted({e["traffic"]["transport"] for e in r["ranks"]})))
EOF
}

# ---- 1. one job over three nodes ------------------------------------------------------------------
check "srun -N 3 --ntasks-per-node 2 train --sync ring" srun_job -N 3 --ntasks-per-node 2 experiments/slurm/task.sh \
    "$BIN" train --sync ring "${TRAIN[@]}" --report "$T/ring.json"
if tr=$(placed "$T/ring.json" 6 0 "node0 node0 node1 node1 node2 node2" 2>"$T/py.log") && [ "$tr" = "shm tcp" ]; then
    ok "ring: 6 ranks, 2 a node, rank 0 on node0; shm inside a node, tcp between nodes"
else bad "ring over 3 nodes" "$tr $(tail -n 2 "$T/py.log")"; fi
check "ring: the report validates" $PY tests/validate_report.py --expect world=6 "$T/ring.json"
# the bytes by the links they took: a ring rank sends to rank r+1 and hears from r-1, so its bytes go
# over the network exactly where a neighbour is on another node (ranks 1, 3, 5 send across, 0, 2, 4 hear across)
check "ring: by_link puts each rank's bytes on the node or the network, transport and transport_received name its right and left links" $PY - "$T/ring.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
ranks = {e["rank"]: e for e in r["ranks"]}
for k, e in ranks.items():
    t, node = e["traffic"], lambda x: ranks[x % 6]["host"] == e["host"]
    by = t["by_link"]
    assert by["node"]["bytes_sent"] == (t["bytes_sent"] if node(k + 1) else 0), (k, by)
    assert by["network"]["bytes_received"] == (0 if node(k - 1) else t["bytes_received"]), (k, by)
    # what it sent over names its right-hand link, what it received over its left-hand one
    assert (t["transport"], t["transport_received"]) == ("shm" if node(k + 1) else "tcp", "shm" if node(k - 1) else "tcp"), (k, t)
EOF
# the network between nodes made slow (cluster.sh shape: tc tbf on every node's link): what the
# report puts on the network is what the kernel counted on the nodes' links (plus TCP/IP headers,
# acknowledgements and the control plane's messages), and what it keeps on a node never got there
# netlink NAME REPORT: every node's link carried, since the mark, what its ranks' by_link put on the network
netlink() {
    local a=() n
    for n in 0 1 2; do a+=("$(bash $CL bytes "$D" node$n job)"); done
    check "  ... $1: each node's link carried the bytes its ranks' by_link put on the network: no more than 10% and 256 KB over, never less" \
        $PY - "$2" "${a[*]}" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1])); a = [int(x) for x in sys.argv[2].split()]
for n in range(3):
    es = [e for e in r["ranks"] if e["host"] == "node%d" % n]
    for i, way in enumerate(("bytes_sent", "bytes_received")):
        want = sum(e["traffic"]["by_link"]["network"][way] for e in es); got = a[2 * n + i]
        assert want <= got <= 1.10 * want + 262144, ("node%d" % n, way, "report", want, "link", got)
EOF2
}
step_ms() { $PY -c 'import json, sys; print("%.1f" % (json.load(open(sys.argv[1]))["summary"]["step_time_s"] * 1e3))' "$1" 2>/dev/null || echo "?"; }
if bash $CL shape "$D" 100mbit >"$T/shape.log" 2>&1; then
    bash $CL mark "$D" job >/dev/null
    check "ring over links of 100 Mbit/s between nodes (tc tbf)" srun_job -N 3 --ntasks-per-node 2 experiments/slurm/task.sh \
        "$BIN" train --sync ring "${TRAIN[@]}" --report "$T/slow.json"
    netlink "the flat ring" "$T/slow.json"
    # Horovod's hierarchical ring on the real nodes (--nodes 3 agrees with srun's 2 tasks a node):
    # inside each node first, so a third fewer bytes cross the network; the links hold it to that too
    bash $CL mark "$D" job >/dev/null
    check "hierarchical ring (--nodes 3 --hierarchical) over the same links" srun_job -N 3 --ntasks-per-node 2 experiments/slurm/task.sh \
        "$BIN" train --sync ring --nodes 3 --hierarchical "${TRAIN[@]}" --report "$T/hslow.json"
    check "  ... architecture ring-hierarchical, ranks on nodes 0,0,1,1,2,2 of node0..node2" $PY -c "
import json, sys
r = json.load(open(sys.argv[1]))
assert r['backend']['architecture'] == 'ring-hierarchical', r['backend']
assert [(e['host'], e['node']) for e in r['ranks']] == [('node%d' % (i // 2), i // 2) for i in range(6)], [(e['host'], e.get('node')) for e in r['ranks']]" "$T/hslow.json"
    netlink "the hierarchical ring" "$T/hslow.json"
    bash $CL shape "$D" off >/dev/null 2>&1
    # the same two on one host, the nodes emulated (--nodes 3 --link 100mbit): printed, not held to
    # anything (experiments/benchmarks/nodes_cluster.sh measures it with repeats)
    for h in flat hier; do
        "$BIN" train -n 6 --nodes 3 --link 100mbit --sync ring $([ $h = hier ] && echo --hierarchical) "${TRAIN[@]}" \
            --report "$T/emu-$h.json" >"$T/emu.log" 2>&1 || bad "--nodes 3 --link 100mbit ($h) on one host" "$(tail -n 2 "$T/emu.log")"
    done
    echo "# ms a step (rank 0's median, 784,32,10): flat ring $(step_ms "$T/slow.json") on the cluster, $(step_ms "$T/emu-flat.json") emulated;" \
        "hierarchical $(step_ms "$T/hslow.json") on the cluster, $(step_ms "$T/emu-hier.json") emulated"
else echo "# no slow network between the nodes: $(tail -n 1 "$T/shape.log")"; fi
check "srun -N 3 train --sync ps (rank 0's server reached over ipc inside node0, tcp from the others)" \
    srun_job -N 3 --ntasks-per-node 2 experiments/slurm/task.sh "$BIN" train --sync ps "${TRAIN[@]}" --report "$T/ps.json"
tr=$(placed "$T/ps.json" 6 0 "node0 node0 node1 node1 node2 node2" 2>"$T/py.log") && [ "$tr" = "ipc tcp" ] \
    && ok "ps colocated: ipc inside node0, tcp from the other nodes" || bad "ps over 3 nodes" "$tr $(tail -n 2 "$T/py.log")"
# the server in rank 0 splits its bytes too: rank 1's (node0) stay on the node, the others' cross the network
check "ps: by_link on the workers and on rank 0's server" $PY - "$T/ps.json" <<'EOF'
import json, sys
r = {e["rank"]: e for e in json.load(open(sys.argv[1]))["ranks"]}
for k in range(1, 6):
    t = r[k]["traffic"]; by = t["by_link"]
    assert by["node"]["bytes_sent"] == (t["bytes_sent"] if r[k]["host"] == r[0]["host"] else 0), (k, by)
b0, t1 = r[0]["traffic"]["by_link"], r[1]["traffic"]
assert b0["node"]["bytes_sent"] == t1["bytes_received"] and b0["node"]["bytes_received"] == t1["bytes_sent"], (b0, t1)
assert b0["network"]["bytes_received"] == sum(r[k]["traffic"]["bytes_sent"] for k in range(2, 6)), b0
EOF
# a dedicated server and byteps's CPU server on a node of their own: the last task of the step
check "srun -N 3 -n 5 task.sh ps --ps-placement dedicated: 4 workers on node0-1, the server on node2" \
    srun_job -N 3 -n 5 --ntasks-per-node 2 --export=ALL,RINGSIDE_SERVERS=1 experiments/slurm/task.sh "$BIN" train --sync ps \
    --ps-placement dedicated "${TRAIN[@]}" --report "$T/ded.json"
placed "$T/ded.json" 4 1 "node0 node0 node1 node1 node2" >/dev/null 2>"$T/py.log" && ok "  ... the server on node2, by itself" \
    || bad "  ... dedicated placement" "$(tail -n 2 "$T/py.log")"
check "  ... every worker's bytes crossed the network to it (by_link)" $PY -c "
import json, sys
for e in json.load(open(sys.argv[1]))['ranks'][:4]:
    by = e['traffic']['by_link']
    assert by['node']['bytes_sent'] == 0 and by['network']['bytes_sent'] == e['traffic']['bytes_sent'] > 0, by" "$T/ded.json"
check "srun -N 3 -n 5 task.sh byteps --ps-servers 1: the CPU server on node2" \
    srun_job -N 3 -n 5 --ntasks-per-node 2 --export=ALL,RINGSIDE_SERVERS=1 experiments/slurm/task.sh "$BIN" train --sync byteps \
    --ps-servers 1 "${TRAIN[@]}" --report "$T/byteps.json"
placed "$T/byteps.json" 4 1 "node0 node0 node1 node1 node2" >/dev/null 2>"$T/py.log" && ok "  ... byteps's server on node2" \
    || bad "  ... byteps placement" "$(tail -n 2 "$T/py.log")"
# srun's even spread puts a server beside workers (-N 2 -n 4: 2 and 2, the server with worker 2):
# rank 0 says so, naming the server and the worker
check "srun -N 2 -n 4 task.sh ps dedicated (Slurm's spread: the server beside worker 2)" \
    srun_job -N 2 -n 4 --export=ALL,RINGSIDE_SERVERS=1 experiments/slurm/task.sh "$BIN" train --sync ps \
    --ps-placement dedicated "${TRAIN[@]}" --report "$T/shared.json"
if grep -q "warning: dedicated server 0 (task 3, at 10\.79\.[0-9]*\.3) shares its host with worker 2," "$T/last.log" &&
    placed "$T/shared.json" 3 1 "node0 node0 node1 node1" >/dev/null 2>"$T/py.log"; then
    ok "  ... rank 0 warns that server 0 (node1's address) shares its host with worker 2"
else bad "  ... the shared host named" "$(grep -i warn "$T/last.log" | head -n 2) $(tail -n 1 "$T/py.log")"; fi

# ---- 2. equivalence: 6 ranks on 3 nodes with a scattered global batch compute what one rank does ---
M=(--device cpu --layers 784,64,10 --train-samples 2048 --eval-samples 64 --steps 12 --seed 3 --quiet)
"$BIN" train --sync none --batch 96 "${M[@]}" --report "$T/one.json" --save-params "$T/one.bin" >"$T/one.log" 2>&1 || bad "one rank" "$(tail -n 2 "$T/one.log")"
for s in ring tree; do
    srun_job -N 3 --ntasks-per-node 2 experiments/slurm/task.sh "$BIN" train --sync $s --global-batch 96 "${M[@]}" \
        --report "$T/eq-$s.json" --save-params "$T/eq-$s.bin" >"$T/eq.log" 2>&1 || bad "$s equivalence run" "$(tail -n 3 "$T/eq.log")"
    check "$s on 3 nodes == one rank (loss curve and parameters within 1e-5)" $PY tests/compare_runs.py "$T/one.json" "$T/eq-$s.json" \
        --params "$T/one.bin" "$T/eq-$s.bin" --tol 1e-5
done

# ---- 3. the sbatch script over the nodes: rank 0's address from the first node (NodeAddr) ------------
JOB=$(run sbatch --parsable --nodes=3 --ntasks-per-node=2 --overcommit --time=5 --output="$T/sbatch.out" \
    --export=ALL,RINGSIDE_BIN="$BIN" experiments/slurm/ringside.sbatch --sync ring "${TRAIN[@]}" --report "$T/sbatch.json" 2>"$T/sbatch.err")
if [ -z "$JOB" ]; then bad "sbatch ringside.sbatch" "$(cat "$T/sbatch.err")"
else
    t0=$SECONDS
    while [ $((SECONDS - t0)) -lt $RUN_S ] && [ -n "$(run squeue -h -j "$JOB" 2>/dev/null)" ]; do sleep 0.5; done
    if grep -q "6 tasks (0 dedicated server(s)) on 3 node(s): node\[0-2\]; rank 0 at 10\.79\.[0-9]*\.2:" "$T/sbatch.out" &&
        placed "$T/sbatch.json" 6 0 "node0 node0 node1 node1 node2 node2" >/dev/null 2>"$T/py.log"; then
        ok "sbatch --nodes=3: 6 tasks, rank 0 at node0's address, the report names every rank's node"
    else bad "sbatch over 3 nodes" "$(tail -n 3 "$T/sbatch.out" 2>/dev/null) $(tail -n 1 "$T/py.log")"; fi
fi

# the sbatch script with a dedicated server: --nodes=3 --ntasks=9 is 3/3/3 by Slurm's spread; the
# script places it itself (--distribution=arbitrary), the server alone on the third node
JOB=$(run sbatch --parsable --nodes=3 --ntasks=9 --overcommit --time=5 --output="$T/sbded.out" \
    --export=ALL,RINGSIDE_BIN="$BIN" experiments/slurm/ringside.sbatch --sync ps --ps-placement dedicated --ps-servers 1 \
    "${TRAIN[@]}" --report "$T/sbded.json" 2>"$T/sbatch.err")
if [ -z "$JOB" ]; then bad "sbatch ringside.sbatch dedicated" "$(cat "$T/sbatch.err")"
else
    t0=$SECONDS
    while [ $((SECONDS - t0)) -lt $RUN_S ] && [ -n "$(run squeue -h -j "$JOB" 2>/dev/null)" ]; do sleep 0.5; done
    if grep -q "placement (srun --distribution=arbitrary): workers 0-3 on node0, workers 4-7 on node1, server 0 (task 8) on node2" \
        "$T/sbded.out" && ! grep -q "can't honor\|shares its host" "$T/sbded.out" &&
        placed "$T/sbded.json" 8 1 "node0 node0 node0 node0 node1 node1 node1 node1 node2" >/dev/null 2>"$T/py.log"; then
        ok "sbatch --nodes=3 --ntasks=9 dedicated: the server's host (node2) holds no worker"
    else bad "sbatch dedicated placement" "$(tail -n 3 "$T/sbded.out" 2>/dev/null) $(tail -n 1 "$T/py.log")"; fi
fi

# ---- 4. a matrix whose cells are jobs over the nodes --------------------------------------------------
cat >"$T/m.json" <<'EOF'
{"name": "nodes", "base": {"device": "cpu", "layers": "784,16,10", "steps": 6, "warmup": 1, "train-samples": 512,
  "eval-samples": 128, "ranks": 3, "timeout": 20},
 "axes": {"variants": {"ring": {"sync": "ring"}, "ps": {"sync": "ps"}}}, "timeout_s": 60}
EOF
check "matrix --launcher slurm --slurm-args '-N 3 --ntasks-per-node 1': every cell ok" \
    run timeout -k 5 $RUN_S "$BIN" matrix "$T/m.json" --out "$T/mo" --launcher slurm --slurm-args "-N 3 --ntasks-per-node 1 --overcommit --time=5"
$PY - "$T/mo/summary.json" <<'EOF' >"$T/py.log" 2>&1 && ok "  ... the summary names the nodes each run used (node0,node1,node2)" || bad "  ... hosts in the summary" "$(tail -n 2 "$T/py.log")"
import json, sys
s = json.load(open(sys.argv[1]))
assert [r["hosts"] for r in s["runs"]] == ["node0,node1,node2"] * 2, [r.get("hosts") for r in s["runs"]]
EOF

# ---- 5. a matrix cell's node lost: the cell FAILED naming the node, the next cell runs on the others ---
cat >"$T/lm.json" <<'EOF'
{"name": "lost", "base": {"device": "cpu", "layers": "784,32,10", "train-samples": 512, "eval-samples": 128, "timeout": 4},
 "axes": {"variants": {"long": {"sync": "ring", "ranks": 3, "steps": 250, "straggler": "0:20"},
                       "short": {"sync": "ring", "ranks": 2, "steps": 6}}},
 "timeout_s": 60}
EOF
run timeout -k 5 $RUN_S "$BIN" matrix "$T/lm.json" --out "$T/lm" --launcher slurm --slurm-args "--ntasks-per-node 1 --overcommit --time=5" \
    >"$T/lm.log" 2>&1 &
mjob=$!
t0=$SECONDS
# (the cell trains --quiet: its job running on 3 nodes is the sign; 250 steps of 20 ms each leave time)
while [ -z "$(run squeue -h -t R -o %D 2>/dev/null | grep -x 3)" ] && [ $((SECONDS - t0)) -lt 30 ]; do sleep 0.2; done
sleep 2
bash $CL kill "$D" node2 >/dev/null
wait $mjob
$PY - "$T/lm/summary.json" <<'EOF' >"$T/py.log" 2>&1 && ok "matrix: the cell whose node died FAILED naming node2, the next ran on node0 and node1" \
    || bad "matrix with a node lost" "$(tail -n 2 "$T/py.log") $(grep '^# \[' "$T/lm.log")"
import json, sys
by = {r["cell"]: r for r in json.load(open(sys.argv[1]))["runs"]}
l, s = by["variant=long"], by["variant=short"]
assert l["status"] == "failed" and "Node failure on node2" in l["error"] and l["report"] == "", l
assert s["status"] == "ok" and s["hosts"] == "node0,node1", s
EOF
# the node back, --resume runs the failed cell again on all three and keeps the other
bash $CL revive "$D" node2 >"$T/revive.log" 2>&1 || bad "node2 back" "$(cat "$T/revive.log")"
check "matrix --resume with node2 back: the failed cell runs again" run timeout -k 5 $RUN_S "$BIN" matrix "$T/lm.json" --out "$T/lm" \
    --launcher slurm --slurm-args "--ntasks-per-node 1 --overcommit --time=5" --resume
$PY - "$T/lm/summary.json" <<'EOF' >"$T/py.log" 2>&1 && ok "  ... now ok on node0,node1,node2; the other kept" || bad "  ... resume" "$(tail -n 2 "$T/py.log")"
import json, sys
by = {r["cell"]: r for r in json.load(open(sys.argv[1]))["runs"]}
assert by["variant=long"]["status"] == "ok" and by["variant=long"]["hosts"] == "node0,node1,node2", by["variant=long"]
assert by["variant=short"]["resumed"] is True, by["variant=short"]
EOF

# ---- 6. a node lost mid-job: its slurmd and ranks killed; the job ends naming what was lost, no report --
LOG=$T/lost.log
srun_job -N 2 --ntasks-per-node 1 experiments/slurm/task.sh "$BIN" train --sync ring --device cpu --layers 784,32,10 \
    --steps 1000000 --timeout 4 --report "$T/lost.json" >"$LOG" 2>&1 &
job=$!
t0=$SECONDS
while ! grep -q '^# train:' "$LOG" 2>/dev/null && [ $((SECONDS - t0)) -lt 30 ]; do sleep 0.2; done
sleep 1
bash $CL kill "$D" node1 >/dev/null
t0=$SECONDS
while kill -0 $job 2>/dev/null && [ $((SECONDS - t0)) -lt 30 ]; do sleep 0.2; done
if kill -0 $job 2>/dev/null; then kill -9 $job; bad "node lost: the job ends" "still running 30 s after"
elif wait $job; then bad "node lost: the job fails" "exit 0"
elif grep -q "rank 1" "$LOG" && [ ! -e "$T/lost.json" ]; then
    ok "node lost: the job ended $((SECONDS - t0)) s after, naming rank 1 ($(grep -o 'error: .*rank 1[^;(]*' "$LOG" | head -n 1 | cut -c1-90)), no report"
else bad "node lost: rank 1 named, no report" "$(grep -i error "$LOG" | tail -n 3)"; fi
left=$(pgrep -f -- "--report $T/lost.json" | wc -l)
[ "$left" = 0 ] && ok "  ... no rank of it left on any node" || bad "  ... ranks left" "$left processes"
finish
