#!/usr/bin/env bash
# transport.sh - --transport auto|shm|ipc|tcp: one rule for the ring and the server; the numbers do not depend on it; bad values are exit 2
. "$(dirname "$0")/lib.sh"
M="--layers 784,64,10 --train-samples 1024 --eval-samples 64 --steps 6 --seed 3 --quiet --timeout 30"
# back end | transport | the transport every rank must report
while IFS='|' read -r sync t want; do
    [ -n "$sync" ] || continue
    if ! timeout 120 $BIN train -n 3 --sync $sync --transport $t $M --report "$T/$sync-$t.json" --save-params "$T/$sync-$t.bin" >"$T/$sync-$t.log" 2>&1; then
        bad "$sync --transport $t" "$(tail -n 3 "$T/$sync-$t.log")"
        continue
    fi
    got=$($PY -c 'import json,sys; print(",".join(sorted({e["traffic"]["transport"] for e in json.load(open(sys.argv[1]))["ranks"]})))' "$T/$sync-$t.json")
    [ "$got" = "$want" ] && ok "$sync --transport $t: every rank reports $want" || bad "$sync --transport $t" "reported $got, want $want"
    if [ "$t" != auto ]; then
        cmp -s "$T/$sync-auto.bin" "$T/$sync-$t.bin" && ok "$sync --transport $t: the same parameters as auto, bitwise" ||
            bad "$sync --transport $t" "parameters differ from auto's"
    fi
done <<'LIST'
ring|auto|shm
ring|shm|shm
ring|ipc|ipc
ring|tcp|tcp
ps|auto|ipc
ps|ipc|ipc
ps|tcp|tcp
LIST
# DataParallel's channel and dedicated servers follow the same rule
$BIN train -n 3 --sync ps --ps-mode dataparallel --global-batch 96 --transport tcp $M --report "$T/dp.json" >"$T/dp.log" 2>&1 &&
    $PY -c 'import json,sys; sys.exit(0 if {e["traffic"]["transport"] for e in json.load(open(sys.argv[1]))["ranks"]} == {"tcp"} else 1)' "$T/dp.json" &&
    ok "dataparallel --transport tcp" || bad "dataparallel --transport tcp" "$(tail -n 3 "$T/dp.log")"
$BIN train -n 2 --sync ps --ps-placement dedicated --ps-servers 2 $M --report "$T/ded.json" >"$T/ded.log" 2>&1 &&
    $PY -c 'import json,sys; sys.exit(0 if {e["traffic"]["transport"] for e in json.load(open(sys.argv[1]))["ranks"]} == {"ipc"} else 1)' "$T/ded.json" &&
    ok "dedicated servers on this host: ipc for workers and servers" || bad "dedicated ipc" "$(tail -n 3 "$T/ded.log")"
# the variable it replaces still works, one release, with a notice
RINGSIDE_RING_TRANSPORT=tcp $BIN train -n 2 --sync ring $M --report "$T/env.json" >"$T/env.log" 2>&1 &&
    grep -q "deprecated" "$T/env.log" &&
    $PY -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["ranks"][0]["traffic"]["transport"] == "tcp" else 1)' "$T/env.json" &&
    ok "RINGSIDE_RING_TRANSPORT=tcp: tcp, with a deprecation notice" || bad "RINGSIDE_RING_TRANSPORT" "$(tail -n 3 "$T/env.log")"
# bad values
expect_status "--transport pigeon is exit 2" 2 $BIN train --transport pigeon --steps 1 --report "$T/x.json"
grep -q "pigeon" "$T/last.log" && ok "the error names the value" || bad "--transport pigeon" "$(cat "$T/last.log")"
expect_status "--transport shm with ps is exit 2" 2 $BIN train -n 2 --sync ps --transport shm --steps 1 --report "$T/x.json"
expect_status "--transport tcp with nccl is exit 2" 2 $BIN train --sync nccl --transport tcp --steps 1 --report "$T/x.json"
expect_status "bench --transport shm with ps is exit 2" 2 $BIN bench -n 2 --sync ps --transport shm
[ ! -e "$T/x.json" ] && ok "no report after a refused --transport" || bad "refused --transport" "a report was written"
finish
