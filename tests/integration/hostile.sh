#!/usr/bin/env bash
# hostile.sh - processes without the job token at rank 0's control port (a flood does not grow rank 0, a squatter does not keep a rank out) and at a rank's data plane (frames larger than the job sends are cut off unread), and one with the token flooding a rank's data mailbox with small messages (its queue bound keeps the rank's memory flat)
. "$(dirname "$0")/lib.sh"
BIN=$(readlink -f "$BIN")
SMALL="--layers 784,32,10 --train-samples 512 --eval-samples 64 --quiet"

# A ZeroMQ peer speaking ZMTP 3.0 over a plain socket, as anyone on the host can:
#   flood PORT N MIB     N messages of MIB MiB each, then one message of 100,000 frames of 1 KiB
#   squat PORT SECONDS   connect as identity m1 (NULL security, no token) and hold the connection
#   plain PORT SECONDS   connect with PLAIN as "member 1" with a wrong password, and hold it
#   push PORT N MIB      as a PUSH (what a data mailbox takes): N two-frame messages, the second
#                        of MIB MiB, reconnecting whenever the rank cuts it off
#   tokenpush PORT N TOKEN SECONDS
#                        as a PUSH with PLAIN and the job's token (the gate admits it): N small
#                        two-frame messages (16 bytes), as fast as the rank's socket takes them,
#                        for at most SECONDS; says how many it wrote whole
# Every connection is retried until the port opens (20 s) and again whenever rank 0 closes it.
cat > $T/peer.py <<'PY'
import select, socket, struct, sys, time
mode, port = sys.argv[1], int(sys.argv[2])
def connect():
    end = time.time() + 20
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            if time.time() > end: raise
            time.sleep(0.05)
def cmd(name, body):
    data = bytes([len(name)]) + name + body
    return (b"\x04" + bytes([len(data)]) if len(data) < 256 else b"\x06" + struct.pack(">Q", len(data))) + data
def prop(name, value):
    return bytes([len(name)]) + name + struct.pack(">I", len(value)) + value
def hello(mech, identity=b"", kind=b"DEALER", user=b"member 1", password=b"wrong"):
    s = connect()
    s.sendall(b"\xff" + b"\0" * 8 + b"\x7f\x03\x00" + mech.ljust(20, b"\0") + b"\0" * 32)
    if mech == b"PLAIN":  # INITIATE follows the rank's WELCOME
        s.sendall(cmd(b"HELLO", bytes([len(user)]) + user + bytes([len(password)]) + password))
    else:
        s.sendall(cmd(b"READY", prop(b"Socket-Type", kind) + prop(b"Identity", identity)))
    return s
def frame(data, more=False):
    return bytes([0x02 | (1 if more else 0)]) + struct.pack(">Q", len(data)) + data
def small(data, more=False):
    return bytes([1 if more else 0, len(data)]) + data
