#!/usr/bin/env bash
# demo.sh - the main job on an embedded default: CPU, synthetic data
set -euo pipefail
bin=${1:-build/ringside}
out=${RINGSIDE_DEMO_OUT:-results/demo}
mkdir -p "$out"
echo "# ringside demo: one rank on the CPU, synthetic data (784-256-10, 300 steps)"
"$bin" train --device cpu --data synthetic --layers 784,256,10 --batch 64 --steps 300 \
    --eval-every 100 --report "$out/train.json"
echo "# report: $out/train.json"
