#!/usr/bin/env bash
# msglayer.sh - --msg-layer direct: every host back end gives zeromq's parameters bit for bit and counts the same bytes and messages; bench sums exactly; bad values and --secure are exit 2
. "$(dirname "$0")/lib.sh"
M="--layers 784,64,10 --train-samples 1024 --eval-samples 64 --steps 6 --seed 3 --quiet --timeout 30"
# name | options (each run twice: --msg-layer zeromq, then direct)
while IFS='|' read -r name opts; do
    [ -n "$name" ] || continue
    for L in zeromq direct; do
        if ! timeout 120 $BIN train $opts --msg-layer $L $M --report "$T/$name-$L.json" --save-params "$T/$name-$L.bin" >"$T/$name-$L.log" 2>&1; then
            bad "$name --msg-layer $L" "$(tail -n 3 "$T/$name-$L.log")"
            continue 2
        fi
    done
    cmp -s "$T/$name-zeromq.bin" "$T/$name-direct.bin" && ok "$name: direct gives zeromq's parameters, bitwise" ||
        bad "$name" "parameters differ between the layers"
    $PY - "$T/$name-zeromq.json" "$T/$name-direct.json" <<'EOF' && ok "$name: the same bytes and messages on every rank, the layer in the config" || bad "$name" "counts or config differ"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
key = lambda r: [(e["traffic"]["bytes_sent"], e["traffic"]["bytes_received"], e["traffic"]["messages_sent"]) for e in r["ranks"]]
sys.exit(0 if key(a) == key(b) and a["config"]["msg-layer"] == "zeromq" and b["config"]["msg-layer"] == "direct" else 1)
EOF
done <<'LIST'
ring-tcp|-n 3 --sync ring --transport tcp
tree|-n 4 --sync tree
ps|-n 3 --sync ps --transport tcp
ps-dedicated|-n 2 --sync ps --ps-placement dedicated --ps-servers 2
dataparallel|-n 3 --sync ps --ps-mode dataparallel --global-batch 96
byteps|-n 3 --sync byteps --ps-servers 1 --link 1gbit
zero-3|-n 3 --sync zero --zero-stage 3 --transport ipc
LIST
# a ring whose segments outgrow a Unix socket's buffer: each rank waits for its lent sends before
# it reads, so a lend held until the peer read would hang both (it did; the layer copies instead)
timeout 120 $BIN train -n 2 --sync ring --transport ipc --msg-layer direct --layers 784,1024,1024,10 --train-samples 256 \
    --eval-samples 64 --steps 3 --seed 3 --quiet --timeout 20 --report "$T/ipc-large.json" >"$T/ipc-large.log" 2>&1 &&
    ok "ring over direct ipc with 1.8 M parameters does not hang" || bad "ring ipc large" "$(tail -n 3 "$T/ipc-large.log")"
# large messages: more than the kernel takes at once goes to the writer thread, in order
$BIN bench -n 3 --sync ring --transport tcp --msg-layer direct -b 1K -e 16M -f 16 -i 3 -w 1 -c 1 --report "$T/bench.json" >"$T/bench.log" 2>&1 &&
    grep -q "wrong elements : 0 OK" "$T/bench.log" && ok "bench ring over direct tcp sums exactly to 16 MiB" || bad "bench direct" "$(tail -n 3 "$T/bench.log")"
$BIN bench -n 2 --sync ps --msg-layer direct -b 8 -e 4M -f 8 -i 3 -w 1 -c 1 --report "$T/bench-ps.json" >"$T/bench-ps.log" 2>&1 &&
    grep -q "wrong elements : 0 OK" "$T/bench-ps.log" && ok "bench ps over direct sums exactly to 4 MiB" || bad "bench ps direct" "$(tail -n 3 "$T/bench-ps.log")"
# bad values
expect_status "--msg-layer pigeon is exit 2" 2 $BIN train --msg-layer pigeon --steps 1 --report "$T/x.json"
grep -q "pigeon" "$T/last.log" && ok "the error names the value" || bad "--msg-layer pigeon" "$(cat "$T/last.log")"
$BIN keygen "$T/key" >/dev/null 2>&1
expect_status "--msg-layer direct with --secure is exit 2" 2 $BIN train -n 2 --msg-layer direct --secure "$T/key" --steps 1 --report "$T/x.json"
grep -q "CURVE" "$T/last.log" && ok "the refusal says why (no CURVE)" || bad "--secure direct" "$(cat "$T/last.log")"
expect_status "bench --msg-layer pigeon is exit 2" 2 $BIN bench -n 2 --msg-layer pigeon
[ ! -e "$T/x.json" ] && ok "no report after a refused --msg-layer" || bad "refused --msg-layer" "a report was written"
finish
