#!/usr/bin/env bash
# floors.sh - the house's rules hold: no include runs up a floor or closes a cycle (tests/floors.py), no polling back end blocks in CUDA (tests/nonblocking.py), every host data plane moves through net/msg.h (tests/transport_rules.py); and each check catches what it forbids
. "$(dirname "$0")/lib.sh"

if $PY tests/floors.py . >"$T/floors.log" 2>&1; then ok "the tree: $(tail -n 1 "$T/floors.log" | cut -c9-)"
else bad "the tree's floors" "$(grep -v '^floors: [0-9]* files' "$T/floors.log" | head -n 5)"; fi

# the built objects: no call up a floor (nm), and a planted call from base/ into engine/ is caught
obj=${BUILD:-build}/obj
if [ -d "$obj/engine" ]; then
    if $PY tests/floors.py . --objects "$obj" >"$T/sym.log" 2>&1; then ok "the objects: $(tail -n 1 "$T/sym.log" | cut -c9-)"
    else bad "the objects' calls" "$(grep -v '^floors: [0-9]* \(files\|objects\)' "$T/sym.log" | head -n 5)"; fi
    mkdir -p "$T/objs/base" "$T/objs/engine"
    cp "$obj/engine/sync.o" "$T/objs/engine/"
    printf 'struct SyncTraffic;\nvoid sync_traffic_add(struct SyncTraffic *, const struct SyncTraffic *);\nvoid x(struct SyncTraffic *t) { sync_traffic_add(t, t); }\n' >"$T/x.c"
    if ${CC:-cc} -c -o "$T/objs/base/x.o" "$T/x.c" && ! $PY tests/floors.py . --objects "$T/objs" >"$T/sym2.log" 2>&1 &&
        grep -q "base/x.o calls sync_traffic_add (engine/sync.o): up from base to engine" "$T/sym2.log"; then
        ok "a call up a floor fails, named"
    else bad "a planted call up a floor" "$(cat "$T/sym2.log")"; fi
else
    echo "# no objects in $obj: the symbol check needs a build (make)"
fi

# a copy of the floors with one include up a floor, then with a cycle: each is found and named
mkdir -p "$T/up" "$T/cycle"
for f in base kernels data model net engine allreduce ps experiments; do cp -r "$f" "$T/up/"; cp -r "$f" "$T/cycle/"; done
printf '/* x.c */\n#include "../engine/sync.h"\n' >"$T/up/base/x.c"
if ! $PY tests/floors.py "$T/up" >"$T/up.log" 2>&1 && grep -q "base/x.c includes engine/sync.h: up from base to engine" "$T/up.log"; then
    ok "an include up a floor fails, named"
else bad "an include up a floor" "$(cat "$T/up.log")"; fi
printf '/* a.h */\n#include "b.h"\n' >"$T/cycle/base/a.h"
printf '/* b.h */\n#include "a.h"\n' >"$T/cycle/base/b.h"
if ! $PY tests/floors.py "$T/cycle" >"$T/cycle.log" 2>&1 && grep -q "include cycle: base/a.h -> base/b.h -> base/a.h" "$T/cycle.log"; then
    ok "an include cycle fails, named"
else bad "an include cycle" "$(cat "$T/cycle.log")"; fi

# the polling back ends wait only by polling (a dead peer ends in --timeout): the tree, then a copy
# of allreduce/ with a blocking synchronise and a copy to pageable host memory planted in it
if $PY tests/nonblocking.py . >"$T/nb.log" 2>&1; then ok "no blocking CUDA call: $(tail -n 1 "$T/nb.log" | cut -c14-)"
else bad "a blocking CUDA call in a polling back end" "$(head -n 5 "$T/nb.log")"; fi
mkdir -p "$T/nb"; cp -r allreduce "$T/nb/"
printf '/* x.cu */\nstatic int f(cudaStream_t cs, float *d) {\n    float h; /* cudaStreamSynchronize in a comment is fine */\n    cudaStreamSynchronize(cs);\n    cudaMemcpyAsync(&h, d, 4, cudaMemcpyDeviceToHost, cs);\n    return 0;\n}\n' >"$T/nb/allreduce/x.cu"
if ! $PY tests/nonblocking.py "$T/nb" >"$T/nb2.log" 2>&1 && grep -q "allreduce/x.cu:4: a blocking synchronise" "$T/nb2.log" &&
    grep -q "allreduce/x.cu:5: a copy to host memory that is not pinned" "$T/nb2.log" && ! grep -q "x.cu:3" "$T/nb2.log"; then
    ok "a blocking synchronise and a copy to pageable memory fail, named (a comment does not)"
else bad "planted blocking calls" "$(cat "$T/nb2.log")"; fi

# one message layer: the figures within their ceilings, then a copy of the tree with a ZeroMQ send,
# a link booking and a traffic count planted in a back end
if $PY tests/transport_rules.py . >"$T/tr.log" 2>&1; then ok "transport rules: $(grep -v 'figures over' "$T/tr.log" | sed 's/transport_rules: *//; s/ (ceiling [0-9]*)//' | tr -s ' ' | paste -sd, -)"
else bad "transport rules" "$(grep -A3 OVER "$T/tr.log" | head -n 12)"; fi
mkdir -p "$T/tr"; for f in base kernels data model net engine allreduce ps experiments; do cp -r "$f" "$T/tr/"; done
printf '/* x.c */\nstatic int f(void *s, char *b, size_t n, unsigned long long *sent) {\n    link_send(n);\n    *sent += n;\n    return zmq_send(s, b, n, 0);\n}\n' >"$T/tr/ps/x.c"
if ! $PY tests/transport_rules.py "$T/tr" >"$T/tr2.log" 2>&1 && grep -q "primitives *1 .*OVER" "$T/tr2.log" &&
    grep -q "ps/x.c:5: return zmq_send" "$T/tr2.log" && grep -q "link *5 .*OVER" "$T/tr2.log"; then
    ok "a ZeroMQ send and a link booking planted in a back end fail, named"
else bad "planted transport calls" "$(cat "$T/tr2.log")"; fi
finish
