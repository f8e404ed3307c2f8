#!/usr/bin/env python3
"""lab6.py - lab 6: tables of ringside train reports, each run beside the formula it should follow.

usage: python3 docs/labs/lab6.py runs   REPORT.json ...   part 1: throughput, steps, loss, staleness
       python3 docs/labs/lab6.py table1 REPORT.json ...   part 2: comm per step against BytePS's Table 1
       python3 docs/labs/lab6.py pace   REPORT.json ...   CPU seconds and busy link time of every process

Every run is under an emulated link (--link) of B bytes/s each way; n workers, batch b per
worker, M = the gradient's bytes (memory.by_tag.params), S = the slowest rank's --straggler ms.

runs prints each run's samples/s beside its link bound, what the formulas of the lab give
with no compute at all (so the measurement can only come in below it):
    ring                     n b / (S + 2(n-1)/n M/B)
    ps sync, ssp (k servers) n b / (S + max(M/B, n M/(k B)))      (ssp: the straggler sets the pace)
    ps async (k servers)     min(k b B/M, sum over workers of b / (S_w + 2M/B))
                             (a server's interface takes one push of M per M/B; a worker
                             pushes M and pulls M on its own interface every step)
and the mean loss over the last quarter of the loss curve (the curve is per server step under
async and ssp), the evaluation at the end, and under async and ssp each worker's local steps.
Its "step ms" column is each worker's median step time, one figure where they agree, else the
fastest's / the slowest's (a/b): under a straggler the slow rank's, under async each its own.

table1 prints comm_total per step (mean over workers) beside the run's line of Table 1
(Jiang et al., OSDI 2020, section 4.1): ring 2(n-1)M/(nB), k dedicated servers max(M/B, nM/(kB)),
BytePS 2n(n-1)M/((n^2+kn-2k)B), sharded 2(n-1)M/(nB); the milliseconds above the line; and
for dedicated servers with partitions, n partition times (n tau, tau = a partition's bytes / B),
what the last partition's answer takes to leave its server's interface for the n workers after
the last piece of it is in: the pipeline's end, which the table leaves out.

pace prints, per process, its CPU seconds (cpu_s) and the seconds its emulated interface was
busy sending and receiving (traffic.link_busy_s), and per run the cores the processes kept busy
on average (sum of cpu_s / wall_s) and the busiest interface's share of the training time (its
busy seconds / the time from the first step's start to the last step's end). Plain python3.
"""
import json
import os
import sys


def reports(paths):
    """[(path, report)] of the train reports among paths, in order; other JSON files (a folder's
    claims.json, figures.json, summary.json) are left out."""
    out = []
    for path in paths:
        with open(path) as f:
            r = json.load(f)
        if isinstance(r, dict) and r.get("schema") == "ringside.report/1":
            out.append((path, r))
    if not out:
        raise ValueError("no ringside train reports among " + " ".join(paths))
    return out


def workers(r):
    return [k for k in r["ranks"] if k.get("role", "worker") == "worker"]


def name(path):
    return os.path.splitext(os.path.basename(path))[0]


def link_bps(r):
    link = r.get("env", {}).get("link") or {}
    return link.get("bandwidth_bytes_per_s") or 0


def stragglers(r):
    """{rank: ms} of --straggler RANK:MS[,RANK:MS]."""
    out = {}
    for part in (r["config"].get("straggler") or "").split(","):
        if ":" in part:
            rank, ms = part.split(":", 1)
            out[int(rank)] = out.get(int(rank), 0) + float(ms)
    return out


def how(r):
    c = r["config"]
    if c["sync"] == "ps":
        s = "ps " + c.get("ps-consistency", "sync")
        if c["ps-placement"] == "dedicated":
            s += f" k={c['ps-servers']}"
        else:
            s += " " + c["ps-placement"]
        return s
    return c["sync"]


