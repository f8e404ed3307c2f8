#!/usr/bin/env bash
# floors.sh - the house's floors hold (tests/floors.py): no include runs up a floor, none closes a cycle; and the check catches both
. "$(dirname "$0")/lib.sh"

if $PY tests/floors.py . >"$T/floors.log" 2>&1; then ok "the tree: $(tail -n 1 "$T/floors.log" | cut -c9-)"
else bad "the tree's floors" "$(grep -v '^floors: [0-9]* files' "$T/floors.log" | head -n 5)"; fi

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
finish
