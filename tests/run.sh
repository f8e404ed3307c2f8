#!/usr/bin/env bash
# run.sh - runs the whole suite: every unit test binary, then every integration script; prints a table
#
#   bash tests/run.sh BUILD [all | unit | SCRIPT...]   SCRIPT: integration script names (ps launcher ...)
#   UNIT_SKIP="test_ctrl ...": unit test binaries to leave out (said as SKIP)
set -uo pipefail
build=${1:-build}
only=${2:-all}
scripts=" ${*:2} "
cd "$(dirname "$0")/.."
pass=0; fail=0; skip=0; failed=()
log_dir="$build/test-logs"; mkdir -p "$log_dir"

record() { # name rc log seconds
    local name=$1 rc=$2 log=$3 secs=$4
    if [ "$rc" = 0 ]; then
        if tail -n 1 "$log" | grep -q "^SKIP"; then skip=$((skip+1)); printf '  %-36s SKIP  %s\n' "$name" "$(tail -n 1 "$log" | cut -c6-)";
        else pass=$((pass+1)); printf '  %-36s PASS  %4d s\n' "$name" "$secs"; fi
    else
        fail=$((fail+1)); failed+=("$name"); printf '  %-36s FAIL  (rc %s, log %s, %d s)\n' "$name" "$rc" "$log" "$secs"
        tail -n 25 "$log" | sed 's/^/      | /'
    fi
}

echo "# unit tests ($build)"
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t"); log="$log_dir/$name.log"
    [[ " ${UNIT_SKIP:-} " == *" $name "* ]] && { printf '  %-36s SKIP  UNIT_SKIP names it\n' "$name"; skip=$((skip+1)); continue; }
    t0=$SECONDS; timeout 600 "$t" >"$log" 2>&1; rc=$?
    record "$name" $rc "$log" $((SECONDS - t0))
    grep -E "^test_.*passed" "$log" | sed 's/^/    /'   # the counts under the name they belong to
done

# Pairs run side by side to keep the suite inside CI's time: each is one script that keeps a core
# busy and asserts nothing about time (fuzzing, drawing) beside one that mostly waits on daemons,
# kills and timeouts (generous bounds, a few seconds of its own work; not blame.sh, whose culprit
# is whichever timeout fires first, so load decides it): the rest run one at a time,
# so that no timing-sensitive check (a claim, a link) shares the machine. The second of a pair runs
# when the first does, and only when both are asked for.
beside() { case $1 in chaos) echo plots ;; fuzz) echo slurm_nodes ;; secure) echo slurm ;; esac; }  # the first in order names its mate
wanted() { case "$only" in all) return 0 ;; unit) return 1 ;; *) [[ "$scripts" == *" $1 "* ]] ;; esac; }
run_script() { # NAME: runs tests/integration/NAME.sh into its log; sets rc
    RINGSIDE_BIN="$build/ringside" BUILD="$build" timeout 900 bash "tests/integration/$1.sh" >"$log_dir/$1.log" 2>&1
}
report_script() { # NAME RC SECONDS
    record "$1" "$2" "$log_dir/$1.log" "$3"
    grep -E "passed, .* failed" "$log_dir/$1.log" | tail -n1 | sed 's/^/    /'
}

if [ "$only" != unit ]; then
    echo "# integration tests"
    done_beside=" "
    for t in tests/integration/*.sh; do
        [ "$(basename "$t")" = lib.sh ] && continue
        [ -f "$t" ] || continue
        name=$(basename "$t" .sh)
        wanted "$name" || continue
        [[ "$done_beside" == *" $name "* ]] && continue
        mate=$(beside "$name")
        if [ -n "$mate" ] && [ -f "tests/integration/$mate.sh" ] && wanted "$mate"; then
            t0=$SECONDS
            ( run_script "$mate" ) & mpid=$!
            run_script "$name"; rc=$?; secs=$((SECONDS - t0))
            wait $mpid; mrc=$?; msecs=$((SECONDS - t0))
            report_script "$name" $rc $secs
            report_script "$mate" $mrc $msecs
            done_beside="$done_beside$mate "
        else
            t0=$SECONDS; run_script "$name"; rc=$?
            report_script "$name" $rc $((SECONDS - t0))
        fi
    done
fi

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
