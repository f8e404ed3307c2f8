#!/usr/bin/env bash
# multihost.sh - ring and ps across network namespaces joined by veth pairs: each namespace stands for a host, TCP between them
# Needs root and iproute2; skips (last line "SKIP: ...") where namespaces cannot be made. Sends traffic only to
# the 10.77.x addresses it gives its own namespaces, and removes them when done, failed or interrupted.
. "$(dirname "$0")/lib.sh"
BIN=$(readlink -f "$BIN")
tag=rs$$; sw=${tag}sw; net=10.77.$(( $$ % 200 + 20 ))
hosts=()
cleanup() {
    for h in "${hosts[@]}"; do ip netns pids "$h" 2>/dev/null | xargs -r kill -9 2>/dev/null; ip netns del "$h" 2>/dev/null; done
    ip netns del "$sw" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT INT TERM
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! ip netns add "$sw" 2>/dev/null; then
    echo "SKIP: cannot create network namespaces here (needs root and iproute2)"; exit 0
fi
ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up || { echo "SKIP: no bridge support"; exit 0; }
# host i: namespace ${tag}h$i, address $net.(i+1), a veth to the bridge
for i in 0 1 2 3; do
    h=${tag}h$i; hosts+=("$h"); ip netns add "$h"
    ip link add "${tag}e$i" type veth peer name "${tag}p$i"
    ip link set "${tag}e$i" netns "$h"; ip link set "${tag}p$i" netns "$sw"
    ip -n "$h" addr add "$net.$((i+1))/24" dev "${tag}e$i"
    ip -n "$h" link set "${tag}e$i" up; ip -n "$h" link set lo up
    ip -n "$sw" link set "${tag}p$i" master br0; ip -n "$sw" link set "${tag}p$i" up
done
MASTER=$net.1; PORT=29500; TOKEN=0123456789abcdef0123456789abcdef
SMALL="--layers 784,64,10 --train-samples 1024 --eval-samples 64 --device cpu --quiet"

# run_job NAME NWORKERS "OPTIONS" [SERVERS]: worker i in host i, dedicated server k in host 3
run_job() {
    local name=$1 n=$2 opts=$3 servers=${4:-0} pids=() rc=0
    for ((i = 0; i < n; i++)); do
        ip netns exec "${tag}h$i" env RANK=$i WORLD_SIZE=$n LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=$MASTER \
            MASTER_PORT=$PORT RINGSIDE_JOB_TOKEN=$TOKEN RINGSIDE_SERVERS=$servers \
            timeout 60 "$BIN" train $SMALL $opts --report "$T/$name.json" >"$T/$name.$i.log" 2>&1 &
        pids+=($!)
    done
    for ((k = 0; k < servers; k++)); do
        ip netns exec "${tag}h3" env RINGSIDE_ROLE=server RINGSIDE_SERVER_ID=$k WORLD_SIZE=$n MASTER_ADDR=$MASTER \
            MASTER_PORT=$PORT RINGSIDE_JOB_TOKEN=$TOKEN RINGSIDE_SERVERS=$servers \
            timeout 60 "$BIN" train $SMALL $opts --report "$T/$name.json" >"$T/$name.s$k.log" 2>&1 &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    PORT=$((PORT + 1))
    return $rc
}

# each rank binds on its own host's address: the report shows every rank, the traffic crossed the bridge
check_report() { $PY - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); n = int(sys.argv[2])
w = [k for k in r["ranks"] if k.get("role", "worker") == "worker"]
ok = len(w) == n and all(k["traffic"]["bytes_sent"] > 0 for k in w) and r["summary"]["final_loss"] > 0
sys.exit(0 if ok else 1)
PY
}
run_job ring3 3 "--sync ring --steps 20" && check_report "$T/ring3.json" 3 && ok "ring over 3 hosts" || bad "ring over 3 hosts" "$(tail -n 3 $T/ring3.*.log)"
run_job ps3 3 "--sync ps --steps 20" && check_report "$T/ps3.json" 3 && ok "ps colocated over 3 hosts" || bad "ps colocated over 3 hosts" "$(tail -n 3 $T/ps3.*.log)"
run_job psd 3 "--sync ps --ps-placement dedicated --steps 20" 1 && check_report "$T/psd.json" 3 \
    && ok "ps with a dedicated server on a 4th host" || bad "ps dedicated over 4 hosts" "$(tail -n 3 $T/psd.*.log)"

