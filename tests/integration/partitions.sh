#!/usr/bin/env bash
# partitions.sh - --ps-partition-kb: buckets (and the bench's all-reduce) cut into partitions striped over every server give the same bits, the exact bytes of the formulas with a header a partition, and bad values are refused
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.." || exit 1
SMALL="--layers 64,128,10 --train-samples 2048 --eval-samples 256 --seed 3 --global-batch 96 --steps 20 -q"

# ---- the same bits as whole buckets (each key's sum is still taken in rank order) -------------------
$BIN train -n 1 --sync none --batch 96 $SMALL --report $T/one.json --save-params $T/one.bin >$T/one.log 2>&1 \
    || bad "one rank, batch 96" "$(tail -n 3 $T/one.log)"
while IFS='|' read -r name opts; do
    [ -n "$name" ] || continue
    if ! $BIN train -n 3 $opts --ps-partition-kb off $SMALL --report $T/w.json --save-params $T/w.bin >$T/w.log 2>&1 ||
        ! $BIN train -n 3 $opts --ps-partition-kb 4 $SMALL --report $T/p.json --save-params $T/p.bin >$T/p.log 2>&1; then
        bad "$name" "$(tail -n 3 $T/w.log $T/p.log)"
        continue
    fi
    cmp -s $T/w.bin $T/p.bin && ok "$name: partitions of 4 KiB give whole buckets' bits" \
        || bad "$name" "parameters differ from whole buckets': $(cmp $T/w.bin $T/p.bin | head -n 1)"
    check "$name: one rank's run within 1e-5" $PY tests/compare_runs.py $T/one.json $T/p.json --params $T/one.bin $T/p.bin --tol 1e-5
    $PY tests/ps_traffic.py $T/p.json >$T/t.log 2>&1 && ok "$name: exact bytes ($(cat $T/t.log))" || bad "$name: bytes" "$(cat $T/t.log)"
done <<'LIST'
dedicated K=2|--sync ps --ps-placement dedicated --ps-servers 2
dedicated K=3, buckets of 0.01 MiB|--sync ps --ps-placement dedicated --ps-servers 3 --bucket-mb 0.01
sharded|--sync ps --ps-placement sharded
byteps k=0|--sync byteps --ps-servers 0
byteps k=1, buckets of 0.01 MiB|--sync byteps --ps-servers 1 --bucket-mb 0.01
byteps k=3|--sync byteps --ps-servers 3
LIST
# colocated: one server, partitions pipeline only; DataParallel's step through them too
for opts in "--sync ps" "--sync ps --ps-mode dataparallel"; do
    $BIN train -n 3 $opts --ps-partition-kb off $SMALL --report $T/w.json --save-params $T/w.bin >$T/w.log 2>&1 &&
        $BIN train -n 3 $opts --ps-partition-kb 4 $SMALL --report $T/p.json --save-params $T/p.bin >$T/p.log 2>&1 &&
        cmp -s $T/w.bin $T/p.bin && ok "$opts: partitions give whole buckets' bits" || bad "$opts" "$(tail -n 2 $T/w.log $T/p.log)"
done
# under --link (auto: partitions, the send queue, contributions booked as they come) every mode ends,
# with the bits of the same run without a link: DataParallel's other ranks wait for no replies, so
# their queued pushes must still all leave (they once stayed queued and rank 0 waited for them)
for opts in "--sync ps --ps-mode dataparallel" "--sync ps --ps-placement dedicated --ps-servers 2" "--sync byteps --ps-servers 1" \
            "--sync ps --ps-placement sharded"; do
    if timeout 120 $BIN train -n 3 $opts $SMALL --timeout 20 --report $T/nl.json --save-params $T/nl.bin >$T/nl.log 2>&1 &&
        timeout 120 $BIN train -n 3 $opts --link 100mbit $SMALL --timeout 20 --report $T/l.json --save-params $T/l.bin >$T/l.log 2>&1 &&
        cmp -s $T/nl.bin $T/l.bin; then ok "$opts under --link 100mbit: ends, the bits of no link"
    else bad "$opts under --link" "$(tail -n 3 $T/nl.log $T/l.log)"; fi
done
timeout 120 $BIN train -n 3 --sync ps --ps-placement dedicated --ps-consistency async --momentum 0.5 --link 100mbit $SMALL \
    --timeout 20 --report $T/as.json >$T/as.log 2>&1 && ok "async under --link 100mbit: ends" || bad "async under --link" "$(tail -n 3 $T/as.log)"

