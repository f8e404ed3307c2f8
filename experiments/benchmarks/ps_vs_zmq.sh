#!/usr/bin/env bash
# ps_vs_zmq.sh - the parameter server at N = 2 against ZeroMQ alone moving the same messages, on ipc and tcp
# usage: experiments/benchmarks/ps_vs_zmq.sh [BIN [REPEATS]]   (needs cc and libzmq's headers)
#        PLACEMENT=sharded experiments/benchmarks/ps_vs_zmq.sh ...   (ps's placement: colocated, the
#        default; sharded: a server in every rank, the same bytes between the two processes; or
#        dedicated: one server process of its own and two workers, against ZeroMQ's server process
#        answering two worker processes)
#        BARRIER=each experiments/benchmarks/ps_vs_zmq.sh ...   (ps timed by the bench's default rule,
#        a barrier before every call, as before; default none: the same rule as ZeroMQ's side)
#
# What is compared. `ringside bench --sync ps -n 2 --transport T` (colocated server in rank 0,
# --bucket-mb 25): per all-reduce of S bytes rank 1 pushes S bytes to rank 0's server over T, in
# messages [56-byte header][payload] of at most 25 MiB each, and gets S bytes back the same way;
# rank 0's own share goes over inproc. Its time is the median of each rank's timed calls, then the
# maximum over the two ranks. experiments/benchmarks/zmq_tput.c does only the ZeroMQ part: one
# process's DEALER sends the same messages to another process's ROUTER, which answers each one
# with a message of the same size; its time is the median of the round trips (first send to last
# answer). Both sides are timed by one rule: the calls (round trips) of a size back to back, with
# no barrier and no refill of the input between them (`bench --barrier none`), each side's median,
# the maximum over its processes. For both, "bus bandwidth" is the bench's: busbw = algbw x
# 2(N-1)/N with algbw = S / time, and at N = 2 busbw = algbw = S / time: the bytes that cross between the two processes each
# way per all-reduce, over the time of one all-reduce. The same sizes, the same transport, the same
# message cut, the same zero-copy rule (payloads >= 64 KiB lent, smaller ones copied), one
# I/O thread per context on both sides. What ps does on top (copying the payloads into its receive
# buffers, the sum, the copies of the result) is what the ratio prices.
#
# PLACEMENT=dedicated: `bench --sync ps --ps-placement dedicated -n 2` (one server process, the two
# ranks its workers: each pushes S and pulls S, so the server's link carries 2 S each way) against
# zmq_tput with two worker processes, whose server answers chunk k to both once both have sent it.
# busbw = S / time on both sides, as at N = 2 above. The diagnostic modes model the colocated
# server's work and are left out.
#
# Two diagnostic rows of the same program go with it (zmq_tput's modes): "zmq+ps copies" adds
# ps's user-space copies and sum to the bare pattern (does it land where ps does?), "zmq+fused"
# keeps the results but sums from the received message in one pass (what removing the server's
# copies would give), "fused, 1M slices" does that with the all-reduce cut into 1 MiB messages
# instead of 25 MiB ones (transfers, sums and copies of successive slices overlap).
#
# A second pair cuts both sides into 1 MiB messages: `bench --sync ps --bucket-mb 1` (the server
# sums and answers each 1 MiB slice as it lands, so transfer, sum and copy-out overlap) against
# zmq_tput's bare pattern in 1 MiB messages: the same goal on the same message sizes.
#
# Both sides run under one malloc policy: ps's processes keep ZeroMQ's received frames in warm
# heap pages (base/heap.h), and zmq_tput gives its two processes the same (its default heap
# "keep"); one more row, "zmq, glibc heap", runs the bare pattern under glibc's defaults (every
# large frame in fresh pages), to show what the policy is worth to ZeroMQ alone.
#
# Runs interleaved REPEATS times (default 5), each ps run and its ZeroMQ run back to back (a pair),
# the side that goes first alternating from repeat to repeat (so that neither always inherits the
# other's leftover load or warm caches), and prints, per transport and size, the median busbw of
# each over the repeats and the ratio ps / ZeroMQ beside the goal (0.80); then a Markdown table of
# the same runs as pairs (experiments/benchmarks/paired.py). Both sides are timed by one
# rule (BARRIER=each puts the bench's barrier before every ps call back, to compare with runs from
# before the rule was shared: a skew of that barrier lands on ps's side only).
set -euo pipefail
shopt -s nullglob # a placement without the diagnostic modes has none of their files
bin=${1:-build/ringside}
reps=${2:-5}
placement=${PLACEMENT:-colocated}
barrier=${BARRIER:-none}
case $placement in colocated|sharded) workers=1 ;; dedicated) workers=2 ;;
    *) echo "ps_vs_zmq: PLACEMENT=$placement: expected colocated, sharded or dedicated" >&2; exit 2 ;; esac
