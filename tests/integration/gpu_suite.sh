#!/usr/bin/env bash
# gpu_suite.sh - tests/gpu/run.sh keeps its bounds on any machine: no check past CHECK_TIMEOUT, nothing started past SUITE_CAP (NOT-RUN), the table and logs packed under $OUT
#
# A fake build whose every program hangs stands in for a GPU machine where everything hangs: the
# suite must still end by its cap (plus the last check's kill grace) and say which checks it ran.
. "$(dirname "$0")/lib.sh"
fake=$T/fake
mkdir -p "$fake/tests"
for p in ringside tests/test_cuda_poll tests/test_kernels tests/test_ops_nn; do
    printf '#!/bin/sh\nexec sleep 300\n' >"$fake/$p"
    chmod +x "$fake/$p"
done
t0=$(date +%s)
SUITE_CAP=14 CHECK_TIMEOUT=3 OUT=$T/out PATH="/usr/bin:/bin" bash tests/gpu/run.sh "$fake" >$T/suite.log 2>&1
rc=$?
secs=$(($(date +%s) - t0))
[ "$rc" = 1 ] && ok "the suite exits 1 when checks fail or do not run" || bad "exit status" "rc $rc, want 1"
# the cap (14 s) and the facts' bounded `ringside info` (5 s, inside the cap), plus one kill grace
[ "$secs" -le 22 ] && ok "the suite ends within its cap ($secs s for SUITE_CAP=14)" || bad "cap" "$secs s for SUITE_CAP=14"
rows=$(grep -cE '^  [a-z_0-9]+ +(PASS|FAIL|NOT-RUN) ' $T/suite.log)
want=$(grep -c '^check ' tests/gpu/run.sh)
[ "$rows" = "$want" ] && ok "every check has a row ($rows)" || bad "rows" "$rows rows, want $want"
grep -qE '^  one_rank_mlp +NOT-RUN' $T/suite.log && grep -qE '^  nccl_wire +NOT-RUN' $T/suite.log &&
    ok "checks after the cap are NOT-RUN" || bad "NOT-RUN" "$(grep -E '^  ' $T/suite.log | head -n 20)"
grep -qE '^  cuda_poll +FAIL +rc 124' $T/suite.log && grep -q 'timed out after 3 s' "$fake/gpu-logs/cuda_poll.log" &&
    ok "a hanging check ends at CHECK_TIMEOUT as a FAIL" || bad "check timeout" "$(grep -E '^  cuda_poll' $T/suite.log)"
grep -qE '^# [0-9]+ checks: 0 PASS, [0-9]+ FAIL, [1-9][0-9]* NOT-RUN' $T/suite.log && ok "the closing line counts NOT-RUN" ||
    bad "closing line" "$(tail -n 2 $T/suite.log)"
if tar -xzf $T/out/gpu-suite.tgz -C $T && [ -s $T/gpu-logs/table.txt ] && [ -f $T/gpu-logs/cuda_poll.log ]; then
    ok "\$OUT/gpu-suite.tgz holds the table and the logs"
else bad "tarball" "$(ls -la $T/out 2>&1)"; fi
pgrep -f "$fake" >/dev/null && bad "leftovers" "processes of the fake build still run" || ok "no process left running"
finish
