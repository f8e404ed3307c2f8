#!/usr/bin/env bash
# ring_vs_mpi.sh - ringside's host ring against Open MPI's MPI_Allreduce, same sizes and ranks, one after the other
# usage: experiments/benchmarks/ring_vs_mpi.sh [BIN]   (needs mpicc/mpirun: make deps installs them)
set -euo pipefail
bin=${1:-build/ringside}
mkdir -p build
mpicc -O2 -o build/mpi_allreduce experiments/benchmarks/mpi_allreduce.c
mpi="mpirun --allow-run-as-root --oversubscribe --mca btl self,vader,tcp"
for n in 2 4; do
    for rep in 1 2 3; do
        echo "## N=$n repeat $rep: ringside bench --sync ring"
        "$bin" bench -n "$n" --sync ring -b 64K -e 64M -f 4 -w 3 -i 10
        echo "## N=$n repeat $rep: MPI_Allreduce"
        $mpi -np "$n" build/mpi_allreduce 65536 67108864 4 3 10
    done
done
