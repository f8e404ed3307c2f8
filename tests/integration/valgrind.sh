#!/usr/bin/env bash
# valgrind.sh - every rank of a short multi-rank run of each back end under valgrind (memcheck): 0 errors, 0 definite leaks
# Ranks are started by hand with torchrun's variables (the launcher's fork+exec would escape valgrind):
# ring N=2, ps colocated N=2, ps dedicated N=2 (+ its server). SKIP when valgrind is absent.
. "$(dirname "$0")/lib.sh"
if ! command -v valgrind >/dev/null; then echo "SKIP: valgrind not installed (apt-get install valgrind)"; exit 0; fi
# memcheck the CPU-only build: a CUDA build's runtime dlopens the driver, whose loader paths
# memcheck reports as errors that are not ringside's (make test builds both variants)
for cpu in "${BUILD:-build}/../build/nocuda/ringside" build/nocuda/ringside; do
    if [ -x "$cpu" ] && "$cpu" info 2>/dev/null | grep -q "cuda *no"; then BIN=$cpu; break; fi
done
if "$BIN" info 2>/dev/null | grep -q "cuda *yes"; then
    echo "SKIP: only a CUDA build is here (memcheck needs the CPU-only one: make CUDA=0 BUILD=build/nocuda)"; exit 0
fi
# a sanitizer build (make asan, make tsan) cannot run under valgrind: its shadow memory is valgrind's
if ldd "$BIN" 2>/dev/null | grep -qE 'lib(asan|tsan)\.' || grep -qa '__asan_init\|__tsan_init' "$BIN"; then
    echo "SKIP: $BIN is a sanitizer build and no CPU-only build/nocuda is here (valgrind cannot run it)"; exit 0
fi
# small and short: valgrind runs ~30x slower; OpenBLAS gets one thread per rank
SMALL="--device cpu --layers 32,16,10 --train-samples 256 --eval-samples 64 --steps 4 --batch 16 --threads 1 --timeout 40 --quiet"
VG="valgrind --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=9 --num-callers=30"
t_all=$SECONDS

# job NAME WORKERS SERVERS OPTIONS... : starts every member under valgrind, waits (bounded), checks each
job() {
    local name=$1 nw=$2 ns=$3; shift 3
    local port token; port=$(free_port); token=$(printf %s "$name" | md5sum | cut -c1-32)
    local pids=() logs=() t0=$SECONDS
    for ((m = 0; m < nw + ns; m++)); do
        local log=$T/$name-m$m.vg
        if ((m < nw)); then
            env RANK=$m WORLD_SIZE=$nw LOCAL_RANK=$m LOCAL_WORLD_SIZE=$nw RINGSIDE_SERVERS=$ns \
                MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RINGSIDE_JOB_TOKEN=$token \
                timeout 120 $VG --log-file=$log $BIN train "$@" $SMALL --report $T/$name.json >$T/$name-m$m.out 2>&1 &
        else
            env RINGSIDE_ROLE=server RINGSIDE_SERVER_ID=$((m - nw)) WORLD_SIZE=$nw RINGSIDE_SERVERS=$ns \
                MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RINGSIDE_JOB_TOKEN=$token \
                timeout 120 $VG --log-file=$log $BIN train "$@" $SMALL --report $T/$name.json >$T/$name-m$m.out 2>&1 &
        fi
        pids+=($!); logs+=("$log")
    done
    local rcs=() i
    for i in "${!pids[@]}"; do wait "${pids[$i]}"; rcs+=($?); done
    for i in "${!pids[@]}"; do
        local who="member $i"; ((i < nw)) && who="rank $i" || who="server $((i - nw))"
        local errs defl
        errs=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' "${logs[$i]}" | tail -n1)
        defl=$(sed -n 's/.*definitely lost: \([0-9,]*\) bytes.*/\1/p' "${logs[$i]}" | tail -n1)
        if [ "${rcs[$i]}" = 0 ] && [ "${errs:-x}" = 0 ] && [ "${defl:-0}" = 0 ]; then
            ok "$name: $who exit 0, 0 errors, 0 bytes definitely lost"
        else
            bad "$name: $who" "exit ${rcs[$i]}, ${errs:-?} errors, ${defl:-?} bytes definitely lost: $(grep -E '^==[0-9]+== (Invalid|Conditional|Syscall|Mismatched|.*definitely lost in)' "${logs[$i]}" | head -n 3) $(tail -n 3 $T/$name-m$i.out)"
            grep -A12 -E '^==[0-9]+== (Invalid|Conditional|Syscall|Mismatched|.*definitely lost in)' "${logs[$i]}" | head -n 40
        fi
    done
    [ -s $T/$name.json ] && ok "$name: report written ($((SECONDS - t0)) s)" || bad "$name: report" "no report"
}

job ring 2 0 --sync ring
job ps-colocated 2 0 --sync ps
job ps-dedicated 2 1 --sync ps --ps-placement dedicated
echo "# valgrind: $((SECONDS - t_all)) s"
finish
