#!/usr/bin/env bash
# bench.sh - `ringside bench` end to end: the nccl-tests-style table, #wrong, exit statuses, bad options, the JSON report
. "$(dirname "$0")/lib.sh"
SWEEP="-b 8 -e 1M -f 4 -w 1 -i 3 --device cpu --timeout 20"

# table_ok LOG NRANKS: every non-data line starts with #, data rows have 7 fields with the
# right count and busbw, #wrong all 0, and the closing "# Avg bus bandwidth" line is there.
table_ok() {
    $PY - "$1" "$2" <<'EOF'
import sys
path, n = sys.argv[1], int(sys.argv[2])
rows, avg = [], None
for line in open(path):
    line = line.rstrip("\n")
    if not line.strip():
        continue
    if line.startswith("#"):
        if line.startswith("# Avg bus bandwidth"):
            avg = float(line.split(":")[1])
        continue
    f = line.split()
    if len(f) != 7:
        sys.exit("not a data row (7 fields): %r" % line)
    size, count, typ, t, alg, bus, wrong = f
    if typ != "float" or int(size) != 4 * int(count):
        sys.exit("bad size/count/type: %r" % line)
    if wrong != "0":
        sys.exit("#wrong is %s: %r" % (wrong, line))
    if float(t) <= 0:
        sys.exit("time not positive: %r" % line)
    want = float(alg) * (2.0 * (n - 1) / n if n > 1 else 0.0)
    if abs(float(bus) - want) > 1e-3 + 1e-3 * want:
        sys.exit("busbw %s is not algbw * 2(N-1)/N = %.4f: %r" % (bus, want, line))
    rows.append(int(size))
if rows != [8 * 4 ** k for k in range(len(rows))] or rows[-1] != 524288:
    sys.exit("sizes %s, want 8, 32, ... 524288" % rows)
if avg is None:
    sys.exit("no '# Avg bus bandwidth' line")
EOF
}

for n in 2 3; do
    $BIN bench -n $n --sync ring $SWEEP >$T/b$n.log 2>$T/b$n.err; rc=$?
    [ $rc = 0 ] && ok "bench -n $n exits 0" || bad "bench -n $n exits 0" "exit $rc: $(tail -n 3 $T/b$n.err)"
    why=$(table_ok $T/b$n.log $n 2>&1) && ok "bench -n $n table (# lines, #wrong 0, busbw)" \
        || bad "bench -n $n table" "$why"
done

# one rank: runs in-process, busbw 0
$BIN bench -n 1 --sync ring $SWEEP >$T/b1.log 2>&1; rc=$?
[ $rc = 0 ] && table_ok $T/b1.log 1 >/dev/null 2>&1 && ok "bench -n 1" || bad "bench -n 1" "exit $rc: $(tail -n 3 $T/b1.log)"

# --check 0 prints N/A in the #wrong column
$BIN bench -n 2 --sync ring $SWEEP -c 0 >$T/nc.log 2>&1; rc=$?
[ $rc = 0 ] && grep -v '^#' $T/nc.log | awk '$7 != "N/A" {bad=1} END {exit bad}' && ok "-c 0 prints N/A" \
    || bad "-c 0 prints N/A" "exit $rc: $(tail -n 3 $T/nc.log)"

# the JSON report parses and matches the table
$BIN bench -n 2 --sync ring $SWEEP --report $T/bench.json >$T/rep.log 2>&1; rc=$?
why=$($PY - $T/bench.json <<'EOF' 2>&1
import json, sys
r = json.load(open(sys.argv[1]))
assert r["schema"] == "ringside.bench/1", r["schema"]
assert r["config"]["ranks"] == 2 and r["config"]["sync"] == "ring"
rows = r["rows"]
assert [x["size_bytes"] for x in rows] == [8 * 4 ** k for k in range(len(rows))], rows
assert all(x["wrong"] == 0 and x["time_us"] > 0 and len(x["rank_time_us"]) == 2 for x in rows)
t = r["summary"]["traffic"]
assert len(t) == 2 and all(e["bytes_sent"] > 0 and e["dropped"] == 0 for e in t), t
EOF
) && [ $rc = 0 ] && ok "--report JSON parses (schema, rows, traffic)" || bad "--report JSON" "exit $rc: $why"

# --bucket-mb cuts the server's all-reduce into slices: exact sums, and rank 1 sends 16 messages
# per 4 MiB call at 0.25 MiB where the default (25) sends one
for mb in 25 0.25; do
    $BIN bench -n 2 --sync ps -b 4M -e 4M -w 1 -i 3 --bucket-mb $mb --report $T/slice$mb.json >$T/slice$mb.log 2>&1 ||
        bad "bench --sync ps --bucket-mb $mb" "$(tail -n 3 $T/slice$mb.log)"
