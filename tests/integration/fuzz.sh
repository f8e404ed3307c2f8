#!/usr/bin/env bash
# fuzz.sh - the bounded fuzz run of the suite: `make fuzz-short` (every libFuzzer harness for 3 s past its seed corpus); SKIP without clang/libFuzzer
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.."
if ! bash tests/fuzz/run.sh --check "${FUZZ_CC:-clang}"; then
    echo "SKIP: no clang with libFuzzer (make fuzz-deps installs clang and libclang-rt-14-dev)"
    exit 0
fi
make --no-print-directory fuzz-short FUZZ_SECONDS="${FUZZ_SECONDS:-3}" >"$T/fuzz.log" 2>&1; rc=$?
grep -E '^# |^  fuzz_|^      \|' "$T/fuzz.log"
if [ $rc = 0 ]; then ok "make fuzz-short: every harness clean"; else bad "make fuzz-short" "$(tail -n 5 "$T/fuzz.log")"; fi
finish
