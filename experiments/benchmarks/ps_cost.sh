#!/usr/bin/env bash
# ps_cost.sh - what one ps all-reduce costs the machine (CPU time, page faults, context switches), builds and ZeroMQ alone side by side
#
# usage: experiments/benchmarks/ps_cost.sh [VARIANT...]
#   VARIANT   LABEL=BINARY[,BENCH-ARG...] (a ringside build, with bench options of its own, e.g.
#             sharded=build/ringside,--ps-placement,sharded), zmq (zmq_tput's bare pattern, ps's
#             heap policy), zmq-glibc (the same under glibc's malloc defaults), or own=BINARY
#             (the bench's own work a call, which ZeroMQ's pattern does not do: refilling the
#             input and the barrier, from `bench --sync none -n 1` counted twice for 2 ranks);
#             default: ps=build/ringside zmq
#   REPS=3 ITERS=30 SIZES="4M 16M 64M" TRANSPORTS="ipc tcp"
#
# Wall times on a shared 2-core machine move by 2x from run to run; the work a call makes does
# not. Each variant runs twice per size, with 5 and with 5 + ITERS timed calls (3 warm-up calls
# both times), under /usr/bin/time, which sums every process of the run (the launcher waits for
# its ranks; zmq_tput for its second process); the difference over ITERS is one call's user +
# system CPU time, minor page faults and context switches, set-up and teardown cancelled out.
# The bench runs with -c 0 (no check of the result: zmq_tput checks nothing either); what
# remains of the bench's own in a call is refilling each rank's input before it (one copy) and
# the barrier, which the own=BINARY variant measures for subtracting.
# The busbw column is the long run's own (its median call), the number ps_vs_zmq.sh compares.
# Variants run in an order rotated by the repeat; medians over REPS.
set -euo pipefail
reps=${REPS:-3}; iters=${ITERS:-30}; sizes=${SIZES:-4M 16M 64M}; transports=${TRANSPORTS:-ipc tcp}
[ $# -gt 0 ] || set -- ps=build/ringside zmq
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
mkdir -p build
cc -O2 -I. -o build/zmq_tput experiments/benchmarks/zmq_tput.c base/heap.c -lzmq -pthread
bytes() { numfmt --from=iec "$1"; }
echo "# ps_cost: $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), $reps repeats of 5 and $((5 + iters)) calls"
nv=$#
for r in $(seq "$reps"); do
    for tr in $transports; do
        for s in $sizes; do
            b=$(bytes "$s")
            for k in $(seq 0 $((nv - 1))); do
                i=$(( (k + r) % nv + 1 )); v=${!i}; label=${v%%=*}
                for n in 5 $((5 + iters)); do
                    f="$out/$label-$tr-$s-$r-$n"
                    case $v in
                    zmq) cmd=(build/zmq_tput "$tr" "$b" "$b" 4 3 "$n" 26214400 bare keep) ;;
                    zmq-glibc) cmd=(build/zmq_tput "$tr" "$b" "$b" 4 3 "$n" 26214400 bare glibc) ;;
                    own=*) cmd=("${v#own=}" bench --sync none -n 1 -b "$b" -e "$b" -w 3 -i "$n" -c 0) ;;
                    *=*) IFS=, read -ra extra <<< "${v#*=}"
                         cmd=("${extra[0]}" bench --sync ps -n 2 --transport "$tr" -b "$b" -e "$b" -w 3 -i "$n" -c 0 "${extra[@]:1}") ;;
                    *) echo "ps_cost: variant '$v': expected LABEL=BINARY, zmq or zmq-glibc" >&2; exit 2 ;;
                    esac
                    /usr/bin/time -f '%U %S %R %w %c' -o "$f.time" "${cmd[@]}" > "$f.out"
                done
            done
        done
    done
done
python3 - "$out" "$reps" "$iters" "$sizes" "$transports" "$@" <<'PY'
import statistics as st, sys
d, reps, iters, sizes, trs, variants = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(), sys.argv[5].split(), sys.argv[6:]
def times(f):
    u, s, flt, w, c = open(f).read().split()[-5:]
    return float(u) + float(s), int(flt), int(w) + int(c)
def busbw(f):
    rows = [l.split() for l in open(f) if l.strip() and l.lstrip()[0].isdigit()]
    return float(rows[-1][5]) if rows else float("nan")
print(f"# per all-reduce (differences of the {5 + iters}- and 5-call runs over {iters}), medians of {reps} repeats")
print(f"# {'transport':<9} {'size':>5} {'variant':<12} {'CPU ms':>8} {'faults':>8} {'switches':>9} {'busbw GB/s':>11}")
for tr in trs:
    for s in sizes:
        for v in variants:
            label = v.split("=")[0]
            per = 2 if label == "own" else 1  # one rank's run, for the two ranks of the others
            cpu, flt, sw, bw = [], [], [], []
            for r in range(1, reps + 1):
                a = times(f"{d}/{label}-{tr}-{s}-{r}-5.time")
                b = times(f"{d}/{label}-{tr}-{s}-{r}-{5 + iters}.time")
                cpu.append(per * (b[0] - a[0]) / iters * 1e3); flt.append(per * (b[1] - a[1]) / iters); sw.append(per * (b[2] - a[2]) / iters)
                bw.append(busbw(f"{d}/{label}-{tr}-{s}-{r}-{5 + iters}.out") if label != "own" else float("nan"))
            print(f"  {tr:<9} {s:>5} {label:<12} {st.median(cpu):8.2f} {st.median(flt):8.0f} {st.median(sw):9.0f} {st.median(bw):11.3f}")
PY
