#!/usr/bin/env bash
# checkpoint.sh - --checkpoint / --resume: a job killed with SIGKILL at a random step, or while a part is being written, resumes to an uninterrupted run's parameters and loss curve bit for bit (ring, tree, ps colocated, dedicated, sharded, byteps, zero); a run extended by --resume; the refusals, exit 2; nothing partial left behind
. "$(dirname "$0")/lib.sh"
# a tiny model (16 steps are two epochs at N = 2: resumes land inside either, the sampler's order
# reshuffled between); the runs to kill slowed to about 40 ms a step by rank 0's --straggler so that
# a kill lands mid-run
M="--layers 784,32,10 --batch 16 --train-samples 256 --eval-samples 64 --device cpu --threads 1 --seed 7 --steps 16 --eval-every 4 --quiet"
SLOW="--straggler 0:40"  # the killed runs' only: a straggler's sleep changes no value, and a resume may differ in it

# the final parameters' hash of every worker and the loss curve, as one line
fingerprint() { $PY - "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print([e["params_hash"] for e in r["ranks"] if e.get("role") == "worker"], r["summary"]["loss_curve"],
      r["summary"]["eval_curve"], r["summary"]["final_loss"])
EOF
}

# waits (up to 20 s) until the glob $1 matches a file; 0 when it does
wait_for() { for _ in $(seq 400); do compgen -G "$1" >/dev/null && return 0; sleep 0.05; done; return 1; }

# NAME SEED MODE OPTS...: the uninterrupted run, then one killed (MODE random: at a random moment
# after its first checkpoint; write: while a part of its second checkpoint is being written) and
# resumed; the resumed report equals the uninterrupted one and says where it resumed from
killed() {
    local name=$1 seed=$2 mode=$3; shift 3
    local d=$T/ck-$seed-$mode
    local full=$T/full-$(echo "$*" | cksum | cut -d' ' -f1).json  # one uninterrupted run per set of options
    [ -e $full ] || $BIN train $M "$@" --report $full >$T/full.log 2>&1 || { bad "$name: uninterrupted run" "$(tail -n 3 $T/full.log)"; return; }
    rm -rf $d $T/killed.json
    local pause=
    [ "$mode" = write ] && pause=400
    RINGSIDE_CKPT_TEST_PAUSE=$pause setsid $BIN train $M $SLOW "$@" --checkpoint $d --checkpoint-every 3 --report $T/killed.json \
        >$T/killed.log 2>&1 &
    local job=$!
    if [ "$mode" = write ]; then
        wait_for "$d/step-000006/*.writing" || bad "$name: no part of step 6 was being written" "$(tail -n 3 $T/killed.log)"
    else
        wait_for "$d/step-000003/MANIFEST" || bad "$name: no first checkpoint" "$(tail -n 3 $T/killed.log)"
        sleep "$($PY -c "import random; random.seed($seed); print(round(random.uniform(0, 0.2), 3))")"
    fi
    kill -9 -- -$job 2>/dev/null
    wait $job 2>/dev/null
    local st=$? how="killed $mode"
    for _ in $(seq 100); do pgrep -s $job >/dev/null || break; sleep 0.02; done  # every member gone
    [ $st = 137 ] || how="$mode: finished before the kill (status $st)"
    [ -e $T/killed.json ] && [ "$mode" = write ] && bad "$name: the killed run wrote a report" "$T/killed.json"
    local at
    at=$(ls $d | sort | tail -n 1)
    if ! $BIN train $M "$@" --resume $d --checkpoint $d --checkpoint-every 3 --report $T/resumed.json >$T/resumed.log 2>&1; then
        bad "$name (seed $seed, $mode): the resume" "$(tail -n 3 $T/resumed.log)"
        return
    fi
    if [ "$(fingerprint $full)" = "$(fingerprint $T/resumed.json)" ]; then
        ok "$name (seed $seed, $how, newest folder $at): parameters, loss and eval curves bit for bit"
    else
        bad "$name (seed $seed, $mode)" "$(fingerprint $full) != $(fingerprint $T/resumed.json)"
    fi
    check "  ... resumed_from named, the report validates" $PY - $T/resumed.json $d <<'EOF'
import json, subprocess, sys
r = json.load(open(sys.argv[1])); rf = r["summary"]["resumed_from"]
assert rf["dir"] == sys.argv[2] and rf["step"] in (3, 6, 9, 12, 15), rf
subprocess.run([sys.executable, "tests/validate_report.py", sys.argv[1]], check=True)
EOF
    # nothing partial: every step folder complete, no temporary or marker file, at most two kept
    local left
    left=$(find $d -name '*.tmp*' -o -name '*.writing' -o -name '.probe*'; for s in $d/step-*; do [ -e $s/MANIFEST ] || echo "$s"; done)
    if [ -z "$left" ] && [ "$(ls $d | wc -l)" -le 2 ]; then ok "  ... nothing partial left, at most two checkpoints kept"
    else bad "  ... nothing partial left" "$left $(ls $d)"; fi
}

