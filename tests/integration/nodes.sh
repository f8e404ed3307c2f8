#!/usr/bin/env bash
# nodes.sh - --nodes M: ranks on M machines that share a NIC each; the flat algorithms give the same bits, each node's NIC carries the formula's bytes, and bad values are exit 2
. "$(dirname "$0")/lib.sh"
SMALL="--layers 784,64,10 --train-samples 1024 --eval-samples 128 --steps 6 --quiet --timeout 30"

# nic_bytes REPORT: per node, the bytes its ranks put on the network ("node:sent:received ..."), and
# every rank's bytes checked to add up (node + network = all)
nic_bytes() {
    $PY - "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
per = {}
for x in r["ranks"]:
    if x.get("role") != "worker":
        continue
    t, by = x["traffic"], x["traffic"]["by_link"]
    assert by["node"]["bytes_sent"] + by["network"]["bytes_sent"] == t["bytes_sent"], x
    s = per.setdefault(x["node"], [0, 0])
    s[0] += by["network"]["bytes_sent"]
    s[1] += by["network"]["bytes_received"]
print(" ".join("%d:%d:%d" % (k, v[0], v[1]) for k, v in sorted(per.items())))
EOF
}

# 1. the flat ring over 2 nodes of 2: the same bits as on 4 machines; each node's NIC carries the
#    ring's 2(N-1)/N of the gradient each way (one rank of each node sends across, one receives)
check "ring -n 4 flat" $BIN train -n 4 --sync ring $SMALL --link 1gbit --report $T/flat.json
check "ring -n 4 --nodes 2" $BIN train -n 4 --nodes 2 --sync ring $SMALL --link 1gbit --report $T/nodes.json
if $PY - $T/flat.json $T/nodes.json <<'EOF'
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
ha = {x["params_hash"] for x in a["ranks"]}; hb = {x["params_hash"] for x in b["ranks"]}
assert len(ha) == 1 and ha == hb, (ha, hb)
assert b["config"]["nodes"] == 2 and [x["node"] for x in b["ranks"]] == [0, 0, 1, 1], [x.get("node") for x in b["ranks"]]
assert "node" not in a["ranks"][0]
EOF
then ok "--nodes 2 trains the flat ring to the same parameters, each rank named with its node"; else bad "--nodes 2 bits" "see above"; fi
grad=$((4 * (784 * 64 + 64 + 64 * 10 + 10)))
got=$(nic_bytes $T/nodes.json)
$PY - "$got" $grad <<'EOF' && ok "each node's NIC carries the ring's 2(N-1)/N of the gradient a step each way ($got)" || bad "NIC bytes" "$got"
import sys
n, grad, steps = 4, int(sys.argv[2]), 6
want = 2 * (n - 1) / n * grad * steps
for part in sys.argv[1].split():
    node, sent, recv = map(int, part.split(":"))
    # headers ride on top of the payload (under 1%); the initial parameters' broadcast passes the
    # whole gradient once along the chain 0 -> 1 -> 2 -> 3: across node 0's NIC out, node 1's in
    extra = grad if node == 0 else 0
    assert want + extra <= sent <= 1.01 * want + extra, ("sent", node, sent, want + extra)
    extra = grad if node == 1 else 0
    assert want + extra <= recv <= 1.01 * want + extra, ("received", node, recv, want + extra)
EOF
[ -z "$(ls /dev/shm 2>/dev/null | grep '^ringside-nic-')" ] && ok "no shared NIC left behind in /dev/shm" \
    || bad "shared NIC left behind" "$(ls /dev/shm | grep ringside-nic-)"

# claim 1 leaves a ring run on nodes out of its memory rule (its ranks' edges mix transports), saying so
mkdir -p $T/cl && cp $T/nodes.json $T/cl/ && $BIN claims $T/cl >$T/cl.log 2>&1
grep -q "on 2 nodes: left out" $T/cl.log && ! grep -q "^1 .*FAIL" $T/cl.log \
    && ok "claim 1 leaves the ring on nodes out, named" || bad "claim 1 on nodes" "$(grep -A3 '^1 ' $T/cl.log)"

