#!/usr/bin/env python3
"""labs_check.py - checks the outcomes each lab page promises, on the files its commands wrote

usage: python3 tests/labs_check.py LAB DIR [LOG]

LAB is 1..8, DIR the folder the lab's commands ran in (a copy of the repository root), LOG the
lab's output (lab 5 looks for the skeleton's message in it). Prints one line per check,
"ok - ..." or "not ok - ...", and exits 1 when any check failed. tests/integration/labs.sh
runs it after each lab; the numbers checked are the machine-independent ones the pages quote.
"""
import json
import os
import sys

H_PS, H_RING, H_STUDENT = 56, 48, 40  # header bytes per message: ps/wire.h, allreduce/ring.h, allreduce/mesh.c

results = []


def check(ok, what):
    results.append(bool(ok))
    print(("ok - " if ok else "not ok - ") + what)
    return ok


def load(d, rel):
    path = os.path.join(d, rel)
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        check(False, f"{rel}: {e}")
        return None


def params(layers):
    return sum(layers[i] * layers[i + 1] + layers[i + 1] for i in range(len(layers) - 1))


def workers(r):
    return [k for k in r["ranks"] if k.get("role", "worker") == "worker"]


def servers(r):
    return [k for k in r["ranks"] if k.get("role") == "server"]


def lab1(d, log):
    for w in (64, 256, 1024):
        r = load(d, f"results/lab1/w{w}.json")
        if not r:
            continue
        L, B = r["config"]["layers"], r["config"]["batch"]
        m = r["ranks"][0]["memory"]
        P = 4 * params(L)
        check(m["by_tag"]["params"] == P, f"lab 1, width {w}: params bytes {m['by_tag']['params']} = 4*sum(in*out+out) = {P}")
        check(m["by_tag"]["grads"] == P and m["by_tag"]["optimizer"] == P, f"lab 1, width {w}: grads = optimizer = params")
        act = 4 * B * (sum(L) + 2 * max(L)) + 4 * B + 8
        check(m["by_tag"]["activations"] == act, f"lab 1, width {w}: activations {m['by_tag']['activations']} = {act}")
        check(m["peak_bytes"] == 3 * P + act, f"lab 1, width {w}: peak {m['peak_bytes']} = 3 params + activations")
        t = r["ranks"][0]["traffic"]
        check(t["bytes_sent"] == 0 and t["bytes_received"] == 0, f"lab 1, width {w}: no traffic on one rank")
        check(r["summary"]["final_accuracy"] >= 0.85, f"lab 1, width {w}: eval accuracy {r['summary']['final_accuracy']:.3f} >= 0.85")
    r = load(d, "results/lab1/w256.json")
    if r:
        data = r["config"]["data"]
        mnist = os.path.exists(os.path.join(d, "../shared/data/mnist/t10k-images-idx3-ubyte.gz")) or \
            os.path.exists(os.path.join(d, "../shared/data/mnist/t10k-images-idx3-ubyte"))
        check((data != "synthetic") == mnist, f"lab 1: trained on {data} ({'MNIST present' if mnist else 'no MNIST: synthetic'})")