def loss_tail(r):
    curve = [p[1] for p in r["summary"]["loss_curve"]]
    k = max(1, len(curve) // 4)
    return sum(curve[-k:]) / k


def throughput_bound(r):
    """samples/s the link allows with no compute (the formulas of the docstring); 0 without a link."""
    B, c = link_bps(r), r["config"]
    if not B:
        return 0
    n, b = r["run"]["world"], c["batch"]
    M = workers(r)[0]["memory"]["by_tag"]["params"]
    slow = stragglers(r)
    S = max(slow.values(), default=0) / 1e3
    if c["sync"] == "ring":
        return n * b / (S + 2 * (n - 1) / n * M / B)
    if c["sync"] == "ps" and c["ps-placement"] == "dedicated":
        k = c["ps-servers"]
        if c.get("ps-consistency", "sync") == "async":
            server = k * b * B / M
            own = sum(b / (slow.get(w, 0) / 1e3 + 2 * M / B) for w in range(n))
            return min(server, own)
        return n * b / (S + max(M / B, n * M / (k * B)))
    return 0


def cmd_runs(paths):
    print("# step ms: the workers' median step, the fastest's / the slowest's where they differ (a straggler, async)")
    print(f"{'run':<18} {'sync':<14} {'strag':>7} {'mom':>4} {'steps':>5} {'samples/s':>9} {'bound':>7} {'x':>5} "
          f"{'step ms':>8} {'loss(last 1/4)':>14} {'eval loss':>9} {'acc':>5}  local steps (staleness max)")
    for p, r in reports(paths):
        s, c, w = r["summary"], r["config"], workers(r)
        bound = throughput_bound(r)
        thr = s["throughput_samples_per_s"]
        steps_ms = sorted({round(k["time_s"]["step"]["median"] * 1e3, 1) for k in w})
        step = "/".join(f"{x:g}" for x in (steps_ms if len(steps_ms) <= 2 else [steps_ms[0], steps_ms[-1]]))
        local = ""
        if any("staleness" in k for k in w):
            local = " ".join(str(k["staleness"]["steps"]) for k in w) + f"  ({max(k['staleness']['max'] for k in w)})"
        budget = f" {c['time-budget']:g}s" if c.get("time-budget") else ""
        print(f"{name(p):<18} {how(r) + budget:<14} {c.get('straggler') or '-':>7} {c['momentum']:>4g} {s['steps']:>5} "
              f"{thr:>9.0f} {bound:>7.0f} {thr / bound if bound else 0:>5.2f} {step:>8} {loss_tail(r):>14.4f} "
              f"{s['final_eval_loss']:>9.4f} {s['final_accuracy']:>5.3f}  {local}")


def partition_s(r):
    """Seconds one partition takes on the link (--ps-partition-kb; auto: 2 ms, at least 64 KiB,
    at most 4 MiB); None without partitions."""
    B, p = link_bps(r), str(r["config"].get("ps-partition-kb", "auto"))
    if not B or p == "off":
        return None
    nbytes = min(max(B * 0.002, 65536), 4194304) if p == "auto" else float(p) * 1024
    return int(nbytes / 4) * 4 / B


def table1_units(r):
    """(architecture, line in units of M/B) of the run, or (None, 0)."""
    c, n = r["config"], r["run"]["world"]
    k = c.get("ps-servers", 1)
    if c["sync"] in ("ring", "nccl"):
        return "ring", 2 * (n - 1) / n
    if c["sync"] == "ps" and c["ps-placement"] == "sharded":
        return "sharded", 2 * (n - 1) / n
    if c["sync"] == "ps" and c["ps-placement"] == "dedicated":
        return f"{k} dedicated", max(1, n / k)
    if c["sync"] == "byteps":
        return f"byteps k={k}", 2 * n * (n - 1) / (n * n + k * n - 2 * k)
    return None, 0


def cmd_table1(paths):
    print(f"{'run':<18} {'architecture':<13} {'n':>2} {'M bytes':>10} {'B bytes/s':>11} {'M/B ms':>7} {'line ms':>8} "
          f"{'comm ms':>8} {'x line':>6} {'above ms':>8} {'n tau ms':>8}")
    for p, r in reports(paths):
        arch, units = table1_units(r)
        B = link_bps(r)
        if not arch or not B:
            print(f"{name(p):<18} (not on a line of Table 1, or no --link)")
            continue
        n, w = r["run"]["world"], workers(r)
        M = w[0]["memory"]["by_tag"]["params"]
        line = units * M / B
        comm = sum(k["time_s"]["phases"]["comm_total"] for k in w) / len(w)
        tau = partition_s(r) if arch.endswith("dedicated") else None
        more = f"{n * tau * 1e3:>8.2f}" if tau else f"{'-':>8}"
        print(f"{name(p):<18} {arch:<13} {n:>2} {M:>10,} {B:>11,} {M / B * 1e3:>7.2f} {line * 1e3:>8.2f} "
              f"{comm * 1e3:>8.2f} {comm / line:>6.2f} {(comm - line) * 1e3:>8.2f} {more}")


def cmd_pace(paths):
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    for p, r in reports(paths):
        wall, train = r["run"]["wall_s"], r["summary"]["time_curve"][-1][1]
        print(f"== {name(p)}: {how(r)}, n={r['run']['world']}, link {r['config']['link']}, "
              f"wall {wall:.2f} s, training (first step to last) {train:.2f} s")
        print(f"   {'process':<12} {'cpu_s':>7} {'link tx s':>10} {'link rx s':>10}")
        busiest = 0
        for k in r["ranks"]:
            t = k["traffic"].get("link_busy_s") or {"tx": 0, "rx": 0}
            busiest = max(busiest, t["tx"], t["rx"])
            who = f"server {k['server']}" if k.get("role") == "server" else f"rank {k['rank']}"
            print(f"   {who:<12} {k['cpu_s']:>7.3f} {t['tx']:>10.3f} {t['rx']:>10.3f}")
        cpu = sum(k["cpu_s"] for k in r["ranks"])
        print(f"   cores kept busy: {cpu:.2f} CPU s / {wall:.2f} s wall = {cpu / wall:.2f} of the {cores} this shell may use")
        print(f"   busiest interface: {busiest:.2f} s busy / {train:.2f} s of training = {busiest / train:.2f}")


def main(argv):
    cmds = {"runs": cmd_runs, "table1": cmd_table1, "pace": cmd_pace}
    if len(argv) < 2 or argv[0] not in cmds:
        print(__doc__.strip(), file=sys.stderr if argv[:1] not in (["-h"], ["--help"]) else sys.stdout)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    try:
        cmds[argv[0]](argv[1:])
    except (OSError, ValueError, KeyError) as e:
        print(f"lab6.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
