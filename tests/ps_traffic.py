#!/usr/bin/env python3
"""ps_traffic.py - a ps or byteps run's bytes per worker and server against docs/ps-protocol.md's formulas, exactly

    ps_traffic.py REPORT [FP32-REPORT]

REPORT is a `ringside train` report of --sync byteps (any k), or --sync ps with --ps-placement
sharded or dedicated. The model of the keys is ps/shard.h's: servers 0..L-1 are the workers' shards
(byteps: weight n - k each, none at k = n; sharded: N of weight 1), then the k server processes
(byteps: weight 2(n - 1); dedicated: K of weight 1). Without partitions (--ps-partition-kb off, or
auto without --link) byteps splits every bucket by the weights and ps gives each server one key
range; with partitions every bucket is cut into partitions of at most the partition's keys (halved
until there are as many partitions as servers) and each partition goes wholly to the server whose
load over its weight would be least with it, ties to the lower one (shard_stripe_plan). Either way
server s holds n_s keys in nsl_s slices; Q_s = el n_s + nsl_s H is its part of a step (el bytes a
key on the wire, H the 56-byte header) and R_s = 4 n_s + nsl_s H of the fp32 start. Per step a
worker pushes Q - Q_own and is answered as much; its shard receives the N - 1 others' pushes and
answers them; rank 0 tells every server but its own the step size (H). A server process receives
N Q_s + H and sends N Q_s a step; at the start R_s (INIT) and N - 1 pulls, answered with
(N - 1) R_s; at the end N goodbyes. A server's `server` memory is 4 n_s (N + 3) bytes (2 n_s more
on a 16-bit wire). Prints one line; exits 1 naming the first process off its formula.
With FP32-REPORT (the same run on fp32), the steps' payload moved must be exactly half of it.
"""
import json
import sys

H = 56


def config_partition_keys(c):
    """base/config.c's config_partition_keys: 0 for whole buckets; the bytes are the wire's."""
    v = str(c.get("ps-partition-kb", "off"))
    if v == "off":
        return 0
    if v == "auto":
        bw = link_bytes_per_s(c.get("link", ""))
        if not bw:
            return 0
        b = min(max(bw * 0.002, 65536), 4194304)
    else:
        b = float(v) * 1024
    return max(1, int(b / (4 if c.get("wire", "fp32") == "fp32" else 2)))  # bytes on the wire


