#!/usr/bin/env bash
# small_msgs.sh - small all-reduces (1-16 KiB) over TCP: ring, tree and ps on each message layer (--msg-layer zeromq | direct) against Open MPI's MPI_Allreduce, shuffled each repeat; medians of time per call, and each against MPI's
# usage: experiments/benchmarks/small_msgs.sh [BIN [REPEATS]]   (default build/ringside, 5; MPI is left out, said so, without mpicc)
#
# MPI runs twice a repeat: its own choice of algorithm (Open MPI's tuned rules take recursive doubling,
# log2 N rounds, for small messages) and its ring forced (coll_tuned_allreduce_algorithm 4: 2(N-1)
# rounds, the ring's own), so that the ring is held against the same algorithm as well as the best one.
set -euo pipefail
bin=$(readlink -f "${1:-build/ringside}")
reps=${2:-5}
out=$(mktemp -d /tmp/small_msgs-XXXXXX)
trap 'rm -rf "$out"' EXIT
sizes=(-b 1K -e 16K -f 4 -w 20 -i 200)
mpi=""
if command -v mpicc >/dev/null && command -v mpirun >/dev/null; then
    mkdir -p build
    mpicc -O2 -rdynamic -o build/mpi_allreduce experiments/benchmarks/mpi_allreduce.c -ldl && mpi=$(readlink -f build/mpi_allreduce)
fi
echo "# small_msgs: commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $reps repeats, $(date -u +%FT%TZ)"
echo "# ringside bench -n N --sync S --transport tcp --msg-layer L ${sizes[*]}; MPI: mpirun --bind-to core:overload-allowed --mca btl self,tcp mpi_allreduce 1024 16384 4 20 200"
[ -n "$mpi" ] || echo "# no mpicc/mpirun: MPI left out"
for rep in $(seq "$reps"); do
    for n in 2 4; do
        runs=()
        for s in ring tree ps; do for l in zeromq direct; do runs+=("$s:$l"); done; done
        [ -n "$mpi" ] && runs+=("mpi:none" "mpi:ring")
        for r in $(printf '%s\n' "${runs[@]}" | shuf); do
            s=${r%%:*} l=${r#*:} f="$out/$s-$l-$n-$rep.txt"
            if [ "$s" = mpi ]; then
                algo=()
                [ "$l" = ring ] && algo=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4)
                mpirun --allow-run-as-root --oversubscribe --bind-to core:overload-allowed --mca btl self,tcp "${algo[@]}" \
                    -np "$n" "$mpi" 1024 16384 4 20 200 >"$f" 2>&1 || echo "# MPI ($l) N=$n failed"
            else
                "$bin" bench -n "$n" --sync "$s" --transport tcp --msg-layer "$l" "${sizes[@]}" >"$f" 2>&1 || echo "# $s $l N=$n failed: $(tail -n 2 "$f")"
            fi
        done
    done
done
python3 - "$out" <<'PY'
import collections, glob, os, statistics, sys
d = collections.defaultdict(list)
for path in glob.glob(os.path.join(sys.argv[1], "*.txt")):
    s, l, n, _ = os.path.basename(path)[:-4].split("-")
    for line in open(path):
        f = line.split()
        if len(f) >= 5 and not line.startswith("#") and f[0].isdigit():
            d[(s, l, int(n), int(f[0]))].append(float(f[3]))
print("# time per all-reduce, us: median (min-max) over repeats; x MPI = the median over MPI's median (its own choice);")
print("# x MPI ring = over MPI's with its ring forced (the ring's rows)")
print(f"{'sync':5} {'layer':7} {'N':>2} {'size':>6} {'median':>8} {'range':>15} {'x MPI':>6} {'x MPI ring':>10}")
def over(m, key):
    return f"{m / statistics.median(d[key]):.2f}" if key in d else "-"
for key in sorted(k for k in d if k[0] != "mpi"):
    s, l, n, size = key
    v = d[key]
    m = statistics.median(v)
    ring = over(m, ("mpi", "ring", n, size)) if s == "ring" else "-"
    print(f"{s:5} {l:7} {n:>2} {size:>6} {m:8.1f} {min(v):7.1f}-{max(v):<7.1f} {over(m, ('mpi', 'none', n, size)):>6} {ring:>10}")
for algo in ("none", "ring"):
    for n in (2, 4):
        for size in sorted({k[3] for k in d if k[:2] == ("mpi", algo) and k[2] == n}):
            v = d[("mpi", algo, n, size)]
            print(f"{'mpi':5} {'own' if algo == 'none' else 'ring':7} {n:>2} {size:>6} {statistics.median(v):8.1f} {min(v):7.1f}-{max(v):<7.1f}")
PY
