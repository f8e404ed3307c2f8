#!/usr/bin/env bash
# launcher.sh - the local launcher and external launchers: bad -n, job tokens too long or too weak, ports, mismatched ranks, killed ranks, Ctrl-C, torchrun and mpirun variables
. "$(dirname "$0")/lib.sh"
SMALL="--layers 784,32,10 --train-samples 512 --eval-samples 64 --quiet"

expect_status "-n 0 is refused" 2 $BIN train -n 0 --sync ring $SMALL --report $T/r.json
expect_status "-n 1000 is refused" 2 $BIN train -n 1000 --sync ring $SMALL --report $T/r.json
for t in 0 -1 abc 3e6; do  # the waits' milliseconds are ints: 24.8 days at most, so above 1e6 s is refused
    expect_status "--timeout $t is refused" 2 $BIN train -n 2 --sync ring --timeout $t $SMALL --report $T/r.json
done
grep -q "at most 1e6 seconds" $T/last.log && ok "--timeout 3e6: says the bound" || bad "--timeout bound" "$(cat $T/last.log)"
[ ! -e $T/r.json ] && ok "no report after refused -n" || bad "no report after refused -n" "report written"

# RINGSIDE_JOB_TOKEN: one too long for the job is refused naming the limit (it used to be cut to 79
# digits without a word), one too weak to keep anyone out too ("0" used to be taken); exit 2 from
# the launcher and from a rank started by hand, nothing written
long=$(printf 'a1%.0s' {1..50})
for spec in "$long|100 hex digits, more than the 79" "0|1 hex digit, too weak" "abcd1234|8 hex digits, too weak" \
            "0000000000000000|one digit 16 times, too weak" "0123456789abcdeg|not hex digits"; do
    tok=${spec%%|*}; want=${spec#*|}
    for how in launcher byhand; do
        if [ $how = launcher ]; then
            RINGSIDE_JOB_TOKEN=$tok $BIN train -n 2 --sync ring $SMALL --steps 2 --report $T/tok.json >$T/tok.log 2>&1; rc=$?
        else
            RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) RINGSIDE_JOB_TOKEN=$tok \
                timeout 20 $BIN train --sync ring $SMALL --steps 2 --report $T/tok.json >$T/tok.log 2>&1; rc=$?
        fi
        if [ $rc = 2 ] && [ ! -e $T/tok.json ] && grep -q "RINGSIDE_JOB_TOKEN: $want" $T/tok.log; then ok "token ${tok:0:16}... ($how): exit 2, \"$want\""
        else bad "token ${tok:0:16}... ($how)" "exit $rc: $(head -n 2 $T/tok.log)"; fi
        rm -f $T/tok.json
    done
done
RINGSIDE_JOB_TOKEN=${long:0:79} $BIN train -n 2 --sync ring $SMALL --steps 2 --report $T/tok.json >$T/tok.log 2>&1 &&
    ok "a token of 79 hex digits is taken" || bad "a 79-digit token" "$(tail -n 2 $T/tok.log)"

# a MASTER_PORT in use is an error naming it
port=$(free_port)
$PY -c "import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1',$port)); s.listen(); time.sleep(20)" &
holder=$!; sleep 0.5
MASTER_PORT=$port $BIN train -n 2 --sync ring $SMALL --steps 3 --report $T/r.json >$T/port.log 2>&1; rc=$?
kill $holder 2>/dev/null; wait $holder 2>/dev/null
[ $rc = 2 ] && grep -q "MASTER_PORT=$port" $T/port.log && ok "port in use named" || bad "port in use named" "rc $rc: $(cat $T/port.log)"
# without MASTER_PORT the launcher picks a free port itself: two jobs at once both succeed
$BIN train -n 2 --sync ring $SMALL --steps 5 --report $T/a.json & a=$!
$BIN train -n 2 --sync ring $SMALL --steps 5 --report $T/b.json & b=$!
wait $a; ra=$?; wait $b; rb=$?
[ $ra = 0 ] && [ $rb = 0 ] && ok "two jobs side by side" || bad "two jobs side by side" "exit $ra $rb"

# ranks started with different options are refused, naming the option
port=$(free_port)
for r in 0 1; do
    b=$([ $r = 0 ] && echo 32 || echo 16)
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        timeout 30 $BIN train --sync ring $SMALL --steps 3 --batch $b --timeout 10 --report $T/mm.json >$T/mm$r.log 2>&1 &
    eval "p$r=$!"
