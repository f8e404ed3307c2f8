#!/usr/bin/env bash
# run.sh - runs the whole suite: every unit test binary, then every integration script; prints a table
#
#   bash tests/run.sh BUILD [all | unit | SCRIPT...]   SCRIPT: integration script names (ps launcher ...)
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
    t0=$SECONDS; timeout 600 "$t" >"$log" 2>&1; rc=$?
    record "$name" $rc "$log" $((SECONDS - t0))
    grep -E "^test_.*passed" "$log" | sed 's/^/    /'   # the counts under the name they belong to
done

if [ "$only" != unit ]; then
    echo "# integration tests"
    for t in tests/integration/*.sh; do
        [ "$(basename "$t")" = lib.sh ] && continue
        [ -f "$t" ] || continue
        name=$(basename "$t" .sh); log="$log_dir/$name.log"
        case "$only" in all|unit) ;; *) [[ "$scripts" == *" $name "* ]] || continue ;; esac
        t0=$SECONDS; RINGSIDE_BIN="$build/ringside" BUILD="$build" timeout 900 bash "$t" >"$log" 2>&1; rc=$?
        record "$name" $rc "$log" $((SECONDS - t0))
        grep -E "passed, .* failed" "$log" | tail -n1 | sed 's/^/    /'
    done
fi

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
