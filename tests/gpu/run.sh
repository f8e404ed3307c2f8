#!/usr/bin/env bash
# run.sh - the GPU suite in one go: every check logs to a file and adds a row; the PASS/FAIL table comes last
#
#   tests/gpu/run.sh [BUILD]        BUILD: a CUDA build's folder (default: build, from `make CUDA=1`)
#
# Bounded for a short GPU slot: every check by CHECK_TIMEOUT seconds (default 60), the whole suite
# by SUITE_CAP seconds (default 360): a check gets at most what is left of the cap, and once it is
# spent the remaining checks are listed NOT-RUN. Where $OUT is set (a device run brings back what
# is under it), the table and every log are packed into $OUT/gpu-suite.tgz. NCCL_DEBUG is WARN
# unless set, so an NCCL failure says why in its log.
#
# Adding a check is one line at the bottom: `check NAME CMD...`. A check passes when CMD exits
# 0; its figure is the last non-empty line CMD printed. Output follows the suite's habit: every
# line that is not a table row starts with '#'. Exits 1 when any check fails or did not run.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
build=${1:-${BUILD:-build}}
log_dir=$build/gpu-logs
mkdir -p "$log_dir"
# shared libraries carried beside the build, for a GPU machine without the CUDA toolkit
if [ -d "$build/lib" ]; then
    export LD_LIBRARY_PATH="$PWD/$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
CHECK_TIMEOUT=${CHECK_TIMEOUT:-60}
SUITE_CAP=${SUITE_CAP:-360}
suite_t0=$SECONDS

names=() results=() figures=()
failures=0 not_run=0

# check NAME CMD... : runs CMD (a command or a function below) with its output in
# $log_dir/NAME.log, and records NAME, PASS, FAIL or NOT-RUN, and a figure for the table. A check
# is bounded by CHECK_TIMEOUT seconds and by what is left of SUITE_CAP; with less than 5 s left it
# is not started (NOT-RUN). A function runs in a child bash that `timeout` can end with its whole
# process group (the script's functions and variables are exported to it).
check() {
    local name=$1 log=$log_dir/$1.log t0=$SECONDS rc fig result left limit
    shift
    left=$((SUITE_CAP - (SECONDS - suite_t0)))
    if [ "$left" -lt 5 ]; then
        echo "# $name: NOT-RUN (the suite's cap of $SUITE_CAP s is spent)"
        names+=("$name") results+=(NOT-RUN) figures+=("the suite's cap of $SUITE_CAP s was spent before it")
        not_run=$((not_run + 1))
        return
    fi
    limit=$CHECK_TIMEOUT
    [ "$left" -lt "$limit" ] && limit=$left
    echo "# $name: $* (at most $limit s)"
    if [ "$(type -t "$1")" = function ]; then
        timeout -k 5 "$limit" bash -c '"$@"' check "$@" >"$log" 2>&1
    else
        timeout -k 5 "$limit" "$@" >"$log" 2>&1
    fi
    rc=$?
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && echo "timed out after $limit s" >>"$log"
    fig=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c 1-110)
    if [ "$rc" = 0 ]; then
        result=PASS
    else
        result=FAIL
        failures=$((failures + 1))
        fig="rc $rc: $fig"
        tail -n 20 "$log" | sed 's/^/#   | /'
    fi
    names+=("$name") results+=("$result") figures+=("$fig ($((SECONDS - t0)) s)")
}

# no_skips CMD... : runs a test binary and fails if it skipped anything: on a GPU machine a
# skipped test is a GPU path left unexercised (a CPU-only build, or a GPU the program cannot see).
no_skips() {
    local out rc
    out=$("$@" 2>&1)
    rc=$?
    printf '%s\n' "$out"
    if [ "$rc" = 0 ] && grep -Eq ', [1-9][0-9]* skipped' <<<"$out"; then
        grep 'SKIP' <<<"$out" | sort | uniq -c
        echo "$(grep -E 'passed, .* skipped' <<<"$out" | tail -n 1): skips not allowed on a GPU machine"
        return 1
    fi
    return "$rc"
}

# gpu_visible : the driver sees a GPU (name, memory, driver version).
gpu_visible() {
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    else
        ls /dev/nvidia[0-9]* && echo "no nvidia-smi; device nodes present"
    fi
}