# a host that drops off the network mid-run: every process ends within timeout + 5 s, naming the lost rank
( sleep 3; ip -n "${tag}h2" link set "${tag}e2" down ) &
t0=$(date +%s)
run_job cut 3 "--sync ring --steps 100000 --timeout 3"; rc=$?
t1=$(date +%s)
ip -n "${tag}h2" link set "${tag}e2" up
if [ $rc != 0 ] && [ $((t1 - t0 - 3)) -le 8 ] && grep -q "rank" "$T"/cut.*.log && [ ! -e "$T/cut.json" ]; then
    ok "unreachable host: job ended in $((t1 - t0 - 3)) s after the cut ($(grep -h -m1 -o 'no data from rank [0-9]*\|rank [0-9]* did not[^(]*' "$T"/cut.*.log | head -n1))"
else
    bad "unreachable host" "rc $rc after $((t1 - t0)) s: $(tail -n 2 "$T"/cut.*.log)"
fi

# a slow, lossy link into host 1: runs finish slower, with the same result. netem (delay 5 ms, loss 1 %)
# where the kernel has it; otherwise a token bucket (tbf) whose rate and short queue make the delay
# and tail-drop loss of a congested link. The shaped run must match the unshaped one's loss exactly.
final_loss() { $PY -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))["summary"]["final_loss"]))' "$1"; }
dev=${tag}e1
shape() { ip netns exec "${tag}h1" tc qdisc add dev "$dev" root "$@" 2>/dev/null; }
unshape() { ip netns exec "${tag}h1" tc qdisc del dev "$dev" root 2>/dev/null; }
if shape netem delay 5ms loss 1%; then
    shaping="netem delay 5 ms, loss 1 %"; qdisc="netem delay 5ms loss 1%"
elif shape tbf rate 20mbit burst 16kb limit 15kb; then
    shaping="tbf 20 Mbit/s, 15 KB queue: no netem in this kernel"; qdisc="tbf rate 20mbit burst 16kb limit 15kb"
else
    shaping=""
fi
unshape
if [ -n "$shaping" ]; then
    for s in ring ps; do
        t0=$(date +%s%N); run_job "fast$s" 3 "--sync $s --steps 20"; t1=$(date +%s%N)
        shape $qdisc
        t2=$(date +%s%N); run_job "slow$s" 3 "--sync $s --steps 20"; rc=$?; t3=$(date +%s%N)
        drops=$(ip netns exec "${tag}h1" tc -s qdisc show dev "$dev" | grep -o 'dropped [0-9]*' | head -n1 | cut -d' ' -f2)
        unshape
        fast=$(( (t1 - t0) / 1000000 )); slow=$(( (t3 - t2) / 1000000 ))
        if [ $rc = 0 ] && check_report "$T/slow$s.json" 3 && [ "$(final_loss "$T/slow$s.json")" = "$(final_loss "$T/fast$s.json")" ]; then
            ok "$s over a slow, lossy link ($shaping): ${slow} ms vs ${fast} ms unshaped, ${drops:-?} packets dropped, same final loss"
        else
            bad "$s over a slow, lossy link ($shaping)" "rc $rc: $(tail -n 3 "$T"/slow$s.*.log)"
        fi
    done
    # a link too slow for the timeout: the job ends with the timeout error naming a rank, never hangs
    shape tbf rate 32kbit burst 4kb limit 8kb
    t0=$(date +%s); run_job crawl 3 "--sync ring --steps 20 --timeout 3"; rc=$?; t1=$(date +%s)
    unshape
    if [ $rc != 0 ] && [ $((t1 - t0)) -le 20 ] && grep -q "rank" "$T"/crawl.*.log && [ ! -e "$T/crawl.json" ]; then
        ok "a 32 kbit/s link with --timeout 3: ended in $((t1 - t0)) s ($(grep -h -o 'no data from rank [0-9]*\|rank [0-9]* did not[^(]*' "$T"/crawl.*.log | sort -u | paste -sd ";"))"
    else
        bad "a link too slow for the timeout" "rc $rc after $((t1 - t0)) s: $(tail -n 2 "$T"/crawl.*.log)"
    fi
