#!/usr/bin/env bash
# blame.sh - without a supervisor (ranks and servers started by hand), the survivors of a killed member name it, not a live one starved by its failure
. "$(dirname "$0")/lib.sh"
N=2

# run_killed NAME SYNC_OPTS SERVERS VICTIM: starts N workers and SERVERS dedicated servers with torchrun's
# variables, SIGKILLs member VICTIM (workers 0..N-1, then the servers) once training runs (rank 0 has
# said "# train:", which it says once every member has joined, and half a second more), waits for
# every survivor (each must end by itself, non-zero, within timeout + 8 s) and leaves their logs in $T/NAME-m*.log
run_killed() {
    local name=$1 opts=$2 k=$3 victim=$4 port pids=() m t0
    port=$(free_port)
    local common="$opts --layers 784,32,10 --steps 100000 --timeout 2 --train-samples 512 --report $T/$name.json"
    for r in $(seq 0 $((N - 1))); do
        RANK=$r WORLD_SIZE=$N LOCAL_RANK=$r LOCAL_WORLD_SIZE=$N RINGSIDE_SERVERS=$k MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            $BIN train $common >$T/$name-m$r.log 2>&1 & pids+=($!)
    done
    for s in $(seq 0 $((k - 1))); do
        RINGSIDE_ROLE=server RINGSIDE_SERVER_ID=$s WORLD_SIZE=$N RINGSIDE_SERVERS=$k MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            $BIN train $common >$T/$name-m$((N + s)).log 2>&1 & pids+=($!)
    done
    # a loaded machine can take seconds to form the job: a kill before then tests the rendezvous, not this
    t0=$SECONDS
    while ! grep -q '^# train:' $T/$name-m0.log 2>/dev/null && [ $((SECONDS - t0)) -lt 30 ]; do sleep 0.1; done
    grep -q '^# train:' $T/$name-m0.log || bad "$name: the job formed within 30 s" "$(tail -n 3 $T/$name-m0.log)"
    sleep 0.5
    kill -9 ${pids[$victim]} 2>/dev/null; wait ${pids[$victim]} 2>/dev/null
    t0=$SECONDS
    local ended=1
    for m in "${!pids[@]}"; do
        [ $m = $victim ] && continue
        while kill -0 ${pids[$m]} 2>/dev/null && [ $((SECONDS - t0)) -lt 10 ]; do sleep 0.2; done
        if kill -0 ${pids[$m]} 2>/dev/null; then ended=0; kill -9 ${pids[$m]}; fi
        wait ${pids[$m]} 2>/dev/null
    done
    [ $ended = 1 ] && ok "$name: every survivor ended by itself" || bad "$name: every survivor ended by itself" "one still ran 10 s after the kill"
}
# says NAME MEMBER PATTERN: member's error line matches the pattern
says() {
    if grep -q "error: .*$3" $T/$1-m$2.log; then ok "$1: member $2 says '$3'"; else bad "$1: member $2 says '$3'" "$(grep -v '^#' $T/$1-m$2.log | tail -n 2)"; fi
}
# never NAME MEMBER PATTERN: member's error does not blame what is alive
never() {
    if grep -q "error: .*$3" $T/$1-m$2.log; then bad "$1: member $2 does not say '$3'" "$(grep error $T/$1-m$2.log)"; else ok "$1: member $2 does not say '$3'"; fi
}

# two dedicated servers, server 1 (member 3) killed: the workers name server 1, not the starved server 0
run_killed dedicated "--sync ps --ps-placement dedicated --ps-servers 2" 2 3
for m in 0 1; do says dedicated $m "no reply from server 1 for step"; never dedicated $m "server 0"; done
never dedicated 2 "rank 0 did not answer"

# byteps's CPU server (member 2) killed: the workers name it
run_killed byteps-server "--sync byteps --ps-servers 1" 1 2
for m in 0 1; do says byteps-server $m "no reply from server 2 (CPU server 0)"; done

# byteps, rank 1 killed: rank 0 names rank 1 (its push missing, or its shard's reply: "server 1 (in
# rank 1)", as the kill lands mid-step or between steps); the CPU server blames no live member
run_killed byteps-rank "--sync byteps --ps-servers 1" 1 1
says byteps-rank 0 "rank 1"
never byteps-rank 2 "rank 0 did not answer"
never byteps-rank 2 "server [01] "
finish