done
why=$($PY - $T/slice25.json $T/slice0.25.json <<'EOF' 2>&1
import json, sys
whole, sliced = (json.load(open(p)) for p in sys.argv[1:])
assert sliced["config"]["bucket_mb"] == 0.25 and whole["config"]["bucket_mb"] == 25
assert all(x["wrong"] == 0 for x in whole["rows"] + sliced["rows"])
m = [next(e["messages_sent"] for e in r["summary"]["traffic"] if e["rank"] == 1) for r in (whole, sliced)]
assert m[1] >= 12 * m[0], "rank 1 sent %d messages whole, %d sliced" % tuple(m)
print("rank 1 sent %d messages whole, %d sliced" % tuple(m))
EOF
) && ok "--bucket-mb 0.25 slices the ps all-reduce ($why)" || bad "--bucket-mb slices" "$why"

# --ps-placement: colocated, rank 0's server sends every other rank its sum ((N-1)x what rank 1
# sends); sharded, every rank serves 1/N of every slice, so the ranks send about alike; both exact,
# with slices of 64 KiB and more (zero-copy) and below
for pl in colocated sharded; do
    $BIN bench -n 3 --sync ps --ps-placement $pl -b 16K -e 1M -f 8 -w 1 -i 3 --bucket-mb 0.5 --report $T/pl-$pl.json \
        >$T/pl-$pl.log 2>&1 || bad "bench --sync ps --ps-placement $pl" "$(tail -n 3 $T/pl-$pl.log)"
done
why=$($PY - $T/pl-colocated.json $T/pl-sharded.json <<'EOF' 2>&1
import json, sys
col, sh = (json.load(open(p)) for p in sys.argv[1:])
assert col["config"]["ps_placement"] == "colocated" and sh["config"]["ps_placement"] == "sharded"
assert all(x["wrong"] == 0 for x in col["rows"] + sh["rows"]) and len(sh["rows"]) == 3
def sent(r): return {e["rank"]: e["bytes_sent"] for e in r["summary"]["traffic"]}
c, s = sent(col), sent(sh)
assert 1.9 < c[0] / c[1] < 2.1, "colocated: rank 0 sent %d, rank 1 %d" % (c[0], c[1])
assert max(s.values()) < 1.2 * min(s.values()), "sharded: %s" % s
assert sum(e["bytes_received"] for e in sh["summary"]["traffic"]) == sum(s.values())
print("bytes sent, rank 0 / rank 1: colocated %.2f, sharded %.2f" % (c[0] / c[1], s[0] / s[1]))
EOF
) && ok "--ps-placement sharded spreads the server's traffic ($why)" || bad "--ps-placement" "$why"

# server processes: --ps-placement dedicated (K = 2, keys by range) and byteps's k = 1 CPU server;
# exact, and every byte the workers send a server receives (and the other way), the servers'
# traffic in the report beside the ranks'
$BIN bench -n 2 --sync ps --ps-placement dedicated --ps-servers 2 -b 16K -e 1M -f 8 -w 1 -i 3 --bucket-mb 0.5 \
    --report $T/ded.json >$T/ded.log 2>&1 || bad "bench --ps-placement dedicated" "$(tail -n 3 $T/ded.log)"
$BIN bench -n 2 --sync byteps --ps-servers 1 -b 16K -e 1M -f 8 -w 1 -i 3 --bucket-mb 0.5 \
    --report $T/bps.json >$T/bps.log 2>&1 || bad "bench --sync byteps --ps-servers 1" "$(tail -n 3 $T/bps.log)"
why=$($PY - $T/ded.json $T/bps.json <<'EOF' 2>&1
import json, sys
for path, K in zip(sys.argv[1:], (2, 1)):
    r = json.load(open(path))
    assert r["config"]["ps_servers"] == K, r["config"]
    assert all(x["wrong"] == 0 for x in r["rows"]) and len(r["rows"]) == 3
    t = r["summary"]["traffic"]
    workers = [e for e in t if "rank" in e]
    servers = [e for e in t if "server" in e]
    assert [e["server"] for e in servers] == list(range(K)), t
    assert all(e["bytes_received"] > 0 for e in servers), servers
    if r["config"]["sync"] == "ps":  # the servers hold every key: what the workers send, they receive
        assert r["config"]["ps_placement"] == "dedicated"
        assert sum(e["bytes_sent"] for e in workers) == sum(e["bytes_received"] for e in servers), t
        assert sum(e["bytes_received"] for e in workers) == sum(e["bytes_sent"] for e in servers), t
        assert workers[0]["bytes_sent"] == workers[1]["bytes_sent"], workers
print("dedicated K = 2 and byteps k = 1 exact, servers' traffic reported")
EOF
) && ok "server processes: $why" || bad "server processes" "$why"

