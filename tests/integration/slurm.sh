#!/usr/bin/env bash
# slurm.sh - a one-node Slurm cluster on this machine (munge, slurmctld, slurmd in a temp folder): srun of ring, ps and a dedicated server, the sbatch script, and matrix --launcher slurm
# Prints SKIP <reason> as its last line (exit 0) where Slurm is not installed or its daemons do not start.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
BIN=$(realpath "$BIN")
UP_S=${RINGSIDE_SLURM_UP_S:-30}   # how long the daemons get to bring the node up
RUN_S=120                         # how long one srun / sbatch / matrix may take

# the cluster knows nothing of an allocation this script may itself run in
for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset MASTER_ADDR MASTER_PORT RINGSIDE_JOB_TOKEN RINGSIDE_SERVERS

# ---- what needs no cluster ------------------------------------------------------------------------
cat >"$T/m.json" <<'EOF'
{"name": "m", "base": {"device": "cpu", "layers": "784,16,10", "steps": 4}, "axes": {"sync": ["ring"]}}
EOF
mkdir -p "$T/nosrun"
expect_status "--launcher slurm without srun on the PATH: exit 2" 2 env PATH="$T/nosrun" "$BIN" matrix "$T/m.json" --out "$T/x" --launcher slurm
grep -q "srun is not on the PATH" "$T/last.log" && ok "  ... saying so" || bad "  ... saying so" "$(cat "$T/last.log")"
expect_status "--launcher unknown: exit 2" 2 "$BIN" matrix "$T/m.json" --out "$T/x" --launcher pbs
expect_status "--slurm-args without --launcher slurm: exit 2" 2 "$BIN" matrix "$T/m.json" --out "$T/x" --slurm-args "-p x"
[ ! -e "$T/x" ] && ok "nothing written on bad input" || bad "nothing written on bad input" "$T/x exists"

# ---- the cluster ----------------------------------------------------------------------------------
D="" PIDS=()   # the cluster's folder; munged slurmctld slurmd, in start order

