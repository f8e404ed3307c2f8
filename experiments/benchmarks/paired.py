#!/usr/bin/env python3
"""paired.py - two programs' busbw side by side from interleaved repeats: medians with quartiles and the paired ratios

usage: paired.py LABEL A_FILE... -- B_FILE...

A_FILE and B_FILE are the outputs of one repeat each (rows in the bench's format: size, count,
type, time, algbw, busbw, #wrong), in the same order on both sides, so that A_FILE i and B_FILE i
ran back to back (a pair). Prints one Markdown row per size: A's and B's median busbw with their
quartiles (q1-q3), the ratio of the medians, and the median (min-max) of the per-pair ratios A/B,
which a noisy machine moves less than the medians (both sides of a pair see the same load).
"""
import statistics
import sys


def busbw_by_size(path):
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 7 and f[0].isdigit():
            out[int(f[0])] = float(f[5])
    return out


def quartiles(v):
    if len(v) < 2:
        return v[0], v[0], v[0]
    q1, q2, q3 = statistics.quantiles(v, n=4, method="inclusive")
    return q1, q2, q3


def size_text(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def main(argv):
    if len(argv) < 4 or "--" not in argv[2:]:
        sys.exit(__doc__.split("\n\n")[1])
    label, rest = argv[1], argv[2:]
    cut = rest.index("--")
    a = [busbw_by_size(p) for p in rest[:cut]]
    b = [busbw_by_size(p) for p in rest[cut + 1:]]
    if len(a) != len(b):
        sys.exit(f"paired.py: {len(a)} files against {len(b)}: the pairs need the same count")
    for s in sorted({k for d in a + b for k in d}):
        av = [d[s] for d in a if s in d]
        bv = [d[s] for d in b if s in d]
        pairs = [x[s] / y[s] for x, y in zip(a, b) if s in x and s in y and y[s] > 0]
        if not av or not bv or not pairs:
            continue
        a1, am, a3 = quartiles(av)
        b1, bm, b3 = quartiles(bv)
        print(f"| {label} | {size_text(s)} | {am:.3f} ({a1:.3f}-{a3:.3f}) | {bm:.3f} ({b1:.3f}-{b3:.3f}) | "
              f"{am / bm if bm > 0 else float('nan'):.2f} | **{statistics.median(pairs):.2f}** "
              f"({min(pairs):.2f}-{max(pairs):.2f}) |")


if __name__ == "__main__":
    main(sys.argv)