if mode == "tokenpush":
    n, token, secs = int(sys.argv[3]), sys.argv[4].encode(), float(sys.argv[5])
    s, got = hello(b"PLAIN", user=b"member 9", password=token), b""
    while b"WELCOME" not in got and b"ERROR" not in got:
        more = s.recv(4096)
        if not more: break
        got += more
    if b"WELCOME" not in got:
        print("tokenpush: refused in the handshake (%r)" % got[-40:])
        sys.exit(0)
    s.sendall(cmd(b"INITIATE", prop(b"Socket-Type", b"PUSH")))
    msg = small(b"stray!!!", True) + small(b"12345678")
    buf, total, done, t0 = msg * 4096, n * len(msg), 0, time.time()
    s.setblocking(False)
    while done < total and time.time() < t0 + secs:
        select.select([], [s], [], 0.2)
        off = done % len(buf)
        try:
            done += s.send(buf[off:off + min(len(buf) - off, total - done)])
        except BlockingIOError:
            pass
        except OSError:
            break
    print("tokenpush: %d messages written whole in %.1f s" % (done // len(msg), time.time() - t0))
    sys.stdout.flush()
elif mode == "push":
    n, size = int(sys.argv[3]), int(sys.argv[4]) << 20
    big, s, sent, closed = b"x" * size, None, 0, 0
    for k in range(n):
        try:
            if s is None: s = hello(b"NULL", kind=b"PUSH")
            s.sendall(frame(b"h" * 40, True) + frame(big))
            sent += 1
        except OSError:
            closed += 1
            s = None
    print("push: %d messages sent whole, %d cut off by the rank" % (sent, closed))
    sys.stdout.flush()
    time.sleep(30)
elif mode == "flood":
    n, size = int(sys.argv[3]), int(sys.argv[4]) << 20
    big, s, sent, closed = b"x" * size, None, 0, 0
    many = b"".join(frame(b"y" * 1024, True) for _ in range(1000))
    for k in range(n + 1):
        try:
            if s is None: s = hello(b"NULL")
            if k < n: s.sendall(frame(b"JOIN 1 0000") + frame(big))
            else:
                for _ in range(100): s.sendall(many)
                s.sendall(frame(b"end"))
            sent += 1
        except OSError:
            closed += 1
            s = None
    print("flood: %d messages sent whole, %d cut off by rank 0" % (sent, closed))
    sys.stdout.flush()
    time.sleep(30)  # hold what was sent: the test kills this process
else:  # the first line tells the test that the handshake is over, one way or the other
    s, got = hello(b"NULL" if mode == "squat" else b"PLAIN", b"m1"), b""
    try:
        while len(got) < 64 + 8:  # rank 0's greeting and its first command
            more = s.recv(4096)
            if not more: break
            got += more
    except OSError:
        pass
    held = len(got) >= 72 and got[64 + 2:64 + 8] == b"\x05READY" if mode == "squat" else b"WELCOME" in got
    if held and mode == "plain":
        s.sendall(cmd(b"INITIATE", prop(b"Socket-Type", b"DEALER") + prop(b"Identity", b"m1")))
    print(mode + (": in, holding identity m1" if held else ": rank 0 closed the connection (%d bytes)" % len(got)))
    sys.stdout.flush()
    if held: time.sleep(float(sys.argv[3]))
PY

rank() { # RANK PORT NAME OPTIONS: starts one rank of a 2-rank job in the background (its log $T/NAME$RANK.log)
    RANK=$1 WORLD_SIZE=2 LOCAL_RANK=$1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$2 RINGSIDE_JOB_TOKEN=ab12ab12ab12ab12 \
        $BIN train --sync ring $SMALL --report $T/$3.json $4 >$T/$3$1.log 2>&1 &
}
job() { rank 1 "$1" "$2" "$3"; p1=$!; rank 0 "$1" "$2" "$3"; p0=$!; } # PORT NAME OPTIONS: sets p0, p1

# 1. a flood while the job trains (rank 1 sleeps 100 ms a step, so training takes about 4 s): 20
#    messages of 50 MiB and one of 100,000 frames. Rank 0's peak RSS must stay near a quiet run's.
port=$(free_port)
job $port quiet "--steps 40 --straggler 1:100 --timeout 20"
wait $p0; r0=$?; wait $p1; r1=$?
quiet_kb=$($PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["ranks"][0]["memory"]["host_peak_rss_bytes"] // 1024)' $T/quiet.json 2>/dev/null)
port=$(free_port)
job $port flood "--steps 40 --straggler 1:100 --timeout 20"
$PY $T/peer.py flood $port 20 50 >$T/peer.log 2>&1 & pf=$!
hwm=0
while kill -0 $p0 2>/dev/null; do
    v=$(awk '/^VmHWM/ {print $2}' /proc/$p0/status 2>/dev/null); [ -n "$v" ] && [ "$v" -gt "$hwm" ] && hwm=$v
    sleep 0.1
done
wait $p0; f0=$?; wait $p1; f1=$?
kill $pf 2>/dev/null; wait $pf 2>/dev/null
echo "quiet run: exit $r0/$r1, rank 0 peak RSS ${quiet_kb:-?} KiB; flooded run: exit $f0/$f1, rank 0 VmHWM $hwm KiB; $(cat $T/peer.log)"
[ $r0 = 0 ] && [ $r1 = 0 ] && [ $f0 = 0 ] && [ $f1 = 0 ] && [ -s $T/flood.json ] \
    && ok "a job flooded by a peer without the token still succeeds" \
    || bad "flooded job" "exit $r0/$r1 quiet, $f0/$f1 flooded: $(tail -n 3 $T/flood0.log $T/flood1.log)"
# the flood is 1.1 GB; a quiet rank 0 here peaks near 60 MB
[ "$hwm" -gt 0 ] && [ "$hwm" -lt 262144 ] && ok "rank 0's peak RSS stays under 256 MiB under the flood ($((hwm / 1024)) MiB)" \
    || bad "rank 0's memory under the flood" "VmHWM $hwm KiB"
grep -q "cut off by rank 0" $T/peer.log && ! grep -q "^flood: [1-9][0-9]* messages sent whole" $T/peer.log \
    && ok "rank 0 cuts off every connection without the token before its first message" \
    || bad "connections cut off" "$(cat $T/peer.log)"

# 3. a rank's data mailbox (the tree's, over TCP): frames larger than anything the job sends end
#    the sender's connection unread (net/msg.h's msg_bound), so 20 messages of 50 MiB pushed at
#    rank 1 while it trains leave its peak RSS where it was, and the job succeeds; a PLAIN peer with
#    a wrong token is refused in its handshake
drank() { # RANK PORT NAME [SYNC]: one rank of a 2-rank job over TCP, the tree's unless SYNC (rank 1 sleeps 100 ms a step)
    RANK=$1 WORLD_SIZE=2 LOCAL_RANK=$1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$2 RINGSIDE_JOB_TOKEN=ab12ab12ab12ab12 \
        $BIN train --sync ${4:-tree} --transport tcp $SMALL --steps 40 --straggler 1:100 --timeout 20 --report $T/$3.json >$T/$3$1.log 2>&1 &
}
listen_port() { # PID: the TCP port the process listens on (a rank other than 0: its data mailbox, its control socket connects out)
    local port=""
    for _ in $(seq 100); do
        port=$($PY - $1 <<'PY'
import os, sys
pid = sys.argv[1]
try:
    inodes = {os.readlink("/proc/%s/fd/%s" % (pid, f))[8:-1] for f in os.listdir("/proc/%s/fd" % pid)
              if os.readlink("/proc/%s/fd/%s" % (pid, f)).startswith("socket:[")}
except OSError:
    inodes = set()
for line in open("/proc/net/tcp").readlines()[1:]:
    f = line.split()
    if f[3] == "0A" and f[9] in inodes:
        print(int(f[1].split(":")[1], 16)); break
PY
)
        [ -n "$port" ] && break; sleep 0.1
    done
    echo "$port"
}
peak_rss() { # PID: its VmHWM in KiB, watched until it exits
    local hwm=0 v
    while kill -0 $1 2>/dev/null; do
        v=$(awk '/^VmHWM/ {print $2}' /proc/$1/status 2>/dev/null); [ -n "$v" ] && [ "$v" -gt "$hwm" ] && hwm=$v
        sleep 0.1
    done
    echo $hwm
}
port=$(free_port)
drank 1 $port data; d1=$!; drank 0 $port data; d0=$!
dport=$(listen_port $d1)
[ -n "$dport" ] && $PY $T/peer.py push $dport 20 50 >$T/push.log 2>&1 & pp=$!
[ -n "$dport" ] && $PY $T/peer.py plain $dport 2 >$T/dplain.log 2>&1 & pq=$!
hwm=$(peak_rss $d1)
wait $d0; e0=$?; wait $d1; e1=$?
kill $pp $pq 2>/dev/null; wait $pp $pq 2>/dev/null
echo "data-plane push at rank 1's port ${dport:-?}: exit $e0/$e1, rank 1 VmHWM $hwm KiB; $(cat $T/push.log 2>/dev/null)"
[ -n "$dport" ] && [ $e0 = 0 ] && [ $e1 = 0 ] && [ -s $T/data.json ] \
    && ok "a tree job whose data mailbox is pushed 1 GB by a stranger still succeeds" \
    || bad "pushed tree job" "port ${dport:-none}, exit $e0/$e1: $(tail -n 3 $T/data0.log $T/data1.log)"
# a quiet rank here peaks near 15 MiB; one 50 MiB frame read in would take it past 64
[ "$hwm" -gt 0 ] && [ "$hwm" -lt 65536 ] && ok "rank 1's peak RSS stays under 64 MiB under the push ($((hwm / 1024)) MiB)" \
    || bad "rank 1's memory under the push" "VmHWM $hwm KiB"
grep -q "^push: 0 messages sent whole" $T/push.log && ok "every oversized message is cut off unread" \
    || bad "oversized messages cut off" "$(cat $T/push.log 2>/dev/null)"
# the data port takes the job token in its handshake as the control port does (net/gate.h): a
# stranger with a wrong password is refused there, and rank 1 names it once
grep -q "data plane: refused a connection from 127.0.0.1 as member 1: not this job's token" $T/data1.log \
    && ok "rank 1's data port refuses a wrong token in the handshake, named" \
    || bad "the data port's token check" "$(cat $T/dplain.log 2>/dev/null; grep -i refused $T/data1.log)"

# 4. a rank's data mailbox (the tree's, and the ring's over TCP) flooded with small messages by a
#    peer that holds the job token, so that the gate lets it in: 2,000,000 messages of 16 bytes,
#    far below the frame bound, are strays the rank drops as it reads them; its queue holds at
#    most msg_queue_bound's messages from the peer (net/msg.h), the rest wait in the peer's socket,
#    so its peak RSS stays near a quiet run's (without the bound ZeroMQ reads the flood in as fast
#    as it comes: some 128 bytes a message, hundreds of MiB) and the job succeeds
for sync in tree ring; do
    port=$(free_port)
    drank 1 $port tflood$sync $sync; d1=$!; drank 0 $port tflood$sync $sync; d0=$!
    dport=$(listen_port $d1)
    [ -n "$dport" ] && $PY $T/peer.py tokenpush $dport 2000000 ab12ab12ab12ab12 60 >$T/tpush$sync.log 2>&1 & pp=$!
    hwm=$(peak_rss $d1)
    wait $d0; e0=$?; wait $d1; e1=$?
    kill $pp 2>/dev/null; wait $pp 2>/dev/null
    dropped=$($PY -c 'import json, sys; print(json.load(open(sys.argv[1]))["ranks"][1]["traffic"]["dropped"])' $T/tflood$sync.json 2>/dev/null)
    echo "$sync: small messages with the token at rank 1's port ${dport:-?}: exit $e0/$e1, rank 1 VmHWM $hwm KiB, dropped ${dropped:-?}; $(cat $T/tpush$sync.log 2>/dev/null)"
    [ -n "$dport" ] && [ $e0 = 0 ] && [ $e1 = 0 ] && [ -s $T/tflood$sync.json ] \
        && ok "a $sync job whose data mailbox a peer with the token floods with small messages still succeeds" \
        || bad "$sync job flooded with the token" "port ${dport:-none}, exit $e0/$e1: $(tail -n 3 $T/tflood${sync}0.log $T/tflood${sync}1.log)"
    [ "$hwm" -gt 0 ] && [ "$hwm" -lt 65536 ] && ok "$sync: rank 1's peak RSS stays under 64 MiB under the small-message flood ($((hwm / 1024)) MiB)" \
        || bad "$sync: rank 1's memory under the small-message flood" "VmHWM $hwm KiB"
    [ "${dropped:-0}" -gt 0 ] && ok "$sync: the flood got in (the token) and rank 1 dropped its messages as strays (${dropped})" \
        || bad "$sync: the flood's strays" "dropped ${dropped:-?}: $(cat $T/tpush$sync.log 2>/dev/null)"
done

# 2. squatters connect first, as identity m1 without a token and with a wrong one; then rank 1 comes
port=$(free_port)
rank 0 $port squatted "--steps 3 --timeout 8"; p0=$!
$PY $T/peer.py squat $port 15 >$T/squat.log 2>&1 & ps1=$!
$PY $T/peer.py plain $port 15 >$T/plain.log 2>&1 & ps2=$!
for _ in $(seq 100); do [ -s $T/squat.log ] && [ -s $T/plain.log ] && break; sleep 0.1; done
rank 1 $port squatted "--steps 3 --timeout 8"; p1=$!
wait $p0; s0=$?; wait $p1; s1=$?
kill $ps1 $ps2 2>/dev/null; wait $ps1 $ps2 2>/dev/null
echo "squatted job: exit $s0/$s1; $(cat $T/squat.log $T/plain.log | tr '\n' ' ')"
[ $s0 = 0 ] && [ $s1 = 0 ] && [ -s $T/squatted.json ] && ok "squatters on identity m1 do not keep rank 1 out" \
    || bad "squatted job" "exit $s0/$s1: $(tail -n 3 $T/squatted0.log $T/squatted1.log)"
grep -q "refused a connection from 127.0.0.1 as member 1: not this job's token" $T/squatted0.log \
    && ok "rank 0 names the connection it refused" || bad "rank 0's warning" "$(cat $T/squatted0.log)"
finish
