#!/usr/bin/env bash
# async_copies.sh - every back end gives bitwise the same parameters on "cpu-async" (a GPU's asynchronous copies and staging, on the CPU) as on the plain CPU, and the bench runs exact there
#
# "cpu-async" defers each device copy to the next synchronisation and has no host-visible memory,
# so the back ends take the staging paths they take on a GPU. A buffer released or reused before
# its copy has run then gives other parameters here, or a use-after-free under ASan (make
# asan-quick runs this script), instead of a failure found only on a GPU.
. "$(dirname "$0")/lib.sh"
M="--layers 784,64,10 --train-samples 1024 --eval-samples 64 --steps 8 --seed 5 --quiet --timeout 30"
while IFS='|' read -r name opts envs; do
    [ -n "$name" ] || continue
    ok_runs=1
    for dev in cpu cpu-async; do
        if ! timeout 120 env $envs $BIN train $opts --device $dev $M --report $T/$dev.json --save-params $T/$dev.bin >$T/$dev.log 2>&1; then
            bad "$name on $dev" "run failed: $(tail -n 3 $T/$dev.log)"
            ok_runs=0
        fi
    done
    [ "$ok_runs" = 1 ] || continue
    if cmp -s $T/cpu.bin $T/cpu-async.bin; then ok "$name: cpu-async == cpu, bitwise"
    else bad "$name" "parameters differ between cpu and cpu-async: $(cmp $T/cpu.bin $T/cpu-async.bin | head -n 1)"; fi
done <<'EOF'
ring N=2|-n 2 --sync ring
ring N=3, three buckets, no overlap|-n 3 --sync ring --bucket-mb 0.06 --no-overlap
ring N=2 over TCP|-n 2 --sync ring --transport tcp|
ps colocated N=2|-n 2 --sync ps
ps colocated N=3, three buckets|-n 3 --sync ps --bucket-mb 0.06
ps dedicated K=2 N=2|-n 2 --sync ps --ps-placement dedicated --ps-servers 2
ps dataparallel N=3|-n 3 --sync ps --ps-mode dataparallel --global-batch 96
ring N=1 (the staging of one rank: broadcast, hand-over, copy back)|--sync ring
ps N=1, the server in the one rank|--sync ps
student ring N=1|--sync student
EOF
# the one-rank path with no back end (device staging for evaluation and saving)
for dev in cpu cpu-async; do
    $BIN train --sync none --device $dev $M --report $T/n$dev.json --save-params $T/n$dev.bin >$T/n$dev.log 2>&1 || bad "none on $dev" "$(tail -n 3 $T/n$dev.log)"
done
cmp -s $T/ncpu.bin $T/ncpu-async.bin && ok "none N=1: cpu-async == cpu, bitwise" || bad "none N=1" "parameters differ"
# the bench on cpu-async: its buffers handed to the back ends must be device memory (the ring's
# data barrier was a host array, which a GPU's runtime copies from with undefined behaviour and
# cpu-async refuses), and every element still exact
for row in "ring 3" "ring 2" "ps 3" "byteps 3" "ring 1"; do
    set -- $row
    if timeout 120 $BIN bench -n $2 --sync $1 --device cpu-async -b 8 -e 256K -f 8 -w 1 -i 3 --timeout 30 >$T/bench.log 2>&1 &&
        grep -q '^# wrong elements : 0 OK' $T/bench.log; then ok "bench --sync $1 -n $2 on cpu-async: exact"
    else bad "bench --sync $1 -n $2 on cpu-async" "$(tail -n 3 $T/bench.log)"; fi
done
finish