# bf16: exact bytes (2 a key, partitions of K KiB on the wire: 4 KiB of bf16 are 8 KiB of fp32's
# keys), the steps' payload half of fp32's over the same partitions
$BIN train -n 3 --sync byteps --ps-servers 1 --wire bf16 --ps-partition-kb 4 $SMALL --report $T/bf.json >$T/bf.log 2>&1 &&
    $BIN train -n 3 --sync byteps --ps-servers 1 --ps-partition-kb 8 $SMALL --report $T/f4.json >$T/f4.log 2>&1 &&
    check "bf16 with partitions: exact bytes, the steps' payload halved" $PY tests/ps_traffic.py $T/bf.json $T/f4.json ||
    bad "bf16 with partitions" "$(tail -n 3 $T/bf.log $T/f4.log)"
# auto under an emulated link: 2 ms of it (100 Mbit/s: 25 kB, at least 64 KiB), halved until every
# one of 4 servers holds a partition of this 38 KB model
$BIN train -n 2 --sync ps --ps-placement dedicated --ps-servers 4 --link 100mbit $SMALL --report $T/auto.json >$T/auto.log 2>&1 &&
    check "auto under --link: the partitions its rule gives, exact bytes" $PY tests/ps_traffic.py $T/auto.json ||
    bad "auto under --link" "$(tail -n 3 $T/auto.log)"
grep -q '"ps-partition-kb":[[:space:]]*"auto"' $T/auto.json && ok "the report's config says auto" || bad "config" "no ps-partition-kb auto"

# ---- the bench's all-reduce in striped partitions: exact sums, and each chunk on one server -------------
# 256 KiB and 1 MiB in 64 KiB partitions (4 and 16 chunks), 4 calls a size (1 warm-up + 3): each worker
# sends 4 x (4 + 16) pushes and 3 goodbyes; server s gets N pushes of every chunk b with b mod 3 = s
# (round robin: 2 + 6 chunks on server 0, 1 + 5 on the others) and N goodbyes
for opts in "--sync ps --ps-placement dedicated --ps-servers 3" "--sync ps --ps-placement sharded" "--sync byteps --ps-servers 2" \
            "--sync ps --ps-placement dedicated --ps-servers 3 --wire bf16"; do
    if $BIN bench -n 3 $opts --ps-partition-kb 64 -b 256K -e 1M -f 4 -w 1 -i 3 --timeout 30 --report $T/bp.json >$T/bp.log 2>&1 &&
        grep -q '^# wrong elements : 0 OK' $T/bp.log && grep -q 'partitions of' $T/bp.log; then
        ok "bench $opts: striped partitions, every element exact"
    else bad "bench $opts" "$(tail -n 3 $T/bp.log)"; fi
done
$BIN bench -n 3 --sync ps --ps-placement dedicated --ps-servers 3 --ps-partition-kb 64 -b 256K -e 1M -f 4 -w 1 -i 3 \
    --report $T/bp.json >$T/bp.log 2>&1
if $PY - $T/bp.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["summary"]["traffic"]
w = [e for e in t if "rank" in e]
s = {e["server"]: e for e in t if "server" in e}
H, calls, N = 56, 4, 3
pay = calls * (256 * 1024 + 1024 * 1024)  # bytes of fp32 each worker contributes over the sweep
assert all(e["messages_sent"] == calls * (4 + 16) + 3 and e["bytes_sent"] == pay + (calls * 20 + 3) * H for e in w), w
assert [s[k]["messages_received"] for k in range(3)] == [calls * N * 8 + N, calls * N * 6 + N, calls * N * 6 + N], s
assert r["config"]["ps_partition_keys"] == 16384 and r["config"]["ps_partition_kb"] == "64"
print("ok")
PY
then ok "bench: messages and bytes of the striped partitions, exactly"; else bad "bench striped traffic" "$(cat $T/bp.log | tail -3)"; fi
expect_status "bench: a partition larger than --bucket-mb is refused before launching" 2 \
    $BIN bench -n 3 --sync ps --bucket-mb 1 --ps-partition-kb 2048 -b 8 -e 1M
grep -q "larger than a bucket" $T/last.log && ! grep -q "rank 0" $T/last.log && ok "bench: says so, from the launcher" \
    || bad "bench refusal" "$(cat $T/last.log)"

# ---- bad values: exit 2 naming the value, before any rank starts, no report ---------------------------
for v in 0 -4 abc 1e400 "" 0.001; do
    expect_status "--ps-partition-kb '$v' is refused" 2 $BIN train -n 3 --sync ps --ps-partition-kb "$v" $SMALL --report $T/bad.json
    grep -q -- "--ps-partition-kb" $T/last.log && ok "'$v': names the option" || bad "'$v': names the option" "$(cat $T/last.log)"
done
expect_status "a partition larger than a bucket is refused" 2 $BIN train -n 3 --sync ps --bucket-mb 0.5 --ps-partition-kb 1024 $SMALL --report $T/bad.json
grep -q "larger than a bucket" $T/last.log && ok "larger than a bucket: says so" || bad "larger than a bucket" "$(cat $T/last.log)"
[ ! -e $T/bad.json ] && ok "no report after refusals" || bad "no report after refusals" "written"
finish
