#!/usr/bin/env bash
# parents.sh - a job dies with its parents: a killed or hung-up launcher or matrix driver leaves no process and no report; one driver per --out
#
# The launcher (`train -n N`) and the matrix driver are the parents of a job. SIGKILL to one
# must take its processes with it (each child gets a death signal from the kernel), SIGHUP must
# stop the job like SIGTERM (exit 130, the signal named), and nothing may write a report for a job
# that was stopped. A --resume right after a killed driver reruns the stopped cell only, and a
# second driver on a folder in use is refused (exit 5) without touching it.
. "$(dirname "$0")/lib.sh"
SMALL="--layers 784,32,10 --train-samples 512 --eval-samples 64 --quiet"

# gone MARKER S: 0 once no process has MARKER in its command line, checked for S seconds
gone() { local i; for ((i = 0; i < $2 * 20; i++)); do pgrep -f -- "$1" >/dev/null || return 0; sleep 0.05; done; return 1; }
# reap MARKER: SIGKILLs what a failed check left running (by pid), so the next check starts clean
reap() { local p; for p in $(pgrep -f -- "$1"); do kill -9 "$p" 2>/dev/null; done; }
# children PID N: waits (5 s at most) until PID has N children
children() { local i; for ((i = 0; i < 100; i++)); do [ "$(pgrep -P "$1" | wc -l)" -ge "$2" ] && return 0; sleep 0.05; done; return 1; }
# appears FILE: waits (20 s at most) for FILE
appears() { local i; for ((i = 0; i < 400; i++)); do [ -e "$1" ] && return 0; sleep 0.05; done; return 1; }

# 1. SIGKILL to the launcher: its ranks die with it, and none finishes the run and writes the report
$BIN train -n 2 --sync ring $SMALL --steps 3000 --report $T/lk.json >$T/lk.log 2>&1 & L=$!
children $L 2; sleep 0.3
kill -9 $L; wait $L 2>/dev/null
if gone "--report $T/lk.json" 3 && sleep 0.2 && [ ! -e $T/lk.json ]; then ok "launcher SIGKILLed: its ranks end with it, no report"
else bad "launcher SIGKILLed" "left: $(pgrep -af -- "--report $T/lk.json" | head -n 3); report $(ls $T/lk.json 2>&1)"; reap "--report $T/lk.json"; fi

# 2. SIGHUP to the launcher: handled like SIGTERM, the signal named, exit 130, every rank stopped
$BIN train -n 2 --sync ring $SMALL --steps 1000000 --report $T/lh.json >$T/lh.log 2>&1 & L=$!
children $L 2; sleep 0.3
kill -HUP $L; wait $L; rc=$?
if [ $rc = 130 ] && grep -q "interrupted by SIGHUP (signal 1): stopping 2 processes" $T/lh.log && gone "--report $T/lh.json" 3 \
   && [ ! -e $T/lh.json ]; then ok "launcher SIGHUP: exit 130 naming SIGHUP, ranks stopped, no report"
else bad "launcher SIGHUP" "exit $rc: $(cat $T/lh.log; pgrep -af -- "--report $T/lh.json")"; reap "--report $T/lh.json"; fi
# under nohup (SIGHUP ignored when it starts) a hangup is no stop: the run finishes
(trap '' HUP; exec $BIN train -n 2 --sync ring $SMALL --steps 400 --report $T/nh.json) >$T/nh.log 2>&1 & L=$!
children $L 2; kill -HUP $L; wait $L; rc=$?
[ $rc = 0 ] && [ -e $T/nh.json ] && ok "launcher under nohup: SIGHUP stays ignored, the run finishes" \
    || bad "launcher under nohup" "exit $rc: $(cat $T/nh.log)"

# the matrix driver: a first cell that ends, then one that would run for hours
cat >"$T/m.json" <<'EOF'
{"name": "parents", "base": {"device": "cpu", "layers": "784,16,10", "train-samples": 512},
 "axes": {"steps": [3, 10000000], "ranks": [2]}, "timeout_s": 120}
EOF
LONG="steps=10000000,ranks=2"

# 3. SIGHUP to the driver: the running cell stopped and named, exit 130, nothing left
"$BIN" matrix "$T/m.json" --out "$T/mh" >"$T/mh.log" 2>&1 & D=$!
appears "$T/mh/$LONG-r1.log"; sleep 0.5
kill -HUP $D; wait $D; rc=$?
if [ $rc = 130 ] && grep -q "interrupted by SIGHUP: the run of $LONG r1 was stopped" "$T/mh.log" && gone "--report $T/mh/" 3 \
   && [ ! -e "$T/mh/$LONG-r1.json" ] \
   && $PY -c "import json,sys; s=json.load(open(sys.argv[1])); assert s['interrupted'] and [r['cell'] for r in s['runs']]==['steps=3,ranks=2'], s" "$T/mh/summary.json"
then ok "driver SIGHUP: exit 130 naming SIGHUP and the stopped run, its cell stopped"
else bad "driver SIGHUP" "exit $rc: $(cat "$T/mh.log"; pgrep -af -- "--report $T/mh/")"; reap "--report $T/mh/"; fi

