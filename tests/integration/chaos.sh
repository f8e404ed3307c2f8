#!/usr/bin/env bash
# chaos.sh - kills a random rank, dedicated server or parent at a random moment in 24 seeded runs: no hang, the dead one named, nothing left, no partial report
#
# Runs 1-14 go through the launcher (train -n N): its exit must be non-zero, name the victim
# ("rank K was killed by signal 9" / "server K ..."), and come within --timeout + 5 s of the kill.
# Runs 15-20 start the members by hand with torchrun's variables (no supervisor; each back end
# twice, the dedicated server the victim of run 20): every survivor
# must end by itself, non-zero, within --timeout + 5 s. In every run the report is absent or
# complete (valid JSON with every member), and no *.tmp.* file is left. A run that ends before its
# kill lands must have succeeded with a complete report. Runs 21-24 kill a parent instead: the
# launcher, then the matrix driver running the job as its one cell, each with SIGKILL and with
# SIGHUP: within PARENT_LIMIT s no process of the job may be left (found by the report path in
# their command lines), no report may be written, and a SIGHUP must end the parent with exit 130
# naming it. CHAOS_SEED=S reproduces (default 7).
. "$(dirname "$0")/lib.sh"
SEED=${CHAOS_SEED:-7}
RANDOM=$SEED
TIMEOUT=3
LIMIT=$((TIMEOUT + 5))
MODEL="--layers 64,64,10 --train-samples 1024 --eval-samples 128 --batch 32 --timeout $TIMEOUT --quiet"
BACKENDS=("ring" "ps" "ps --ps-placement dedicated")
STEPS=(1500 20000 20000)   # short runs end near their kill: the gather and report window
echo "# chaos: seed $SEED, --timeout $TIMEOUT, limit $LIMIT s after the kill"
kills=0 finished=0 hangs=0 partial=0 t_all=$SECONDS

# report_ok PATH MEMBERS : absent, or complete (valid JSON, a summary, every member); no temp file
report_ok() {
    local tmp; tmp=$(ls "$1".tmp.* 2>/dev/null | head -n 3)
    if [ -n "$tmp" ]; then echo "temp file left: $tmp"; return 1; fi
    [ -e "$1" ] || return 0
    $PY - "$1" "$2" <<'PY' || return 1
import json, sys
r = json.load(open(sys.argv[1]))
assert r["schema"].startswith("ringside.report/") and "summary" in r and len(r["ranks"]) == int(sys.argv[2]), "incomplete"
PY
}

# now_ms: monotonic enough for a few seconds
now_ms() { date +%s%3N; }