# one worker and its dedicated server: the launcher starts both
$BIN bench -n 1 --sync ps --ps-placement dedicated -b 64K -e 256K -f 4 -w 1 -i 3 --report $T/ded1.json >$T/ded1.log 2>&1 \
    && $PY -c "
import json, sys
r = json.load(open(sys.argv[1]))
assert all(x['wrong'] == 0 for x in r['rows'])
assert [e.get('server') for e in r['summary']['traffic'] if 'server' in e] == [0], r['summary']['traffic']
" $T/ded1.json 2>>$T/ded1.log && ok "-n 1 with a dedicated server: launched, exact, its traffic reported" \
    || bad "-n 1 --ps-placement dedicated" "$(tail -n 3 $T/ded1.log)"

# --barrier none: a size's calls back to back after one line-up (no refill or barrier between
# them): exact on the first call, named in the report, and the same bytes as --barrier each (the
# same calls; the line-up's barriers are not counted under either rule)
for s in ring ps tree; do
    for b in each none; do
        $BIN bench -n 3 --sync $s -b 4K -e 256K -f 8 -w 2 -i 4 --barrier $b --report $T/bar-$s-$b.json \
            >$T/bar-$s-$b.log 2>&1 || bad "bench --sync $s --barrier $b" "$(tail -n 3 $T/bar-$s-$b.log)"
    done
done
why=$($PY - $T <<'EOF' 2>&1
import json, sys
for s in ("ring", "ps", "tree"):
    each, none = (json.load(open("%s/bar-%s-%s.json" % (sys.argv[1], s, b))) for b in ("each", "none"))
    assert each["config"]["barrier"] == "each" and none["config"]["barrier"] == "none", s
    assert len(none["rows"]) == 3 and all(x["wrong"] == 0 for x in none["rows"]), (s, none["rows"])
    sent = lambda r: [(e["bytes_sent"], e["messages_sent"]) for e in r["summary"]["traffic"]]
    assert sent(each) == sent(none), "%s: each %s, none %s" % (s, sent(each), sent(none))
print("ring, ps, tree")
EOF
) && ok "--barrier none: exact, reported, the same bytes and messages as --barrier each ($why)" || bad "--barrier none" "$why"
grep -q "calls back to back (--barrier none)" $T/bar-ring-none.log && ok "--barrier none: the header names the rule" \
    || bad "--barrier none header" "$(grep '^# before' $T/bar-ring-none.log)"

# bad options: exit 2 with one line naming the option, before any rank starts
bad_opt() { # NAME WANT-IN-MESSAGE ARGS...
    local name=$1 want=$2; shift 2
    $BIN bench "$@" >$T/bad.out 2>$T/bad.err; local rc=$?
    if [ $rc = 2 ] && [ "$(wc -l <$T/bad.err)" = 1 ] && grep -q -- "$want" $T/bad.err && [ ! -s $T/bad.out ]; then
        ok "$name"
    else
        bad "$name" "exit $rc: $(cat $T/bad.err)"
    fi
}
bad_opt "unknown option refused" "--bogus" -n 2 --bogus 1
bad_opt "-b not a size refused" "-b" -n 2 -b lots
bad_opt "-e below -b refused" "-e" -n 2 -b 1M -e 8
bad_opt "-f 1 refused" "-f" -n 2 -f 1
bad_opt "-i 0 refused" "-i" -n 2 -i 0
bad_opt "-c 2 refused" "-c" -n 2 -c 2
bad_opt "--barrier sometimes refused" "--barrier 'sometimes'" -n 2 --barrier sometimes
bad_opt "--bucket-mb 0 refused" "--bucket-mb" -n 2 --sync ps --bucket-mb 0
bad_opt "--sync unknown refused" "--sync" -n 2 --sync nope
bad_opt "--ps-servers without server processes refused" "--ps-servers 2" -n 2 --sync ps --ps-servers 2
bad_opt "--ps-placement dedicated --ps-servers 0 refused" "at least one" -n 2 --sync ps --ps-placement dedicated --ps-servers 0
bad_opt "byteps --ps-servers above N refused" "0 <= k <= n" -n 2 --sync byteps --ps-servers 3
bad_opt "--ps-placement without ps refused" "--ps-placement sharded with --sync ring" -n 2 --ps-placement sharded
bad_opt "missing value refused" "--timeout" -n 2 --timeout
bad_opt "unwritable --report refused" "$T/no/such/dir" -n 2 --report $T/no/such/dir/r.json

finish