# 2. the other back ends under nodes: every rank's bytes split by link, the parameters agreeing
for sync in tree ps byteps; do
    extra=""
    [ $sync = byteps ] && extra="--ps-servers 1"
    if $BIN train -n 4 --nodes 2 --sync $sync $extra $SMALL --link 1gbit --intra-link 10gbit --report $T/$sync.json >$T/$sync.log 2>&1 \
        && $PY tests/validate_report.py $T/$sync.json >>$T/$sync.log 2>&1 && bytes=$(nic_bytes $T/$sync.json) \
        && $PY - $T/$sync.json <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["summary"]["params_agree"], "params disagree"
servers = [x for x in r["ranks"] if x.get("role") != "worker"]
assert all(x["node"] >= 2 for x in servers), [x.get("node") for x in servers]  # servers: nodes of their own
EOF
    then ok "--sync $sync over 2 nodes with a fabric: parameters agree, bytes split by link ($bytes)"
    else bad "--sync $sync over nodes" "$(tail -n 5 $T/$sync.log)"; fi
done

# 2b. the hierarchical ring (Horovod's) and NCCL's trees over nodes: at M x G = 2x2, 3x2 and 2x3
#     each computes what one rank computes on the whole batch (another order of the same sums:
#     within 1e-5), every rank the same bits; each node's NIC carries its formula's bytes a step
#     each way, counted as the difference of a 12-step and a 6-step run
M1="--layers 784,64,10 --train-samples 2048 --eval-samples 64 --seed 3 --quiet --timeout 30"
$BIN train --sync none --batch 96 $M1 --steps 12 --report $T/one.json --save-params $T/one.bin >$T/one.log 2>&1 || bad "N=1 baseline" "$(tail -n 3 $T/one.log)"
for sync in ring tree byteps; do
for mg in 2x2 3x2 2x3; do
    m=${mg%x*}; g=${mg#*x}; n=$((m * g)) extra=""
    [ $sync = byteps ] && extra="--ps-servers 1"
    if $BIN train -n $n --nodes $m --hierarchical --sync $sync $extra --global-batch 96 $M1 --steps 12 --report $T/h12.json --save-params $T/h.bin >$T/h.log 2>&1 \
        && $BIN train -n $n --nodes $m --hierarchical --sync $sync $extra --global-batch 96 $M1 --steps 6 --report $T/h6.json >>$T/h.log 2>&1; then
        check "$sync --hierarchical ${m}x$g == one rank" $PY tests/compare_runs.py $T/one.json $T/h12.json --params $T/one.bin $T/h.bin --tol 1e-5
        a=$(nic_bytes $T/h12.json) b=$(nic_bytes $T/h6.json)
        # the ring: 2(M-1)/M of the gradient each way; the trees over nodes: what a rank of the flat
        # trees over M ranks carries, half the gradient a tree for each neighbour (n on 2 nodes);
        # byteps: BytePS's worker link with n = M machines and k = 1, 2M(M-1)/(M^2 + M - 2)
        $PY - "$a" "$b" $m $grad $sync <<'EOF' && ok "$sync --hierarchical ${m}x$g: each NIC carries its formula's bytes a step each way ($a)" || bad "hierarchical NIC bytes $sync ${m}x$g" "$a / $b"
import sys
sys.path.insert(0, "tests")
from validate_report import tree_links
a, b = ({int(k): (int(s), int(r)) for k, s, r in (p.split(":") for p in x.split())} for x in sys.argv[1:3])
m, grad, sync = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
for node in a:
    if sync == "ring":
        want = 2 * (m - 1) / m * grad
    elif sync == "byteps":
        want = 2 * m * (m - 1) / (m * m + m - 2) * grad
    else:
        want = sum((tree_links(m, node, t)[0] >= 0) + len(tree_links(m, node, t)[1]) for t in (0, 1)) * grad / 2
    for d in (0, 1):
        got = (a[node][d] - b[node][d]) / 6
        assert want <= got <= 1.01 * want, (node, d, got, want)
EOF
        $PY -c "import json,sys; r=json.load(open('$T/h12.json')); sys.exit(r['backend']['architecture'] != '$sync-hierarchical')" \
            && ok "the report names the architecture $sync-hierarchical" || bad "architecture $sync ${m}x$g" "$(grep -o '"architecture": *"[^"]*"' $T/h12.json)"
    else
        bad "$sync --hierarchical ${m}x$g" "$(tail -n 3 $T/h.log)"
    fi
done
done
# on one node, or one rank a node, it is the flat ring, said so
$BIN train -n 2 --nodes 2 --hierarchical --sync ring $SMALL --report $T/flat1.json >$T/flat1.log 2>&1 \
    && grep -q "that is the flat ring, which runs" $T/flat1.log \
    && $PY -c "import json,sys; sys.exit(json.load(open('$T/flat1.json'))['backend']['architecture'] != 'ring')" \
    && ok "--hierarchical at one rank a node runs the flat ring and says so" || bad "--hierarchical at G = 1" "$(tail -n 3 $T/flat1.log)"

# the hierarchical forms' sums exact at every size from one float to 16 MiB, at 2x2, 3x2 and 4x2
for sync in ring tree byteps; do for nm in "4 2" "6 3" "8 4"; do
    set -- $nm
    extra=""
    [ $sync = byteps ] && extra="--ps-servers $(($2 / 2))"   # k = 1, 1, 2 CPU servers beside the shards
    $BIN bench -n $1 --nodes $2 --sync $sync $extra --hierarchical -b 4 -e 16M -f 16 -w 0 -i 1 --report $T/hb.json >$T/hb.log 2>&1 \
        && grep -q "wrong elements : 0 OK" $T/hb.log && ok "bench $sync --hierarchical -n $1 --nodes $2: every element exact up to 16 MiB" \
        || bad "bench $sync --hierarchical -n $1 --nodes $2" "$(tail -n 4 $T/hb.log)"
done; done

# 3. bench: the ring's bus bandwidth over 2 nodes of 2 is the NIC's (each NIC carries what a
#    rank's own would)
if timeout 300 $BIN bench -n 4 --nodes 2 --sync ring --link 1gbit -b 4M -e 8M -f 2 -w 1 -i 3 --timeout 60 \
    --report $T/bench.json >$T/bench.log 2>&1; then
    $PY - $T/bench.json <<'EOF' && ok "bench --nodes 2: the flat ring's busbw within 15% of the NIC's 1 Gbit/s" || bad "bench busbw" "$(tail -n 4 $T/bench.log)"
import json, statistics, sys
r = json.load(open(sys.argv[1]))
assert r["config"]["nodes"] == 2, r["config"]
bw = statistics.median(x["busbw_gbps"] for x in r["rows"])
assert abs(bw - 0.125) <= 0.15 * 0.125, bw
EOF
else bad "bench --nodes 2" "$(tail -n 4 $T/bench.log)"; fi

# the shipped matrix of claim 8 at the paper's topology: every cell passes its ranks' checks
$BIN matrix experiments/matrices/nodes.json --out $T/nm --dry-run >$T/nm.log 2>&1 \
    && grep -q "11 runs" $T/nm.log && grep -q "every cell passed its ranks' checks" $T/nm.log \
    && ok "nodes.json: 11 cells, every one accepted" || bad "nodes.json dry run" "$(tail -n 3 $T/nm.log)"

# a rank killed on a node: the job ends at once, naming the rank and its node, no report
for form in "--sync ring --hierarchical" "--sync byteps --ps-servers 1 --hierarchical"; do
    $BIN train -n 4 --nodes 2 $form --layers 784,256,10 --steps 100000 --quiet --timeout 10 --report $T/killed.json >$T/killed.log 2>&1 &
    L=$!
    for ((w = 0; w < 100; w++)); do [ "$(pgrep -P $L | wc -l)" -ge 4 ] && break; sleep 0.05; done
    sleep 1
    kill -9 "$(pgrep -P $L | sort -n | sed -n 4p)" 2>/dev/null
    t0=$SECONDS
    while kill -0 $L 2>/dev/null && ((SECONDS - t0 < 25)); do sleep 0.1; done
    if kill -0 $L 2>/dev/null; then kill -9 $L; bad "rank killed on a node ($form)" "the job did not end within 25 s"
    else
        wait $L; rc=$?
        [ $rc != 0 ] && grep -q "rank 3 (node 1) was killed by signal 9" $T/killed.log && [ ! -e $T/killed.json ] \
            && ok "$form: rank 3 killed on node 1: exit $rc within $((SECONDS - t0)) s, named with its node, no report" \
            || bad "rank killed on a node ($form)" "exit $rc: $(tail -n 3 $T/killed.log)"
    fi
done

# 4. bad values: exit 2, naming the option, nothing started
expect_status "--nodes 0" 2 $BIN train -n 4 --nodes 0 $SMALL --report $T/bad.json
expect_status "--nodes -1" 2 $BIN train -n 4 --nodes -1 $SMALL --report $T/bad.json
expect_status "--nodes 3 with -n 4" 2 $BIN train -n 4 --nodes 3 $SMALL --report $T/bad.json
grep -q "does not divide -n 4" $T/last.log && ok "a count that does not divide is named" || bad "--nodes 3 message" "$(cat $T/last.log)"
expect_status "--nodes with --sync none" 2 $BIN train -n 4 --nodes 2 --sync none $SMALL --report $T/bad.json
expect_status "--nodes with DataParallel" 2 $BIN train -n 4 --nodes 2 --sync ps --ps-mode dataparallel --global-batch 64 $SMALL --report $T/bad.json
expect_status "--intra-link without --nodes" 2 $BIN train -n 4 --intra-link 10gbit $SMALL --report $T/bad.json
expect_status "--intra-link malformed" 2 $BIN train -n 4 --nodes 2 --intra-link fast $SMALL --report $T/bad.json
grep -q -- "--intra-link 'fast'" $T/last.log && ok "a malformed --intra-link is named" || bad "--intra-link message" "$(cat $T/last.log)"
expect_status "--hierarchical without --nodes" 2 $BIN train -n 4 --hierarchical --sync ring $SMALL --report $T/bad.json
expect_status "--hierarchical with --sync ps" 2 $BIN train -n 4 --nodes 2 --hierarchical --sync ps $SMALL --report $T/bad.json
grep -q "no machine-aware form" $T/last.log && ok "a back end without a hierarchical form is named" || bad "--hierarchical ps" "$(cat $T/last.log)"
expect_status "byteps --hierarchical with more CPU servers than machines" 2 $BIN train -n 4 --nodes 2 --hierarchical --sync byteps --ps-servers 3 $SMALL --report $T/bad.json
grep -q -- "--ps-servers 3 with 2 machines" $T/last.log && ok "byteps --hierarchical counts its workers by machine" || bad "byteps --hierarchical k > M" "$(cat $T/last.log)"
expect_status "--nodes with --transport shm" 2 $BIN train -n 4 --nodes 2 --transport shm $SMALL --report $T/bad.json
expect_status "bench --nodes 3 -n 4" 2 $BIN bench -n 4 --nodes 3 --sync ring -b 1K -e 1K
[ ! -e $T/bad.json ] && ok "no report from a refused run" || bad "refused runs" "a report was written"
# a launcher that placed 2 ranks on this host, against --nodes 1 (4 a node): refused naming both
RANK=0 WORLD_SIZE=4 LOCAL_RANK=0 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$(free_port) \
    expect_status "--nodes against torchrun's LOCAL_WORLD_SIZE" 2 $BIN train --nodes 1 $SMALL --report $T/bad.json
grep -q "torchrun placed 2 on this one" $T/last.log && grep -q -- "give --nodes 2" $T/last.log \
    && ok "the disagreement names --nodes and the launcher's count" || bad "launcher disagreement" "$(cat $T/last.log)"
finish
