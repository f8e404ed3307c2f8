#!/usr/bin/env python3
"""labs_check.py - checks the outcomes each lab page promises, on the files its commands wrote

usage: python3 tests/labs_check.py LAB DIR [LOG]

LAB is 1..5, DIR the folder the lab's commands ran in (a copy of the repository root), LOG the
lab's output (lab 5 looks for the skeleton's message in it). Prints one line per check,
"ok - ..." or "not ok - ...", and exits 1 when any check failed. tests/integration/labs.sh
runs it after each lab; the numbers checked are the machine-independent ones the pages quote.
"""
import json
import os
import sys

H_PS, H_RING, H_STUDENT = 56, 48, 40  # header bytes per message: ps/wire.h, allreduce/ring.h, allreduce/student.c

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
        check(peaks[0] - peaks[1] == (N + 3) * P, "lab 2: ps rank 0's extra peak = (N+3)P")
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


def main(argv):
    if len(argv) < 2 or argv[0] not in "12345" or len(argv[0]) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    d, log = argv[1], argv[2] if len(argv) > 2 else None
    [lab1, lab2, lab3, lab4, lab5][int(argv[0]) - 1](d, log)
    bad = results.count(False)
    print(f"# lab {argv[0]}: {len(results) - bad} checks ok, {bad} not ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
