#!/usr/bin/env bash
# run.sh - ThreadSanitizer check (make tsan): the threaded unit tests and multi-rank runs where the comm thread, the colocated server and the launcher live
#
#   bash tests/tsan/run.sh build/tsan      (after: make BUILD=build/tsan CUDA=0 SAN=-fsanitize=thread all)
# Every process (ranks the launcher starts included) writes its reports to a log of its own; the
# check fails on any report that tests/tsan/suppressions.txt does not cover (see docs/reliability.md).
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build/tsan}
bin=$build/ringside
logs=$build/tsan-logs
rm -rf "$logs"; mkdir -p "$logs"
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan/suppressions.txt log_path=$PWD/$logs/tsan exitcode=66 second_deadlock_stack=1 history_size=7"
T=$(mktemp -d /tmp/ringside-tsan-XXXXXX); trap 'rm -rf "$T"' EXIT
SMALL="--layers 64,32,10 --train-samples 512 --eval-samples 64 --steps 12 --batch 16 --bucket-mb 0.002 --timeout 30 --quiet"
pass=0; fail=0

run() { # NAME CMD... : passes when CMD exits 0 within 300 s
    local name=$1; shift
    local t0=$SECONDS
    timeout 300 "$@" >"$T/out.log" 2>&1; local rc=$?
    if [ $rc = 0 ]; then pass=$((pass+1)); printf '  %-44s PASS  %3d s\n' "$name" $((SECONDS-t0));
    else fail=$((fail+1)); printf '  %-44s FAIL  rc %s\n' "$name" "$rc"; tail -n 5 "$T/out.log" | sed 's/^/      | /'; fi
}

echo "# ThreadSanitizer ($build)"
# the check must be able to fail: the binary is instrumented, and a known race lands in a log
if ! grep -qa "__tsan_init" "$bin"; then echo "  $bin is not a ThreadSanitizer build (make tsan builds one)"; echo "0 passed, 1 failed"; exit 1; fi
if ! ${CC:-cc} -fsanitize=thread -g -O1 tests/tsan/canary.c -o "$T/canary" -lpthread 2>"$T/cc.log"; then
    echo "  cannot build a ThreadSanitizer program: $(head -n 1 "$T/cc.log")"; echo "0 passed, 1 failed"; exit 1
fi
TSAN_OPTIONS="log_path=$T/canary-log exitcode=0" "$T/canary" >/dev/null 2>"$T/canary.err"
# some kernels' address-space randomisation leaves no room for ThreadSanitizer's shadow memory
if grep -q "unexpected memory mapping" "$T/canary.err" "$T"/canary-log.* 2>/dev/null; then
    echo "SKIP: ThreadSanitizer cannot run on this kernel's memory layout (try: sudo sysctl vm.mmap_rnd_bits=28)"; exit 0
fi
if grep -q "data race" "$T"/canary-log.* 2>/dev/null; then
    pass=$((pass+1)); printf '  %-44s PASS\n' "canary: a deliberate race is reported"
else
    fail=$((fail+1)); printf '  %-44s FAIL  (ThreadSanitizer did not report it; see %s)\n' "canary: a deliberate race is reported" "$T"
fi
for t in test_ring test_ps test_ctrl test_msg; do run "$t" "$build/tests/$t"; done
run "train -n 2 --sync ring"                    $bin train -n 2 --sync ring $SMALL --report $T/ring.json
run "train -n 2 --sync ring --no-overlap"       $bin train -n 2 --sync ring --no-overlap $SMALL --report $T/ring2.json
run "train -n 2 --sync ps (colocated)"          $bin train -n 2 --sync ps $SMALL --report $T/ps.json
run "train -n 1 --sync ps (colocated)"          $bin train -n 1 --sync ps $SMALL --report $T/ps1.json
run "train -n 2 --sync ps --ps-placement dedicated" $bin train -n 2 --sync ps --ps-placement dedicated $SMALL --report $T/psd.json
run "train -n 2 --sync ps --msg-layer direct"   $bin train -n 2 --sync ps --msg-layer direct $SMALL --report $T/psdirect.json
run "train -n 3 --sync tree --msg-layer direct, large" $bin train -n 3 --sync tree --msg-layer direct --layers 784,512,10 --train-samples 256 --eval-samples 64 --steps 4 --batch 16 --timeout 30 --quiet --report $T/treedirect.json
run "train -n 2 --sync ps --ps-mode dataparallel" $bin train -n 2 --sync ps --ps-mode dataparallel --global-batch 32 $SMALL --report $T/dp.json
# a model whose buckets exceed 64 KiB: the parameter server's zero-copy replies
run "train -n 2 --sync ps, zero-copy buckets"   $bin train -n 2 --sync ps --layers 256,128,10 --train-samples 256 --eval-samples 64 --steps 6 --batch 16 --bucket-mb 0.2 --timeout 30 --quiet --report $T/zc.json
# the kernels' thread pool: regions handed to a worker that watches for them, then sleeps
run "train -n 2 --sync zero --zero-stage 2"     $bin train -n 2 --sync zero --zero-stage 2 $SMALL --report $T/z2.json
run "train -n 3 --sync zero --zero-stage 3 (gathers)" $bin train -n 3 --sync zero --zero-stage 3 $SMALL --eval-every 4 --report $T/z3.json
run "train --model gpt --threads 2 (the pool)"  $bin train --model gpt --threads 2 --batch 4 --steps 6 --eval-samples 16 --timeout 30 --quiet --report $T/pool.json
run "bench -n 2 --sync ps"                      $bin bench -n 2 --sync ps -b 8 -e 64K -f 4 --report $T/bench.json
# a server thread in every rank, summing zero-copy slices from its own rank and the other's
run "bench -n 2 --sync ps, sharded, zero-copy"   $bin bench -n 2 --sync ps --ps-placement sharded -b 64K -e 1M -f 4 -i 5 --bucket-mb 0.5 --report $T/bench-sh.json

reports=$(grep -l "WARNING: ThreadSanitizer" "$logs"/tsan.* 2>/dev/null | wc -l)
if [ "$reports" != 0 ]; then
    fail=$((fail+1))
    echo "  ThreadSanitizer reports in $reports process log(s) ($logs):"
    grep -h -A14 "WARNING: ThreadSanitizer" "$logs"/tsan.* | grep -E "WARNING|^    #[0-3] |Location|Previous|Thread T" | head -n 60 | sed 's/^/      | /'
else
    echo "  no ThreadSanitizer report from the runs above (a process writes its log only when it reports)"
fi
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
