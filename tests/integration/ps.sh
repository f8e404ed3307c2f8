#!/usr/bin/env bash
# ps.sh - the parameter server end to end: equivalence, memory balance, exact traffic, foreign messages, killed peers, bad --ps-servers, exact sums
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/../.." || exit 1
SMALL="--layers 64,128,10 --train-samples 2048 --eval-samples 256 --seed 3"

# ---- equivalence: N ranks scattering a global batch of 96 = one rank with a batch of 96 ---------
$BIN train -n 1 --sync ps --batch 96 --steps 30 $SMALL -q --report $T/one.json >$T/one.log 2>&1 \
    || bad "one rank, batch 96" "$(tail -n 3 $T/one.log)"
# same_curve NAME REPORT: summary.loss_curve within 1e-5 relative of the one-rank run, 30 steps
same_curve() {
    $PY - "$T/one.json" "$2" <<'EOF' >$T/cmp.log 2>&1 && ok "$1" || bad "$1" "$(cat $T/cmp.log)"
import json, sys
a = json.load(open(sys.argv[1]))["summary"]["loss_curve"]
b = json.load(open(sys.argv[2]))["summary"]["loss_curve"]
assert len(a) == len(b) == 30, (len(a), len(b))
worst = max(abs(x[1] - y[1]) / abs(x[1]) for x, y in zip(a, b))
assert worst <= 1e-5, "max relative difference %g" % worst
print("max relative difference %g" % worst)
EOF
}
for spec in "4 colocated 1" "3 dedicated 1" "3 dedicated 2" "2 dedicated 3" "5 colocated 1"; do
    set -- $spec
    $BIN train -n $1 --sync ps --ps-placement $2 --ps-servers $3 --global-batch 96 --steps 30 --bucket-mb 0.01 \
        $SMALL -q --report $T/eq-$1-$2-$3.json >$T/eq.log 2>&1 \
        && same_curve "equivalence: $1 ranks, $2, $3 server(s)" $T/eq-$1-$2-$3.json \
        || bad "equivalence: $1 ranks, $2, $3 server(s)" "$(tail -n 3 $T/eq.log)"
done