# print_table : the table, last (also in $log_dir/table.txt, and with every log in
# $OUT/gpu-suite.tgz where $OUT is set); returns 1 when any check failed or did not run.
print_table() {
    {
        echo "# ringside GPU suite: build $build, host $(hostname), $(date -u +%Y-%m-%dT%H:%M:%SZ), $((SECONDS - suite_t0)) s of a $SUITE_CAP s cap"
        printf '# %-22s %-7s %s\n' check result figure
        for i in "${!names[@]}"; do
            printf '  %-22s %-7s %s\n' "${names[$i]}" "${results[$i]}" "${figures[$i]}"
        done
        echo "# ${#names[@]} checks: $((${#names[@]} - failures - not_run)) PASS, $failures FAIL, $not_run NOT-RUN; logs in $log_dir"
    } | tee "$log_dir/table.txt"
    if [ -n "${OUT:-}" ] && mkdir -p "$OUT" && tar -C "$(dirname "$log_dir")" -czf "$OUT/gpu-suite.tgz" "$(basename "$log_dir")"; then
        echo "# the table and the logs: $OUT/gpu-suite.tgz"
    fi
    [ "$failures" = 0 ] && [ "$not_run" = 0 ]
}

# facts : what the machine is, before anything runs: the kernel (4.4.0 is gVisor, where NCCL has
# had trouble), the GPU's compute mode (Exclusive_Process stops ranks sharing it), the driver, and
# the NCCL library this build loads beside the headers it was built against.
facts() {
    echo "# kernel $(uname -r)$([ "$(uname -r)" = 4.4.0 ] && echo ' (gVisor: NCCL has had trouble there)')"
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,compute_mode,driver_version --format=csv,noheader | sed 's/^/# gpu: /'
        if nvidia-smi --query-gpu=compute_mode --format=csv,noheader | grep -q Exclusive; then
            echo "# compute mode Exclusive_*: several ranks cannot share the GPU; the multi-rank checks will fail"
        fi
    else
        echo "# no nvidia-smi"
    fi
    timeout -k 2 5 "$build/ringside" info | sed -n 's/^  \(nccl\|cuda\) */# \1: /p'
}

# cuda_poll : the probe first. Says whether a polled cudaErrorNotReady stays in the runtime's
# last-error slot on this machine, and fails if our launch checks trip over it (issue: --sync
# nccl failing at step 0 with "a kernel launch failed").
cuda_poll() {
    local out rc
    out=$(no_skips "$build/tests/test_cuda_poll" 2>&1)
    rc=$?
    printf '%s\n' "$out"
    grep -o 'last-error slot afterwards: .*' <<<"$out" | tail -n 1
    return "$rc"
}

# ---- checks (append new ones here) ----
export build log_dir
export -f no_skips gpu_visible cuda_poll
facts
check gpu_visible gpu_visible
check cuda_poll cuda_poll
check test_kernels no_skips "$build/tests/test_kernels"
check test_ops_nn no_skips "$build/tests/test_ops_nn"

# one_rank MODEL : one rank of MODEL on the GPU beside the CPU (no back end, 20 steps, the same
# seed and data): every point of the loss curves within a relative 2e-3 (the GPU sums in other
# orders, so not the bits; 20 steps of SGD let the difference grow past the kernels' 1e-4), and
# the loss must fall on both. Figure: the largest relative difference.
one_rank() {
    local m=$1 d
    for d in cuda cpu; do
        timeout 50 "$build/ringside" train --device $d --sync none --model "$m" --steps 20 --quiet \
            --report "$log_dir/one_${m}_$d.json" || { echo "train --model $m --device $d failed"; return 1; }
    done
    python3 -c '
import json, sys
g, c = [json.load(open(f))["summary"]["loss_curve"] for f in sys.argv[1:3]]
d = max(abs(a[1] - b[1]) / max(abs(b[1]), 1e-6) for a, b in zip(g, c))
fell = g[-1][1] < g[0][1] and c[-1][1] < c[0][1]
print("%s: GPU against CPU, max relative loss difference %.2e over %d points (at most 2e-3), loss %.4f -> %.4f"
      % (sys.argv[3], d, min(len(g), len(c)), g[0][1], g[-1][1]))
sys.exit(0 if len(g) == len(c) and d <= 2e-3 and fell else 1)' "$log_dir/one_${m}_cuda.json" "$log_dir/one_${m}_cpu.json" "$m"
}
export -f one_rank
check one_rank_mlp one_rank mlp
check one_rank_lenet one_rank lenet
check one_rank_gpt one_rank gpt

