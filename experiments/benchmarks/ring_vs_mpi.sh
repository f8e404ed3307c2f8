#!/usr/bin/env bash
# ring_vs_mpi.sh - ringside's host ring against Open MPI's MPI_Allreduce: paired, interleaved runs, medians and IQRs
# usage: experiments/benchmarks/ring_vs_mpi.sh [BIN [REPEATS [CASES]]]   (needs mpicc/mpirun: make deps installs them)
#
# Cases (CASES: a space-separated subset, default "shm tcp netns"):
#   shm    ring's default on one host (shared-memory lanes, --transport shm) against MPI's shared
#          memory (--mca btl self,vader)
#   tcp    ring over ZeroMQ TCP on loopback (--transport tcp) against MPI over TCP (--mca btl self,tcp)
#   direct ring over plain TCP on loopback, read and written by the rank's own thread (--transport tcp
#          --msg-layer direct) against MPI over TCP (--mca btl self,tcp)
#   netns  ring over TCP between network namespaces joined by veth pairs and a bridge (the "hosts" of
#          tests/integration/multihost.sh: one rank per namespace) against MPI over TCP between the same
#          namespaces (rank i started in host i; mpi_allreduce.c reaches mpirun's PMIx server, which only
#          listens on loopback, from mpirun's namespace); needs root and iproute2, skipped (with the
#          reason) otherwise
# For every repeat, N = 2 and 4 and every case, the ring and MPI run back to back, in an order that
# alternates with the repeat, over the same sizes (64 KiB to 64 MiB, factor 4, 3 warm-up and 10 timed
# iterations, every element checked). Both measure alike: a barrier before every iteration, each rank's
# median of the timed iterations, the maximum over ranks, busbw = size / time x 2(N-1)/N. Both bind rank
# i to CPU i mod nproc: mpirun --bind-to core:overload-allowed, the bench's default --bind core (netns:
# each namespace host's rank started under taskset on CPU i mod nproc).
# Prints, per case, N and size, the median busbw of each side over the repeats with its interquartile
# range (q1-q3), the ratio of the medians, the median of the per-repeat (paired) ratios, and each
# side's spread as IQR / median (marked * where the ring's is the wider).
set -euo pipefail
bin=$(readlink -f "${1:-build/ringside}")
reps=${2:-5}
cases=${3:-shm tcp netns}
sizes=(-b 64K -e 64M -f 4 -w 3 -i 10)
msizes=(65536 67108864 4 3 10)
mkdir -p build
mpicc -O2 -rdynamic -o build/mpi_allreduce experiments/benchmarks/mpi_allreduce.c -ldl
mpibin=$(readlink -f build/mpi_allreduce)
mpi=(mpirun --allow-run-as-root --oversubscribe --bind-to core:overload-allowed)
out=$(mktemp -d /tmp/ring_vs_mpi-XXXXXX)

# network-namespace hosts (netns): host i is ${tag}h$i at $net.(i+1), a veth into a bridge
ncpu=$(nproc); tag=rvm$$; net=10.78.$(($$ % 200 + 20)); hosts=()
cleanup() {
    for h in "${hosts[@]}"; do ip netns pids "$h" 2>/dev/null | xargs -r kill -9 2>/dev/null; ip netns del "$h" 2>/dev/null; done
    [ ${#hosts[@]} -gt 0 ] && ip netns del "${tag}sw" 2>/dev/null
    rm -rf "$out"
}
trap cleanup EXIT INT TERM
if [[ " $cases " == *" netns "* ]]; then
    why=""
    if [ "$(id -u)" != 0 ]; then why="needs root"
    elif ! command -v ip >/dev/null; then why="no iproute2"
    elif ! ip netns add "${tag}sw" 2>/dev/null; then why="cannot create network namespaces"
    else
        hosts+=("${tag}sw")
        ip -n "${tag}sw" link add br0 type bridge && ip -n "${tag}sw" link set br0 up || why="no bridge support"
        for i in 0 1 2 3; do
            [ -n "$why" ] && break
            h=${tag}h$i; hosts+=("$h"); ip netns add "$h"
            ip link add "${tag}e$i" type veth peer name "${tag}p$i"
            ip link set "${tag}e$i" netns "$h"; ip link set "${tag}p$i" netns "${tag}sw"
            ip -n "$h" addr add "$net.$((i + 1))/24" dev "${tag}e$i"
            ip -n "$h" link set "${tag}e$i" up; ip -n "$h" link set lo up
            ip -n "${tag}sw" link set "${tag}p$i" master br0; ip -n "${tag}sw" link set "${tag}p$i" up
        done
    fi
    if [ -n "$why" ]; then
        echo "# netns: skipped ($why)"
        cases=${cases//netns/}
    fi
fi

# one rank of the netns ring: rank $1 of $2 in host $1 (multihost.sh's environment)
netns_ring() {
    local n=$1 pids=() rc=0 port=$((29600 + RANDOM % 2000))
    for ((i = 0; i < n; i++)); do
        ip netns exec "${tag}h$i" taskset -c $((i % ncpu)) env RANK=$i WORLD_SIZE=$n LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=$net.1 \
            MASTER_PORT=$port RINGSIDE_JOB_TOKEN=0123456789abcdef0123456789abcdef \
            timeout 300 "$bin" bench --sync ring "${sizes[@]}" >"$out/netns-rank$i.txt" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    cat "$out/netns-rank0.txt"
    return $rc
}

# an MPI rank of the netns case: rank i enters host i
printf '#!/usr/bin/env bash\nexec ip netns exec %sh${OMPI_COMM_WORLD_RANK} "$@"\n' "$tag" >"$out/mpi_in_ns.sh"
chmod +x "$out/mpi_in_ns.sh"

run_ring() { # case n
    case $1 in
    shm) "$bin" bench -n "$2" --sync ring --transport shm "${sizes[@]}" ;;
    tcp) "$bin" bench -n "$2" --sync ring --transport tcp "${sizes[@]}" ;;
    direct) "$bin" bench -n "$2" --sync ring --transport tcp --msg-layer direct "${sizes[@]}" ;;
    netns) netns_ring "$2" ;;
    esac
}
run_mpi() { # case n
    case $1 in
    shm) "${mpi[@]}" --mca btl self,vader -np "$2" "$mpibin" "${msizes[@]}" ;;
    tcp | direct) "${mpi[@]}" --mca btl self,tcp -np "$2" "$mpibin" "${msizes[@]}" ;;
    netns) MPI_ALLREDUCE_ROOT_NETNS=/proc/$$/ns/net "${mpi[@]}" -x MPI_ALLREDUCE_ROOT_NETNS --mca btl self,tcp \
        --mca btl_tcp_if_include "$net.0/24" -np "$2" "$out/mpi_in_ns.sh" "$mpibin" "${msizes[@]}" ;;
    esac
}

