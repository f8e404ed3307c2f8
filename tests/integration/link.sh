#!/usr/bin/env bash
# link.sh - --link: an emulated network interface per process paces ring and ps as the formulas say; bad values are exit 2
#
# Pacing: at large sizes `bench --link 1gbit` reaches, for the ring, a bus bandwidth within 15% of
# the link rate (each rank's interface carries 2(N-1)/N of the buffer each way, full duplex: busbw
# = BW); for a colocated ps in whole messages (--ps-partition-kb off), of BW/N (rank 0's interface
# takes in the N-1 other ranks' buffers, then, once the sum is made, sends N-1 buffers back:
# t = 2(N-1)S/BW, busbw = S/t x 2(N-1)/N); in partitions (auto: 2 ms of the link), of 2 BW/N: each
# partition is answered as soon as it is in, so the replies leave while the pushes still arrive on
# the full-duplex interface, t = (N-1)S/BW.
. "$(dirname "$0")/lib.sh"
BW=125000000 # 1gbit in bytes per second

# busbw of the largest rows of a bench run: "SYNC N" -> the median busbw (GB/s) of its 4M and 16M rows
bench_busbw() {
    local sync=$1 n=$2
    timeout 300 $BIN bench -n "$n" --sync "$sync" ${PART:+--ps-partition-kb $PART} --link 1gbit -b 4M -e 16M -f 4 -w 1 -i 3 --timeout 60 \
        --report "$T/bench-$sync-$n.json" >"$T/bench-$sync-$n.log" 2>&1 || return 1
    $PY -c '
import json, statistics, sys
r = json.load(open(sys.argv[1]))
print(statistics.median(x["busbw_gbps"] for x in r["rows"]))' "$T/bench-$sync-$n.json"
}

# check_busbw SYNC N DIVISOR NAME WHAT: SYNC's busbw at N ranks within 15% of the link's rate / DIVISOR
check_busbw() {
    local sync=$1 n=$2 div=$3 name=$4 what=$5 got want
    if ! got=$(bench_busbw "$sync" "$n"); then bad "$sync N=$n bench" "$(tail -n 3 "$T/bench-$sync-$n.log")"; return; fi
    want=$($PY -c "print($BW / 1e9 / $div)")
    if $PY -c "import sys; sys.exit(0 if abs($got - $want) <= 0.15 * $want else 1)"; then
        ok "$name N=$n --link 1gbit: busbw $got GB/s, $what $want GB/s"
    else bad "$name N=$n --link 1gbit" "busbw $got GB/s, want $what $want GB/s within 15%"; fi
}
for n in 2 3; do
    check_busbw ring $n 1 ring "the link's"
    PART=off check_busbw ps $n $n "ps colocated, whole messages" "BW/N ="
    check_busbw ps $n "($n / 2)" "ps colocated, partitions" "2 BW/N ="
done

# the DataParallel imbalance where the network sets the pace: rank 0's interface carries every
# other rank's push and pull, the ring's only 2(N-1)/N of one gradient
M="--layers 784,256,10 --steps 6 --warmup 1 --eval-samples 64 --quiet --timeout 60 --link 200mbit"
# six ranks on 2 shared cores: one slow scheduling can cost the ring's steps a quarter (once: 70 ms a
# step against its usual 56, which put ps at 2.9x), so a pair under 3x is measured once more and
# the check fails only when the second pair is under it too
first=""
for attempt in 1 2; do
    if ! { timeout 300 $BIN train -n 6 --sync ring $M --report "$T/ring6.json" >"$T/ring6.log" 2>&1 &&
           timeout 300 $BIN train -n 6 --sync ps $M --report "$T/ps6.json" >"$T/ps6.log" 2>&1; }; then
        bad "N=6 --link 200mbit runs" "$(tail -n 3 "$T/ring6.log" "$T/ps6.log")"
        break
    fi
    out=$($PY - "$T/ring6.json" "$T/ps6.json" <<'EOF'
import json, sys
ring, ps = (json.load(open(p)) for p in sys.argv[1:])
c_ring = max(e["time_s"]["phases"]["comm_total"] for e in ring["ranks"])
c_ps = ps["ranks"][0]["time_s"]["phases"]["comm_total"]
link = ps["env"]["link"]
ok = c_ps >= 3 * c_ring and link and link["text"] == "200mbit" and abs(link["bandwidth_bytes_per_s"] - 25e6) < 1
print("ps rank 0 comm_total %.1f ms per step, the ring's %.1f ms (%.1fx); env.link %s" % (c_ps * 1e3, c_ring * 1e3, c_ps / c_ring, link))
sys.exit(0 if ok else 1)
EOF
)
    if [ $? = 0 ]; then ok "N=6 --link 200mbit: $out${first:+ (second pair; the first: $first)}"; break; fi
    [ $attempt = 2 ] && bad "N=6 --link 200mbit" "$out (twice; the first pair: $first)"
    first=$out