def link_bytes_per_s(text):
    text = (text or "").split(",")[0].strip()
    if not text or text == "none":
        return 0
    units = {"kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8, "bit": 1 / 8,
             "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "B/s": 1}
    for u in sorted(units, key=len, reverse=True):
        if text.lower().endswith(u.lower()):
            return float(text[: -len(u)]) * units[u]
    raise ValueError("link %r" % text)


def buckets_of(n, bucket_mb):
    """engine/sync.c's plan: from the end, the first capped at 1 MiB."""
    per, first = max(1, int(bucket_mb * 1048576 / 4)), 262144
    first = per if first > per else first
    out, hi, i = [], n, 0
    while hi > 0 or i == 0:
        cap = first if i == 0 else per
        out.append((max(0, hi - cap), hi))
        hi, i = max(0, hi - cap), i + 1
    return out


def partitions(buckets, keys, K):
    """ps/shard.c's shard_partition: (partitions in order, the keys it settled on)."""
    most = max(b - a for a, b in buckets)
    if keys == 0 or keys > most:
        keys = most or 1
    count = lambda q: sum(-(-(b - a) // q) if b > a else 1 for a, b in buckets)
    while keys > 1 and count(keys) < K:
        keys = (keys + 1) // 2
    parts = []
    for a, b in buckets:
        lo = a
        while True:
            hi = min(lo + keys, b)
            parts.append((lo, hi))
            lo = hi
            if lo >= b:
                break
    return parts, keys


def stripe(parts, w):
    """ps/shard.c's shard_stripe_plan: each partition's server."""
    load, owner = [0] * len(w), []
    for a, b in parts:
        m = b - a
        best = 0
        for s in range(1, len(w)):
            if (load[s] + m) * w[best] < (load[best] + m) * w[s]:
                best = s
        load[best] += m
        owner.append(best)
    return owner


def layout(r):
    """(N, L, k, weights, pieces [per partition or bucket: keys per server], partition keys or 0)."""
    c, b = r["config"], r.get("backend") or {}
    N, arch = r["run"]["world"], b.get("architecture")  # the report's architecture (docs/report-schema.md)
    if arch == "byteps":
        k = int(b["servers"])
        L = N if k < N else 0
        w = [N - k] * L + [2 * (N - 1)] * k if L else [1] * k
    elif arch == "ps-sharded":
        L, k, w = N, 0, [1] * N
    elif arch == "ps-dedicated":
        k = int(b["servers"])
        L, w = 0, [1] * k
    else:
        raise SystemExit("ps_traffic.py: architecture %s: only byteps, ps-sharded and ps-dedicated" % arch)
    n = r["ranks"][0]["memory"]["by_tag"]["params"] // 4
    buckets = buckets_of(n, float(c["bucket-mb"]))
    K, W = len(w), sum(w)
    pk = config_partition_keys(c)
    if pk:
        parts, pk = partitions(buckets, pk, K)
        owner = stripe(parts, w)
        pieces = [[(b - a) if s == owner[i] else 0 for s in range(K)] for i, (a, b) in enumerate(parts)]
    elif arch == "byteps":
        def split(m):  # m keys by the weights: floor(m w_s / W), the first m - sum of them one more
            q = [m * x // W for x in w]
            return [q[s] + (s < m - sum(q)) for s in range(K)]
        pieces = [split(b - a) for a, b in buckets]
    else:  # ranges: server s holds shard_range(n, K, s); a bucket's piece is its overlap
        base, rem = n // K, n % K
        rng = [(s * base + min(s, rem), s * base + min(s, rem) + base + (s < rem)) for s in range(K)]
        pieces = [[max(0, min(b, z) - max(a, y)) for y, z in rng] for a, b in buckets]
    return N, L, k, w, pieces, pk, n


def expect(r, el):
    """{("worker", rank) | ("server", j): (sent, received, step payload sent, received)}, the keys per process."""
    S = r["summary"]["steps"]
    N, L, k, w, pieces, pk, n = layout(r)
    K = len(w)
    held = [sum(p[s] for p in pieces) for s in range(K)]
    nsl = [sum(1 for p in pieces if p[s]) for s in range(K)]
    P = [el * x for x in held]
    Q = [p + H * m for p, m in zip(P, nsl)]
    R = [4 * x + H * m for x, m in zip(held, nsl)]
    Qa, Ra, Pa, sh = sum(Q), sum(R), sum(P), 1 if L else 0
    want = {}
    for rank in range(N):
        Qo, Ro, Po = (Q[rank], R[rank], P[rank]) if L else (0, 0, 0)
        step, pay = Qa - Qo + (N - 1) * Qo, S * (Pa - Po + (N - 1) * Po)
        if rank == 0:
            sent = S * step + S * (K - sh) * H + (Ra - Ro) + (N - 1) * Ro + k * H
            recv = S * step + sh * (N - 1) * H
        else:
            sent = S * step + (K - sh) * H + sh * (N - 2) * Ro + k * H
            recv = S * step + sh * S * H + (Ra - Ro) + sh * (Ro + (N - 2) * H)
        want[("worker", rank)] = (sent, recv, pay, pay)
    for j in range(k):
        s = L + j
        want[("server", j)] = (S * N * Q[s] + (N - 1) * R[s], S * (N * Q[s] + H) + R[s] + (N - 1) * H + N * H,
                               S * N * P[s], S * N * P[s])
    keys = held[:L] + [0] * (N - L) + held[L:]
    return want, keys, (N, L, k, w, pk, n, len(pieces))


def measured(r):
    out = {}
    for e in r["ranks"]:
        key = ("server", e["server"]) if e.get("role") == "server" else ("worker", e["rank"])
        out[key] = (e["traffic"]["bytes_sent"], e["traffic"]["bytes_received"], e["traffic"]["dropped"],
                    e["memory"]["by_tag"].get("server", 0))
    return out


def main():
    r = json.load(open(sys.argv[1]))
    el = 4 if r["config"].get("wire", "fp32") == "fp32" else 2
    want, keys, (N, L, k, w, pk, n, nparts) = expect(r, el)
    got = measured(r)
    assert sorted(got) == sorted(want), "processes %s, want %s" % (sorted(got), sorted(want))
    bad = ["%s %d: sent/received %s, want %s" % (p[0], p[1], got[p][:2], want[p][:2]) for p in sorted(want)
           if got[p][:2] != want[p][:2] or got[p][2]]
    assert not bad, "; ".join(bad)
    mem = [got[("worker", i)][3] for i in range(N)] + [got[("server", j)][3] for j in range(k)]
    per_key = 4 * (N + 3) + (2 if el == 2 else 0)  # a 16-bit wire adds the replies' encode buffer
    assert mem == [per_key * x for x in keys], "server memory %s, want %d x keys %s" % (mem, per_key, keys)
    held = [x for i, x in enumerate(keys) if i < L or i >= N]  # the servers' keys, in server order
    W = sum(w)
    # each server within its share: one key a bucket without partitions (each piece rounds once),
    # one partition scaled by the weights with them (the greedy stripe's bound)
    tol = pk * max(w) / min(w) + 1 if pk else nparts
    off = [(s, x, n * w[s] / W) for s, x in enumerate(held) if abs(x - n * w[s] / W) > tol]
    assert not off, "servers off their shares (server, keys, share): %s, tolerance %g" % (off, tol)
    msg = "N=%d k=%d keys %s%s" % (N, k, keys, ", %d partitions of %d keys" % (nparts, pk) if pk else "")
    if len(sys.argv) > 2:  # the same run on fp32: the steps' payload moved here is exactly half of it
        f = json.load(open(sys.argv[2]))
        want4, _, _ = expect(f, 4)
        got4 = measured(f)
        for p in want:
            for i in (0, 1):
                assert got4[p][i] - got[p][i] == want4[p][2 + i] // 2, "%s %d: fp32 %d - bf16 %d != half the steps' %d" % (
                    p[0], p[1], got4[p][i], got[p][i], want4[p][2 + i])
        msg += ", the steps' payload halved (%d of %d bytes sent by rank 0)" % (want[("worker", 0)][2], want4[("worker", 0)][2])
    print(msg)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("ps_traffic.py: %s" % e)
        sys.exit(1)