done
wait $p0; r0=$?; wait $p1; r1=$?
grep -q -- "--batch" $T/mm0.log && grep -q -- "--batch" $T/mm1.log && [ $r0 = 2 ] && [ $r1 = 2 ] \
    && ok "mismatched options refused on both sides" || bad "mismatched options refused" "exit $r0/$r1: $(cat $T/mm0.log $T/mm1.log)"

# a rank killed with SIGKILL mid-training: the launcher names it, everything is gone within timeout + 5 s
$BIN train -n 3 --sync ring $SMALL --steps 1000000 --timeout 5 --report $T/k.json >$T/kill.log 2>&1 & L=$!
sleep 2
victim=$(pgrep -P $L | sed -n 2p)   # the second child is rank 1
t0=$(date +%s); kill -9 $victim
wait $L; rc=$?; t1=$(date +%s)
left=$(pgrep -P $L | wc -l)
[ $rc != 0 ] && grep -q "rank 1 was killed by signal 9" $T/kill.log && [ $((t1-t0)) -le 10 ] && [ "$left" = 0 ] \
    && ok "killed rank named, all stopped in $((t1-t0)) s" || bad "killed rank" "rc $rc, $((t1-t0)) s, left $left: $(cat $T/kill.log)"
[ ! -e $T/k.json ] && ok "no report after a killed rank" || bad "no report after a killed rank" "report written"
# its last line names it as the first to fail, and does not point at an error line it never wrote
tail -n 1 $T/kill.log | grep -q "rank 1 failed first (killed by signal 9)$" \
    && ok "the last line: the killed rank failed first, by its signal" || bad "last line after a kill" "$(tail -n 1 $T/kill.log)"

# rank 0 killed under an external launcher: the others notice through the timeout and exit non-zero
port=$(free_port)
for r in 0 1 2; do
    RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RINGSIDE_JOB_TOKEN=abcd0123abcd0123 \
        $BIN train --sync ring $SMALL --steps 1000000 --timeout 3 --report $T/z.json >$T/z$r.log 2>&1 &
    eval "q$r=$!"
done
sleep 2; t0=$(date +%s); kill -9 $q0
wait $q1; r1=$?; wait $q2; r2=$?; t1=$(date +%s)
[ $r1 = 3 ] && [ $r2 = 3 ] && [ $((t1-t0)) -le 8 ] && ok "rank 0 killed: others exit 3 in $((t1-t0)) s" \
    || bad "rank 0 killed" "exit $r1/$r2 after $((t1-t0)) s: $(tail -n2 $T/z1.log)"

# Ctrl-C (SIGINT to the launcher) stops every rank
$BIN train -n 2 --sync ring $SMALL --steps 1000000 --report $T/c.json >$T/int.log 2>&1 & L=$!
sleep 2; kids=$(pgrep -P $L | tr '\n' ' ')
kill -INT $L; wait $L; rc=$?; sleep 0.5
alive=0; for k in $kids; do kill -0 $k 2>/dev/null && alive=$((alive+1)); done
[ $rc = 130 ] && [ $alive = 0 ] && ok "Ctrl-C stops all ranks (exit 130)" || bad "Ctrl-C" "rc $rc, $alive alive"

# torchrun's variables: ranks started by hand write one report
port=$(free_port)
for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        $BIN train --sync ring $SMALL --steps 10 --report $T/tr.json >$T/tr$r.log 2>&1 &
    eval "t$r=$!"
done
wait $t0; r0=$?; wait $t1; r1=$?
[ $r0 = 0 ] && [ $r1 = 0 ] && $PY -c "import json,sys; r=json.load(open('$T/tr.json')); sys.exit(len(r['ranks'])!=2 or r['config']['ranks']!=2)" \
    && ok "torchrun variables" || bad "torchrun variables" "exit $r0/$r1"

# Open MPI's mpirun: OMPI_COMM_WORLD_* variables
if command -v mpirun >/dev/null; then
    port=$(free_port)
    timeout 60 mpirun --allow-run-as-root --oversubscribe -np 3 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT=$port \
        $BIN train --sync ring $SMALL --steps 10 --report $T/mpi.json >$T/mpi.log 2>&1; rc=$?
    [ $rc = 0 ] && $PY -c "import json,sys; r=json.load(open('$T/mpi.json')); sys.exit(len(r['ranks'])!=3)" \
        && ok "mpirun variables" || bad "mpirun variables" "rc $rc: $(tail -n 5 $T/mpi.log)"
else
    echo "skip mpirun: not installed (make deps installs openmpi-bin)"
fi
finish