def lab2(d, log):
    ps, ring = load(d, "results/lab2/ps.json"), load(d, "results/lab2/ring.json")
    if ps:
        N, S = ps["run"]["world"], ps["summary"]["steps"]
        P = 4 * params(ps["config"]["layers"])
        w = workers(ps)
        peaks = [k["memory"]["peak_bytes"] for k in w]
        check(peaks[0] > max(peaks[1:]), f"lab 2: ps rank 0's peak {peaks[0]} above every other rank's (max {max(peaks[1:])})")
        check(w[0]["memory"]["by_tag"]["server"] == (N + 3) * P, f"lab 2: ps rank 0's server bytes = (N+3)P = {(N + 3) * P}")
        comm = [k["memory"]["by_tag"]["comm"] for k in w]
        check(all(c == P + H_PS for c in comm[1:]), f"lab 2: ps workers' comm = one reply held, P+H = {P + H_PS}: {comm[1:]}")
        check(comm[0] > N * P, f"lab 2: ps rank 0's comm holds the N pushes at once (> NP = {N * P}): {comm[0]}")
        check(peaks[0] - peaks[1] == (N + 3) * P + comm[0] - comm[1],
              "lab 2: ps rank 0's extra peak = (N+3)P + its extra comm")
        for k in w[1:]:
            t = k["traffic"]
            check(t["bytes_sent"] == S * (P + H_PS) + H_PS and t["bytes_received"] == (S + 1) * (P + H_PS),
                  f"lab 2: ps rank {k['rank']} sent S(P+H)+H, received (S+1)(P+H)")
        t = w[0]["traffic"]
        check(t["bytes_sent"] == (N - 1) * (S + 1) * (P + H_PS), f"lab 2: ps rank 0 sent (N-1)(S+1)(P+H) = {(N - 1) * (S + 1) * (P + H_PS)}")
        check(t["bytes_received"] == (N - 1) * (S * (P + H_PS) + H_PS), "lab 2: ps rank 0 received (N-1)(S(P+H)+H)")
    if ring:
        N, S = ring["run"]["world"], ring["summary"]["steps"]
        P = 4 * params(ring["config"]["layers"])
        w = workers(ring)
        check(len({k["memory"]["peak_bytes"] for k in w}) == 1, "lab 2: ring peaks equal on every rank")
        t = w[0]["traffic"]
        want = S * 2 * (N - 1) / N * P + P + H_RING * t["messages_sent"]  # chunks + start-up broadcast + headers
        check(abs(t["bytes_sent"] - want) <= 1e-3 * want,
              f"lab 2: ring rank 0 sent {t['bytes_sent']} = S 2(N-1)/N P + P + 48 x {t['messages_sent']} messages = {want:.0f} (0.1%)")
    for name, K in (("ps-dedicated", 1), ("ps-dedicated-2", 2)):
        r = load(d, f"results/lab2/{name}.json")
        if not r:
            continue
        N = r["run"]["world"]
        P = 4 * params(r["config"]["layers"])
        w, s = workers(r), servers(r)
        check(len({k["memory"]["peak_bytes"] for k in w}) == 1 and all(k["memory"]["by_tag"]["server"] == 0 for k in w),
              f"lab 2: {name}: workers' memory equal, no server bytes on any worker")
        check(len(s) == K and sum(k["memory"]["by_tag"]["server"] for k in s) == (N + 3) * P,
              f"lab 2: {name}: {K} server entr{'y' if K == 1 else 'ies'} holding (N+3)P in all")
    f = load(d, "results/lab2/figures.json")
    if f:
        check(all(f.get(x, {}).get("status") == "drawn" for x in ("memory", "traffic")), "lab 2: memory and traffic figures drawn")


def lab3(d, log):
    for name in ("global-batch-4", "dp-global-batch-4"):
        r = load(d, f"results/lab3/{name}.json")
        if not r:
            continue
        w = workers(r)
        S = r["summary"]["steps"]
        check([k["samples"] for k in w] == [S] * 4 + [0] * 4, f"lab 3: {name}: ranks 0-3 {S} samples, ranks 4-7 none")
        fw = [k["time_s"]["phases"]["forward"] for k in w]
        working = sum(fw[:4]) / 4
        check(max(fw[4:]) <= 0.5 * working, f"lab 3: {name}: idle ranks' forward {max(fw[4:]) * 1e3:.4f} ms <= half the working ranks' {working * 1e3:.4f} ms")
        if name == "global-batch-4":
            sent = {k["traffic"]["bytes_sent"] for k in w[1:]}
            check(len(sent) == 1, "lab 3: idle ranks send as many bytes as working ones (ranks 1-7 alike)")
        else:
            g = [k["memory"]["by_tag"]["gather"] for k in w]
            B, C = r["config"]["global-batch"], r["config"]["layers"][-1]
            check(g == [4 * B * (2 * C + 1)] + [0] * 7, f"lab 3: {name}: gather {g[0]} = 4B(2C+1) on rank 0 only")
    r = load(d, "results/lab3/batch-4.json")
    if r:
        S = r["summary"]["steps"]
        check([k["samples"] for k in workers(r)] == [4 * S] * 8, f"lab 3: --batch 4: every rank {4 * S} samples")
    c = load(d, "results/lab3/claims.json")
    if c:
        check(c[3]["claim"] == 4 and c[3]["verdict"] == "PASS", f"lab 3: claim 4 {c[3]['verdict']}")
    for C in (10, 100, 1000):
        r = load(d, f"results/lab3/dp-classes-{C}.json")
        if not r:
            continue
        B = r["config"]["global-batch"]
        g = [k["memory"]["by_tag"]["gather"] for k in workers(r)]
        check(g[0] == 4 * B * (2 * C + 1) and not any(g[1:]), f"lab 3: C={C}: gather {g[0]} = 4B(2C+1) = {4 * B * (2 * C + 1)} on rank 0 only")


