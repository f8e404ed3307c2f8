#!/usr/bin/env bash
# torchrun.sh - ringside as the ranks of the real torchrun: one node (ring, ps), two agents in a c10d rendezvous, the failure summary naming the error
# Needs PyTorch (not a dependency of ringside): prints SKIP naming why where it is not installed.
. "$(dirname "$0")/lib.sh"
if ! $PY -c 'import torch.distributed.run' >/dev/null 2>&1; then
    echo "SKIP: PyTorch is not installed for $PY (torchrun comes with it: pip install torch)"; exit 0
fi
TR="$PY -m torch.distributed.run"
BINABS=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
SMALL="--device cpu --layers 32,16,10 --train-samples 256 --eval-samples 64 --steps 5 --batch 16 --threads 1 --timeout 30 --quiet"
export OMP_NUM_THREADS=1 PYTHONWARNINGS=ignore
cd "$T" || exit 1

# ranks_in REPORT : how many ranks the report lists
ranks_in() { $PY -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["ranks"]))' "$1" 2>/dev/null; }

# one node, 2 ranks: torchrun's agent serves its TCPStore on MASTER_PORT; rank 0 binds elsewhere
for sync in ring ps; do
    rm -f r.json
    timeout 120 $TR --nproc_per_node 2 --master_port "$(free_port)" --no-python "$BINABS" train --sync $sync $SMALL \
        --report r.json >"one-$sync.log" 2>&1; rc=$?
    if [ $rc = 0 ] && [ "$(ranks_in r.json)" = 2 ]; then ok "one node, 2 ranks, --sync $sync"
    else bad "one node, 2 ranks, --sync $sync" "exit $rc, $(ranks_in r.json) ranks reported: $(grep -i error "one-$sync.log" | tail -n 2)"; fi
done

# two agents of one rank each, meeting in a c10d rendezvous: the store is the rendezvous's, and
# whichever node the rendezvous makes rank 0 publishes its control plane there
rdzv=$(free_port); pids=()
for n in 0 1; do
    timeout 120 $TR --nnodes 2 --nproc_per_node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:$rdzv --rdzv-id it$$ \
        --node-rank $n --no-python "$BINABS" train --sync ring $SMALL --report "mn$n.json" >"mn$n.log" 2>&1 & pids+=($!)
done
rc0=0; rc1=0; wait "${pids[0]}" || rc0=$?; wait "${pids[1]}" || rc1=$?
reports=$(ls mn*.json 2>/dev/null | wc -l); rep=$(ls mn*.json 2>/dev/null | head -n1)
if [ $rc0 = 0 ] && [ $rc1 = 0 ] && [ "$reports" = 1 ] && [ "$(ranks_in "$rep")" = 2 ]; then ok "two agents x 1 rank, c10d rendezvous"
else bad "two agents x 1 rank, c10d rendezvous" "exits $rc0 $rc1, $reports reports: $(grep -ih error mn*.log | tail -n 2)"; fi

# the agent's store not shared (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1): MASTER_PORT is free, rank 0 binds it
rm -f r.json
TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 timeout 120 $TR --nnodes 1 --nproc_per_node 2 --rdzv-backend c10d \
    --rdzv-endpoint 127.0.0.1:"$(free_port)" --no-python "$BINABS" train --sync ring $SMALL --report r.json >own.log 2>&1; rc=$?
if [ $rc = 0 ] && [ "$(ranks_in r.json)" = 2 ]; then ok "no agent store: rank 0 binds MASTER_PORT"
else bad "no agent store: rank 0 binds MASTER_PORT" "exit $rc: $(grep -i error own.log | tail -n 2)"; fi

# a failing run: every rank writes TORCHELASTIC_ERROR_FILE, and torchrun's summary names the error
rm -f r.json
timeout 120 $TR --nproc_per_node 2 --master_port "$(free_port)" --no-python "$BINABS" train --sync ring $SMALL \
    --data "$T/no-such-mnist" --report r.json >fail.log 2>&1; rc=$?
files=$(grep -c "error_file: /" fail.log); named=$(grep -c "traceback : ringside: MNIST directory $T/no-such-mnist" fail.log)
if [ $rc != 0 ] && [ "$files" = 2 ] && [ "$named" = 2 ] && [ ! -e r.json ]; then ok "a failed run: torchrun's summary names the error of each rank"
else bad "a failed run: torchrun's summary names the error of each rank" "exit $rc, $files error files, $named named: $(grep -A3 'Root Cause' fail.log | tail -n 3)"; fi
finish