killed "ring" 1 random --sync ring -n 2
killed "ring" 2 random --sync ring -n 2
killed "ring" 3 write --sync ring -n 2
killed "tree" 11 random --sync tree -n 3
killed "ps colocated" 4 random --sync ps -n 2
killed "ps colocated" 5 write --sync ps -n 2 --optimizer adamw
killed "ps dedicated x2" 6 random --sync ps --ps-placement dedicated --ps-servers 2 -n 2
killed "ps dedicated x2" 7 write --sync ps --ps-placement dedicated --ps-servers 2 -n 2
killed "ps sharded" 8 random --sync ps --ps-placement sharded -n 3
killed "ps sharded, bf16 wire" 9 write --sync ps --ps-placement sharded -n 3 --wire bf16
killed "byteps k=1" 10 random --sync byteps --ps-servers 1 -n 2
killed "zero-2, AdamW (each rank's optimizer shard a part)" 12 random --sync zero --zero-stage 2 -n 3 --optimizer adamw
killed "zero-1" 13 write --sync zero --zero-stage 1 -n 2
killed "zero-3, AdamW (sharded parameters, gathered whole for the checkpoint)" 14 random --sync zero --zero-stage 3 -n 3 --optimizer adamw
killed "zero-3" 15 write --sync zero --zero-stage 3 -n 2

# extended: a 12-step run's last checkpoint resumed to 16 steps (another --warmup: timing only) is
# the 16-step run, its evaluation after step 12 included
full=$T/full-$(echo "--sync ring -n 2" | cksum | cut -d' ' -f1).json
if $BIN train $M --sync ring -n 2 --steps 12 --checkpoint $T/ext --checkpoint-every 6 --report $T/ext12.json >$T/ext.log 2>&1 &&
   $BIN train $M --sync ring -n 2 --resume $T/ext --warmup 0 --report $T/ext16.json >>$T/ext.log 2>&1; then
    if [ "$(fingerprint $full)" = "$(fingerprint $T/ext16.json)" ]; then ok "ring: a 12-step run extended to 16 by --resume is the 16-step run"
    else bad "ring: extended by --resume" "$(fingerprint $full) != $(fingerprint $T/ext16.json)"; fi
    check "  ... its report validates" $PY tests/validate_report.py $T/ext16.json
else
    bad "ring: extended by --resume" "$(tail -n 3 $T/ext.log)"
fi

# two jobs on one folder: the second (a resume while the first runs) is refused at once, exit 5,
# naming the first's pid, and the first finishes undisturbed
rm -rf $T/two
$BIN train $M --sync ring -n 2 --straggler 0:150 --checkpoint $T/two --checkpoint-every 3 --report $T/two1.json >$T/two1.log 2>&1 &
first=$!
if wait_for "$T/two/step-000003/MANIFEST"; then
    $BIN train $M --sync ring -n 2 --resume $T/two --checkpoint $T/two --checkpoint-every 3 --report $T/two2.json >$T/two2.log 2>&1; rc=$?
    if [ $rc = 5 ] && grep -q "in use by another job: pid $first on host " $T/two2.log && [ ! -e $T/two2.json ]; then ok "a second job on one checkpoint folder: refused, exit 5, naming the first's pid"
    else bad "a second job on one checkpoint folder" "exit $rc, want 5 naming pid $first: $(tail -n 2 $T/two2.log)"; fi