# ---- sync back ends on one GPU: nccl (2 and 4 ranks), the CUDA-staged host ring, ps sharing the GPU ----
# Several ranks on one GPU: NCCL refuses it unless told; ringside's nccl back end sets what this
# NCCL needs (>= 2.30: NCCL_MULTI_RANK_GPU_ENABLE=1; older: a distinct NCCL_HOSTID per rank with
# P2P and SHM off) when a host's ranks outnumber its GPUs, and says so in one line.

# ranks_one_gpu N SUBCOMMAND ARGS... : runs `ringside SUBCOMMAND -n N ARGS` on the one GPU.
ranks_one_gpu() {
    local n=$1 sub=$2
    shift 2
    timeout 120 "$build/ringside" "$sub" -n "$n" --timeout 30 "$@"
}

# report_summary REPORT : the figure of a training run: final loss (and that it fell), step time.
report_summary() {
    python3 -c '
import json, sys
num = lambda v: float(v) if isinstance(v, (int, float, str)) else float("nan")  # a diverged run writes "nan", "inf"
r = json.load(open(sys.argv[1])); s = r["summary"]; c = s["loss_curve"]
f = num(s["final_loss"]); c0 = num(c[0][1]) if c else float("nan")
ok = c and not s.get("diverged") and f == f and f < c0
print("final loss %.4f (from %.4f)%s, step %.2f ms, %d ranks" % (f, c0, ", diverged" if s.get("diverged") else "", s["step_time_s"] * 1e3, len(r["ranks"])))
sys.exit(0 if ok else 1)' "$1"
}

# train_nccl : 2 ranks, --sync nccl, on one GPU; the loss must fall.
train_nccl() {
    ranks_one_gpu 2 train --sync nccl --device cuda --layers 784,256,10 --steps 30 \
        --report "$log_dir/train_nccl.json" && report_summary "$log_dir/train_nccl.json"
}

# bench_nccl : the nccl-tests-style sweep; bench exits non-zero when #wrong is not 0 anywhere.
bench_nccl() {
    local out rc
    out=$(ranks_one_gpu 2 bench --sync nccl -b 8 -e 64M -f 4 2>&1)
    rc=$?
    printf '%s\n' "$out"
    [ "$rc" = 0 ] || return "$rc"
    grep -i 'bandwidth' <<<"$out" | tail -n 1
}

# train_ring_cuda : the host ring over ZeroMQ staging CUDA gradients through host memory.
train_ring_cuda() {
    timeout 120 "$build/ringside" train -n 2 --sync ring --device cuda --layers 784,256,10 --steps 30 \
        --report "$log_dir/train_ring_cuda.json" && report_summary "$log_dir/train_ring_cuda.json"
}

# nccl_vs_ring : the two all-reduce back ends give the same loss curve (the claims' 1e-4).
nccl_vs_ring() {
    python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))["summary"]["loss_curve"]
b = json.load(open(sys.argv[2]))["summary"]["loss_curve"]
d = max(abs(x[1] - y[1]) for x, y in zip(a, b))
print("max |loss(nccl) - loss(ring)| = %.3g over %d points" % (d, min(len(a), len(b))))
sys.exit(0 if len(a) == len(b) and d <= 1e-4 else 1)' "$log_dir/train_nccl.json" "$log_dir/train_ring_cuda.json"
}

# train_ps_cuda : 4 ps ranks share the GPU (each its own context); per-rank device memory.
train_ps_cuda() {
    timeout 120 "$build/ringside" train -n 4 --sync ps --device cuda --layers 784,256,10 --steps 30 \
        --report "$log_dir/train_ps_cuda.json" || return
    report_summary "$log_dir/train_ps_cuda.json" || return
    python3 -c '
import json, sys
rs = json.load(open(sys.argv[1]))["ranks"]
print("device MiB (used / peak accounted): " + ", ".join("r%s %.0f/%.1f" % (r["rank"], r["memory"].get("device_used_bytes", 0) / 2**20, r["memory"].get("peak_bytes", 0) / 2**20) for r in rs))' "$log_dir/train_ps_cuda.json"
}

export -f ranks_one_gpu report_summary train_nccl bench_nccl train_ring_cuda nccl_vs_ring train_ps_cuda
# nccl_pinned : the report says NCCL ran the ring (NCCL_ALGO=Ring set by ringside), the broadcast
# as an all-reduce, its traffic derived from that ring, and the shared-GPU line was printed.
nccl_pinned() {
    grep -q "ranks share this host" "$log_dir/train_nccl.log" || { echo "no shared-GPU line in train_nccl.log"; return 1; }
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
t = [e["traffic"] for e in r["ranks"]]
ok = all(x.get("algorithm", "").startswith("Ring/") and x["measured"] is False and x["transport"] == "nccl"
         and x.get("broadcast") == "allreduce" for x in t)
print("algorithm %s, broadcast %s, measured %s" % (t[0].get("algorithm"), t[0].get("broadcast"), t[0].get("measured")))
sys.exit(0 if ok else 1)' "$log_dir/train_nccl.json"
}