# the last lines of the daemons' logs, on one line
daemon_tails() {
    local out="" f
    for f in munged slurmctld slurmd; do
        [ -s "$D/log/$f.out" ] && out="$out | $f: $(grep -v '^\s*$' "$D/log/$f.out" | tail -n 2 | tr '\n' ' ')"
    done
    echo "${out# | }"
}
# skip WHY: stops what started and ends with SKIP WHY and the daemons' last lines (exit 1 when a
# check above already failed, so that a skip hides no failure)
skip() {
    local tails=""
    [ -n "$D" ] && tails=": $(daemon_tails)"
    stop_all
    echo "$passed passed, $failed failed (before the cluster)"
    echo "SKIP $1$tails"
    [ "$failed" = 0 ] && exit 0 || exit 1
}
stop_all() {
    if [ ${#PIDS[@]} -ge 2 ]; then   # jobs first, while the controller can still end them
        scancel --quiet --user "$(id -un)" 2>/dev/null
        for _ in $(seq 50); do [ -z "$(squeue -h 2>/dev/null)" ] && break; sleep 0.2; done
    fi
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do kill -TERM "${PIDS[$i]}" 2>/dev/null; done
    for _ in $(seq 50); do
        local alive=0
        for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && break
        sleep 0.2
    done
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    PIDS=()
}
trap 'stop_all; rm -rf "$T" ${D:+"$D"}' EXIT
trap 'exit 143' TERM INT   # so that the EXIT trap stops the daemons

sbin() { command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; }; }
MUNGED=$(sbin munged) SLURMCTLD=$(sbin slurmctld) SLURMD=$(sbin slurmd)
for c in MUNGED SLURMCTLD SLURMD; do
    [ -n "${!c}" ] || skip "Slurm is not installed (no ${c,,}; make deps-slurm installs slurm-wlm and munge)"
done
for c in srun sbatch sinfo squeue scontrol scancel munge unmunge; do
    command -v "$c" >/dev/null || skip "Slurm is not installed (no $c; make deps-slurm installs slurm-wlm and munge)"
done

# munge wants every folder above its socket searchable by all, and its key private
D=$(mktemp -d /tmp/ringside-slurm-XXXXXX)
chmod 755 "$D"
mkdir -p "$D/key" "$D/run" "$D/state" "$D/spool" "$D/log"
chmod 700 "$D/key"
chmod 755 "$D/run"
if command -v mungekey >/dev/null; then mungekey --create --keyfile="$D/key/munge.key" >"$D/log/mungekey.out" 2>&1
else dd if=/dev/urandom of="$D/key/munge.key" bs=1 count=1024 2>/dev/null; fi
chmod 600 "$D/key/munge.key"
SOCK="$D/run/munge.socket"
"$MUNGED" -F --key-file="$D/key/munge.key" --socket="$SOCK" --pid-file="$D/run/munged.pid" \
    --seed-file="$D/key/seed" --log-file="$D/log/munged.log" >"$D/log/munged.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 50); do munge -n -S "$SOCK" 2>/dev/null | unmunge -S "$SOCK" >/dev/null 2>&1 && break; sleep 0.2; done
munge -n -S "$SOCK" 2>/dev/null | unmunge -S "$SOCK" >/dev/null 2>&1 || skip "munged did not start in 10 s"

H=$(hostname -s)
CPUS=$(nproc); [ "$CPUS" -ge 8 ] || CPUS=8
CTLD_PORT=$(free_port) SLURMD_PORT=$(free_port)
while [ "$SLURMD_PORT" = "$CTLD_PORT" ]; do SLURMD_PORT=$(free_port); done
cat >"$D/slurm.conf" <<EOF
# one node, this machine, at 127.0.0.1; everything in $D
ClusterName=ringside
SlurmctldHost=$H(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=$(id -un)
SlurmdUser=$(id -un)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
InactiveLimit=0
KillWait=5
# at least 8 CPUs, whatever the machine has, so that the sbatch script's --ntasks-per-node=4 fits
SlurmdParameters=config_overrides
NodeName=$H NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=ringside Nodes=$H Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF="$D/slurm.conf"
"$SLURMCTLD" -D -f "$SLURM_CONF" >"$D/log/slurmctld.out" 2>&1 &
PIDS+=($!)
"$SLURMD" -D -f "$SLURM_CONF" -N "$H" >"$D/log/slurmd.out" 2>&1 &
PIDS+=($!)
t0=$SECONDS state=""
while [ $((SECONDS - t0)) -lt "$UP_S" ]; do
    for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null || skip "a Slurm daemon exited at start"; done
    state=$(timeout 5 sinfo -h -n "$H" -o %t 2>/dev/null)
    [ "$state" = idle ] && break
    sleep 0.5
done
[ "$state" = idle ] || skip "the node did not become idle in $UP_S s (state '${state:-none}')"
# a step that needs nothing of ringside: where this fails, the machine cannot run Slurm jobs
timeout -k 5 30 srun -n 1 --time=1 true >"$D/log/smoke.out" 2>&1 \
    || skip "the cluster is up but cannot run a step (srun -n 1 true: $(tail -n 2 "$D/log/smoke.out" | tr '\n' ' '))"
echo "# a one-node cluster ($H, slurmctld :$CTLD_PORT, slurmd :$SLURMD_PORT) up in $((SECONDS - t0)) s"

# ---- srun: ring, ps, a dedicated server -------------------------------------------------------------
TRAIN=(--device cpu --layers 784,32,10 --steps 30 --warmup 2 --timeout 30 --quiet)

# runs srun with a job's rank-0 address, port and token (what rankenv needs beside srun's variables)
srun_job() {
    MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) RINGSIDE_JOB_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n') \
        timeout -k 5 "$RUN_S" srun --time=5 --kill-on-bad-exit=1 "$@"
}

# check_report NAME FILE SYNC SERVERS: 4 workers (and SERVERS servers), the loss falls, the validator passes
check_report() {
    local n=$1 f=$2 sync=$3 servers=$4
    if ! $PY - "$f" "$servers" >"$T/py.log" 2>&1 <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
servers = int(sys.argv[2])
roles = [x["role"] for x in r["ranks"]]
assert roles.count("worker") == 4 and roles.count("server") == servers, roles
assert r["config"]["ranks"] == 4, r["config"]["ranks"]
curve = r["summary"]["loss_curve"]
assert len(curve) >= 2 and curve[-1][1] < curve[0][1], curve
print("loss %.4f -> %.4f" % (curve[0][1], curve[-1][1]))
EOF
    then bad "$n: the report" "$(tail -n 3 "$T/py.log")"; return; fi
    ok "$n: 4 workers$([ "$servers" -gt 0 ] && echo " + $servers server"), $(cat "$T/py.log")"
    check "$n: the report validates" $PY tests/validate_report.py --expect world=4 --expect sync="$sync" --expect servers="$servers" "$f"
}

check "srun -n 4 --overcommit train --sync ring" srun_job -n 4 --overcommit "$BIN" train --sync ring "${TRAIN[@]}" --report "$T/ring.json"
check_report "srun ring" "$T/ring.json" ring 0
check "srun -n 4 --overcommit train --sync ps" srun_job -n 4 --overcommit "$BIN" train --sync ps "${TRAIN[@]}" --report "$T/ps.json"
check_report "srun ps" "$T/ps.json" ps 0
check "srun -n 5 task.sh train --sync ps --ps-placement dedicated (4 workers + 1 server)" \
    srun_job -n 5 --overcommit --export=ALL,RINGSIDE_SERVERS=1 experiments/slurm/task.sh "$BIN" train --sync ps \
    --ps-placement dedicated "${TRAIN[@]}" --report "$T/ded.json"
check_report "srun dedicated" "$T/ded.json" ps 1
check "srun -n 6 task.sh train --sync byteps --ps-servers 2 (4 workers with shards + 2 CPU servers)" \
    srun_job -n 6 --overcommit --export=ALL,RINGSIDE_SERVERS=2 experiments/slurm/task.sh "$BIN" train --sync byteps \
    --ps-servers 2 "${TRAIN[@]}" --report "$T/byteps.json"
check_report "srun byteps" "$T/byteps.json" byteps 2

# ---- the sbatch script: its own address, port and token; the options passed through -------------
JOB=$(sbatch --parsable --nodes=1 --ntasks-per-node=5 --time=5 --output="$T/sbatch.out" \
    --export=ALL,RINGSIDE_BIN="$BIN",MASTER_ADDR=127.0.0.1 experiments/slurm/ringside.sbatch \
    --sync ps --ps-placement=dedicated "${TRAIN[@]}" --report "$T/sbatch.json" 2>"$T/sbatch.err")
if [ -z "$JOB" ]; then bad "sbatch ringside.sbatch" "$(cat "$T/sbatch.err")"
else
    t0=$SECONDS
    while [ $((SECONDS - t0)) -lt "$RUN_S" ] && [ -n "$(squeue -h -j "$JOB" 2>/dev/null)" ]; do sleep 0.5; done
    if [ -n "$(squeue -h -j "$JOB" 2>/dev/null)" ]; then scancel "$JOB"; bad "sbatch ringside.sbatch" "still running after $RUN_S s"
    elif grep -q "5 tasks (1 dedicated server(s))" "$T/sbatch.out" && [ -s "$T/sbatch.json" ]; then
        ok "sbatch ringside.sbatch --ps-placement=dedicated: 5 tasks, the last a server, in $((SECONDS - t0)) s"
        check_report "sbatch dedicated" "$T/sbatch.json" ps 1
    else bad "sbatch ringside.sbatch" "$(tail -n 4 "$T/sbatch.out" 2>/dev/null)"; fi
fi

# ---- matrix --launcher slurm ------------------------------------------------------------------------
cat >"$T/sm.json" <<'EOF'
{
  "name": "slurm-small",
  "base": {"device": "cpu", "layers": "784,16,10", "steps": 8, "warmup": 1, "train-samples": 512, "eval-samples": 128,
           "ranks": 2, "timeout": 20},
  "axes": {"variants": {"ring": {"sync": "ring"}, "ps": {"sync": "ps"},
                        "ps-dedicated": {"sync": "ps", "ps-placement": "dedicated"},
                        "broken": {"sync": "ring", "data": "/nonexistent"}}},
  "timeout_s": 60
}
EOF
export MASTER_ADDR=127.0.0.1
O="$T/mo"
expect_status "matrix --launcher slurm (4 cells, one failing on purpose): exit 1" 1 \
    timeout -k 5 "$RUN_S" "$BIN" matrix "$T/sm.json" --out "$O" --launcher slurm --slurm-args "--overcommit --time=5"
cp "$T/last.log" "$T/matrix1.log"
grep "^# \[" "$T/matrix1.log" | sed 's/^/    /'   # each step's wall time, for the record
grep -q "each a Slurm job step" "$T/matrix1.log" && grep -q "^# \[3/4\] variant=ps-dedicated r1: ok in" "$T/matrix1.log" \
    && ok "  ... progress lines" || bad "  ... progress lines" "$(head -n 6 "$T/matrix1.log")"
if $PY - "$O" >"$T/py.log" 2>&1 <<'EOF'
import json, os, sys
out = sys.argv[1]
s = json.load(open(os.path.join(out, "summary.json")))
assert s["launcher"] == "slurm" and s["slurm_args"] == ["--overcommit", "--time=5"], s.get("launcher")
by = {r["cell"]: r for r in s["runs"]}
assert sorted(by) == ["variant=broken", "variant=ps", "variant=ps-dedicated", "variant=ring"], sorted(by)
for c in ("variant=ring", "variant=ps", "variant=ps-dedicated"):
    assert by[c]["status"] == "ok" and by[c]["throughput_samples_per_s"] > 0, by[c]
    rep = json.load(open(os.path.join(out, by[c]["report"])))
    roles = [x["role"] for x in rep["ranks"]]
    assert roles.count("worker") == 2 and roles.count("server") == (c == "variant=ps-dedicated"), (c, roles)
b = by["variant=broken"]
assert b["status"] == "failed" and b["exit_code"] != 0 and "nonexistent" in b["error"] and b["report"] == "", b
print("ok")
EOF
then ok "  ... summary: 3 ok (2 workers each, the dedicated cell's server too), the failure recorded with its error"
else bad "  ... summary" "$(tail -n 3 "$T/py.log")"; fi
check "  ... summary and reports validate" $PY tests/validate_report.py "$O/summary.json" "$O/variant=ring-r1.json" "$O/variant=ps-r1.json" "$O/variant=ps-dedicated-r1.json"

expect_status "matrix --launcher slurm --resume: exit 1 (the broken cell again)" 1 \
    timeout -k 5 "$RUN_S" "$BIN" matrix "$T/sm.json" --out "$O" --launcher slurm --slurm-args "--overcommit --time=5" --resume
[ "$(grep -c ": kept (report exists)" "$T/last.log")" = 3 ] && ok "  ... keeps the 3 reports, reruns the failed cell" \
    || bad "  ... resume" "$(head -n 6 "$T/last.log")"

expect_status "matrix --launcher slurm --dry-run: every cell checked as a job step" 0 \
    timeout -k 5 "$RUN_S" "$BIN" matrix "$T/sm.json" --only variant=ps-dedicated --launcher slurm --slurm-args "--overcommit" --dry-run
grep -q "srun --ntasks=3 --overcommit ringside train" "$T/last.log" && grep -q "every cell passed" "$T/last.log" \
    && ok "  ... srun --ntasks=3 for 2 ranks + 1 server" || bad "  ... dry run" "$(tail -n 4 "$T/last.log")"

# "links": "auto": the benches that fit the links are job steps too (2 tasks)
cat >"$T/auto.json" <<'EOF'
{"name": "auto", "base": {"device": "cpu", "layers": "784,16,10", "steps": 4, "ranks": 2, "sync": "ring"}, "links": "auto", "timeout_s": 60}
EOF
expect_status "matrix --launcher slurm with links auto" 0 \
    timeout -k 5 "$RUN_S" "$BIN" matrix "$T/auto.json" --out "$T/auto" --launcher slurm --slurm-args "--overcommit"
if $PY - "$T/auto" >"$T/py.log" 2>&1 <<'EOF'
import json, os, sys
b = json.load(open(os.path.join(sys.argv[1], "links-bench-ring.json")))
assert b["config"]["sync"] == "ring" and len(b["rows"]) >= 2, b["config"]
s = json.load(open(os.path.join(sys.argv[1], "summary.json")))
links = s["prediction"]["links"]
assert any(l["source"].startswith("auto: fitted") for l in links.values()), links
EOF
then ok "  ... the bench ran as a step and its fit is in the summary"; else bad "  ... links auto" "$(tail -n 3 "$T/py.log")"; fi

# a run past the matrix's timeout_s: recorded as a timeout, the step ended, nothing left running
cat >"$T/slow.json" <<'EOF'
{"name": "slow", "base": {"device": "cpu", "layers": "784,64,10", "steps": 1000000, "ranks": 2, "sync": "ring"}, "timeout_s": 4}
EOF
expect_status "matrix --launcher slurm: a run past timeout_s exits 1" 1 \
    timeout -k 5 "$RUN_S" "$BIN" matrix "$T/slow.json" --out "$T/slow" --launcher slurm --slurm-args "--overcommit"
grep -q "TIMEOUT" "$T/last.log" && ok "  ... recorded as TIMEOUT" || bad "  ... TIMEOUT" "$(tail -n 3 "$T/last.log")"
t0=$SECONDS
while [ $((SECONDS - t0)) -lt 20 ] && { [ -n "$(squeue -h 2>/dev/null)" ] || pgrep -f -- "--report $T/slow/" >/dev/null; }; do sleep 0.5; done
[ -z "$(squeue -h 2>/dev/null)" ] && ! pgrep -f -- "--report $T/slow/" >/dev/null \
    && ok "  ... its job step ended, no rank left running ($((SECONDS - t0)) s after)" \
    || bad "  ... left running" "$(squeue -h 2>/dev/null; pgrep -af -- "--report $T/slow/")"
unset MASTER_ADDR

finish