for run in $(seq 1 20); do
    b=${BACKENDS[$((RANDOM % 3))]}
    ((run > 14)) && b=${BACKENDS[$((run % 3))]}      # by hand: each back end twice
    n=$((2 + RANDOM % 2))
    steps=${STEPS[$((RANDOM % 3))]}
    delay_ms=$((100 + RANDOM % 2400))
    servers=0; [[ $b == *dedicated* ]] && servers=1
    members=$((n + servers))
    victim=$((RANDOM % members))
    ((run == 20)) && victim=$n                         # by hand, once: the dedicated server
    if ((victim < n)); then vname="rank $victim"; else vname="server $((victim - n))"; fi
    rep=$T/chaos-$run.json
    mode=launcher; ((run > 14)) && mode=by-hand
    printf '# run %2d: %-8s --sync %-28s -n %d --steps %-5d kill %-8s after %4d ms' "$run" "$mode" "$b" "$n" "$steps" "$vname" "$delay_ms"

    pids=()
    if [ $mode = launcher ]; then
        $BIN train -n $n --sync $b --steps $steps $MODEL --report $rep >$T/chaos-$run.log 2>&1 &
        L=$!
        sleep "$(printf '0.%03d' $((delay_ms % 1000)))"; sleep $((delay_ms / 1000))
        # the launcher forks ranks 0..n-1, then the servers: its children in pid order; a kill
        # drawn before the launcher has forked them all waits until it has (at most 5 s)
        for ((w = 0; w < 100; w++)); do [ "$(pgrep -P $L | wc -l)" -ge $members ] && break; sleep 0.05; done
        vpid=$(pgrep -P $L | sort -n | sed -n "$((victim + 1))p")
    else
        port=$(free_port); token=$(printf 'chaos%d' $run | md5sum | cut -c1-32)
        for ((m = 0; m < members; m++)); do
            if ((m < n)); then
                env RANK=$m WORLD_SIZE=$n LOCAL_RANK=$m LOCAL_WORLD_SIZE=$n RINGSIDE_SERVERS=$servers MASTER_ADDR=127.0.0.1 \
                    MASTER_PORT=$port RINGSIDE_JOB_TOKEN=$token $BIN train --sync $b --steps $steps $MODEL --report $rep \
                    >$T/chaos-$run-m$m.log 2>&1 &
            else
                env RINGSIDE_ROLE=server RINGSIDE_SERVER_ID=0 WORLD_SIZE=$n RINGSIDE_SERVERS=$servers MASTER_ADDR=127.0.0.1 \
                    MASTER_PORT=$port RINGSIDE_JOB_TOKEN=$token $BIN train --sync $b --steps $steps $MODEL --report $rep \
                    >$T/chaos-$run-m$m.log 2>&1 &
            fi
            pids+=($!)
        done
        sleep "$(printf '0.%03d' $((delay_ms % 1000)))"; sleep $((delay_ms / 1000))
        vpid=${pids[$victim]}
    fi

    t0=$(now_ms)
    exec 3>&2 2>/dev/null   # bash's own "Killed" notices for the victim
    # a victim that has already exited (a zombie its parent has not reaped) is not killed by the signal
    vstate=$( [ -n "$vpid" ] && sed -n 's/^[0-9]* (.*) \([A-Z]\).*/\1/p' /proc/$vpid/stat 2>/dev/null)
    if [ -n "$vpid" ] && [ "$vstate" != Z ] && kill -9 "$vpid" 2>/dev/null; then landed=1; else landed=0; fi
    # wait for everything, bounded: a process still alive at the limit is a hang
    rcs=() hung=0
    if [ $mode = launcher ]; then all=($L); else all=("${pids[@]}"); fi
    for p in "${all[@]}"; do
        while kill -0 "$p" 2>/dev/null && (( $(now_ms) - t0 < LIMIT * 1000 + 2000 )); do sleep 0.05; done
        if kill -0 "$p" 2>/dev/null; then hung=1; kill -9 "$p" 2>/dev/null; fi
        wait "$p" 2>/dev/null; rcs+=($?)
    done
    dt=$(( $(now_ms) - t0 ))
    exec 2>&3 3>&-
    # the last step done and the victim exiting between the state check and the signal: a whole
    # run (launcher exit 0, the report complete), which the signal met already finished
    if [ $landed = 1 ] && [ $mode = launcher ] && [ "${rcs[0]}" = 0 ] && [ -e "$rep" ] && \
        ! grep -q "was killed by signal" $T/chaos-$run.log; then landed=0; fi
    ((landed)) && kills=$((kills+1))
    why=""
    if [ $landed = 1 ]; then
        printf '  -> killed, all ended in %4d ms, exit %s' "$dt" "${rcs[*]}"
        ((dt > LIMIT * 1000)) && why="took $dt ms (limit ${LIMIT}000)"
        ((hung)) && why="a process hung past the limit"
        if [ $mode = launcher ]; then
            [ "${rcs[0]}" != 0 ] || why="$why; launcher exit 0"
            grep -q "$vname was killed by signal 9" $T/chaos-$run.log || why="$why; victim not named: $(tail -n 2 $T/chaos-$run.log | tr '\n' ' ')"
        else
            for ((m = 0; m < members; m++)); do
                ((m == victim)) && continue
                if [ "${rcs[$m]}" = 0 ] && ! [ -e "$rep" ]; then why="$why; member $m exit 0 without a report"; fi
            done
        fi
    else
        finished=$((finished+1))
        printf '  -> ended before the kill (exit %s)   ' "${rcs[*]}"
        for rc in "${rcs[@]}"; do [ "$rc" = 0 ] || why="$why; exit $rc without a kill"; done
        [ -e "$rep" ] || why="$why; no report"
    fi
    ((hung)) && hangs=$((hangs+1))
    if ! msg=$(report_ok "$rep" "$members" 2>&1); then partial=$((partial+1)); why="$why; partial report: $msg"; fi
    state=absent; [ -e "$rep" ] && state=complete
    echo "  report $state"
    if [ $mode = by-hand ] && [ $landed = 1 ]; then  # what the survivors said
        for ((m = 0; m < members; m++)); do
            ((m == victim)) || grep -h -m1 "error" $T/chaos-$run-m$m.log | sed "s/^/#         member $m: /"
        done
    fi
    ((hung)) && why="$why; a process outlived the limit (killed: exit 137)"
    if [ -n "$why" ]; then  # every member's last lines, to tell what happened
        if [ $mode = by-hand ]; then logs=$(ls $T/chaos-$run-m*.log); else logs=$T/chaos-$run.log; fi
        for f in $logs; do tail -n 4 "$f" | sed "s|^|#         $(basename "$f"): |"; done
    fi
    if [ -z "$why" ]; then ok "run $run"; else bad "run $run" "$why"; fi
