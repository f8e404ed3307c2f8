#!/usr/bin/env bash
# noalloc.sh - nothing in our step loop allocates: `ringside train` for S and for 2S steps makes the same number of heap allocations from the executable
#
# tests/noalloc/alloc_count.c, built here as an LD_PRELOAD shim, counts the malloc / calloc /
# realloc / posix_memalign / aligned_alloc / memalign / valloc calls whose caller is inside the
# ringside executable (libraries' own allocations, libzmq's per-message buffers among them, are
# not ours and not counted) and writes them at exit to PREFIX.PID, one file per process: the
# launcher and each rank of -n 2 write their own. Equal counts at S and 2S steps (per process,
# compared as sorted lists) mean zero allocations per step. On a difference the call sites that
# grew are named (addr2line).
. "$(dirname "$0")/lib.sh"
command -v cc >/dev/null || { echo "SKIP: no C compiler (cc) to build the allocation-counting shim"; exit 0; }
shim="$T/alloc_count.so"
if ! cc -O2 -shared -fPIC -o "$shim" tests/noalloc/alloc_count.c -ldl >"$T/cc.log" 2>&1; then
    echo "SKIP: the allocation-counting shim does not build here: $(head -n 2 "$T/cc.log" | tr '\n' ' ')"
    exit 0
fi
# the shim must see the executable's own calls: a quick probe (the launcher alone allocates a little)
ALLOC_COUNT_OUT="$T/probe" LD_PRELOAD="$shim" "$BIN" --help >/dev/null 2>&1 || true
[ -n "$(ls "$T"/probe.* 2>/dev/null)" ] || { echo "SKIP: the shim wrote no count (LD_PRELOAD not honoured here?)"; exit 0; }

S=6
model=(--model mlp --layers 784,64,32,10 --batch 16 --device cpu --threads 1 -q --timeout 60)

# run NAME STEPS ARGS...: the run's per-process counts land in $T/NAME-STEPS.*
run() {
    local name=$1 steps=$2; shift 2
    ALLOC_COUNT_OUT="$T/$name-$steps" LD_PRELOAD="$shim" "$BIN" train "${model[@]}" --steps "$steps" \
        --report "$T/$name-$steps.json" "$@" >"$T/$name-$steps.log" 2>&1
}
counts() { for f in "$T/$1".*; do awk '$1 == "exe" {print $2}' "$f"; done | sort -n | tr '\n' ' '; }
sites() { for f in "$T/$1".*; do awk '$1 == "site" {print $2, $3}' "$f"; done | sort; }

# check_case NAME S1 S2 ARGS...: S1 and S2 steps; the executable's allocations per process must match
check_case() {
    local name=$1 s1=$2 s2=$3; shift 3
    if ! run "$name" "$s1" "$@" || ! run "$name" "$s2" "$@"; then
        bad "$name" "the run failed: $(tail -n 3 "$T/$name-$s1.log" "$T/$name-$s2.log" | tr '\n' ' ')"
        return
    fi
    local a b
    a=$(counts "$name-$s1"); b=$(counts "$name-$s2")
    echo "# $name: allocations from the executable per process, $s1 steps: $a; $s2 steps: $b"
    if [ -n "$a" ] && [ "$a" = "$b" ]; then
        ok "$name: no allocation per step"
    else
        local grew
        grew=$(join -a 2 -e 0 -o 0,1.2,2.2 <(sites "$name-$s1" | awk '{a[$1]+=$2} END {for (k in a) print k, a[k]}' | sort) \
                                            <(sites "$name-$s2" | awk '{a[$1]+=$2} END {for (k in a) print k, a[k]}' | sort) |
               awk '$2 != $3' | while read -r off n1 n2; do
                   echo "$(addr2line -f -i -p -e "$BIN" "$off" 2>/dev/null | head -n 1) ($n1 -> $n2)"
               done | tr '\n' ';')
        bad "$name: allocations per step" "$s1 steps: $a; $s2 steps: $b; sites: ${grew:-?}"
    fi
}

check_case one-rank "$S" $((2 * S)) --sync none
check_case ring-2 "$S" $((2 * S)) -n 2 --sync ring
check_case ps-2 "$S" $((2 * S)) -n 2 --sync ps
check_case ring-2-bf16 "$S" $((2 * S)) -n 2 --sync ring --wire bf16
check_case ps-2-bf16 "$S" $((2 * S)) -n 2 --sync ps --wire bf16
# --trace records spans as the steps go: 600 steps record more than the recorder's first 1024
# (its room is reserved for the whole run up front, not doubled in the loop)
check_case ps-2-trace "$S" 600 -n 2 --sync ps --trace "$T/trace.json"
finish