else bad "a second job on one checkpoint folder" "the first made no checkpoint: $(tail -n 3 $T/two1.log)"; fi
if wait $first && [ -e $T/two1.json ]; then ok "  ... the first job finished undisturbed"
else bad "  ... the first job finished undisturbed" "$(tail -n 3 $T/two1.log)"; fi

# a resume without --checkpoint-every keeps the interrupted job's period (6 here, not the default 100)
if $BIN train $M --sync ring -n 2 --steps 18 --resume $T/ext --checkpoint $T/ext --report $T/ext18.json >$T/ext18.log 2>&1 &&
   [ -e $T/ext/step-000018/MANIFEST ] && $PY -c "import json, sys; assert json.load(open(sys.argv[1]))['config']['checkpoint-every'] == 6" $T/ext18.json; then
    ok "a resume without --checkpoint-every keeps the job's period (6; the report's config says so)"
else bad "a resume without --checkpoint-every keeps the job's period" "$(ls $T/ext; tail -n 3 $T/ext18.log)"; fi

# ---- refusals: exit 2 naming why, before any work, nothing written ----------------------------------
R="--layers 784,32,10 --batch 16 --train-samples 512 --eval-samples 64 --device cpu --threads 1 --seed 7 -n 2 --quiet"
$BIN train $R --steps 6 --checkpoint $T/cp --checkpoint-every 3 --report $T/cp.json >$T/cp.log 2>&1 || bad "a checkpoint to refuse from" "$(tail -n 3 $T/cp.log)"
refused() { # NAME WANT_IN_MESSAGE OPTS...
    local n=$1 want=$2; shift 2
    rm -f $T/no.json
    timeout 60 $BIN train $R "$@" --report $T/no.json >$T/last.log 2>&1; local rc=$?  # a refusal never waits
    if [ "$rc" = 2 ] && grep -q -- "$want" $T/last.log && [ ! -e $T/no.json ]; then ok "refused: $n"
    else bad "refused: $n" "exit $rc, want 2 and '$want', no report: $(tail -n 2 $T/last.log)"; fi
}
mkdir -p $T/partial/step-000003 && touch $T/partial/step-000003/rank-0.bin
refused "--resume of a missing folder" "--resume $T/nowhere: No such file" --steps 8 --resume $T/nowhere
refused "--resume without a manifest (incomplete)" "no complete checkpoint" --steps 8 --resume $T/partial
refused "--resume of another model" "another model size" --steps 8 --resume $T/cp --layers 784,16,10
refused "--resume of another world size" "another world size (2 workers there, 3 here)" --steps 8 --resume $T/cp -n 3
refused "--resume with other options, the first named" "another value of --lr (0.10000000000000001 here" --steps 8 --resume $T/cp --lr 0.1
refused "--resume with another back end" "another value of --sync (ps here, ring in the checkpoint)" --steps 8 --resume $T/cp --sync ps
refused "--resume with fewer steps than the checkpoint's" "--steps must be at least 6" --steps 4 --resume $T/cp
cp -r $T/cp $T/schema && sed -i 's/"schema":\t1/"schema":\t99/' $T/schema/step-000006/MANIFEST
refused "--resume of another build's schema" "schema 99, this build reads schema 1" --steps 8 --resume $T/schema
cp -r $T/cp $T/fifo && rm $T/fifo/step-000006/MANIFEST && mkfifo $T/fifo/step-000006/MANIFEST
refused "--resume of a manifest that is a FIFO (never waited on)" "MANIFEST: not a regular file (a FIFO)" --steps 8 --resume $T/fifo
cp -r $T/cp $T/edit && sed -i 's/lr=0.050000000000000003/lr=0.10000000000000001/' $T/edit/step-000006/MANIFEST
refused "--resume of a manifest whose options were edited" "the manifest was edited: its options do not hash" --steps 8 --resume $T/edit --lr 0.1
cp -r $T/cp $T/cut && truncate -s 4000 $T/cut/step-000006/rank-1.bin
refused "--resume of a truncated part, the older complete one named" "rank-1.bin: checksum mismatch (truncated or damaged); step-000003 is complete: remove step-000006 to resume from it" --steps 8 --resume $T/cut
# a dedicated server's part damaged: the server refuses it by name before the job trains
d6=$(ls -d $T/ck-6-random/step-* | while read -r f; do [ -e "$f/MANIFEST" ] && echo "$f"; done | tail -n 1)
if [ -n "$d6" ]; then
    cp -r $T/ck-6-random $T/srv && printf 'xx' | dd of=$T/srv/$(basename "$d6")/server-1.bin bs=1 seek=100 conv=notrunc 2>/dev/null
    rm -f $T/no.json
    $BIN train $M --sync ps --ps-placement dedicated --ps-servers 2 -n 2 --resume $T/srv --report $T/no.json >$T/last.log 2>&1; rc=$?
    if [ $rc = 2 ] && grep -q "server-1.bin: checksum mismatch" $T/last.log && [ ! -e $T/no.json ]; then ok "refused: a dedicated server's damaged part, named"
    else bad "refused: a dedicated server's damaged part" "exit $rc: $(grep error $T/last.log | head -n 2)"; fi
