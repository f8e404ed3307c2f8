#!/usr/bin/env bash
# simd.sh - the CPU kernels built for AVX2 and for SSE2 give the same bits: the other build's ops_cpu.o linked in, mlp, lenet and gpt trained on both
#
# The Makefile builds kernels/ops_cpu.c for AVX2 where the machine has it (SIMD=auto) and without
# fused multiply-add either way, so that the choice changes speed, never results. This script
# builds the kernels for the instruction set the CPU-only build did not use (with the Makefile's
# own flags), links them in its place, and holds every model's saved parameters after 6 steps on
# 2 threads to the build's, bit for bit.
. "$(dirname "$0")/lib.sh"
lib=build/nocuda
[ -f "$lib/libringside.a" ] && [ -f "$lib/obj/experiments/main.o" ] || { echo "SKIP: no CPU-only build in $lib (make CUDA=0 BUILD=$lib)"; exit 0; }
grep -qw avx2 /proc/cpuinfo 2>/dev/null || { echo "SKIP: this CPU has no AVX2: only the SSE2 kernels can run here"; exit 0; }
have=$("$lib/ringside" train --steps 1 --quiet --report "$T/isa.json" >/dev/null 2>&1 &&
       $PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["env"]["cpu_kernels_isa"])' "$T/isa.json")
case $have in
    avx2) other=sse2 ;;
    sse2) other=avx2 ;;
    *) bad "the CPU-only build's env.cpu_kernels_isa" "'$have'"; finish; exit 1 ;;
esac
if make --no-print-directory BUILD="$T/b" CUDA=0 SIMD=$other "$T/b/obj/kernels/ops_cpu.o" >"$T/cc.log" 2>&1 &&
   cc -pthread -o "$T/ringside" "$lib/obj/experiments/main.o" "$T/b/obj/kernels/ops_cpu.o" "$lib/libringside.a" \
       $(pkg-config --libs libzmq libcjson openblas zlib 2>/dev/null) -lm -ldl 2>>"$T/cc.log"; then
    ok "the kernels built for $other link in place of the build's $have"
else
    bad "building the $other kernels" "$(tail -n 5 "$T/cc.log")"; finish; exit 1
fi
"$T/ringside" train --steps 1 --quiet --report "$T/isa2.json" >/dev/null 2>&1
got=$($PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["env"]["cpu_kernels_isa"])' "$T/isa2.json" 2>&1)
[ "$got" = "$other" ] && ok "its report says env.cpu_kernels_isa $other" || bad "env.cpu_kernels_isa of the $other build" "$got"

for m in "mlp:--layers 784,256,10" "lenet:--model lenet" "gpt:--model gpt --optimizer adamw"; do
    name=${m%%:*} opts=${m#*:}
    # shellcheck disable=SC2086
    if "$lib/ringside" train $opts --threads 2 --batch 16 --steps 6 --quiet --save-params "$T/$name-$have.bin" >"$T/a.log" 2>&1 &&
       "$T/ringside" train $opts --threads 2 --batch 16 --steps 6 --quiet --save-params "$T/$name-$other.bin" >"$T/b.log" 2>&1; then
        cmp -s "$T/$name-$have.bin" "$T/$name-$other.bin" && ok "$name: $have and $other kernels save the same parameters, bit for bit" ||
            bad "$name: $have and $other" "the saved parameters differ"
    else
        bad "$name runs" "$(tail -n 3 "$T/a.log" "$T/b.log")"
    fi
done
finish
