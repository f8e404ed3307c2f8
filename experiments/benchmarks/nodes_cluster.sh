#!/usr/bin/env bash
# nodes_cluster.sh - the flat and the hierarchical ring on 3 Slurm nodes of 2 ranks each (experiments/slurm/cluster.sh, links shaped by tc tbf) against the same runs under --nodes 3 --link on one host: ms a step, interleaved repeats, medians (docs/benchmarks.md)
# usage: experiments/benchmarks/nodes_cluster.sh [BIN]   as root, or with sudo (REPS=5 repeats, medians; RATE=100mbit; LAYERS=784,256,10; STEPS=30)
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=$(realpath "${1:-build/ringside}"); reps=${REPS:-5}; rate=${RATE:-100mbit}; layers=${LAYERS:-784,256,10}; steps=${STEPS:-30}
[ -x "$bin" ] || { echo "nodes_cluster.sh: error: $bin is not an executable (build it, or name it)" >&2; exit 2; }
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || { echo "nodes_cluster.sh: error: REPS '$reps': expected a count of 1 or more" >&2; exit 2; }
CL=experiments/slurm/cluster.sh
D=$(mktemp -d /tmp/ringside-nc-XXXXXX); out=$(mktemp -d)
trap 'bash $CL down "$D" >/dev/null 2>&1; rm -rf "$D" "$out"' EXIT
trap 'exit 143' TERM INT
for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
unset MASTER_ADDR MASTER_PORT RINGSIDE_JOB_TOKEN RINGSIDE_SERVERS
bash $CL up "$D" 3 || exit 3
bash $CL shape "$D" "$rate" || exit 3
TRAIN=(--sync ring --device cpu --layers "$layers" --steps "$steps" --warmup 3 --timeout 60 --quiet)
cluster() { # FLAG(flat|hier) REPORT: 6 tasks, 2 a node, under srun
    local h=(); [ "$1" = hier ] && h=(--nodes 3 --hierarchical)
    bash $CL mark "$D" job >/dev/null
    bash $CL run "$D" env MASTER_PORT=$((20000 + RANDOM % 20000)) RINGSIDE_JOB_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n') \
        timeout -k 5 300 srun --time=10 --kill-on-bad-exit=1 --overcommit -N 3 --ntasks-per-node 2 experiments/slurm/task.sh \
        "$bin" train "${TRAIN[@]}" "${h[@]}" --report "$2" >"$out/last.log" 2>&1 || return 1
    for n in 0 1 2; do bash $CL bytes "$D" node$n job; done | tr '\n' ' ' >"${2%.json}.link"
}
emulated() { # FLAG REPORT: 6 ranks on this host, 3 emulated nodes, each node's NIC at RATE
    local h=(); [ "$1" = hier ] && h=(--hierarchical)
    timeout -k 5 300 "$bin" train -n 6 --nodes 3 --link "$rate" "${TRAIN[@]}" "${h[@]}" --report "$2" >"$out/last.log" 2>&1
}
for ((k = 1; k <= reps; k++)); do # interleaved: a slow moment of the machine falls on both sides
    for a in flat hier; do
        for side in cluster emulated; do
            $side $a "$out/$side-$a-$k.json" || { echo "nodes_cluster.sh: $side $a (repeat $k) failed: $(tail -n 3 "$out/last.log")" >&2; exit 1; }
        done
    done
    echo "# repeat $k of $reps done" >&2
done
python3 - "$out" "$reps" "$rate" "$layers" <<'PY'
import json, statistics, sys
out, reps, rate, layers = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
med = statistics.median
print("%s, links %s, %d repeats (medians); ms a step: rank 0's median step; comm: comm_total a step, mean over ranks" % (layers, rate, reps))
print("| ring | cluster step (ms) | emulated step (ms) | cluster / emulated | cluster comm (ms) | emulated comm (ms) | network KB a step per node (report) | the links' KB a step, sent (node 0..2) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for a in ("flat", "hier"):
    step, comm = {"cluster": [], "emulated": []}, {"cluster": [], "emulated": []}
    net, wire = [[] for _ in range(3)], [[] for _ in range(3)]
    for k in range(1, reps + 1):
        for side in ("cluster", "emulated"):
            r = json.load(open("%s/%s-%s-%d.json" % (out, side, a, k)))
            step[side].append(r["summary"]["step_time_s"] * 1e3)
            comm[side].append(statistics.mean(e["time_s"]["phases"]["comm_total"] for e in r["ranks"]) * 1e3)
            if side == "cluster":  # the whole run's bytes (warm-up and the start's broadcast too) over its steps
                n_steps = r["summary"]["steps"]
                link = [int(x) for x in open("%s/%s-%s-%d.link" % (out, side, a, k)).read().split()]
                for n in range(3):
                    es = [e for e in r["ranks"] if e["host"] == "node%d" % n]
                    net[n].append(sum(e["traffic"]["by_link"]["network"]["bytes_sent"] for e in es) / n_steps / 1e3)
                    wire[n].append(link[2 * n] / n_steps / 1e3)
    c, e = med(step["cluster"]), med(step["emulated"])
    print("| %s | %.1f | %.1f | %.2f | %.1f | %.1f | %s | %s |" % (
        "flat" if a == "flat" else "hierarchical", c, e, c / e, med(comm["cluster"]), med(comm["emulated"]),
        " / ".join("%.0f" % med(x) for x in net), " / ".join("%.0f" % med(x) for x in wire)))
PY
