#!/usr/bin/env bash
# labs.sh - runs every command of the classroom labs (docs/labs/0*.md) on the CPU and checks the outcomes the pages promise
#
# Each lab runs in a copy of the repository (so results/ and reports stay out of the tree), with
# build/ringside there running $RINGSIDE_BIN (default build/ringside) with --device cpu, and with
# ../shared/data/mnist beside it when the real tree has it (lab 1 then runs a second time
# without it, on the synthetic fallback). tests/labs_extract.py turns a page's `sh lab` blocks into
# one script; tests/labs_check.py checks the files they wrote. Lab 5's `sh lab solution` blocks
# run with docs/labs/solutions/student.c built in place of allreduce/student.c (make CUDA=0 in a
# copy of the tree). Every lab must finish in 5 minutes; the whole script takes 3 to 4.
#   LABS=2,5 runs only those labs (default 1,2,3,4,5,6,7,8); LABS_KEEP=DIR keeps the copies and logs there.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
pass=0; fail=0
ok()  { pass=$((pass+1)); echo "ok   $*"; }
bad() { fail=$((fail+1)); echo "FAIL $*"; }

BIN=${RINGSIDE_BIN:-build/ringside}
[ -x "$BIN" ] || BIN=build/nocuda/ringside
case "$BIN" in /*) ;; *) BIN="$ROOT/$BIN" ;; esac
if [ ! -x "$BIN" ]; then echo "FAIL no ringside binary (RINGSIDE_BIN=${RINGSIDE_BIN:-}); build first"; echo "0 passed, 1 failed"; exit 1; fi
if ! bash plots/find_python.sh >/dev/null 2>&1; then
    echo "SKIP no python3 with matplotlib (the labs draw plots): $(bash plots/find_python.sh 2>&1 | head -n1)"
    exit 0
fi
command -v python3 >/dev/null || { echo "SKIP no python3"; exit 0; }
echo "# binary: $BIN"
LABS=${LABS:-1,2,3,4,5,6,7,8}
if [ -n "${LABS_KEEP:-}" ]; then T=$LABS_KEEP; rm -rf "$T"; mkdir -p "$T"; else T=$(mktemp -d /tmp/ringside-labs-XXXXXX); trap 'rm -rf "$T"' EXIT; fi
T=$(cd "$T" && pwd)
MNIST=$ROOT/../shared/data/mnist

# copy_tree DEST: the repository's files (tracked and untracked, not ignored: no build/ or results/)
copy_tree() {
    mkdir -p "$1"
    if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
        git -C "$ROOT" ls-files -co --exclude-standard -z | tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -xf - -C "$1"
    else
        tar --exclude=./build --exclude=./results --exclude=./.git -cf - . | tar -xf - -C "$1"
    fi
}

# wrap NAME BINARY: $T/bin/NAME runs BINARY, on the CPU (the labs describe CPU runs; a CUDA build
# on a GPU machine would otherwise pick the GPU)
wrap() {
    mkdir -p "$T/bin"
    cat >"$T/bin/$1" <<WRAP
#!/bin/sh
case "\$1" in train|bench) c=\$1; shift; exec "$2" "\$c" --device cpu "\$@" ;; esac
exec "$2" "\$@"
WRAP
    chmod +x "$T/bin/$1"
}
wrap ringside-tree "$BIN"

# a sandbox: $1/repo, a copy of the tree, its build/ringside -> $BIN; $2 = with-data | no-data
make_sandbox() {
    copy_tree "$1/repo"
    mkdir -p "$1/repo/build"
    ln -sfn "$T/bin/ringside-tree" "$1/repo/build/ringside"
    if [ "$2" = with-data ] && [ -d "$MNIST" ]; then mkdir -p "$1/shared/data"; ln -sfn "$MNIST" "$1/shared/data/mnist"; fi
}

SOLBIN=""
build_solution() {
    local t0=$SECONDS
    copy_tree "$T/soltree"
    cp docs/labs/solutions/student.c "$T/soltree/allreduce/student.c"
    if make -C "$T/soltree" CUDA=0 BUILD="$T/solbuild" -j"$(nproc 2>/dev/null || echo 2)" "$T/solbuild/ringside" >"$T/solbuild.log" 2>&1; then
        wrap ringside-solution "$T/solbuild/ringside"
        SOLBIN=$T/bin/ringside-solution
        ok "lab 5: the reference solution builds in place of allreduce/student.c ($((SECONDS - t0)) s)"
    else
        bad "lab 5: the reference solution does not build: $(grep -m3 -E 'error|Error' "$T/solbuild.log")"
    fi
    # the solution and the skeleton share everything but the LAB 5 section (and the head line)
    if python3 - allreduce/student.c docs/labs/solutions/student.c <<'EOF'
import re, sys
def outside(p):
    s = open(p).read()
    s = s[s.index("\n"):]
    return re.sub(r"/\* ==== BEGIN LAB 5.*?/\* ==== END LAB 5", "", s, flags=re.S)
sys.exit(0 if outside(sys.argv[1]) == outside(sys.argv[2]) else 1)
EOF
    then ok "lab 5: solutions/student.c matches allreduce/student.c outside the LAB 5 section"
    else bad "lab 5: solutions/student.c and allreduce/student.c differ outside the LAB 5 section (keep the plumbing in step)"; fi
}

# run_lab N PAGE SANDBOX LABEL: runs the page's blocks in SANDBOX/repo, then its checks
run_lab() {
    local n=$1 page=$2 box=$3 label=$4 log="$3/lab$1.log"
    python3 tests/labs_extract.py "$page" >"$box/lab$n.sh" || { bad "$label: cannot extract $page"; return; }
    local t0=$SECONDS
    (
        cd "$box/repo" || exit 99
        lab_block() { echo "labs: === $page, block at line $1 ($2)"; }
        lab_binary() {
            if [ "$1" = solution ]; then
                [ -n "$SOLBIN" ] || { echo "labs: no solution binary"; exit 98; }
                ln -sfn "$SOLBIN" build/ringside
            else ln -sfn "$T/bin/ringside-tree" build/ringside; fi
        }
        # shellcheck disable=SC1090
        source "$box/lab$n.sh"
    ) >"$log" 2>&1 </dev/null
    local rc=$? dt=$((SECONDS - t0))
    if [ $rc = 0 ]; then ok "$label: every command ran ($dt s)"
    else bad "$label: exit status $rc at $(grep '^labs: ===' "$log" | tail -n1 | cut -c13-); log $log"; tail -n 15 "$log" | sed 's/^/      | /'; fi
    if [ $dt -le 300 ]; then ok "$label: under 5 minutes ($dt s)"; else bad "$label: took $dt s, over the 5 minutes the page promises"; fi
    local out
    out=$(python3 tests/labs_check.py "$n" "$box/repo" "$log" 2>&1)
    while IFS= read -r line; do
        case "$line" in
            "ok - "*) ok "${line#ok - }" ;;
            "not ok - "*) bad "${line#not ok - }" ;;
            *) [ -n "$line" ] && echo "     $line" ;;
        esac
    done <<<"$out"
}

make_sandbox "$T/main" with-data
for n in 1 2 3 4 5 6 7 8; do
    case ",$LABS," in *",$n,"*) ;; *) continue ;; esac
    page=$(ls docs/labs/0"$n"-*.md 2>/dev/null | head -n1)
    [ -n "$page" ] || { bad "lab $n: no page docs/labs/0$n-*.md"; continue; }
    [ "$n" = 5 ] && build_solution
    run_lab "$n" "$page" "$T/main" "lab $n"
    if [ "$n" = 1 ] && [ -d "$MNIST" ]; then # once more without MNIST: the synthetic fallback
        make_sandbox "$T/nodata" no-data
        run_lab 1 "$page" "$T/nodata" "lab 1 (no MNIST)"
    fi
done

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