done

# runs 21-24: a parent is the victim. A child of a parent killed by SIGKILL cannot be stopped by it:
# the kernel's death signal must end it (PR_SET_PDEATHSIG), and a SIGHUP must stop the job as
# SIGTERM does. 100000 steps outlast every kill here, so no run may end with a report.
PARENT_LIMIT=3
left_total=0
for run in 21 22 23 24; do
    b=${BACKENDS[$((RANDOM % 3))]}
    n=$((2 + RANDOM % 2))
    delay_ms=$((100 + RANDOM % 900))
    servers=0; [[ $b == *dedicated* ]] && servers=1
    members=$((n + servers))
    if ((run <= 22)); then parent=launcher; else parent=driver; fi
    if ((run % 2)); then sig=KILL; else sig=HUP; fi
    printf '# run %2d: %-8s --sync %-28s -n %d --steps 100000 kill the %-8s with SIG%-4s after %4d ms' "$run" "$parent" "$b" "$n" "$parent" "$sig" "$delay_ms"
    if [ $parent = launcher ]; then
        rep=$T/chaos-$run.json mark="--report $T/chaos-$run.json" log=$T/chaos-$run.log
        $BIN train -n $n --sync $b --steps 100000 $MODEL --report $rep >$log 2>&1 &
        P=$!
    else
        mkdir -p $T/chaos-$run
        rep=$T/chaos-$run/base-r1.json mark="--report $T/chaos-$run/" log=$T/chaos-$run.log
        set -- $b
        extra=""; [ -n "${3:-}" ] && extra=", \"ps-placement\": \"$3\""
        printf '{"name": "chaos", "timeout_s": 120, "base": {"device": "cpu", "layers": "64,64,10", "train-samples": 1024, "eval-samples": 128, "batch": 32, "timeout": %d, "sync": "%s"%s, "steps": 100000, "ranks": %d}}\n' \
            $TIMEOUT "$1" "$extra" $n >$T/chaos-$run.matrix.json
        $BIN matrix $T/chaos-$run.matrix.json --out $T/chaos-$run >$log 2>&1 &
        P=$!
    fi
    # every process of the job up (its launcher, the cell's under a driver, and the members), then the kill
    want=$((members + 1))
    for ((w = 0; w < 100; w++)); do [ "$(pgrep -f -- "$mark" | wc -l)" -ge $want ] && break; sleep 0.05; done
    sleep "$(printf '0.%03d' $delay_ms)"
    t0=$(now_ms)
    exec 3>&2 2>/dev/null
    kill -$sig $P; wait $P; rc=$?
    why="" left=""
    for ((w = 0; w < PARENT_LIMIT * 20; w++)); do left=$(pgrep -f -- "$mark"); [ -z "$left" ] && break; sleep 0.05; done
    dt=$(( $(now_ms) - t0 ))
    exec 2>&3 3>&-
    printf '  -> exit %s, nothing left after %4d ms' "$rc" "$dt"
    if [ -n "$left" ]; then
        why="processes left ${PARENT_LIMIT} s after the kill: $(echo $left)"; left_total=$((left_total + 1))
        for p in $left; do kill -9 $p 2>/dev/null; done
    fi
    if [ $sig = HUP ]; then
        [ "$rc" = 130 ] || why="$why; exit $rc, want 130"
        grep -q "interrupted by SIGHUP" $log || why="$why; SIGHUP not named: $(tail -n 2 $log | tr '\n' ' ')"
    fi
    sleep 0.2   # a survivor's report would be due by now
    [ -e "$rep" ] && why="$why; a report was written for a stopped job"
    if ! msg=$(report_ok "$rep" "$members" 2>&1); then partial=$((partial+1)); why="$why; partial report: $msg"; fi
    echo
    [ -n "$why" ] && tail -n 4 $log | sed "s|^|#         $(basename $log): |"
    if [ -z "$why" ]; then ok "run $run"; else bad "run $run" "$why"; fi
done
echo "# chaos: seed $SEED: 24 runs, $kills kills of a member landed, $finished ended first, $hangs hangs, $left_total parents' jobs left running, $partial partial reports, $((SECONDS - t_all)) s"
finish
