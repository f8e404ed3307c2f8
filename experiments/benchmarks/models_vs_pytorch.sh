#!/usr/bin/env bash
# models_vs_pytorch.sh - one rank of each model against the same model in PyTorch on the CPU, interleaved, medians over repeats
# usage: experiments/benchmarks/models_vs_pytorch.sh [BIN]
#   PY (a python3 with torch; default python3), REPS (default 3), STEPS (default 40), THREADS (default 2),
#   MODELS (default "mlp lenet gpt gpt32k"), BEFORE (another ringside binary, run in the same
#   repeats: a before/after column pair)
# Each repeat runs every model once in ringside and once in PyTorch, back to back (a pair), so both see
# the same machine; which goes first alternates from repeat to repeat (odd repeats ringside first, even
# ones PyTorch), so that neither always inherits the other's warm caches or its leftover load. Prints the
# parameter counts (they must agree: the same model), the median step times, and the pairs: every
# repeat's ratio and their median (min-max), which the machine's load moves less than the medians;
# "torch/ringside" above 1 means ringside is faster.
set -euo pipefail
bin=${1:-build/ringside}
py=${PY:-python3}; reps=${REPS:-3}; steps=${STEPS:-40}; threads=${THREADS:-2}
models=${MODELS:-mlp lenet gpt gpt32k}
before=${BEFORE:-}
here=$(cd "$(dirname "$0")" && pwd)
"$py" -c "import torch" 2>/dev/null || { echo "models_vs_pytorch.sh: $py has no torch (PY=/path/to/python3 with torch)" >&2; exit 2; }
[ -x "$bin" ] || { echo "models_vs_pytorch.sh: no $bin (make first)" >&2; exit 2; }
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT

args() { # model -> ringside options, PyTorch arguments (model batch)
    case $1 in
        mlp) echo "--model mlp --layers 784,1024,1024,10 --batch 128|mlp 128" ;;
        lenet) echo "--model lenet --batch 64|lenet 64" ;;
        gpt) echo "--model gpt --batch 16 --optimizer adamw|gpt 16" ;;
        gpt32k) echo "--model gpt --vocab 32768 --batch 16 --optimizer adamw|gpt 16 --vocab 32768" ;;
        *) echo "models_vs_pytorch.sh: unknown model $1" >&2; exit 2 ;;
    esac
}
ours() { # MODEL REPEAT OPTIONS: ringside's run (and BEFORE's) of one repeat
    local m=$1 r=$2; shift 2
    "$bin" train "$@" --sync none --threads "$threads" --steps "$steps" --warmup 5 --quiet --report "$out/$m-$r.json"
    [ -z "$before" ] || "$before" train "$@" --sync none --threads "$threads" --steps "$steps" --warmup 5 --quiet \
        --report "$out/$m-$r.before.json"
}
theirs() { # MODEL REPEAT ARGS: PyTorch's run of one repeat
    local m=$1 r=$2; shift 2
    "$py" "$here/pytorch_models.py" "$1" "$2" "$steps" 5 "$threads" "${@:3}" >"$out/$m-$r.torch"
}
for r in $(seq "$reps"); do
    for m in $models; do
        a=$(args "$m"); ropt=${a%%|*}; topt=${a#*|}
        # shellcheck disable=SC2086
        if [ $((r % 2)) = 1 ]; then ours "$m" "$r" $ropt; theirs "$m" "$r" $topt
        else theirs "$m" "$r" $topt; ours "$m" "$r" $ropt; fi
    done
done
python3 - "$out" "$reps" "$models" "$threads" "$before" <<'PY'
import json, statistics, sys
d, reps, models, threads, before = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4], sys.argv[5]
print(f"# one rank, {threads} threads, median step over {reps} repeats (each the median of its steps)")
if before:
    print(f"# before: {before}; gemm ms: the report's time_s.gemm (wall time inside the GEMM calls per step)")
print(f"{'model':<8} {'params rs':>10} {'params pt':>10} {'ringside ms':>12} {'pytorch ms':>11} {'torch/ringside':>15}"
      + (f" {'before ms':>10} {'torch/before':>13} {'gemm ms':>8} {'gemm before':>12}" if before else ""))
for m in models:
    rs = [json.load(open(f"{d}/{m}-{r}.json")) for r in range(1, reps + 1)]
    pt = [open(f"{d}/{m}-{r}.torch").read().split() for r in range(1, reps + 1)]
    rstep = statistics.median(r["ranks"][0]["time_s"]["step"]["median"] for r in rs)
    pstep = statistics.median(float(p[2]) for p in pt)
    rparams = rs[0]["ranks"][0]["memory"]["by_tag"]["params"] // 4
    line = f"{m:<8} {rparams:>10,} {int(pt[0][6]):>10,} {1e3 * rstep:>12.2f} {1e3 * pstep:>11.2f} {pstep / rstep:>15.2f}"
    if before:
        bs = [json.load(open(f"{d}/{m}-{r}.before.json")) for r in range(1, reps + 1)]
        bstep = statistics.median(r["ranks"][0]["time_s"]["step"]["median"] for r in bs)
        gemm = lambda runs: statistics.median(r["ranks"][0]["time_s"]["gemm"] for r in runs)
        line += f" {1e3 * bstep:>10.2f} {pstep / bstep:>13.2f} {1e3 * gemm(rs):>8.2f} {1e3 * gemm(bs):>12.2f}"
    print(line)
print(f"# the pairs (one repeat's ringside and PyTorch back to back, the first of the two alternating): torch/ringside")
for m in models:
    pairs = []
    for r in range(1, reps + 1):
        rep = json.load(open(f"{d}/{m}-{r}.json"))["ranks"][0]["time_s"]["step"]["median"]
        pairs.append(float(open(f"{d}/{m}-{r}.torch").read().split()[2]) / rep)
    print(f"{m:<8} " + " ".join(f"{x:.2f}" for x in pairs) + f"   median {statistics.median(pairs):.2f} "
          f"({min(pairs):.2f}-{max(pairs):.2f})")
PY
