#!/usr/bin/env python3
"""lab8.py - lab 8's table: each run's model states per process against the formula of its architecture

usage: python3 docs/labs/lab8.py REPORT.json [REPORT.json ...]

For every train report (ringside.report/1): its architecture, N, the parameters Psi (a full
replica's params tag / 4; under ZeRO the optimizer tags' sum / K, the shards adding up), K (bytes of optimizer state a parameter: SGD 4, AdamW 8), the formula
of the model states (params + grads + optimizer + server tags) a process holds, its value, what
the process measured, and beside it what the formula leaves out: activations and comm. One line
per kind of process (DataParallel's rank 0 and its other ranks apart, a dedicated server apart).
Plain python3, no packages needed.
"""
import json
import sys

STATES = ("params", "grads", "optimizer", "server")


def tag(e, t):
    return e["memory"]["by_tag"].get(t, 0)


def formulas(arch, n, k):
    """[(who, formula text, bytes per Psi)] of one architecture at N = n with K = k."""
    if arch == "ring":
        return [("every rank", f"(4 + 4 + {k}) Psi", 8 + k)]
    if arch == "zero-1":
        return [("every rank", f"8 Psi + {k} Psi/N", 8 + k / n)]
    if arch == "zero-2":
        return [("every rank", f"4 Psi + {4 + k} Psi/N", 4 + (4 + k) / n)]
    if arch == "zero-3":
        return [("every rank", f"{8 + k} Psi/N", (8 + k) / n)]
    # a server keeps the parameters, the sum and N receive buffers (4 (N + 2) Psi) and the optimizer's state
    if arch == "ps-colocated":
        return [("rank 0", f"8 Psi + 4(N+2) Psi + {k} Psi", 8 + 4 * (n + 2) + k), ("other ranks", "8 Psi", 8)]
    if arch == "ps-dedicated":
        return [("a worker", "8 Psi", 8), ("the server", f"4(N+2) Psi + {k} Psi", 4 * (n + 2) + k)]
    if arch == "ps-sharded":
        return [("every rank", f"8 Psi + (4(N+2) + {k}) Psi/N", 8 + (4 * (n + 2) + k) / n)]
    return []


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    print(f"{'report':<24} {'arch':<13} {'N':>2} {'process':<12} {'formula':<28} {'predicted':>12} {'measured':>12} "
          f"{'activations':>12} {'comm':>12} {'states':>7}")
    for path in argv:
        with open(path) as f:
            r = json.load(f)
        arch, n = r["backend"]["architecture"], r["run"]["world"]
        k = 8 if r["config"].get("optimizer") == "adamw" else 4
        ranks = r["ranks"]
        ws = [e for e in ranks if e.get("role", "worker") == "worker"]
        # Psi: a full replica's params tag / 4; under ZeRO the shards of the optimizer's state add up to K Psi
        psi = sum(tag(e, "optimizer") for e in ws) / k if arch.startswith("zero") else max(tag(e, "params") for e in ws) / 4
        groups = {"every rank": [e for e in ranks if e.get("role", "worker") == "worker"],
                  "rank 0": [e for e in ranks if e.get("role", "worker") == "worker" and e["rank"] == 0],
                  "other ranks": [e for e in ranks if e.get("role", "worker") == "worker" and e["rank"] != 0],
                  "a worker": [e for e in ranks if e.get("role", "worker") == "worker"],
                  "the server": [e for e in ranks if e.get("role") == "server"]}
        for who, text, per in formulas(arch, n, k):
            es = groups[who]
            if not es:
                continue
            e = max(es, key=lambda x: sum(tag(x, t) for t in STATES))
            states = sum(tag(e, t) for t in STATES)
            rest = states + tag(e, "activations") + tag(e, "comm")
            name = path.rsplit("/", 1)[-1]
            print(f"{name:<24} {arch:<13} {n:>2} {who:<12} {text:<28} {per * psi:>12,.0f} {states:>12,} "
                  f"{tag(e, 'activations'):>12,} {tag(e, 'comm'):>12,} {100 * states / rest:>6.1f}%")
    print("(Psi from the params tag, 4 bytes a parameter, or ZeRO's optimizer shards; measured: the process holding the most of its kind; "
          "states: the model states' share of states + activations + comm)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