echo "# ring_vs_mpi: commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores, $reps repeats, cases: $cases, $(date -u +%FT%TZ)"
echo "# ring: ringside bench --sync ring ${sizes[*]} (--transport shm | tcp, direct: --transport tcp --msg-layer direct; netns: one rank per namespace host)"
echo "# MPI:  mpirun --bind-to core:overload-allowed --mca btl self,vader | self,tcp -np N mpi_allreduce ${msizes[*]}"
for rep in $(seq "$reps"); do
    for n in 2 4; do
        for c in $cases; do
            for side in ring mpi; do
                [ $((rep % 2)) = 0 ] && side=$([ $side = ring ] && echo mpi || echo ring)
                f="$out/$c-$n-$side-$rep.txt"
                if [ $side = ring ]; then run_ring "$c" "$n" >"$f" 2>&1 || echo "# ring $c N=$n repeat $rep failed: $(tail -n 2 "$f")"
                else run_mpi "$c" "$n" >"$f" 2>&1 || echo "# MPI $c N=$n repeat $rep failed: $(tail -n 2 "$f")"; fi
                if grep -q 'FAILED' "$f" || awk '!/^#/ && NF >= 7 && $7 != 0 && $7 != "N/A" {bad=1} END {exit !bad}' "$f"; then
                    echo "# $side $c N=$n repeat $rep: wrong elements"
                fi
            done
        done
        echo "# repeat $rep N=$n done $(date -u +%T)"
    done
done

python3 - "$out" "$reps" "$cases" <<'PY'
import glob, os, statistics, sys
out, reps, cases = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()

def rows(path):
    d = {}
    if not os.path.exists(path):
        return d
    for line in open(path):
        f = line.split()
        if len(f) >= 7 and not line.startswith("#") and f[0].isdigit():
            d[int(f[0])] = float(f[5])
    return d

def q(v):
    if len(v) < 2:
        return (v[0], v[0], v[0]) if v else (float("nan"),) * 3
    a, m, b = statistics.quantiles(v, n=4, method="inclusive")
    return a, statistics.median(v), b

def size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"

print("\n| case | N | size | ring busbw median (q1-q3) GB/s | MPI busbw median (q1-q3) GB/s | ring / MPI (medians) | "
      "paired ratio median (min-max) | IQR / median: ring, MPI |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for c in cases:
    for n in (2, 4):
        ring = [rows(f"{out}/{c}-{n}-ring-{r}.txt") for r in range(1, reps + 1)]
        mpi = [rows(f"{out}/{c}-{n}-mpi-{r}.txt") for r in range(1, reps + 1)]
        for s in sorted({k for d in ring + mpi for k in d}):
            rv = [d[s] for d in ring if s in d]
            mv = [d[s] for d in mpi if s in d]
            pr = [a[s] / b[s] for a, b in zip(ring, mpi) if s in a and s in b and b[s] > 0]
            if not rv or not mv:
                continue
            r1, rm, r3 = q(rv)
            m1, mm, m3 = q(mv)
            ratio = rm / mm if mm > 0 else float("nan")
            pm = statistics.median(pr) if pr else float("nan")
            rs, ms = (r3 - r1) / rm if rm > 0 else float("nan"), (m3 - m1) / mm if mm > 0 else float("nan")
            print(f"| {c} | {n} | {size(s)} | {rm:.2f} ({r1:.2f}-{r3:.2f}) | {mm:.2f} ({m1:.2f}-{m3:.2f}) | {ratio:.2f} | "
                  f"{pm:.2f} ({min(pr):.2f}-{max(pr):.2f}) | {rs:.2f}, {ms:.2f}{' *' if rs > ms else ''} |")
PY