else
    echo "skip slow link: this kernel has neither netem nor tbf queueing disciplines"
fi

# --link against the kernel's own shaping: the same job across hosts whose links a token bucket
# (tc tbf) limits to R each way (on the host's side of its veth and on the switch's), and on one
# host with --link R over TCP on the loopback: their comm_total per step agree within 25%
R=100mbit
shape_all() { # tbf at R both ways on hosts 0-2's links; 1 when tbf is missing
    for i in 0 1 2; do
        ip netns exec "${tag}h$i" tc qdisc add dev "${tag}e$i" root tbf rate $R burst 32kb latency 200ms 2>/dev/null || return 1
        ip netns exec "$sw" tc qdisc add dev "${tag}p$i" root tbf rate $R burst 32kb latency 200ms 2>/dev/null || return 1
    done
}
unshape_all() {
    for i in 0 1 2; do
        ip netns exec "${tag}h$i" tc qdisc del dev "${tag}e$i" root 2>/dev/null
        ip netns exec "$sw" tc qdisc del dev "${tag}p$i" root 2>/dev/null
    done
}
comm_per_step() { $PY -c '
import json, statistics, sys
r = json.load(open(sys.argv[1]))
print(statistics.mean(e["time_s"]["phases"]["comm_total"] for e in r["ranks"] if e.get("role") == "worker"))' "$1"; }
if shape_all; then
    unshape_all
    # a time on 2 shared cores can be one scheduling hiccup off (once: 41 ms a step across hosts
    # against 25 on one, where 3 runs in a row after agreed within 10%), so a pair that disagrees
    # is measured once more, and the check fails only when the second pair disagrees too
    for s in ring ps; do
        first=""
        for attempt in 1 2; do
            shape_all
            run_job "tbf$s" 3 "--sync $s --steps 20 --warmup 3"; rc=$?
            unshape_all
            timeout 120 "$BIN" train -n 3 --sync $s $SMALL --steps 20 --warmup 3 --link $R --transport tcp \
                --report "$T/emu$s.json" >"$T/emu$s.log" 2>&1; erc=$?
            if [ $rc != 0 ] || [ $erc != 0 ]; then
                bad "$s --link vs tbf" "rc $rc / $erc: $(tail -n 2 "$T"/tbf$s.*.log "$T/emu$s.log")"
                break
            fi
            a=$(comm_per_step "$T/tbf$s.json"); b=$(comm_per_step "$T/emu$s.json")
            if $PY -c "import sys; sys.exit(0 if abs($b - $a) <= 0.25 * $a else 1)"; then
                ok "$s: --link $R on one host ($(printf %.1f "$($PY -c "print($b*1e3)")") ms comm per step) agrees with tc tbf at $R across hosts ($(printf %.1f "$($PY -c "print($a*1e3)")") ms) within 25%${first:+ (second pair; the first: $first)}"
                break
            fi
            [ $attempt = 2 ] && bad "$s --link vs tbf" "comm per step: --link $b s, tbf $a s (more than 25% apart, twice; the first pair: $first)"
            first="--link $b s, tbf $a s"
        done
    done
else
    unshape_all
    echo "skip --link against tc: this kernel has no tbf queueing discipline"
fi
finish
