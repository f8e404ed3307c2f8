#!/usr/bin/env bash
# checkpoint.sh - the cost of one checkpoint save (--checkpoint-every 1): bytes, rank 0's milliseconds from the end of the step to the manifest in place, and what a save adds to the run's wall time (against the same run without checkpoints; a server's part is written inside the step), medians, for a small and a larger MLP under the ring and the ps placements (docs/benchmarks.md)
# usage: experiments/benchmarks/checkpoint.sh [BIN]   (REPS=3 runs of 21 steps each; the first save of a run left out; N=${RANKS:-2})
set -euo pipefail
bin=${1:-build/ringside}; reps=${REPS:-3}; ranks=${RANKS:-2}
out=$(mktemp -d "${TMPDIR:-/tmp}/ringside-ckpt-bench-XXXXXX"); trap 'rm -rf "$out"' EXIT
echo "# $ranks ranks, $(nproc) cores, checkpoints on $(df -T "$out" | awk 'NR==2 {print $2}') ($out)"
echo "| model | parameters | sync | parts | bytes a save | rank 0's save (ms), median | min .. max | added to the run a save (ms), median | step (ms), median |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for layers in 784,32,10 784,1024,1024,10; do
    for sync in "ring" "ps" "ps --ps-placement dedicated" "ps --ps-placement sharded"; do
        : >"$out/saves"
        : >"$out/steps"
        : >"$out/added"
        for rep in $(seq "$reps"); do
            # shellcheck disable=SC2086
            "$bin" train --layers $layers --batch 32 --train-samples 2048 --eval-samples 64 --device cpu -n "$ranks" \
                --sync $sync --steps 21 --seed "$rep" --report "$out/plain.json" -q
            rm -rf "$out/ck"
            # shellcheck disable=SC2086
            "$bin" train --layers $layers --batch 32 --train-samples 2048 --eval-samples 64 --device cpu -n "$ranks" \
                --sync $sync --steps 21 --seed "$rep" --checkpoint "$out/ck" --checkpoint-every 1 --report "$out/r.json" \
                2>&1 | grep '# checkpoint:' | tail -n +2 >>"$out/saves"
            python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['summary']['step_time_s'])" "$out/r.json" >>"$out/steps"
            python3 -c "import json,sys; w=lambda f: json.load(open(f))['run']['wall_s']; print((w(sys.argv[1]) - w(sys.argv[2])) / 21)" \
                "$out/r.json" "$out/plain.json" >>"$out/added"
        done
        python3 - "$out/saves" "$out/steps" "$layers" "$sync" "$out/added" <<'PY'
import re, statistics, sys
lines = open(sys.argv[1]).read().splitlines()
ms = [float(re.search(r"([0-9.]+) ms", l).group(1)) for l in lines]
mb = [float(re.search(r"([0-9.]+) MB", l).group(1)) for l in lines]
parts = re.search(r"(\d+) parts", lines[0]).group(1)
steps = [float(x) * 1e3 for x in open(sys.argv[2]).read().split()]
added = [float(x) * 1e3 for x in open(sys.argv[5]).read().split()]
sizes = [int(x) for x in sys.argv[3].split(",")]
params = sum(a * b + b for a, b in zip(sizes, sizes[1:]))
print("| %s | %d | %s | %s | %.2f MB | %.2f | %.2f .. %.2f | %.1f | %.1f |" % (sys.argv[3], params, sys.argv[4], parts,
      statistics.median(mb), statistics.median(ms), min(ms), max(ms), statistics.median(added), statistics.median(steps)))
PY
    done
done