# ---- traffic: measured bytes equal the formulas exactly ----------------------------------------
# colocated: per step every other rank sends and receives P + nb*H, rank 0 (N-1) times that;
# dedicated: per step each worker moves P + nsl*H each way, rank 0 also K step sizes (H each);
# start: rank 0 hands the servers P (+ headers), the others pull; end (dedicated): one goodbye per server.
traffic_check() { # NAME REPORT
    $PY - "$2" <<'EOF' >$T/traffic.log 2>&1 && ok "$1" || bad "$1" "$(cat $T/traffic.log)"
import json, sys
r = json.load(open(sys.argv[1]))
c = r["config"]
get = lambda *names: next(c[n] for n in names if n in c)
S, N, K = r["summary"]["steps"], r["run"]["world"], int(get("ps_servers", "ps-servers"))
dedicated = get("ps_placement", "ps-placement") == "dedicated"
if not dedicated: K = 1
H = 56
workers = [e for e in r["ranks"] if e.get("role", "worker") == "worker"]
servers = [e for e in r["ranks"] if e.get("role") == "server"]
n = workers[0]["memory"]["by_tag"]["params"] // 4
per = max(1, int(float(get("bucket_mb", "bucket-mb")) * 1048576 / 4))
buckets, hi = [], n
while hi > 0:
    buckets.append((max(0, hi - per), hi)); hi -= per
rng = [(s * (n // K) + min(s, n % K), s * (n // K) + min(s, n % K) + n // K + (s < n % K)) for s in range(K)]
sl = [sum(1 for lo, hi in buckets if min(hi, b) > max(lo, a)) for a, b in rng]   # slices per server
nsl = sum(sl)
P = 4 * n
step = P + nsl * H
want = {}
if not dedicated:
    for w in range(1, N):
        want[w] = (S * step + H, (S + 1) * step)
    want[0] = ((N - 1) * want[1][1], (N - 1) * want[1][0]) if N > 1 else (0, 0)
else:
    for w in range(1, N):
        want[w] = (S * step + 2 * K * H, (S + 1) * step)
    want[0] = (S * step + S * K * H + step + K * H, S * step)
    for k, (a, b) in enumerate(rng):
        pk = 4 * (b - a) + sl[k] * H
        want[N + k] = ((N - 1) * pk + N * S * pk, N * S * pk + pk + (N - 1) * H + S * H + N * H)
bad = []
for e in r["ranks"]:
    got = (e["traffic"]["bytes_sent"], e["traffic"]["bytes_received"])
    if got != want[e["rank"]] or e["traffic"]["dropped"] != 0:
        bad.append("member %d: sent/received %s, want %s, dropped %d" % (e["rank"], got, want[e["rank"]], e["traffic"]["dropped"]))
assert len(servers) == (K if dedicated else 0), "servers in the report: %d" % len(servers)
assert not bad, "; ".join(bad)
print("exact: %s" % {k: v for k, v in sorted(want.items())})
EOF
}
for spec in "4 colocated 1 25" "3 colocated 1 0.01" "1 colocated 1 0.01" "3 dedicated 1 0.01" "4 dedicated 2 0.01" "2 dedicated 3 25"; do
    set -- $spec
    $BIN train -n $1 --sync ps --ps-placement $2 --ps-servers $3 --bucket-mb $4 --steps 12 $SMALL -q \
        --report $T/tr-$1-$2-$3.json >$T/tr.log 2>&1 \
        && traffic_check "traffic formula: $1 ranks, $2, $3 server(s), buckets of $4 MiB" $T/tr-$1-$2-$3.json \
        || bad "traffic: $1 ranks, $2, $3 server(s)" "$(tail -n 3 $T/tr.log)"
done

# ---- memory balance ------------------------------------------------------------------------------
$BIN train -n 4 --sync ps --steps 5 --layers 784,512,512,10 --train-samples 1024 --eval-samples 128 -q \
    --report $T/mem-c.json >$T/mem.log 2>&1 || bad "memory run colocated" "$(tail -n 3 $T/mem.log)"
$PY - $T/mem-c.json <<'EOF' >$T/m.log 2>&1 && ok "colocated: rank 0 carries the server ($(cat $T/m.log))" || bad "colocated memory" "$(cat $T/m.log)"
import json, sys
r = json.load(open(sys.argv[1]))["ranks"]
z, others = r[0]["memory"], [e["memory"] for e in r[1:]]
srv = z["by_tag"]["server"]
assert srv > 0 and all(o["by_tag"]["server"] == 0 for o in others), "server bytes %d" % srv
gap = z["peak_bytes"] - max(o["peak_bytes"] for o in others)
assert gap >= srv, "rank 0 %d, others %s, server %d" % (z["peak_bytes"], [o["peak_bytes"] for o in others], srv)
print("rank 0 %.1f MB, others %.1f MB, server %.1f MB" % (z["peak_bytes"] / 1e6, max(o["peak_bytes"] for o in others) / 1e6, srv / 1e6))
EOF
$BIN train -n 4 --sync ps --ps-placement dedicated --steps 5 --layers 784,512,512,10 --train-samples 1024 --eval-samples 128 -q \
    --report $T/mem-d.json >$T/mem.log 2>&1 || bad "memory run dedicated" "$(tail -n 3 $T/mem.log)"
$PY - $T/mem-d.json <<'EOF' >$T/m.log 2>&1 && ok "dedicated: workers balanced ($(cat $T/m.log))" || bad "dedicated memory" "$(cat $T/m.log)"
import json, sys
r = json.load(open(sys.argv[1]))["ranks"]
w = [e["memory"]["peak_bytes"] for e in r if e.get("role") == "worker"]
s = [e for e in r if e.get("role") == "server"]
assert len(w) == 4 and len(s) == 1, (len(w), len(s))
assert s[0]["device"] == "cpu" and s[0]["memory"]["by_tag"]["server"] > 0
assert max(w) <= 1.05 * min(w), w
print("workers %s MB, server %.1f MB" % ([round(x / 1e6, 1) for x in w], s[0]["memory"]["peak_bytes"] / 1e6))
EOF

# ---- a foreign process talks to the server: without the job token it is refused in the handshake
# (net/gate.h: nothing of it reaches the server); with the token but garbage and another job's
# wire token, every message is dropped and counted; the job finishes correctly either way -------
cat >$T/foreign.c <<'EOF'
/* foreign.c - a stranger on the server's port: garbage frames and well-formed messages with another job's token (argv[2]: the job token to present in the handshake, if any) */
#include <stdio.h>
#include <string.h>
#include <zmq.h>
#include "ps/wire.h"
int main(int argc, char **argv) {
    void *ctx = zmq_ctx_new();
    int sent = 0, linger = 3000;
    const char *ids[2] = {NULL, "w99"};
    for (int i = 0; i < 2; i++) {
        void *s = zmq_socket(ctx, ZMQ_DEALER);
        zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
        if (ids[i]) zmq_setsockopt(s, ZMQ_ROUTING_ID, ids[i], strlen(ids[i]));
        if (argc > 2) { /* PLAIN with the job token: admitted by the gate, then judged by its messages */
            zmq_setsockopt(s, ZMQ_PLAIN_USERNAME, "stranger", 8);
            zmq_setsockopt(s, ZMQ_PLAIN_PASSWORD, argv[2], strlen(argv[2]));
        }
        if (zmq_connect(s, argv[1])) return 1;
        sent += zmq_send(s, "garbage", 7, 0) == 7;
        zmq_send(s, "a", 1, ZMQ_SNDMORE); zmq_send(s, "b", 1, ZMQ_SNDMORE); sent += zmq_send(s, "c", 1, 0) == 1;
        for (int op = WIRE_INIT; op < WIRE_NOPS; op++)
            for (int dt = WIRE_F32; dt <= WIRE_F16; dt++) { /* every dtype, the 16-bit wires' too */
                if (dt == WIRE_TEXT) continue;
                WireHeader h = wire_header(wire_token("not-this-job"), (WireOp)op);
                h.count = 4;
                h.total = 4;
                h.dtype = (uint16_t)dt;
                unsigned char b[WIRE_HEADER_BYTES];
                float x[4] = {1e30f, -1e30f, 1e30f, -1e30f};
                size_t len = 4 * wire_dtype_bytes(dt);
                wire_encode(&h, b);
                zmq_send(s, b, sizeof b, ZMQ_SNDMORE);
                sent += zmq_send(s, x, len, 0) == (int)len;
            }
        zmq_close(s);
    }
    zmq_ctx_term(ctx);
    printf("%d\n", sent);
    return 0;
}
EOF
if cc -I. -o $T/foreign $T/foreign.c ps/wire.c $(pkg-config --cflags --libs libzmq) 2>$T/cc.log; then
    tok=0123456789abcdef0123456789abcdef
    RINGSIDE_JOB_TOKEN=$tok $BIN train -n 3 --sync ps --steps 1500 $SMALL --report $T/f.json >$T/f.log 2>&1 & L=$!
    ep=""
    for i in $(seq 1 100); do ep=$(grep -o 'listening on tcp://[^ |]*' $T/f.log | head -n1 | cut -d' ' -f3); [ -n "$ep" ] && break; sleep 0.1; done
    $T/foreign "$ep" >$T/n0 2>&1 & F0=$! # no token: refused in the handshake (it lingers 3 s on what it queued)
    n=$($T/foreign "$ep" "$tok" 2>&1)    # the token: in, and every message dropped
    wait $F0; n0=$(cat $T/n0)
    # a raw TCP peer speaking no ZeroMQ at all
    $PY -c "import socket,sys; h,p=sys.argv[1].rsplit(':',1); s=socket.create_connection((h[6:],int(p))); s.sendall(b'\xff'*64+b'GET / HTTP/1.0\r\n\r\n'); s.close()" "$ep" 2>/dev/null
    wait $L; rc=$?
    $PY - $T/f.json "$n" "$rc" "$n0" <<'EOF' >$T/fc.log 2>&1 && ok "foreign messages: none without the token, all dropped and counted with it ($(cat $T/fc.log))" || bad "foreign messages" "$(cat $T/fc.log; tail -n 5 $T/f.log)"
import json, sys
assert sys.argv[3] == "0", "job exit %s" % sys.argv[3]
r = json.load(open(sys.argv[1]))
n = int(sys.argv[2])
d = r["ranks"][0]["traffic"]["dropped"]
assert n > 0 and int(sys.argv[4]) > 0 and d == n, "sent %d with the token and %s without, rank 0 dropped %d" % (n, sys.argv[4], d)
assert all(e["traffic"]["dropped"] == 0 for e in r["ranks"][1:])
lc = r["summary"]["loss_curve"]
assert lc[-1][1] < lc[0][1] and all(x[1] == x[1] and abs(x[1]) < 100 for x in lc), "loss curve %s .. %s" % (lc[0], lc[-1])
print("%s queued without the token, none arrived; %d dropped" % (sys.argv[4], d))
EOF
else
    bad "foreign sender builds" "$(cat $T/cc.log)"
fi

# ---- a worker killed mid-run: everything ends within timeout + 5 s, non-zero ----------------------
kill_test() { # NAME VICTIM(rank|server) ARGS...
    local name=$1 victim=$2; shift 2
    $BIN train "$@" --sync ps --steps 1000000 $SMALL --timeout 3 -q --report $T/k.json >$T/k.log 2>&1 & L=$!
    sleep 2
    local pid=""
    for p in $(pgrep -P $L); do
        if [ "$victim" = server ]; then grep -qz '^RINGSIDE_ROLE=server$' /proc/$p/environ 2>/dev/null && pid=$p
        else grep -qz "^RANK=$victim\$" /proc/$p/environ 2>/dev/null && pid=$p; fi
    done
    [ -n "$pid" ] || { bad "$name" "no process for $victim"; kill $L; wait $L; return; }
    local t0=$(date +%s.%N); kill -9 $pid
    wait $L; local rc=$?; local t1=$(date +%s.%N)
    local took=$($PY -c "print(round($t1 - $t0, 1))") left=$(pgrep -P $L | wc -l)
    $PY -c "import sys; sys.exit(0 if $took <= 3 + 5 else 1)" && [ $rc != 0 ] && [ "$left" = 0 ] && [ ! -e $T/k.json ] \
        && ok "$name: exit $rc after $took s" || bad "$name" "exit $rc after $took s, $left left: $(tail -n 3 $T/k.log)"
}
kill_test "colocated, rank 2 killed" 2 -n 3
kill_test "dedicated, rank 1 killed" 1 -n 3 --ps-placement dedicated --ps-servers 2
kill_test "dedicated, a server killed" server -n 2 --ps-placement dedicated

# without a supervising launcher the server names the missing rank (or, killed between its push
# and the reply, the rank its reply cannot reach)
port=$(free_port)
for r in 0 1 2; do
    RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port RINGSIDE_JOB_TOKEN=abcd0123abcd0123 \
        $BIN train --sync ps --steps 1000000 $SMALL --timeout 3 -q --report $T/z.json >$T/z$r.log 2>&1 &
    eval "q$r=$!"
done
sleep 2; t0=$(date +%s); kill -9 $q2; wait $q2 2>/dev/null
wait $q0; r0=$?; wait $q1; r1=$?; t1=$(date +%s)
grep -qE "no push from rank 2 for step [0-9]+ within 3 s|to rank 2: it is gone" $T/z0.log && [ $r0 = 3 ] && [ $r1 = 3 ] && [ $((t1 - t0)) -le 8 ] \
    && ok "unsupervised: rank 0's server names rank 2, all exit 3 in $((t1 - t0)) s" \
    || bad "unsupervised kill" "exit $r0/$r1 after $((t1 - t0)) s: $(tail -n 2 $T/z0.log $T/z1.log)"

# ---- bad --ps-servers --------------------------------------------------------------------------------
expect_status "--ps-servers 2 colocated is refused" 2 $BIN train -n 2 --sync ps --ps-servers 2 $SMALL --steps 2 -q --report $T/b.json
grep -q "needs --ps-placement dedicated" $T/last.log && ok "colocated refusal says why" || bad "colocated refusal says why" "$(cat $T/last.log)"
expect_status "--ps-servers 7 over 6 parameters is refused" 2 $BIN train -n 2 --sync ps --ps-placement dedicated --ps-servers 7 \
    --layers 2,2 --steps 2 -q --report $T/b.json
grep -q -- "--ps-servers 7: more servers than the model's 6 parameters" $T/last.log && ok "too many servers named" || bad "too many servers named" "$(cat $T/last.log)"
expect_status "--ps-servers 0 is refused" 2 $BIN train -n 2 --sync ps --ps-placement dedicated --ps-servers 0 $SMALL --steps 2 -q --report $T/b.json
[ ! -e $T/b.json ] && ok "no report after refusals" || bad "no report after refusals" "written"

# ---- exact sums: ringside bench --sync ps -------------------------------------------------------------
if $BIN bench --help >/dev/null 2>&1; then
    for n in 1 2 3 4 5; do
        $BIN bench -n $n --sync ps -c 1 -b 4 -e 1M -f 4 -w 1 -i 3 --timeout 30 >$T/bench$n.log 2>&1; rc=$?
        grep -q "^# wrong elements : 0 OK" $T/bench$n.log && [ $rc = 0 ] \
            && ok "bench -n $n --sync ps: #wrong 0" || bad "bench -n $n --sync ps" "rc $rc: $(tail -n 4 $T/bench$n.log)"
    done
else
    bad "ringside bench" "not in this build"
fi

finish
