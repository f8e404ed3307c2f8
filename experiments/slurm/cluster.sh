#!/usr/bin/env bash
# cluster.sh - a Slurm cluster of several nodes on one machine: each node a network and UTS namespace on a bridge, with its own address, hostname and slurmd; slurmctld and munge beside them
#
#   experiments/slurm/cluster.sh up DIR [NODES]     # NODES nodes (default 3): node0 .. node{N-1}
#   experiments/slurm/cluster.sh run DIR CMD...     # CMD where the controller is: srun, sbatch, sinfo, ringside matrix
#   experiments/slurm/cluster.sh exec DIR NODE CMD... # CMD inside node NODE's namespaces (its hostname, its address)
#   experiments/slurm/cluster.sh kill DIR NODE      # NODE lost: SIGKILL to its slurmd and everything it runs
#   experiments/slurm/cluster.sh revive DIR NODE    # NODE back: its slurmd started again, idle once it registers
#   experiments/slurm/cluster.sh shape DIR RATE|off # every node's link to the bridge limited to RATE each way (tc tbf: 100mbit, 1gbit)
#   experiments/slurm/cluster.sh mark DIR [NAME]    # every node's link counters now, kept as NAME (default job) for bytes
#   experiments/slurm/cluster.sh bytes DIR NODE [NAME] # bytes NODE's link has sent and received since mark NAME (without one: since up): "SENT RECEIVED"
#   experiments/slurm/cluster.sh down DIR           # every process of the cluster stopped, the namespaces gone
#
# Run it as root, or with sudo in front of each line above (root: namespaces, a bridge). Needs
# iproute2, util-linux's unshare, Slurm (slurmctld, slurmd, srun...) and munge: `make deps-slurm`.
# Everything lives in DIR (configuration, keys, spool, state, marks, logs:
# `DIR/log/slurmd-node1.log` and so on) and on a bridge of its own with addresses 10.79.S.x
# (S from DIR's name), so that the cluster sends traffic only to addresses it made; `down` removes
# it all. The controller (slurmctld, and the commands `run` starts) lives in a namespace of its own
# on the same bridge, at 10.79.S.1; node i is at 10.79.S.(i+2). Every node shares this machine's
# file system, as a cluster's nodes share theirs: submit from the repository's root.
#
# `up` waits (CLUSTER_UP_S, default 30 s) for every node to be idle and prints "cluster up: ..."; on
# failure it prints "cluster.sh: error: ..." naming the daemon that did not come up (its log's last
# lines), stops what it started and exits 3 (2 for a missing tool or bad arguments).
set -uo pipefail

die() { echo "cluster.sh: error: $*" >&2; exit "${2:-2}"; }
usage() { sed -n '3,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 2 ] || usage
op=$1 D=$2; shift 2
case "$op" in up|down|run|exec|kill|revive|shape|mark|bytes) ;; *) usage ;; esac
[ "$(id -u)" = 0 ] || die "needs root (network namespaces and a bridge): run it as root, or with sudo"

sbin() { command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; }; }
tag() { echo "rsc$(basename "$D" | cksum | cut -c1-5)"; }   # the namespaces' and links' prefix: short, per DIR
subnet() { echo "10.79.$(( $(basename "$D" | cksum | cut -d' ' -f1) % 200 + 20 ))"; }
node_ns() { # NODE: sets ns to node NODE's namespace (node1 or 1), or dies naming it
    ns="$(tag)n${1#node}"
    ip netns list | awk '{print $1}' | grep -qx "$ns" || die "$D: no node $1"
}

# Every process in the cluster's namespaces, then the namespaces and the bridge.
cluster_down() {
    local t; t=$(tag)
    if [ -f "$D/pids" ]; then
        while read -r p; do kill -TERM "$p" 2>/dev/null; done <"$D/pids"
        sleep 0.5
        while read -r p; do kill -KILL "$p" 2>/dev/null; done <"$D/pids"
    fi
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$t"); do
        ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
        ip netns del "$ns" 2>/dev/null
    done
    rm -f "$D/pids"
}

if [ "$op" = down ]; then
    [ -d "$D" ] || die "$D: no such cluster folder"
    cluster_down
    echo "cluster down: $D"
    exit 0
fi

