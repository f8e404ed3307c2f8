#!/usr/bin/env python3
# compare_runs.py - holds two runs to each other: loss curves (relative) and saved parameters (absolute + relative)
"""usage: compare_runs.py REPORT_A REPORT_B [--params A.bin B.bin] [--tol 1e-5] [--params-tol T]

Exits 0 when the loss curves agree within tol relative (|a-b| <= tol * max(|a|, |b|, 1e-3))
and the parameters within the parameters' tolerance (|a-b| <= T * max(1, |a|); T is tol unless
--params-tol gives it); prints the largest differences."""
import json, struct, sys


def curve(path):
    with open(path) as f:
        return [p[1] for p in json.load(f)["summary"]["loss_curve"]]


def floats(path):
    with open(path, "rb") as f:
        data = f.read()
    return struct.unpack("<%df" % (len(data) // 4), data)


def main(argv):
    tol = 1e-5
    if "--tol" in argv:
        i = argv.index("--tol")
        tol = float(argv[i + 1])
        del argv[i:i + 2]
    ptol = None
    if "--params-tol" in argv:
        i = argv.index("--params-tol")
        ptol = float(argv[i + 1])
        del argv[i:i + 2]
    params = None
    if "--params" in argv:
        i = argv.index("--params")
        params = argv[i + 1:i + 3]
        del argv[i:i + 3]
    a, b = curve(argv[0]), curve(argv[1])
    if len(a) != len(b):
        print("curves differ in length: %d vs %d" % (len(a), len(b)))
        return 1
    worst = max(abs(x - y) / max(abs(x), abs(y), 1e-3) for x, y in zip(a, b))
    print("loss curves: %d steps, max relative difference %.3g (tolerance %g)" % (len(a), worst, tol))
    ok = worst <= tol
    if params:
        pa, pb = floats(params[0]), floats(params[1])
        if len(pa) != len(pb) or not pa:
            print("parameter files differ in length: %d vs %d" % (len(pa), len(pb)))
            return 1
        pw = max(abs(x - y) / max(1.0, abs(x)) for x, y in zip(pa, pb))
        ptol = tol if ptol is None else ptol
        print("parameters: %d values, max difference %.3g (tolerance %g)" % (len(pa), pw, ptol))
        ok = ok and pw <= ptol
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
