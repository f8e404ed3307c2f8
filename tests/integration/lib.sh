# lib.sh - shared helpers of the integration scripts: checks, a tally, a temp dir, free ports
# Source it; then call `check NAME CMD...` / `ok NAME` / `bad NAME WHY`, and `finish` last.
BIN=${RINGSIDE_BIN:-build/ringside}
PY=${PYTHON:-python3}
T=$(mktemp -d /tmp/ringside-it-XXXXXX)
passed=0; failed=0
trap 'rm -rf "$T"' EXIT

ok()  { passed=$((passed+1)); echo "PASS $1"; }
bad() { failed=$((failed+1)); echo "FAIL $1: $2"; }
# check NAME CMD... : passes when CMD exits 0
check() { local n=$1; shift; if "$@" >"$T/last.log" 2>&1; then ok "$n"; else bad "$n" "$(tail -n 5 "$T/last.log")"; fi; }
# expect_status NAME WANT CMD... : passes when CMD exits with WANT
expect_status() {
    local n=$1 want=$2; shift 2
    "$@" >"$T/last.log" 2>&1; local rc=$?
    if [ "$rc" = "$want" ]; then ok "$n"; else bad "$n" "exit $rc, want $want: $(tail -n 3 "$T/last.log")"; fi
}
# free_port: a TCP port free now, below the kernel's ephemeral range where it can (every connection
# and every ZeroMQ bind on ":*" takes its ports from that range, so a port picked there can be gone
# by the time a rank binds it, most of all with two scripts running side by side)
free_port() {
    $PY -c '
import random, socket
try:
    lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    lo = 0
for _ in range(500 if lo > 12000 else 0):
    p = random.randint(10000, lo - 1)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        print(p)
        break
    except OSError:
        pass
    finally:
        s.close()
else:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
finish() { echo "$passed passed, $failed failed"; [ "$failed" = 0 ]; }