def lab4(d, log):
    b = load(d, "results/lab4/bench-ring-n2.json")
    if b:
        check(b["summary"]["wrong"] == 0 and len(b["rows"]) == 7, "lab 4: bench: 7 sizes, #wrong 0")
    f = load(d, "results/lab4/fit.json")
    if f:
        check(f["alpha_s"] > 0 and f["beta_s_per_byte"] > 0, f"lab 4: fit alpha {f['alpha_s']:.3g} s > 0, beta {f['beta_s_per_byte']:.3g} s/B > 0")
    s = load(d, "results/lab4/scaling/summary.json")
    if s:
        check(s["complete"] and s["runs_done"] == 6 and s["runs_failed"] == 0, "lab 4: matrix: 6 runs, all ok")
        p = (s.get("prediction") or {}).get("links", {}).get("default")
        if f:
            same = p and abs(p["alpha_s"] - f["alpha_s"]) <= 1e-6 * f["alpha_s"] and \
                abs(p["beta_s_per_byte"] - f["beta_s_per_byte"]) <= 1e-6 * f["beta_s_per_byte"]
            check(same, "lab 4: the matrix fitted the same alpha and beta as docs/labs/alpha_beta.py")
            pred = {(x["ranks"], k): x[k + "_s"] for x in f["predictions"] for k in ("ring", "ps")}
            for row in s["runs"]:
                key = (row["axes"]["ranks"], row["axes"]["sync"])
                ok = row["predicted_comm_s"] and abs(row["predicted_comm_s"] - pred[key]) <= 1e-6 * pred[key]
                check(ok, f"lab 4: {row['cell']}: matrix prediction {row['predicted_comm_s']} = the lab's {pred[key]:.6g}")
    c = load(d, "results/lab4/scaling/claims.json")
    if c:
        check(c[0]["verdict"] == "PASS" and c[1]["verdict"] == "PASS", f"lab 4: claims 1 and 2 (bytes) {c[0]['verdict']}, {c[1]['verdict']}")
        check(c[5]["verdict"] in ("PASS", "FAIL"), f"lab 4: claim 6 decided ({c[5]['verdict']}: times, machine-dependent)")
    f = load(d, "results/lab4/scaling/figures.json")
    if f:
        check(f.get("step_time", {}).get("status") == "drawn", "lab 4: step_time figure drawn")


def lab5(d, log):
    text = open(log).read() if log and os.path.exists(log) else ""
    check("allreduce/student.c: student_allreduce is not implemented yet (lab 5)" in text,
          "lab 5: the skeleton's bench fails with the 'not implemented yet (lab 5)' message")
    check("FAILED" not in text, "lab 5: no solution bench reported FAILED")
    for n in (1, 2, 3, 4):
        r = load(d, f"results/lab5/check/student-n{n}.json")
        if r:
            check(r["config"]["ranks"] == n and r["summary"]["wrong"] == 0 and len(r["rows"]) == 9
                  and r["rows"][-1]["size_bytes"] == 512 * 1024,
                  f"lab 5: solution bench -n {n}: #wrong 0 over {len(r['rows'])} sizes, 8 B to 512 KiB as the page says")
    for name in ("student", "ring"):
        r = load(d, f"results/lab5/bench-{name}.json")
        if r:
            check(r["summary"]["wrong"] == 0, f"lab 5: bench --sync {name} -n 4: #wrong 0")
            how = {t.get("transport") for t in r["summary"].get("traffic", [])}
            check(how == {"tcp"}, f"lab 5: bench --sync {name} moved over tcp, one transport for both ({how})")
    check("# ringside fit:" in text and "\n  tcp " in text, "lab 5: ringside fit printed the ring's TCP alpha and beta")
    st, ri = load(d, "results/lab5/train/student.json"), load(d, "results/lab5/train/ring.json")
    if st and ri:
        a, b = st["summary"]["final_loss"], ri["summary"]["final_loss"]
        check(abs(a - b) <= 1e-3 * abs(b), f"lab 5: training with --sync student: final loss {a:.6f} vs ring {b:.6f}")
        N, S = st["run"]["world"], st["summary"]["steps"]
        P = 4 * params(st["config"]["layers"])
        sent = [k["traffic"]["bytes_sent"] for k in workers(st)]
        check(N == 4 and sent[1:] == [S * 2 * (P + H_STUDENT)] * 3, "lab 5: recursive doubling: ranks 1-3 send 2(P+40) per step")
        check(sent[0] == S * 2 * (P + H_STUDENT) + (N - 1) * (P + H_STUDENT),
              "lab 5: rank 0 sends that plus the start-up broadcast, (N-1)(P+40) once, as the page says")
        check(ri["summary"]["transport"] == st["summary"]["transport"] == "tcp", "lab 5: student and ring trained over tcp, like for like")
        check(f"final loss {a:.6f}" in text, "lab 5: show.py prints the final loss to 6 decimals")
        hashes = {k.get("params_hash") for k in workers(st)}
        check(len(hashes) == 1 and None not in hashes,
              "lab 5: every rank ends with the same parameters, bit for bit (params_hash: %s)" % ", ".join(sorted(map(str, hashes))))
    f = load(d, "results/lab5/figures.json")
    if f:
        check(f.get("busbw", {}).get("status") == "drawn", "lab 5: busbw figure drawn")


