#!/usr/bin/env bash
# nodes_link.sh - the ring and the colocated ps on 3 Slurm nodes of 2 ranks each (experiments/slurm/cluster.sh), the network between nodes as fast as the machine and then limited by tc tbf: comm per step, what each rank put on the network, what the nodes' links counted (docs/benchmarks.md)
# usage: sudo experiments/benchmarks/nodes_link.sh [BIN]   (REPS=3 repeats, medians; RATE=100mbit; LAYERS=784,256,10)
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=$(realpath "${1:-build/ringside}"); reps=${REPS:-3}; rate=${RATE:-100mbit}; layers=${LAYERS:-784,256,10}
CL=experiments/slurm/cluster.sh
D=$(mktemp -d /tmp/ringside-nl-XXXXXX); out=$(mktemp -d)
trap 'bash $CL down "$D" >/dev/null 2>&1; rm -rf "$D" "$out"' EXIT
for v in $(env | sed -n 's/^\(SLURM_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
bash $CL up "$D" 3 || exit 3
job() { # SYNC REPORT
    bash $CL run "$D" env MASTER_PORT=$((20000 + RANDOM % 20000)) RINGSIDE_JOB_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n') \
        timeout -k 5 120 srun --time=5 --kill-on-bad-exit=1 --overcommit -N 3 --ntasks-per-node 2 experiments/slurm/task.sh \
        "$bin" train --sync "$1" --device cpu --layers "$layers" --steps 30 --warmup 3 --timeout 30 --quiet --report "$2"
}
for link in fast "$rate"; do
    if [ "$link" = fast ]; then bash $CL shape "$D" off >/dev/null; else bash $CL shape "$D" "$link" || exit 3; fi
    for s in ring ps; do
        for ((k = 1; k <= reps; k++)); do
            b=$(for n in 0 1 2; do bash $CL bytes "$D" node$n; done | tr '\n' ' ')
            job $s "$out/$link-$s-$k.json" || { echo "nodes_link.sh: $s under $link failed" >&2; exit 1; }
            a=$(for n in 0 1 2; do bash $CL bytes "$D" node$n; done | tr '\n' ' ')
            echo "$b" >"$out/$link-$s-$k.before"; echo "$a" >"$out/$link-$s-$k.after"
        done
    done
done
python3 - "$out" "$reps" "$rate" <<'PY'
import json, statistics, sys
out, reps, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3]
print("| links between nodes | sync | comm_total a step, rank 0..5 (ms) | network bytes a step, node 0..2 (report, KB) | the nodes' links (KB, sent) |")
print("| --- | --- | --- | --- | --- |")
for link in ("fast", rate):
    for s in ("ring", "ps"):
        comm, net, wire = [[] for _ in range(6)], [[] for _ in range(3)], [[] for _ in range(3)]
        for k in range(1, reps + 1):
            r = json.load(open("%s/%s-%s-%d.json" % (out, link, s, k)))
            steps = r["summary"]["steps"]
            b = [int(x) for x in open("%s/%s-%s-%d.before" % (out, link, s, k)).read().split()]
            a = [int(x) for x in open("%s/%s-%s-%d.after" % (out, link, s, k)).read().split()]
            for e in r["ranks"]:
                comm[e["rank"]].append(e["time_s"]["phases"]["comm_total"] * 1e3)
            for n in range(3):
                es = [e for e in r["ranks"] if e["host"] == "node%d" % n]
                net[n].append(sum(e["traffic"]["by_link"]["network"]["bytes_sent"] for e in es) / steps / 1e3)
                wire[n].append((a[2 * n] - b[2 * n]) / steps / 1e3)
        med = lambda xs: statistics.median(xs)
        print("| %s | %s | %s | %s | %s |" % (link, s, " / ".join("%.1f" % med(c) for c in comm),
              " / ".join("%.0f" % med(x) for x in net), " / ".join("%.0f" % med(x) for x in wire)))
PY