# nccl_four : 4 NCCL ranks on the one GPU through plain `train -n 4`; the loss must fall.
nccl_four() {
    ranks_one_gpu 4 train --sync nccl --device cuda --layers 784,256,10 --steps 20 \
        --report "$log_dir/nccl_four.json" && report_summary "$log_dir/nccl_four.json"
}

# nccl_tree : --nccl-algo tree: NCCL_ALGO=Tree (the start's broadcast an all-reduce, which NCCL 2.24+
# runs under Tree where ncclBroadcast would fail), the report's architecture "tree" and its traffic
# the trees' figures (validate_report.py's tree floors), the loss within the ring's 1e-4.
nccl_tree() {
    ranks_one_gpu 2 train --sync nccl --nccl-algo tree --device cuda --layers 784,256,10 --steps 30 \
        --report "$log_dir/nccl_tree.json" || return
    report_summary "$log_dir/nccl_tree.json" || return
    python3 -c '
import json, sys
r, g = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
t = r["ranks"][0]["traffic"]
a, b = [p[1] for p in r["summary"]["loss_curve"]], [p[1] for p in g["summary"]["loss_curve"]]
d = max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(a, b))
print("architecture %s, algorithm %s, max rel loss difference to the ring %.3g" % (r["backend"]["architecture"], t.get("algorithm"), d))
sys.exit(0 if r["backend"]["architecture"] == "tree" and t.get("algorithm", "").startswith("Tree/") and d <= 1e-4 else 1)' \
        "$log_dir/nccl_tree.json" "$log_dir/train_nccl.json"
}

# nccl_straggler : a 40 ms straggler shows up as idle on the other rank (the one timeline).
nccl_straggler() {
    ranks_one_gpu 2 train --sync nccl --device cuda --layers 784,256,10 --steps 20 --warmup 4 \
        --straggler 1:40 --report "$log_dir/nccl_straggler.json" || return
    python3 -c '
import json, sys
e = {x["rank"]: x for x in json.load(open(sys.argv[1]))["ranks"]}
i0, i1 = e[0]["time_s"]["phases"]["idle"], e[1]["time_s"]["phases"]["idle"]
print("idle: rank 0 %.1f ms, rank 1 (the straggler) %.1f ms" % (i0 * 1e3, i1 * 1e3))
sys.exit(0 if 0.028 <= i0 <= 0.052 and i1 < 0.012 else 1)' "$log_dir/nccl_straggler.json"
}

# nccl_wire_bench : a bf16 wire (ncclBfloat16) and an fp16 wire (ncclHalf): bench's exact inputs
# come back exact (#wrong 0).
nccl_wire_bench() {
    ranks_one_gpu 2 bench --sync nccl --wire bf16 -b 8 -e 16M -f 16 || return
    ranks_one_gpu 2 bench --sync nccl --wire fp16 -b 8 -e 16M -f 16
}

# nccl_wire : training at 2 ranks on a bf16 wire ends with the host ring's bf16 loss within the
# bf16 tolerance (docs/benchmarks.md, "Compressed gradients").
nccl_wire() {
    ranks_one_gpu 2 train --sync nccl --device cuda --wire bf16 --layers 784,256,10 --steps 30 \
        --report "$log_dir/nccl_wire.json" || return
    timeout 120 "$build/ringside" train -n 2 --sync ring --device cuda --wire bf16 --layers 784,256,10 --steps 30 \
        --report "$log_dir/ring_wire_cuda.json" || return
    python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))["summary"]["loss_curve"]
b = json.load(open(sys.argv[2]))["summary"]["loss_curve"]
d = max(abs(x[1] - y[1]) for x, y in zip(a, b))
print("max |loss(nccl bf16) - loss(ring bf16)| = %.3g over %d points" % (d, min(len(a), len(b))))
sys.exit(0 if len(a) == len(b) and d <= 0.05 else 1)' "$log_dir/nccl_wire.json" "$log_dir/ring_wire_cuda.json"
}