if [ "$op" = kill ]; then
    [ $# -ge 1 ] || usage
    node_ns "$1"
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    echo "node lost: $1 ($(echo $pids | wc -w) processes killed)"
    exit 0
fi

if [ "$op" = revive ]; then
    [ $# -ge 1 ] && [ -f "$D/slurm.conf" ] || usage
    i=${1#node}
    node_ns "$1"
    SLURMD=$(sbin slurmd)
    nsenter --net="/run/netns/$ns" unshare --uts sh -c "hostname node$i && exec '$SLURMD' -D -f '$D/slurm.conf' -N node$i" \
        >>"$D/log/slurmd-node$i.out" 2>&1 &
    echo $! >>"$D/pids"
    for _ in $(seq 60); do
        st=$(ip netns exec "$(tag)ctl" env SLURM_CONF="$D/slurm.conf" timeout 5 sinfo -h -n "node$i" -o %t 2>/dev/null)
        [ "$st" = idle ] && { echo "node back: node$i"; exit 0; }
        sleep 0.5
    done
    die "node$i not idle 30 s after its slurmd started again (state '${st:-none}')" 3
fi

# The network between nodes made slow (what crosses nodes goes over the bridge; what stays in a node
# never touches it): a token bucket at RATE on both ends of every node's link, so each node sends
# and receives at most RATE. `off` removes them.
if [ "$op" = shape ]; then
    [ $# -ge 1 ] && [ -f "$D/slurm.conf" ] || usage
    rate=$1 t=$(tag)
    [ "$rate" = off ] || [[ "$rate" =~ ^[0-9]+(\.[0-9]+)?[kmg]?bit$ ]] || die "RATE '$rate': expected a tc rate such as 100mbit or 1gbit, or off"
    for ns in $(ip netns list | awk '{print $1}' | grep "^${t}n[0-9]*$"); do
        ip netns exec "$ns" tc qdisc del dev "${ns}e" root 2>/dev/null
        ip netns exec "${t}sw" tc qdisc del dev "${ns}p" root 2>/dev/null
        [ "$rate" = off ] && continue
        # a queue of about 50 ms at RATE (at least 32 KB), as a switch port's buffer
        ip netns exec "$ns" tc qdisc add dev "${ns}e" root tbf rate "$rate" burst 32kb latency 50ms 2>/dev/null &&
            ip netns exec "${t}sw" tc qdisc add dev "${ns}p" root tbf rate "$rate" burst 32kb latency 50ms 2>/dev/null ||
            die "tc tbf on node${ns##*n}'s link failed (no tbf queueing discipline in this kernel?)" 3
    done
    echo "links: ${rate/off/unshaped} (every node's link to the bridge, each way)"
    exit 0
fi

# A node's link counters (its end of the veth: what it sent to the bridge, what it got from it), as
# the kernel counts them since `up`, or since a mark: `mark` keeps every node's, so that one job's
# bytes are the difference (DIR/marks/NAME: a line "nodeK SENT RECEIVED" per node).
counters() { # NAMESPACE: "SENT RECEIVED"
    echo "$(ip netns exec "$1" cat "/sys/class/net/${1}e/statistics/tx_bytes") $(ip netns exec "$1" cat "/sys/class/net/${1}e/statistics/rx_bytes")"
}
if [ "$op" = mark ]; then
    [ -f "$D/slurm.conf" ] || die "$D: no cluster here (cluster.sh up $D first)"
    name=${1:-job}
    [[ "$name" =~ ^[A-Za-z0-9_.-]+$ ]] || die "mark NAME '$name': letters, digits, '_', '.' and '-' only"
    mkdir -p "$D/marks" || die "cannot make $D/marks"
    t=$(tag)
    for ns in $(ip netns list | awk '{print $1}' | grep "^${t}n[0-9]*$" | sort -V); do
        echo "node${ns##*n} $(counters "$ns")"
    done >"$D/marks/$name.tmp" && mv "$D/marks/$name.tmp" "$D/marks/$name" || die "cannot write $D/marks/$name"
    echo "mark $name: $(wc -l <"$D/marks/$name") nodes' link counters"
    exit 0
fi
if [ "$op" = bytes ]; then
    [ $# -ge 1 ] || usage
    node_ns "$1"
    now=$(counters "$ns")
    if [ $# -ge 2 ]; then
        [ -f "$D/marks/$2" ] || die "no mark '$2' in $D (cluster.sh mark $D $2 first)"
        read -r s0 r0 < <(awk -v n="node${ns##*n}" '$1 == n {print $2, $3}' "$D/marks/$2")
        [ -n "${s0:-}" ] || die "mark '$2' has no counters of node${ns##*n} (taken before it was there?)"
        read -r s1 r1 <<<"$now"
        [ "$s1" -ge "$s0" ] && [ "$r1" -ge "$r0" ] || die "node${ns##*n}'s counters went back since mark '$2' (the cluster came up again?)" 3
        echo "$((s1 - s0)) $((r1 - r0))"
    else
        echo "$now"
    fi
    exit 0
fi

if [ "$op" = run ] || [ "$op" = exec ]; then
    [ -f "$D/slurm.conf" ] || die "$D: no cluster here (cluster.sh up $D first)"
    ns="$(tag)ctl"
    if [ "$op" = exec ]; then
        [ $# -ge 2 ] || usage
        node_ns "$1"; shift
    fi
    if [ "$op" = exec ]; then h="node${ns##*n}"; else h=ctl; fi
    exec nsenter --net="/run/netns/$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$h" env SLURM_CONF="$D/slurm.conf" "$@"
fi

# ---- up ---------------------------------------------------------------------------------------------
N=${1:-3}
[[ "$N" =~ ^[0-9]+$ ]] && [ "$N" -ge 1 ] && [ "$N" -le 16 ] || die "NODES '$N': expected 1..16"
MUNGED=$(sbin munged) SLURMCTLD=$(sbin slurmctld) SLURMD=$(sbin slurmd)
for c in MUNGED SLURMCTLD SLURMD; do [ -n "${!c}" ] || die "Slurm is not installed (no ${c,,}; make deps-slurm)"; done
for c in ip unshare nsenter srun sinfo scontrol munge unmunge; do command -v "$c" >/dev/null || die "no $c (make deps-slurm; iproute2, util-linux)"; done
mkdir -p "$D" || die "cannot make $D"
D=$(cd "$D" && pwd)
[ ! -f "$D/pids" ] || die "$D holds a cluster already (cluster.sh down $D)"
t=$(tag) net=$(subnet)
fail() { # WHAT LOG: names the daemon and its log's last lines, stops everything, exit 3
    echo "cluster.sh: error: $1${2:+: $(grep -v '^\s*$' "$2" 2>/dev/null | tail -n 3 | tr '\n' ' ')}" >&2
    cluster_down
    exit 3
}
chmod 755 "$D"
mkdir -p "$D/key" "$D/run" "$D/state" "$D/spool" "$D/log"
chmod 700 "$D/key"; chmod 755 "$D/run"
: >"$D/pids"

# the bridge in a namespace of its own; the controller's and every node's namespace on it
ip netns add "${t}sw" 2>/dev/null || fail "cannot create network namespaces"
ip -n "${t}sw" link add br0 type bridge && ip -n "${t}sw" link set br0 up || fail "no bridge support"
attach() { # NAMESPACE ADDRESS
    ip netns add "$1" || return 1
    ip link add "$1e" type veth peer name "$1p" || return 1
    ip link set "$1e" netns "$1" && ip link set "$1p" netns "${t}sw" || return 1
    ip -n "$1" addr add "$2/24" dev "$1e" && ip -n "$1" link set "$1e" up && ip -n "$1" link set lo up || return 1
    ip -n "${t}sw" link set "$1p" master br0 && ip -n "${t}sw" link set "$1p" up
}
attach "${t}ctl" "$net.1" || fail "cannot attach the controller's namespace"
for ((i = 0; i < N; i++)); do attach "${t}n$i" "$net.$((i + 2))" || fail "cannot attach node$i's namespace"; done

# munge: its socket a file, reachable from every namespace
if command -v mungekey >/dev/null; then mungekey --create --keyfile="$D/key/munge.key" >"$D/log/mungekey.out" 2>&1
else dd if=/dev/urandom of="$D/key/munge.key" bs=1 count=1024 2>/dev/null; fi
chmod 600 "$D/key/munge.key"
SOCK="$D/run/munge.socket"
"$MUNGED" -F --key-file="$D/key/munge.key" --socket="$SOCK" --pid-file="$D/run/munged.pid" --seed-file="$D/key/seed" \
    --log-file="$D/log/munged.log" >"$D/log/munged.out" 2>&1 &
echo $! >>"$D/pids"
for _ in $(seq 50); do munge -n -S "$SOCK" 2>/dev/null | unmunge -S "$SOCK" >/dev/null 2>&1 && break; sleep 0.2; done
munge -n -S "$SOCK" 2>/dev/null | unmunge -S "$SOCK" >/dev/null 2>&1 || fail "munged did not start in 10 s" "$D/log/munged.log"

CPUS=${CLUSTER_CPUS:-4}   # per node: ranks per node, whatever the machine (OverSubscribe)
nodes="node[0-$((N - 1))]"
{
    echo "# $N nodes on one machine, each a namespace at $net.(i+2); the controller at $net.1; everything in $D"
    echo "ClusterName=ringside"
    echo "SlurmctldHost=ctl($net.1)"
    echo "SlurmctldPort=6817"
    echo "SlurmdPort=6818"
    echo "SlurmUser=$(id -un)"
    echo "SlurmdUser=$(id -un)"
    echo "AuthType=auth/munge"
    echo "CredType=cred/munge"
    echo "AuthInfo=socket=$SOCK"
    echo "StateSaveLocation=$D/state"
    echo "SlurmdSpoolDir=$D/spool/%n"
    echo "SlurmctldPidFile=$D/run/slurmctld.pid"
    echo "SlurmdPidFile=$D/run/slurmd-%n.pid"
    echo "SlurmctldLogFile=$D/log/slurmctld.log"
    echo "SlurmdLogFile=$D/log/slurmd-%n.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_Core"
    echo "AccountingStorageType=accounting_storage/none"
    echo "JobCompType=jobcomp/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "MpiDefault=none"
    echo "SwitchType=switch/none"
    echo "ReturnToService=2"
    echo "InactiveLimit=0"
    echo "KillWait=5"
    echo "SlurmdTimeout=10"
    echo "MessageTimeout=5"
    echo "SlurmdParameters=config_overrides"
    for ((i = 0; i < N; i++)); do echo "NodeName=node$i NodeAddr=$net.$((i + 2)) NodeHostname=node$i CPUs=$CPUS State=UNKNOWN"; done
    echo "PartitionName=ringside Nodes=$nodes Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES"
} >"$D/slurm.conf"
export SLURM_CONF="$D/slurm.conf"
for ((i = 0; i < N; i++)); do mkdir -p "$D/spool/node$i"; done

# nsenter, not `ip netns exec`: the latter remounts /sys, and slurmd wants the machine's cgroups there
innet() { local ns=$1; shift; nsenter --net="/run/netns/$ns" "$@"; }
innet "${t}ctl" unshare --uts sh -c "hostname ctl && exec '$SLURMCTLD' -D -f '$SLURM_CONF'" >"$D/log/slurmctld.out" 2>&1 &
echo $! >>"$D/pids"
for ((i = 0; i < N; i++)); do
    # its own hostname (a UTS namespace), so that what runs there, and its report, names the node
    innet "${t}n$i" unshare --uts sh -c "hostname node$i && exec '$SLURMD' -D -f '$SLURM_CONF' -N node$i" \
        >"$D/log/slurmd-node$i.out" 2>&1 &
    echo $! >>"$D/pids"
done
UP_S=${CLUSTER_UP_S:-30}
t0=$SECONDS
while :; do
    while read -r p; do kill -0 "$p" 2>/dev/null || fail "a daemon exited at start (pid $p)" "$D/log/slurmctld.log"; done <"$D/pids"
    idle=$(ip netns exec "${t}ctl" timeout 5 sinfo -h -N -o '%N %t' 2>/dev/null | grep -c ' idle$')
    [ "$idle" = "$N" ] && break
    if [ $((SECONDS - t0)) -ge "$UP_S" ]; then
        down=""
        for ((i = 0; i < N; i++)); do
            ip netns exec "${t}ctl" timeout 5 sinfo -h -n "node$i" -o %t 2>/dev/null | grep -q '^idle' || down="$down node$i"
        done
        first=${down# }
        fail "not every node idle in $UP_S s (not:$down)" "$D/log/slurmd-${first%% *}.log"
    fi
    sleep 0.5
done
echo "cluster up: $N nodes ($nodes at $net.2..$net.$((N + 1)), $CPUS CPUs each), the controller at $net.1, in $((SECONDS - t0)) s; $D"
