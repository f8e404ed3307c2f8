#!/usr/bin/env bash
# run.sh - runs every libFuzzer harness of a fuzz build over its seed corpus and prints one line of figures per harness
#
#   run.sh BUILD LIBFUZZER_ARGS...   e.g. run.sh build/fuzz -runs=1000000  |  run.sh build/fuzz -max_total_time=20
#   run.sh --check CC                exit 0 when CC links a -fsanitize=fuzzer program
#
# Each harness starts from tests/fuzz/corpus/<name> (kept in the repo) in a fresh working corpus
# under BUILD/run-*/corpus/<name>; a crash, leak or timeout leaves its input in BUILD/run-*/artifacts/
# and fails the run. FUZZ_JOBS harnesses run at once (default: the number of cores). A harness's own flags
# (tests/fuzz/<name>.options, one line) come before the command line's. FUZZ_ONLY="idx wire" runs
# only those.
set -uo pipefail
cd "$(dirname "$0")/../.."

if [ "${1:-}" = --check ]; then
    cc=${2:-clang}
    command -v "$cc" >/dev/null || exit 1
    d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
    printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n' >"$d/t.c"
    "$cc" -fsanitize=fuzzer,address,undefined -o "$d/t" "$d/t.c" >/dev/null 2>&1 && "$d/t" -runs=1 >/dev/null 2>&1
    exit $?
fi

build=${1:?usage: run.sh BUILD LIBFUZZER_ARGS...}; shift
jobs=${FUZZ_JOBS:-$(nproc)}
# one folder per invocation, so that two runs at once (two people, or the suite beside `make fuzz`)
# never share a working corpus; its corpus/ goes at the end, its logs/ and artifacts/ stay
out=$(mktemp -d "$build/run-$(date +%Y%m%d-%H%M%S)-XXXX")
mkdir -p "$out/corpus" "$out/artifacts" "$out/logs"
harnesses=()
for src in tests/fuzz/fuzz_*.c; do
    h=$(basename "$src" .c)
    [ -z "${FUZZ_ONLY:-}" ] || [[ " $FUZZ_ONLY " == *" ${h#fuzz_} "* ]] && harnesses+=("$h")
done

# Figures of one finished log: runs, seconds, exec/s, cov, ft, corpus, peak RSS.
figures() {
    local log=$1 runs secs eps cov ft corp rss
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
    eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n1)
    secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n1)
    local last; last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n1)
    cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
    printf 'runs %-8s time %5s s  exec/s %-7s cov %-5s ft %-6s corpus %-5s rss %s MB' \
        "${runs:-?}" "${secs:-?}" "${eps:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "${rss:-?}"
}

run_one() { # name args...
    local name=$1; shift
    local bin="$build/$name" seeds="tests/fuzz/corpus/${name#fuzz_}" work="$out/corpus/${name#fuzz_}"
    local log="$out/logs/$name.log"
    mkdir -p "$work" "$seeds"
    local opts=()   # a harness's own libFuzzer flags, one line: tests/fuzz/<name>.options
    [ -f "tests/fuzz/$name.options" ] && read -r -a opts <"tests/fuzz/$name.options"
    # the harness's own output is closed (close_fd_mask=3); libFuzzer's reports still reach the log
    timeout 7200 "$bin" -close_fd_mask=3 -timeout=20 -rss_limit_mb=4096 -malloc_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$out/artifacts/$name-" "${opts[@]}" "$@" "$work" "$seeds" >"$log" 2>&1
    echo $? >"$log.rc"
}

t0=$(date +%s)
running=0
for h in "${harnesses[@]}"; do
    [ -x "$build/$h" ] || { echo "run.sh: $build/$h missing (make fuzz-build)" >&2; exit 1; }
    run_one "$h" "$@" &
    running=$((running+1))
    if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running-1)); fi
done
wait

fail=0
echo "# libFuzzer ($*), $jobs at once, $(( $(date +%s) - t0 )) s in all"
for h in "${harnesses[@]}"; do
    log="$out/logs/$h.log"; rc=$(cat "$log.rc" 2>/dev/null || echo 1)
    crashes=$(ls "$out/artifacts/$h-"* 2>/dev/null | wc -l)
    if [ "$rc" = 0 ]; then verdict=PASS; else verdict=FAIL; fail=1; fi
    printf '  %-16s %s  findings %s  %s\n' "$h" "$(figures "$log")" "$crashes" "$verdict"
    if [ "$rc" != 0 ]; then
        grep -E 'ERROR: |SUMMARY: |Test unit written|deadly signal' "$log" | head -n 8 | sed 's/^/      | /'
    fi
done
rm -rf "$out/corpus"
[ "$fail" = 0 ] && echo "# fuzz: every harness clean (logs in $out/logs)" || { echo "# fuzz: FAILED (inputs in $out/artifacts, logs in $out/logs)"; exit 1; }
