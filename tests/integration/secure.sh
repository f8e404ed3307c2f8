#!/usr/bin/env bash
# secure.sh - --secure: CURVE on every socket; a peer without the job's key is refused; a capture of the link shows no plaintext
. "$(dirname "$0")/lib.sh"
BIN=$(readlink -f "$BIN")
SMALL="--layers 784,32,10 --train-samples 512 --eval-samples 64 --quiet"

$BIN keygen $T/job.key >/dev/null && [ "$(stat -c %a $T/job.key)" = 600 ] && [ "$(wc -l < $T/job.key)" = 2 ] \
    && ok "keygen writes a private two-line key file" || bad "keygen" "$(ls -l $T/job.key)"
$BIN keygen $T/other.key >/dev/null
expect_status "keygen into a missing directory" 2 $BIN keygen /nonexistent-dir/k.key
echo "not a key" > $T/bad.key
expect_status "a malformed key file is refused" 2 $BIN train $SMALL --steps 2 --secure $T/bad.key --report $T/x.json

for sync in "ring" "ps" "ps --ps-placement dedicated --ps-servers 2" "ps --ps-mode dataparallel --global-batch 32"; do
    check "--secure with --sync $sync" $BIN train -n 3 --sync $sync $SMALL --steps 5 --timeout 20 --secure $T/job.key --report $T/s.json
done

# rank 1 without the key, then with another key: refused (its join never completes), rank 0 names it
for variant in "none:" "other:--secure $T/other.key"; do
    name=${variant%%:*}; opts=${variant#*:}
    port=$(free_port)
    RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RINGSIDE_JOB_TOKEN=ab12 \
        $BIN train --sync ring $SMALL --steps 3 --timeout 4 --secure $T/job.key --report $T/k.json >$T/k0.log 2>&1 & p0=$!
    RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RINGSIDE_JOB_TOKEN=ab12 \
        $BIN train --sync ring $SMALL --steps 3 --timeout 4 $opts --report $T/k.json >$T/k1.log 2>&1 & p1=$!
    wait $p0; r0=$?; wait $p1; r1=$?
    [ $r0 = 3 ] && [ $r1 != 0 ] && grep -q "rank 1 did not join" $T/k0.log && [ ! -e $T/k.json ] \
        && ok "a peer with key '$name' is refused" || bad "a peer with key '$name'" "exit $r0/$r1: $(cat $T/k0.log $T/k1.log | tail -n 4)"
done

# an eavesdropper: capture loopback in a namespace of our own while rank 1 pushes a known input to rank 0;
# the plain run must show the input's bytes (the capture works), the secure run must not
if command -v tcpdump >/dev/null && [ "$(id -u)" = 0 ] && ip netns add rs$$cap 2>/dev/null; then
    trap 'ip netns del rs$$cap 2>/dev/null; rm -rf "$T"' EXIT
    ip -n rs$$cap link set lo up
    for mode in plain secure; do
        opts=$([ $mode = secure ] && echo "--secure $T/job.key")
        ip netns exec rs$$cap tcpdump -i lo -U -s 0 -w $T/$mode.pcap >/dev/null 2>&1 & cap=$!
        sleep 1
        ip netns exec rs$$cap $BIN bench -n 2 --sync ps --transport tcp -b 64K -e 64K -w 1 -i 2 $opts >$T/$mode.log 2>&1; brc=$?
        sleep 0.5; kill $cap; wait $cap 2>/dev/null
        # rank 1's input: element i = ((7i + 13) mod 17) - 8, as float32; look for 32 consecutive elements
        found=$($PY - $T/$mode.pcap <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
pat = b"".join(struct.pack("<f", float(((7 * i + 13) % 17) - 8)) for i in range(100, 132))
print(1 if pat in data else 0)
PY
)
        echo "$mode: bench exit $brc, plaintext gradients in the capture: $found ($(stat -c %s $T/$mode.pcap) bytes captured)"
        eval "${mode}_found=$found; ${mode}_rc=$brc"
    done
    [ "$plain_rc" = 0 ] && [ "$plain_found" = 1 ] && ok "without --secure the capture shows the gradients (the check works)" \
        || bad "plain capture" "bench exit $plain_rc, found $plain_found"
    [ "$secure_rc" = 0 ] && [ "$secure_found" = 0 ] && ok "with --secure the capture shows no plaintext gradients" \
        || bad "secure capture" "bench exit $secure_rc, found $secure_found"
else
    echo "skip eavesdropper: needs root, tcpdump and network namespaces"
fi
finish
