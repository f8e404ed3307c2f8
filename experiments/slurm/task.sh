#!/bin/sh
# task.sh - one Slurm task as one ringside process: a worker rank or a dedicated server, from SLURM_PROCID
#
#   RINGSIDE_SERVERS=K srun -n W+K experiments/slurm/task.sh build/ringside train --sync ps \
#       --ps-placement dedicated --ps-servers K
#
#   RINGSIDE_SERVERS=K srun -n W+K experiments/slurm/task.sh build/ringside train --sync byteps \
#       --ps-servers K          (BytePS: a shard in each of the W workers and K CPU servers)
#
# The last K tasks of the step are the dedicated servers and the first W the workers (each gets
# torchrun's variables with the worker count W); without RINGSIDE_SERVERS every task is a worker
# and ringside reads srun's own variables. MASTER_ADDR, unless set, is the step's first node, where
# task 0 runs (its NodeAddr in slurm.conf, which need not resolve as a host name). `ringside matrix --launcher slurm` runs the same lines (matrix_task_sh in
# experiments/matrix.c): change both together.
set -eu
: "${SLURM_PROCID:?not a Slurm task: run this under srun}"
w=$((SLURM_NTASKS - ${RINGSIDE_SERVERS:-0}))
if [ "$w" -lt 1 ]; then
    echo "task.sh: error: $SLURM_NTASKS tasks for RINGSIDE_SERVERS=${RINGSIDE_SERVERS:-0} servers leaves no worker" >&2
    exit 2
fi
if [ -z "${MASTER_ADDR:-}" ]; then # the first node's address as Slurm knows it (NodeAddr), else its name
    first=$(scontrol show hostnames "${SLURM_STEP_NODELIST:-$SLURM_JOB_NODELIST}" | head -n 1)
    MASTER_ADDR=$(scontrol show node -o "$first" 2>/dev/null | sed -n 's/.*NodeAddr=\([^ ]*\).*/\1/p')
    MASTER_ADDR=${MASTER_ADDR:-$first}
fi
export MASTER_ADDR
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE
if [ "$SLURM_PROCID" -ge "$w" ]; then
    export RINGSIDE_ROLE=server RINGSIDE_SERVER_ID=$((SLURM_PROCID - w)) WORLD_SIZE=$w
elif [ "$w" -lt "$SLURM_NTASKS" ]; then
    export RINGSIDE_ROLE=worker RANK=$SLURM_PROCID WORLD_SIZE=$w LOCAL_RANK=$SLURM_LOCALID
fi
exec "$@"