done

# the same job with and without a link computes the same numbers (pacing changes time only)
for sync in ring ps student; do
    [ $sync = student ] && continue # the skeleton's all-reduce is the student's to write
    $BIN train -n 3 --sync $sync --layers 784,64,10 --steps 5 --quiet --save-params "$T/p0.bin" --report "$T/a.json" >/dev/null 2>&1
    $BIN train -n 3 --sync $sync --layers 784,64,10 --steps 5 --quiet --link 10gbit,20us --save-params "$T/p1.bin" --report "$T/b.json" >/dev/null 2>&1
    cmp -s "$T/p0.bin" "$T/p1.bin" && ok "$sync: --link 10gbit,20us leaves the parameters bitwise unchanged" ||
        bad "$sync --link" "the parameters differ with a link"
done

# the demo's emulated matrix (experiments/matrices/quick-link.json): on this machine's cores, with
# ranks up to 8, the time claims hold under the link, and the claims output names it
if timeout 600 $BIN matrix experiments/matrices/quick-link.json --out "$T/ql" >"$T/ql.log" 2>&1; then
    $BIN claims "$T/ql" >"$T/claims.log" 2>&1
    for k in 3 6; do
        if grep -Eq "^$k +PASS" "$T/claims.log" && grep -A40 -E "^$k +PASS" "$T/claims.log" | grep -q "link 1gbit\|emulated 1gbit"; then
            ok "quick-link: claim $k PASSes at N = 2, 4, 8, decided on the emulated 1gbit link"
        else bad "quick-link claim $k" "$(grep -A12 -E "^$k " "$T/claims.log")"; fi
    done
    $PY tests/claims_explained.py "$T/ql/claims.json" >"$T/ql.why" 2>&1 && ok "quick-link: no FAIL without a measured why" \
        || bad "quick-link: a FAIL nothing explains" "$(cat "$T/ql.why")"
else bad "quick-link matrix" "$(tail -n 5 "$T/ql.log")"; fi

# bad values: exit 2 naming the value, no report
expect_status "--link 0gbit is exit 2" 2 $BIN train --link 0gbit --steps 1 --report "$T/x.json"
expect_status "--link -5mbit is exit 2" 2 $BIN train --link -5mbit --steps 1 --report "$T/x.json"
expect_status "--link 1furlong is exit 2" 2 $BIN train --link 1furlong --steps 1 --report "$T/x.json"
grep -q "1furlong" "$T/last.log" && ok "the unit error names the value" || bad "unit error" "$(cat "$T/last.log")"
expect_status "--link 1gbit,20s (latency over 10 s) is exit 2" 2 $BIN train --link 1gbit,20s --steps 1 --report "$T/x.json"
expect_status "--link 1gbit,5parsecs is exit 2" 2 $BIN train --link 1gbit,5parsecs --steps 1 --report "$T/x.json"
expect_status "bench --link 0bit is exit 2" 2 $BIN bench --link 0bit
# a link under which one bucket cannot cross within --timeout (its waits sleep as long as the
# bandwidth implies: 1 kbit/s once hung `bench --timeout 5`): refused at once, from the launcher
s0=$SECONDS
expect_status "train --link 1kbit --timeout 5 is exit 2" 2 $BIN train -n 2 --link 1kbit --timeout 5 --steps 1 --report "$T/x.json"
grep -q "one bucket of .* takes .* s on it, not less than --timeout 5 s" "$T/last.log" && ok "train: says the bucket cannot cross" \
    || bad "train 1kbit" "$(cat "$T/last.log")"
expect_status "bench -n 2 --link 1kbit --timeout 5 is exit 2" 2 timeout 30 $BIN bench -n 2 --link 1kbit --timeout 5
grep -q "the sweep's largest call (67108864 bytes) takes" "$T/last.log" && ! grep -q "rank 0" "$T/last.log" \
    && ok "bench: says the largest call cannot cross, before any rank starts" || bad "bench 1kbit" "$(cat "$T/last.log")"
[ $((SECONDS - s0)) -le 10 ] && ok "refused within seconds" || bad "1kbit refusals" "took $((SECONDS - s0)) s"
expect_status "bench --link 1kbit -e 64 --timeout 5 runs (64 bytes cross in 0.5 s)" 0 timeout 60 $BIN bench --link 1kbit -b 8 -e 64 -w 1 -i 1 --timeout 5
[ ! -e "$T/x.json" ] && ok "no report after a refused --link" || bad "refused --link" "a report was written"
finish