case $barrier in each|none) ;; *) echo "ps_vs_zmq: BARRIER=$barrier: expected each or none" >&2; exit 2 ;; esac
sizes=(-b 64K -e 64M -f 4 -w 3 -i 10)
mkdir -p build
cc -O2 -I. -o build/zmq_tput experiments/benchmarks/zmq_tput.c base/heap.c -lzmq -pthread
out=$(mktemp -d /tmp/ps_vs_zmq-XXXXXX)
trap 'rm -rf "$out"' EXIT
echo "# ps_vs_zmq: $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores, $reps repeats, ps placement $placement, ps --barrier $barrier, $(date -u +%FT%TZ)"
ps_run() { # REP TRANSPORT NAME [OPTIONS]: one bench of ps into OUT/NAME-TRANSPORT-REP.txt
    local rep=$1 tr=$2 name=$3; shift 3
    echo "## repeat $rep, $tr: ringside bench --sync ps --ps-placement $placement -n 2 --transport $tr --barrier $barrier $* ${sizes[*]}"
    "$bin" bench --sync ps --ps-placement "$placement" -n 2 --transport "$tr" --barrier "$barrier" "$@" "${sizes[@]}" | tee "$out/$name-$tr-$rep.txt" | grep -v '^#' || true
}
zmq_run() { # REP TRANSPORT MODE: one zmq_tput run into OUT/zmqMODE-TRANSPORT-REP.txt
    local rep=$1 tr=$2 mode=$3 chunk=26214400 heap=keep m
    case $mode in *1m) chunk=1048576 ;; esac
    case $mode in *glibc) heap=glibc ;; esac
    m=${mode%1m}; m=${m%glibc}
    echo "## repeat $rep, $tr: zmq_tput $tr (mode $m, $chunk-byte slices, heap $heap, $workers worker process(es))"
    build/zmq_tput "$tr" 65536 67108864 4 3 10 "$chunk" "$m" "$heap" "$workers" | tee "$out/zmq$mode-$tr-$rep.txt" | grep -v '^#' || true
}
# every ps run and its ZeroMQ run back to back (a pair: both see the same moment's load), the one
# that goes first alternating from repeat to repeat; the diagnostic modes after the pairs
for rep in $(seq "$reps"); do
    for tr in ipc tcp; do
        if [ $((rep % 2)) = 1 ]; then
            ps_run "$rep" "$tr" ps; zmq_run "$rep" "$tr" bare
            ps_run "$rep" "$tr" ps1m --bucket-mb 1; zmq_run "$rep" "$tr" bare1m
        else
            zmq_run "$rep" "$tr" bare; ps_run "$rep" "$tr" ps
            zmq_run "$rep" "$tr" bare1m; ps_run "$rep" "$tr" ps1m --bucket-mb 1
        fi
        if [ "$workers" = 1 ]; then diag="ps fused fused1m bareglibc"; else diag=bareglibc; fi
        for mode in $diag; do zmq_run "$rep" "$tr" "$mode"; done
    done
done
# rows: "  size count float time algbw busbw wrong"; medians over the repeats per (program, transport, size)
echo
echo "# median busbw (GB/s) over $reps repeats; ratio = ps / ZeroMQ (goal: >= 0.80 at every size); then the diagnostic modes"
printf '# %-9s %12s %10s %10s %7s %14s %10s %18s %10s %10s %8s %16s\n' transport "size(B)" ps zeromq ratio "zmq+ps copies" "zmq+fused" "fused, 1M slices" "ps 1M" "zmq 1M" "ratio 1M" "zmq, glibc heap"
for tr in ipc tcp; do
    for f in "$out"/ps-"$tr"-*.txt; do awk '/^ +[0-9]/ {print "ps", $1, $6}' "$f"; done >"$out/rows-$tr"
    for f in "$out"/ps1m-"$tr"-*.txt; do awk '/^ +[0-9]/ {print "ps1m", $1, $6}' "$f"; done >>"$out/rows-$tr"
    for mode in bare ps fused fused1m bare1m bareglibc; do
        for f in "$out"/zmq"$mode"-"$tr"-*.txt; do awk -v m="zmq$mode" '/^ +[0-9]/ {print m, $1, $6}' "$f"; done >>"$out/rows-$tr"
    done
    for size in $(awk '{print $2}' "$out/rows-$tr" | sort -n -u); do
        med() { awk -v p="$1" -v s="$size" '$1 == p && $2 == s {print $3}' "$out/rows-$tr" | sort -g |
                awk '{v[NR] = $1} END {if (!NR) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
        p=$(med ps); z=$(med zmqbare); zp=$(med zmqps); zf=$(med zmqfused); z1=$(med zmqfused1m)
        p1=$(med ps1m); b1=$(med zmqbare1m); zg=$(med zmqbareglibc)
        awk -v t="$tr" -v s="$size" -v p="$p" -v z="$z" -v zp="$zp" -v zf="$zf" -v z1="$z1" -v p1="$p1" -v b1="$b1" -v zg="$zg" \
            'BEGIN {printf "  %-9s %12d %10.3f %10.3f %7s %14.3f %10.3f %18.3f %10.3f %10.3f %8s %16.3f\n", t, s, p, z, (z > 0 && p != "nan") ? sprintf("%.2f", p / z) : "n/a", zp, zf, z1, p1, b1, (b1 > 0 && p1 != "nan") ? sprintf("%.2f", p1 / b1) : "n/a", zg}'
    done
done
# the same runs as pairs (a repeat's ps and ZeroMQ ran back to back): medians with quartiles and
# the median (min-max) of the per-repeat ratios, which the machine's load moves less
echo
echo "| transport, cut | size | ps busbw median (q1-q3) GB/s | ZeroMQ busbw median (q1-q3) GB/s | ratio of the medians | paired ratio median (min-max) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for tr in ipc tcp; do
    python3 experiments/benchmarks/paired.py "$tr, 25 MiB" $(for r in $(seq "$reps"); do echo "$out/ps-$tr-$r.txt"; done) -- \
        $(for r in $(seq "$reps"); do echo "$out/zmqbare-$tr-$r.txt"; done)
    python3 experiments/benchmarks/paired.py "$tr, 1 MiB" $(for r in $(seq "$reps"); do echo "$out/ps1m-$tr-$r.txt"; done) -- \
        $(for r in $(seq "$reps"); do echo "$out/zmqbare1m-$tr-$r.txt"; done)
done