# 4. SIGKILL to the driver: its cell (launcher and ranks) dies with it; --resume at once reruns that cell only
cat >"$T/mk.json" <<'EOF'
{"name": "parents", "base": {"device": "cpu", "layers": "784,16,10", "train-samples": 512},
 "axes": {"steps": [3, 2500], "ranks": [2]}, "timeout_s": 120}
EOF
"$BIN" matrix "$T/mk.json" --out "$T/mk" >"$T/mk.log" 2>&1 & D=$!
appears "$T/mk/steps=2500,ranks=2-r1.log"; sleep 0.2
first=$(stat -c %Y.%i "$T/mk/steps=3,ranks=2-r1.json")
kill -9 $D; wait $D 2>/dev/null
if gone "--report $T/mk/" 3 && sleep 0.2 && [ ! -e "$T/mk/steps=2500,ranks=2-r1.json" ]; then ok "driver SIGKILLed: its cell ends with it, no report"
else bad "driver SIGKILLed" "left: $(pgrep -af -- "--report $T/mk/" | head -n 3); $(ls "$T/mk")"; reap "--report $T/mk/"; fi
expect_status "--resume after the killed driver" 0 "$BIN" matrix "$T/mk.json" --out "$T/mk" --resume
if grep -q "resume: 1 report kept" "$T/last.log" && [ "$(stat -c %Y.%i "$T/mk/steps=3,ranks=2-r1.json")" = "$first" ] \
   && $PY -c "import json,sys; r=json.load(open(sys.argv[1]))['runs']; assert [(x['cell'], x['resumed'], x['status']) for x in r]==[('steps=3,ranks=2', True, 'ok'), ('steps=2500,ranks=2', False, 'ok')], r" "$T/mk/summary.json"
then ok "--resume keeps the finished run and reruns the stopped one only"
else bad "--resume after a kill" "$(cat "$T/last.log")"; fi

# a driver's lock outlives it while a process of its run does: a cell that ignores SIGTERM holds
# the next driver off until it ends (here a stand-in binary sleeping 2 s), then the next one runs
printf '#!/bin/sh\ntrap "" TERM\nsleep 2\n' >"$T/stubborn"; chmod +x "$T/stubborn"
"$BIN" matrix "$T/mk.json" --out "$T/ml" --bin "$T/stubborn" >"$T/ml.log" 2>&1 & D=$!
appears "$T/ml/steps=3,ranks=2-r1.log"; sleep 0.2
kill -9 $D; wait $D 2>/dev/null
expect_status "a driver after one killed mid-cell waits for its cell, then runs" 0 "$BIN" matrix "$T/mk.json" --out "$T/ml" --only steps=3
grep -q "its last driver, pid $D, is gone; waiting" "$T/last.log" && ok "  ... saying it waits for the killed driver's run" \
    || bad "lock wait" "$(cat "$T/last.log")"

# 5. two drivers on one --out: the second is refused at once (exit 5, naming the first's pid) and
#    changes nothing; the first finishes every run on data of its own
"$BIN" matrix "$T/mk.json" --out "$T/m2" >"$T/m2.log" 2>&1 & D=$!
appears "$T/m2/steps=2500,ranks=2-r1.log"
snap() { (cd "$T/m2" && for f in * .lock; do case $f in *.log) stat -c '%n %i' "$f" ;; *) stat -c '%n %i %Y %s' "$f" ;; esac; done) }
snap >"$T/m2.before"
expect_status "a second driver on the same --out is refused (exit 5)" 5 "$BIN" matrix "$T/mk.json" --out "$T/m2" --resume
snap >"$T/m2.after"
grep -q "in use by another matrix driver, pid $D" "$T/last.log" && ok "  ... naming the first driver's pid" || bad "second driver's message" "$(cat "$T/last.log")"
cmp -s "$T/m2.before" "$T/m2.after" && ok "  ... without touching its files" || bad "second driver touched files" "$(diff "$T/m2.before" "$T/m2.after")"
wait $D; rc=$?
[ $rc = 0 ] && grep -q "done: 2 runs, 2 ok" "$T/m2.log" && ok "the first driver finishes its runs" || bad "first driver" "exit $rc: $(cat "$T/m2.log")"

# 6. a symbolic link planted as --out's lock: refused (exit 2) naming it, its target neither
#    truncated nor written, and nothing run
mkdir -p "$T/mlink" && printf precious >"$T/precious" && ln -s "$T/precious" "$T/mlink/.lock"
expect_status "a planted link as the driver's lock file is refused (exit 2)" 2 "$BIN" matrix "$T/mk.json" --out "$T/mlink"
grep -q "lock file $T/mlink/.lock: .*symbolic link" "$T/last.log" && [ "$(cat "$T/precious")" = precious ] && [ -z "$(ls "$T/mlink")" ] \
    && ok "  ... naming it, its target untouched, nothing run" || bad "planted lock link" "$(cat "$T/precious"; ls "$T/mlink"; cat "$T/last.log")"

finish