fi
refused "a fresh run into a folder holding a checkpoint" "holds another run's checkpoint (step 6)" --steps 8 --checkpoint $T/cp
# a step that is a symbolic link: refused naming it, and what it points to is never removed
mkdir -p $T/victim $T/lnk && echo keep >$T/victim/keep && ln -s $T/victim $T/lnk/step-000001
refused "a checkpoint folder whose step is a symbolic link, named" "step-000001 is a symbolic link" --steps 6 --checkpoint $T/lnk --checkpoint-every 3
refused "a resume from a folder whose step is a symbolic link, named" "step-000001 is a symbolic link" --steps 6 --resume $T/lnk
if [ "$(cat $T/victim/keep 2>/dev/null)" = keep ] && [ -L $T/lnk/step-000001 ]; then ok "  ... the link and its target untouched"
else bad "  ... the link and its target untouched" "$(ls -la $T/victim $T/lnk)"; fi
touch $T/afile
refused "--checkpoint under a file (not writable)" "--checkpoint $T/afile/sub" --steps 8 --checkpoint $T/afile/sub
refused "--checkpoint-every 0" "--checkpoint-every 0: must be at least 1" --steps 8 --checkpoint $T/c3 --checkpoint-every 0
refused "--checkpoint-every -3" "--checkpoint-every -3: must be at least 1" --steps 8 --checkpoint $T/c3 --checkpoint-every -3
refused "--checkpoint-every x" "--checkpoint-every 'x': not an integer" --steps 8 --checkpoint $T/c3 --checkpoint-every x
refused "--checkpoint under async" "a consistent cut" --steps 8 --checkpoint $T/c3 --sync ps --ps-consistency async
refused "--resume under ssp" "--resume with --ps-consistency ssp:2" --steps 8 --resume $T/cp --sync ps --ps-consistency ssp:2
refused "--checkpoint under DataParallel's driver" "DataParallel's driver has no checkpoint" --steps 8 --checkpoint $T/c3 --sync ps --ps-mode dataparallel --global-batch 32
if [ ! -e $T/c3 ] && [ "$(ls $T/cp)" = "step-000003
step-000006" ]; then ok "the refused runs made no folder and left the checkpoint as it was"
else bad "the refused runs left something" "$(ls $T)"; fi
finish