def lab6_comm(r):
    w = workers(r)
    return sum(k["time_s"]["phases"]["comm_total"] for k in w) / len(w)


def lab6_tail(r):
    curve = [p[1] for p in r["summary"]["loss_curve"]]
    k = max(1, len(curve) // 4)
    return sum(curve[-k:]) / k


def lab6(d, log):
    thr = lambda r: r["summary"]["throughput_samples_per_s"]
    # part 1: b B / M, the dedicated server's interface bound under async (n = 4, b = 32, 1 Gbit/s)
    r0, a0 = load(d, "results/lab6/sweep/ring-s0.json"), load(d, "results/lab6/sweep/async-s0.json")
    if a0:
        M = a0["ranks"][0]["memory"]["by_tag"]["params"]
        bound = a0["config"]["batch"] * a0["env"]["link"]["bandwidth_bytes_per_s"] / M
        check(M == 814_120 and abs(bound - 4913) < 1, f"lab 6: M = {M} = 814,120 bytes, b B/M = {bound:.0f} samples/s")
        check(0.75 * bound <= thr(a0) <= 1.1 * bound, f"lab 6: no straggler: async {thr(a0):.0f} samples/s within 0.75-1.1x of b B/M = {bound:.0f}")
    if r0 and a0:
        check(thr(r0) >= 1.2 * thr(a0), f"lab 6: no straggler: the ring {thr(r0):.0f} samples/s >= 1.2x async's {thr(a0):.0f}")
    st = {v: load(d, f"results/lab6/straggler/{v}.json") for v in ("ring", "ps-sync", "ps-async", "ps-ssp2")}
    ring, sync, asy, ssp = st["ring"], st["ps-sync"], st["ps-async"], st["ps-ssp2"]
    if ring:
        idle = [k["time_s"]["phases"]["idle"] for k in workers(ring)]
        check(min(idle[:3]) >= 0.7 * 0.030 and idle[3] <= 0.3 * 0.030,
              f"lab 6: straggler 3:30: the ring's ranks 0-2 idle {', '.join(f'{x * 1e3:.1f}' for x in idle[:3])} ms >= 21, rank 3's {idle[3] * 1e3:.1f} <= 9")
    if ring and asy:
        check(thr(asy) >= 1.25 * thr(ring), f"lab 6: straggler 3:30: async {thr(asy):.0f} samples/s >= 1.25x the ring's {thr(ring):.0f}")
        fast, slow = [k["staleness"]["steps"] for k in workers(asy)[:3]], workers(asy)[3]["staleness"]["steps"]
        check(min(fast) >= 1.5 * slow, f"lab 6: async: the fast workers' local steps {fast} >= 1.5x the straggler's {slow}")
    if ring and sync:
        check(thr(sync) < thr(ring), f"lab 6: straggler 3:30: ps sync {thr(sync):.0f} samples/s below the ring's {thr(ring):.0f}")
        a, b = sync["summary"]["final_loss"], ring["summary"]["final_loss"]
        check(abs(a - b) <= 1e-3 * abs(b), f"lab 6: ps sync and the ring end at the same loss ({a:.6f}, {b:.6f})")
    if ssp and asy:
        m = max(k["staleness"]["max"] for k in workers(ssp))
        check(m <= 2 and thr(ssp) <= 0.75 * thr(asy),
              f"lab 6: ssp:2: staleness max {m} <= 2, {thr(ssp):.0f} samples/s <= 0.75x async's {thr(asy):.0f}")
    c = load(d, "results/lab6/straggler/claims.json")
    if c:
        check(c[6]["claim"] == 7 and c[6]["verdict"] == "PASS", f"lab 6: claim 7 {c[6]['verdict']}")
        check(c[7]["verdict"] == "NOT-RUN", f"lab 6: claim 8 NOT-RUN beside the stragglers ({c[7]['verdict']})")
    f = load(d, "results/lab6/straggler/figures.json")
    if f:
        check(f.get("loss", {}).get("status") == "drawn", "lab 6: loss figure drawn")
    rs = [load(d, f"results/lab6/sweep/ring-s{s}.json") for s in (0, 10, 20)] + [ring]
    if all(rs):
        t = [thr(r) for r in rs]
        check(all(x > y for x, y in zip(t, t[1:])), f"lab 6: the ring's samples/s falls with S = 0, 10, 20, 30 ms: {', '.join(f'{x:.0f}' for x in t)}")
    if a0 and asy:
        # flat within a loaded 2-core machine's noise (0.80x once in a clean-clone suite), where the ring falls to about 0.4x
        check(thr(asy) >= 0.7 * thr(a0), f"lab 6: async about flat in S: {thr(asy):.0f} at 30 ms >= 0.7x {thr(a0):.0f} at 0")
    bud = {v: load(d, f"results/lab6/budget/{v}.json") for v in ("ring-m0.5", "async-m0.5", "ring-m0.9", "async-m0.9")}
    if all(bud.values()):
        st5 = [bud[v]["summary"]["steps"] for v in ("ring-m0.5", "async-m0.5")]
        check(st5[1] >= 1.3 * st5[0], f"lab 6: 3 s budget: async {st5[1]} steps >= 1.3x the ring's {st5[0]}")
        t = {v: lab6_tail(r) for v, r in bud.items()}
        check(t["async-m0.5"] < t["ring-m0.5"], f"lab 6: 3 s budget, momentum 0.5: async's loss {t['async-m0.5']:.3f} below the ring's {t['ring-m0.5']:.3f}")
        check(t["ring-m0.9"] < 0.5 * t["async-m0.5"], f"lab 6: 3 s budget: the ring at 0.9 {t['ring-m0.9']:.3f} below half async's at 0.5 {t['async-m0.5']:.3f}")
        check(t["async-m0.9"] > 1.5 * t["async-m0.5"] and t["async-m0.9"] > 1.5,
              f"lab 6: 3 s budget: async at momentum 0.9 does not train ({t['async-m0.9']:.3f})")
        check(all(r["config"]["time-budget"] == 3 and r["summary"]["steps"] < 5000 for r in bud.values()), "lab 6: the budget, not --steps, ended every run")
    # part 2: BytePS's Table 1, n = 4, the default model (M = 7,454,760 bytes), 300 Mbit/s; partitions of 2 ms
    n, tau = 4, 0.002
    t1 = {v: load(d, f"results/lab6/table1/{v}.json") for v in ("ring", "ps-k1", "ps-k2", "ps-k4")}
    lines = {}
    if all(t1.values()):
        M = t1["ring"]["ranks"][0]["memory"]["by_tag"]["params"]
        B = t1["ring"]["env"]["link"]["bandwidth_bytes_per_s"]
        check(M == 7_454_760 and B == 37_500_000, f"lab 6: M = {M} = 7,454,760 bytes, B = {B} = 37,500,000 bytes/s")
        comm = {v: lab6_comm(r) for v, r in t1.items()}
        lines = {"ring": 2 * (n - 1) / n * M / B, "ps-k1": 4 * M / B, "ps-k2": 2 * M / B, "ps-k4": M / B}
        for v, hi in (("ring", 1.25), ("ps-k1", 1.25), ("ps-k2", 1.25), ("ps-k4", 1.4)):
            x = comm[v] / lines[v]
            check(0.95 <= x <= hi, f"lab 6: {v}: comm {comm[v] * 1e3:.1f} ms per step = {x:.2f}x its line {lines[v] * 1e3:.1f} ms (0.95-{hi})")
        check(comm["ps-k4"] < 0.85 * comm["ring"], f"lab 6: k = n = 4 servers {comm['ps-k4'] * 1e3:.1f} ms per step < 0.85x the ring's {comm['ring'] * 1e3:.1f}")
        check(comm["ps-k1"] > comm["ps-k2"] > comm["ps-k4"], "lab 6: comm per step falls with k = 1, 2, 4")
        x = comm["ps-k1"] / comm["ps-k4"]
        check(3.0 <= x <= 4.5, f"lab 6: one server takes {x:.2f}x the k = n time (3-4.5; the lines say n = 4)")
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        for v, r in t1.items():
            busy = max(max(k["traffic"]["link_busy_s"].values()) for k in r["ranks"])
            share = busy / r["summary"]["time_curve"][-1][1]
            used = sum(k["cpu_s"] for k in r["ranks"]) / r["run"]["wall_s"]
            check(share >= 0.6 and used < cores,
                  f"lab 6: {v}: the busiest interface busy {share:.2f} of the training (>= 0.6), the processes {used:.2f} of {cores} cores")
        servers_cpu = [k["cpu_s"] for k in servers(t1["ps-k4"])]
        check(len(servers_cpu) == 4 and max(servers_cpu) < min(k["cpu_s"] for k in workers(t1["ps-k4"])),
              "lab 6: k = 4: every server's cpu_s below every worker's")
    c = load(d, "results/lab6/table1/claims.json")
    if c:
        check(c[7]["claim"] == 8 and c[7]["verdict"] in ("PASS", "FAIL"), f"lab 6: claim 8 decided on the table ({c[7]['verdict']})")
        pair = c[7]["numbers"].get("k_equals_n", [])
        check(len(pair) == 1 and pair[0]["ps_comm_s"] < pair[0]["ring_comm_s"], "lab 6: claims: the k = n pair, servers below the ring")
    f = load(d, "results/lab6/table1/figures.json")
    if f:
        check(f.get("table1", {}).get("status") == "drawn", "lab 6: table1 figure drawn")
    # step 6: the same few ms above the line weigh more on a smaller gradient (784,512,10)
    sm = {v: load(d, f"results/lab6/small/{v}.json") for v in ("ring", "ps-k4", "ps-k4-p128")}
    if all(sm.values()) and lines:
        M = sm["ring"]["ranks"][0]["memory"]["by_tag"]["params"]
        B = sm["ring"]["env"]["link"]["bandwidth_bytes_per_s"]
        cs = {v: lab6_comm(r) for v, r in sm.items()}
        xr = cs["ring"] / (2 * (n - 1) / n * M / B)
        check(M == 1_628_200 and 0.95 <= xr <= 1.25, f"lab 6: M = {M} = 1,628,200 bytes: the ring {xr:.2f}x its line (0.95-1.25)")
        xs, xb = cs["ps-k4"] / (M / B), lab6_comm(t1["ps-k4"]) / lines["ps-k4"]
        check(xs >= xb + 0.1, f"lab 6: k = 4 at {xs:.2f}x its line with M = 1.6 MB, {xb:.2f}x with 7.5 MB (further off by 0.1 at least)")
        for name, r, c_, line in (("M = 1.6 MB", sm["ps-k4"], cs["ps-k4"], M / B), ("M = 7.5 MB", t1["ps-k4"], lab6_comm(t1["ps-k4"]), lines["ps-k4"])):
            check(c_ - line >= 0.5 * n * tau, f"lab 6: {name}: k = 4 {(c_ - line) * 1e3:.1f} ms above its line, >= half of n tau = {n * tau * 1e3:.0f} ms")
        check(cs["ps-k4-p128"] > cs["ps-k4"], f"lab 6: k = 4 slower with 128 KiB partitions ({cs['ps-k4-p128'] * 1e3:.1f} ms) than with 2 ms ones ({cs['ps-k4'] * 1e3:.1f})")
    one = {v: load(d, f"results/lab6/one-core/{v}.json") for v in ("ring", "ps-k4")}
    if all(one.values()) and all(t1.values()):
        for v, r in one.items():
            x = lab6_comm(r) / lab6_comm(t1[v])
            check(0.8 <= x <= 1.25, f"lab 6: {v} on one core: comm {x:.2f}x the run on every core (0.8-1.25)")


def lab7(d, log):
    n = 4 * params([784, 1024, 10])
    bw = 25e6  # --link 200mbit, bytes per second
    runs = {k: load(d, f"results/lab7/{k}.json") for k in ("machines-4", "flat-2x2", "hier-2x2", "flat-3x2", "hier-3x2")}
    r = runs["machines-4"]
    if r:
        S = r["summary"]["steps"]
        last = workers(r)[-1]["traffic"]["bytes_sent"] / S  # rank 3 forwards none of the start-up broadcast
        check(1.5 * n <= last <= 1.01 * 1.5 * n, f"lab 7: 4 machines: rank 3's NIC {last:,.0f} B a step = 2(N-1)/N n = {1.5 * n:,.0f} (+ headers)")
    for name, M, ratio in (("flat-2x2", 2, 1.5), ("hier-2x2", 2, 1.0), ("flat-3x2", 3, 5 / 3), ("hier-3x2", 3, 4 / 3)):
        r = runs[name]
        if not r:
            continue
        S = r["summary"]["steps"]
        want_arch = "ring-hierarchical" if name.startswith("hier") else "ring"
        check(r["backend"]["architecture"] == want_arch and r["config"]["nodes"] == M, f"lab 7: {name}: {want_arch} on {M} nodes")
        last = sum(k["traffic"]["by_link"]["network"]["bytes_sent"] for k in workers(r) if k["node"] == M - 1) / S
        check(ratio * n <= last <= 1.01 * ratio * n, f"lab 7: {name}: the last node's NIC {last:,.0f} B a step = {ratio:.3g} n = {ratio * n:,.0f} (+ headers)")
    # BytePS on 2 machines of 2 with k = 2 CPU servers: a node's NIC 2.0 n flat (n = 4 workers),
    # 1.0 n with the machine-level reduce (n = 2 machines); the reduce the faster
    bp = {k: load(d, f"results/lab7/{k}.json") for k in ("byteps-2x2", "byteps-hier-2x2")}
    for name, want_arch, ratio in (("byteps-2x2", "byteps", 2.0), ("byteps-hier-2x2", "byteps-hierarchical", 1.0)):
        r = bp[name]
        if not r:
            continue
        S = r["summary"]["steps"]
        check(r["backend"]["architecture"] == want_arch and r["backend"]["servers"] == 2, f"lab 7: {name}: {want_arch} with 2 CPU servers")
        last = sum(k["traffic"]["by_link"]["network"]["bytes_sent"] for k in workers(r) if k["node"] == 1) / S
        check(ratio * n <= last <= 1.02 * ratio * n, f"lab 7: {name}: node 1's NIC {last:,.0f} B a step = {ratio:.3g} n = {ratio * n:,.0f} (+ headers)")
    if all(bp.values()):
        tf, th = (bp[k]["summary"]["step_time_s"] for k in ("byteps-2x2", "byteps-hier-2x2"))
        check(th < tf, f"lab 7: BytePS with the machine-level reduce ({th * 1e3:.1f} ms) faster than without ({tf * 1e3:.1f} ms)")
    f, h = runs["flat-2x2"], runs["hier-2x2"]
    if f:
        t, bound = f["summary"]["step_time_s"], 1.5 * n / bw
        check(abs(t - bound) <= 0.15 * bound, f"lab 7: flat ring on 2 nodes: {t * 1e3:.1f} ms a step, within 15% of its NIC bound {bound * 1e3:.1f} ms")
    if f and h:
        tf, th = f["summary"]["step_time_s"], h["summary"]["step_time_s"]
        check(th < tf, f"lab 7: on 2 nodes the hierarchical ring ({th * 1e3:.1f} ms) is faster than the flat ring ({tf * 1e3:.1f} ms)")


def lab8(d, log):
    page = 4096
    psi = params([784, 1024, 1024, 10])
    assert psi == 1_863_690

    def states(e):
        return sum(e["memory"]["by_tag"][t] for t in ("params", "grads", "optimizer", "server"))

    runs = {k: load(d, f"results/lab8/{k}.json") for k in ("ring", "zero1", "zero2", "zero3", "ps", "ps-dedicated", "ps-sharded",
                                                            "zero2-n2", "zero2-n8", "ps-n2", "ps-n8")}
    # (report, architecture, N, the process's formula in Psi, its slack in bytes: one element a bucket (DDP's
    # two here: the first of at most 1 MiB, the rest) for a shard, two pages a bucket more for a shard counted by pages)
    b = 2
    want = [("ring", "ring", 4, lambda n: 16, 0), ("zero1", "zero-1", 4, lambda n: 8 + 8 / n, 8 * b),
            ("zero2", "zero-2", 4, lambda n: 4 + 12 / n, b * (12 + 2 * page)),
            ("zero2-n2", "zero-2", 2, lambda n: 4 + 12 / n, b * (12 + 2 * page)),
            ("zero2-n8", "zero-2", 8, lambda n: 4 + 12 / n, b * (12 + 2 * page)),
            ("zero3", "zero-3", 4, lambda n: 16 / n, 3 * (16 + 2 * 2 * page)),  # a shard a layer (3), two tags by pages
            ("ps-sharded", "ps-sharded", 4, lambda n: 8 + (4 * (n + 2) + 8) / n, 4 * 10 * b)]
    for name, arch, n, per, slack in want:
        r = runs[name]
        if not r:
            continue
        check(r["backend"]["architecture"] == arch and r["run"]["world"] == n, f"lab 8: {name}: {arch} at N = {n}")
        got = [states(e) for e in workers(r)]
        check(all(abs(g - per(n) * psi) <= slack for g in got),
              f"lab 8: {name}: every rank's model states {max(got):,} within {slack} B of {per(n):.4g} Psi = {per(n) * psi:,.0f}")
    for name, n in (("ps-n2", 2), ("ps", 4), ("ps-n8", 8)):
        r = runs[name]
        if r:
            w = workers(r)
            check(states(w[0]) == (24 + 4 * n) * psi and all(states(e) == 8 * psi for e in w[1:]),
                  f"lab 8: {name}: DataParallel's rank 0 {states(w[0]):,} = (24 + 4N) Psi, the others 8 Psi")
    r = runs["ps-dedicated"]
    if r:
        check(states(servers(r)[0]) == 32 * psi and all(states(e) == 8 * psi for e in workers(r)),
              f"lab 8: the dedicated server {states(servers(r)[0]):,} = 4(N+2) Psi + 8 Psi = 32 Psi, its workers 8 Psi")
    if runs["zero1"] and runs["zero2"] and runs["ring"]:
        p1, p2, pr = (runs[k]["ranks"][0]["memory"]["peak_bytes"] for k in ("zero1", "zero2", "ring"))
        check(abs(p2 - p1) <= 64 << 10 and p1 < pr,
              f"lab 8: ZeRO-2's peak {p2:,} within 64 KiB of ZeRO-1's {p1:,} (the gradient in flight), both below the ring's {pr:,}")
    if runs["zero3"] and runs["zero1"]:
        p3, p1 = (runs[k]["ranks"][0]["memory"]["peak_bytes"] for k in ("zero3", "zero1"))
        check(p3 > p1 + (8 << 20), f"lab 8: ZeRO-3's peak {p3:,} over 8 MiB above ZeRO-1's {p1:,} (a second ring's lanes and the gathered layers)")
    h = {k: load(d, f"results/lab8/heavy-{k}.json") for k in ("ring", "zero2")}
    if all(h.values()):
        hpsi = h["ring"]["ranks"][0]["memory"]["by_tag"]["params"] / 4
        act = [e["memory"]["by_tag"]["activations"] for r in h.values() for e in workers(r)]
        check(hpsi == 632_576 and len(set(act)) == 1, f"lab 8: the heavy gpt: Psi {hpsi:,.0f}, the same activations {act[0]:,} on every rank of both")
        sr, sz = states(workers(h["ring"])[0]), max(states(e) for e in workers(h["zero2"]))
        check(sr == 16 * hpsi and abs(sz - 7 * hpsi) <= b * (12 + 2 * page), f"lab 8: the heavy gpt's states {sr:,} = 16 Psi, ZeRO-2's {sz:,} = 7 Psi (+ pages)")
        pr, pz = (h[k]["ranks"][0]["memory"]["peak_bytes"] for k in ("ring", "zero2"))
        check(sr / pr < 0.06 and 0.97 * pr < pz < pr, f"lab 8: the heavy gpt: model states {100 * sr / pr:.1f}% of the ring's peak, ZeRO-2 saves {100 * (pr - pz) / pr:.1f}% (< 3%)")
    c = load(d, "results/lab8/claims.json")
    if c:
        check(len(c) >= 12 and c[11]["claim"] == 12 and c[11]["verdict"] == "PASS", f"lab 8: claim 12 {c[11]['verdict'] if len(c) >= 12 else 'missing'}")
        check(c[11]["numbers"]["stage3_comm_time"]["verdict"] == "NOT-RUN", "lab 8: claim 12's stage-3 part NOT-RUN (no ZeRO-3 and ring pair under --link here)")
    f = load(d, "results/lab8/figures.json")
    if f:
        check(f.get("states", {}).get("status") == "drawn", "lab 8: states figure drawn")


def main(argv):
    if len(argv) < 2 or argv[0] not in "12345678" or len(argv[0]) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    d, log = argv[1], argv[2] if len(argv) > 2 else None
    [lab1, lab2, lab3, lab4, lab5, lab6, lab7, lab8][int(argv[0]) - 1](d, log)
    bad = results.count(False)
    print(f"# lab {argv[0]}: {len(results) - bad} checks ok, {bad} not ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