# nccl_fp8 WIRE : --wire fp8e4m3 or fp8e5m2 over NCCL: NCCL's FP8 types where the headers, the
# library loaded and the GPU allow (traffic.wire_collective names the format), else FP8 rounding
# around an fp32 all-reduce ("fp32"); training at 2 ranks within FP8's claim-5 tolerance (5%) of
# the host ring's FP8 run on the same GPU. One check a format, each with its own bound.
nccl_fp8() {
    local w=$1
    ranks_one_gpu 2 train --sync nccl --device cuda --wire $w --layers 784,256,10 --steps 30 \
        --report "$log_dir/nccl_$w.json" || return
    timeout 120 "$build/ringside" train -n 2 --sync ring --device cuda --wire $w --layers 784,256,10 --steps 30 \
        --report "$log_dir/ring_$w.json" || return
    python3 -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
ca, cb = ([x[1] for x in r["summary"]["loss_curve"]] for r in (a, b))
area = sum(abs(x - y) for x, y in zip(ca, cb)) / sum(cb)
how = {e["traffic"].get("wire_collective") for e in a["ranks"]}
print("%s: nccl moved %s; mean |loss(nccl) - loss(ring)| / mean loss %.2f%%" % (sys.argv[3], how, 100 * area))
sys.exit(0 if len(ca) == len(cb) and area <= 0.05 and len(how) == 1 and how <= {sys.argv[3], "fp32"} else 1)' \
        "$log_dir/nccl_$w.json" "$log_dir/ring_$w.json" $w
}

# nccl_fp8_stall : rank 1 of a 2-rank FP8 job over NCCL is stopped (SIGSTOP) 12 s in, mid-training:
# rank 0 must end by itself within its --timeout of 8 s (plus the launcher's clean-up) with an
# error naming the bucket it waited for, never hang in a blocking wait (the FP8 scale stays on the
# device; nothing in allreduce/nccl.cu waits but by polling: tests/nonblocking.py).
nccl_fp8_stall() {
    local r=$log_dir/nccl_fp8_stall.json out=$log_dir/nccl_fp8_stall.out job p pid1="" t0 rc
    "$build/ringside" train -n 2 --sync nccl --device cuda --wire fp8e4m3 --layers 784,256,10 --steps 10000000 \
        --timeout 8 --report "$r" >"$out" 2>&1 &
    job=$!
    sleep 12
    for p in $(pgrep -f -- "$r"); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx RANK=1 && pid1=$p
    done
    [ -n "$pid1" ] || { cat "$out"; echo "rank 1 not found 12 s in"; kill "$job"; return 1; }
    kill -STOP "$pid1"
    t0=$SECONDS
    for _ in $(seq 1 60); do kill -0 "$job" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$job" 2>/dev/null && { kill -KILL "$job" "$pid1"; echo "still running 30 s after the stop"; return 1; }
    wait "$job"
    rc=$?
    kill -KILL "$pid1" 2>/dev/null
    grep -v '^step' "$out" | tail -n 5
    echo "ended ${rc:+with exit $rc }$((SECONDS - t0)) s after rank 1 stopped: $(grep -o 'the all-reduce of bucket [0-9]* did not complete within [0-9]* s' "$out" | head -n 1)"
    [ "$rc" != 0 ] && [ ! -e "$r" ] && grep -q 'the all-reduce of bucket [0-9]* did not complete within' "$out"
}

export -f nccl_pinned nccl_four nccl_tree nccl_straggler nccl_wire_bench nccl_wire nccl_fp8 nccl_fp8_stall
# one_rank_staged : one rank with the host ring and with ps on the GPU: the engine stages
# through pinned memory at one rank too; the loss must fall.
one_rank_staged() {
    local s
    for s in ring ps; do
        timeout 50 "$build/ringside" train --device cuda --sync $s --batch 128 --steps 20 --quiet \
            --report "$log_dir/one_staged_$s.json" && report_summary "$log_dir/one_staged_$s.json" || return
    done
}
export -f one_rank_staged
check one_rank_staged one_rank_staged
check train_nccl train_nccl
check bench_nccl bench_nccl
check train_ring_cuda train_ring_cuda
check nccl_vs_ring nccl_vs_ring
check train_ps_cuda train_ps_cuda
check nccl_pinned nccl_pinned
check nccl_four nccl_four
check nccl_tree nccl_tree
check nccl_straggler nccl_straggler
check nccl_wire_bench nccl_wire_bench
check nccl_wire nccl_wire
check nccl_fp8e4m3 nccl_fp8 fp8e4m3
check nccl_fp8e5m2 nccl_fp8 fp8e5m2
check nccl_fp8_stall nccl_fp8_stall

print_table
