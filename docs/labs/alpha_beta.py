#!/usr/bin/env python3
"""alpha_beta.py - lab 4: fits alpha and beta to a ringside bench report, then predicts ps and ring.

usage: python3 docs/labs/alpha_beta.py BENCH.json [--layers 784,256,10] [--ranks 2,4,8]
                                       [--bucket-mb 25] [--out FIT.json]

The model: one message of m bytes costs alpha + m * beta seconds. An all-reduce of n bytes over
N ranks costs t = alpha * A + beta * B, with (experiments/predict.h):
    ring:          A = 2(N-1)   B = 2(N-1)/N * n   (reduce-scatter + all-gather, N-1 steps each)
    ps colocated:  A = 2(N-1)   B = 2(N-1) * n     (rank 0's link carries the others' push and pull)
The bench report holds (size, time) rows of one back end on N ranks: each row is one equation
t_i = alpha * A_i + beta * B_i. Least squares on the relative residuals (t_i - model_i) / t_i,
so that the small sizes (which set alpha) weigh as much as the large ones (which set beta), as
`ringside matrix` does when given the same bench report. Plain python3, no packages needed.
"""
import argparse
import json
import math
import sys


def coeffs(sync, n_ranks, n_bytes):
    """(A, B) of one reduction of n_bytes over n_ranks ranks."""
    if n_ranks <= 1:
        return 0.0, 0.0
    if sync in ("ring", "nccl", "student"):
        return 2.0 * (n_ranks - 1), 2.0 * (n_ranks - 1) / n_ranks * n_bytes
    if sync == "ps":  # colocated
        return 2.0 * (n_ranks - 1), 2.0 * (n_ranks - 1) * n_bytes
    raise ValueError(f"no model for --sync {sync}")


def fit(sync, n_ranks, sizes, times):
    """alpha, beta >= 0 minimising sum(((t - alpha A - beta B) / t)^2); and the RMS relative error."""
    a, b = [], []
    for s, t in zip(sizes, times):
        A, B = coeffs(sync, n_ranks, s)
        a.append(A / t)
        b.append(B / t)
    # the normal equations of min sum (1 - alpha a_i - beta b_i)^2
    saa = sum(x * x for x in a)
    sbb = sum(y * y for y in b)
    sab = sum(x * y for x, y in zip(a, b))
    sa, sb = sum(a), sum(b)
    det = saa * sbb - sab * sab
    alpha = (sa * sbb - sb * sab) / det
    beta = (sb * saa - sa * sab) / det
    if alpha < 0 or beta < 0:  # keep the better one-term fit
        a1, b2 = max(sa / saa, 0.0), max(sb / sbb, 0.0)
        e1 = sum((1 - a1 * x) ** 2 for x in a)
        e2 = sum((1 - b2 * y) ** 2 for y in b)
        alpha, beta = (a1, 0.0) if e1 <= e2 else (0.0, b2)
    rms = math.sqrt(sum((1 - alpha * x - beta * y) ** 2 for x, y in zip(a, b)) / len(a))
    return alpha, beta, rms


def step_comm(sync, n_ranks, n_bytes, bucket_bytes, alpha, beta):
    """Seconds of communication per step: the gradient in buckets, one reduction each."""
    total, left = 0.0, n_bytes
    while left > 0:
        m = min(left, bucket_bytes)
        A, B = coeffs(sync, n_ranks, m)
        total += alpha * A + beta * B
        left -= m
    return total


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("bench", help="a bench report (ringside bench ... --report FILE)")
    p.add_argument("--layers", default="784,256,10", help="the model (default 784,256,10)")
    p.add_argument("--ranks", default="2,4,8", help="N to predict for (default 2,4,8)")
    p.add_argument("--bucket-mb", type=float, default=25, help="train's --bucket-mb (default 25)")
    p.add_argument("--out", help="also write the fit and the predictions as JSON")
    o = p.parse_args()

    with open(o.bench) as f:
        r = json.load(f)
    if r.get("schema") != "ringside.bench/1":
        sys.exit(f"alpha_beta.py: {o.bench} is not a bench report (schema {r.get('schema')!r})")
    sync, n = r["config"]["sync"], int(r["config"]["ranks"])
    if n < 2:
        sys.exit("alpha_beta.py: a bench on one rank sends nothing: run it with -n 2 or more")
    rows = [row for row in r["rows"] if row["time_us"] > 0]
    sizes = [float(row["size_bytes"]) for row in rows]
    times = [row["time_us"] * 1e-6 for row in rows]
    alpha, beta, rms = fit(sync, n, sizes, times)
    print(f"# fit to {len(rows)} sizes of {o.bench} (sync {sync}, N={n}):")
    print(f"alpha = {alpha:.4g} s    ({alpha * 1e6:.1f} us per message)")
    bw = f"{1 / beta / 1e9:.3f} GB/s" if beta > 0 else "infinite"
    print(f"beta  = {beta:.4g} s/byte   (1/beta = {bw})")
    print(f"RMS relative error of the fit: {rms * 100:.1f}%")
    print(f"# {'size(B)':>10} {'measured us':>12} {'model us':>10}")
    for s, t in zip(sizes, times):
        A, B = coeffs(sync, n, s)
        print(f"  {int(s):>10} {t * 1e6:>12.1f} {(alpha * A + beta * B) * 1e6:>10.1f}")

    layers = [int(x) for x in o.layers.split(",")]
    params = sum(layers[i] * layers[i + 1] + layers[i + 1] for i in range(len(layers) - 1))
    nbytes = 4 * params
    print(f"# model {o.layers}: {params:,} parameters, n = {nbytes:,} bytes of gradient per step")
    print(f"# predicted communication per step (ms):")
    print(f"  {'N':>3} {'ring':>10} {'ps':>10}")
    pred = []
    for N in [int(x) for x in o.ranks.split(",")]:
        ring = step_comm("ring", N, nbytes, o.bucket_mb * 1024 * 1024, alpha, beta)
        ps = step_comm("ps", N, nbytes, o.bucket_mb * 1024 * 1024, alpha, beta)
        print(f"  {N:>3} {ring * 1e3:>10.3f} {ps * 1e3:>10.3f}")
        pred.append({"ranks": N, "ring_s": ring, "ps_s": ps})
    if o.out:
        with open(o.out, "w") as f:
            json.dump({"alpha_s": alpha, "beta_s_per_byte": beta, "rms_relative_error": rms, "source": o.bench,
                       "layers": layers, "gradient_bytes": nbytes, "predictions": pred}, f, indent=1)
        print(f"# written: {o.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
