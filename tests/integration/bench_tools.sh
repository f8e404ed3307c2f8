#!/usr/bin/env bash
# bench_tools.sh - the benchmark programs built with the library run every model and refuse bad options: rest_alone (a step with and without its GEMMs)
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.." || exit 1
RA=${BUILD:-build}/bench/rest_alone
[ -x "$RA" ] || { echo "FAIL rest_alone: no $RA (make builds it)"; exit 1; }

# every model: exit 0 and one result line whose numbers hang together (the step without its GEMMs
# is shorter than the whole step; the shares are percentages)
for m in "mlp:--model mlp --layers 784,256,10 --batch 32" "lenet:--model lenet --batch 8" \
    "gpt:--model gpt --n-embd 32 --n-head 2 --seq-len 16 --vocab 64 --batch 4 --optimizer adamw"; do
    name=${m%%:*} opts=${m#*:}
    # shellcheck disable=SC2086
    if "$RA" 20 $opts --threads 2 >"$T/$name.out" 2>&1; then
        $PY - "$T/$name.out" <<'PY' >"$T/$name.chk" 2>&1 && ok "rest_alone $name: $(cat "$T/$name.chk")" || bad "rest_alone $name" "$(cat "$T/$name.chk" "$T/$name.out")"
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r"whole step ([\d.]+) ms, of it in GEMM ([\d.]+) ms \((\d+)%\); rest alone ([\d.]+) ms; best share (\d+)%", t)
assert m, "no result line"
whole, gemm, share, rest, best = (float(x) for x in m.groups())
# the step and its GEMM seconds are medians of separate blocks of steps, so on a loaded machine GEMM
# can come out over the step's median (103% in a clean-clone suite, 146% beside another suite); twice
# the step would mean the GEMM time is counted twice, which is what this checks
assert whole > 0 and 0 < gemm < 2 * whole and 0 < share < 200, f"step {whole}, GEMM {gemm} ({share}%)"
assert 0 < rest < whole and 0 < best <= 100, f"rest alone {rest} ms of a {whole} ms step, best share {best}%"
print(f"step {whole} ms, GEMM {share:.0f}%, rest alone {rest} ms, best share {best:.0f}%")
PY
    else
        bad "rest_alone $name" "exit $?: $(tail -n 3 "$T/$name.out")"
    fi
done

# bad input: a clear message and exit status 2, before any work
expect_status "rest_alone: too few steps is refused (2)" 2 "$RA" 5 --model mlp
grep -q "usage: rest_alone REPS" "$T/last.log" && ok "rest_alone: the usage names REPS" || bad "rest_alone usage" "$(cat "$T/last.log")"
expect_status "rest_alone: an unknown model is refused (2)" 2 "$RA" 20 --model nope
grep -q -- "--model" "$T/last.log" && ok "rest_alone: the error names --model" || bad "rest_alone --model error" "$(cat "$T/last.log")"
expect_status "rest_alone: an unknown option is refused (2)" 2 "$RA" 20 --bogus 1
finish
