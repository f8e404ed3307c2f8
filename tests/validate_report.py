#!/usr/bin/env python3
# validate_report.py - checks ringside JSON reports against docs/report-schema.md: fields, types, units, invariants
"""usage: validate_report.py [--options FILE] [--expect KEY=VALUE ...] REPORT.json ...

Validates train reports ("schema": "ringside.report/1"), bench reports ("ringside.bench/1"),
matrix summaries (summary.json, "ringside.matrix/1") and claims.json (python3 standard library only). For each file prints "ok FILE" or one line per problem,
"FILE: field.path: what is wrong"; exits 1 when any file has a problem, 2 on bad usage.

  --options FILE   the output of `ringside train --help`: config must hold exactly those options
  --expect K=V     cross-checks with what the caller ran: world=N, sync=NAME, servers=K
"""

import json
import math
import os
import re
import sys

REPORT_SCHEMA = "ringside.report/1"
BENCH_SCHEMA = "ringside.bench/1"
MATRIX_SCHEMA = "ringside.matrix/1"
PREDICT_SCHEMA = "ringside.predict/1"
TAGS = ["params", "grads", "activations", "optimizer", "comm", "server", "gather"]
PHASES = ["data", "forward", "backward", "optimizer", "comm_exposed", "idle", "other", "comm_total"]
BUSY_PHASES = ["data", "forward", "backward", "optimizer"]
STEP_PHASES = ["data", "forward", "backward", "optimizer", "comm_exposed", "idle", "other"]  # they add up to the step
DIST = ["median", "p95", "min", "max", "mean"]
# backend.architecture and its family, as train's registry names them (experiments/backends.c)
ARCHITECTURES = {"none": "none", "ring": "allreduce", "tree": "allreduce", "student": "allreduce", "ps-colocated": "ps",
                 "ps-sharded": "ps", "ps-dedicated": "ps", "byteps": "ps",
                 "ring-hierarchical": "allreduce", "tree-hierarchical": "allreduce", "byteps-hierarchical": "ps",
                 "zero-1": "zero", "zero-2": "zero", "zero-3": "zero"}
REL = 1e-6  # relative tolerance for numbers the report derives from other numbers in it


class Checker:
    """Collects problems; each check names the field it looked at."""

    def __init__(self):
        self.problems = []

    def fail(self, path, msg):
        self.problems.append("%s: %s" % (path, msg))

    def get(self, obj, key, path, kind, required=True):
        """obj[key] when it has the kind ('int', 'num', 'str', 'bool', 'list', 'dict'), else None."""
        where = "%s.%s" % (path, key) if path else key
        if not isinstance(obj, dict) or key not in obj:
            if required:
                self.fail(where, "missing")
            return None
        v = obj[key]
        ok = {
            "int": isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v == int(v),
            "num": isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
            "str": isinstance(v, str),
            "bool": isinstance(v, bool),
            "list": isinstance(v, list),
            "dict": isinstance(v, dict),
        }[kind]
        if not ok:
            self.fail(where, "expected %s, got %s" % (kind, json.dumps(v)[:60]))
            return None
        return int(v) if kind == "int" else v

    def nonneg(self, obj, key, path, kind="num", required=True):
        v = self.get(obj, key, path, kind, required)
        if v is not None and v < 0:
            self.fail("%s.%s" % (path, key), "negative (%s)" % v)
        return v

    def expect(self, cond, path, msg):
        if not cond:
            self.fail(path, msg)
        return cond


def close(a, b, rel=REL, abs_=1e-12):
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


# JSON has no NaN or infinity: a report writes them as these strings (docs/report-schema.md)
NONFINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def report_value(v):
    """A number as a report holds it: the float of a JSON number or of "nan", "inf", "-inf"; else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    return NONFINITE.get(v) if isinstance(v, str) else None


def same_value(a, b):
    """Two report values equal: both the same non-finite kind, or close numbers."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return close(a, b)


# ---- train report: the blocks --------------------------------------------------------------


def check_run(c, rep):
    run = c.get(rep, "run", "", "dict")
    if run is None:
        return None
    for k in ("id", "git", "host", "cmdline"):
        c.get(run, k, "run", "str")
    started = c.get(run, "started", "run", "str")
    if started is not None:
        c.expect(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", started), "run.started",
                 "not UTC ISO 8601 (YYYY-MM-DDTHH:MM:SSZ): %s" % started)
    world = c.get(run, "world", "run", "int")
    if world is not None:
        c.expect(world >= 1, "run.world", "must be >= 1")
    c.nonneg(run, "wall_s", "run")
    return run


def check_env(c, rep):
    env = c.get(rep, "env", "", "dict")
    if env is None:
        return
    devs = c.get(env, "devices", "env", "list")
    if devs is not None:
        c.expect(len(devs) >= 1, "env.devices", "empty (the CPU is always listed)")
        for i, d in enumerate(devs):
            c.get(d, "name", "env.devices[%d]" % i, "str")
            c.get(d, "description", "env.devices[%d]" % i, "str")
        if devs and isinstance(devs[0], dict):
            c.expect(devs[0].get("name") == "cpu", "env.devices[0].name", "the CPU comes first")
    for k in ("zeromq", "cjson", "zlib", "blas"):
        c.get(env, k, "env", "str")
    c.get(env, "cuda_build", "env", "bool")
    if "nccl" in env or "nccl_built" in env:  # CUDA builds; none before they had them
        for k in ("nccl", "nccl_built"):
            v = c.get(env, k, "env", "str")
            c.expect(v is None or re.fullmatch(r"\d+\.\d+\.\d+", v or "") is not None, "env." + k,
                     "%r is not a version X.Y.Z" % (v,))
        c.expect(env.get("cuda_build") is True, "env.nccl", "present in a build without CUDA")
    if "cpu_kernels_isa" in env:  # reports before it had none
        c.expect(env["cpu_kernels_isa"] in ("avx2", "sse2"), "env.cpu_kernels_isa",
                 "%r is not avx2 or sse2" % (env["cpu_kernels_isa"],))


def help_options(text):
    """Config keys from `ringside train --help`: '--no-x' options appear as 'x'."""
    keys = set()
    for m in re.finditer(r"^\s+(?:-\w, )?--([a-z][a-z0-9-]*)", text, re.M):
        name = m.group(1)
        keys.add(name[3:] if name.startswith("no-") else name)
    return keys


def check_config(c, rep, options):
    cfg = c.get(rep, "config", "", "dict")
    if cfg is None:
        return {}
    c.get(cfg, "sync", "config", "str")
    layers = c.get(cfg, "layers", "config", "list")
    if layers is not None:
        c.expect(len(layers) >= 2 and all(isinstance(x, int) and x > 0 for x in layers), "config.layers",
                 "expected >= 2 positive integers: %s" % layers)
    for k in ("ranks", "batch", "steps", "warmup", "global-batch", "ps-servers"):
        c.nonneg(cfg, k, "config", "int")
    for k in ("lr", "momentum", "bucket-mb", "timeout"):
        c.nonneg(cfg, k, "config")
    for k in ("ps-placement", "ps-mode", "report", "data", "device"):
        c.get(cfg, k, "config", "str")
    for k in ("overlap", "shuffle", "drop-last"):
        c.get(cfg, k, "config", "bool")
    if options is not None:
        missing = sorted(options - set(cfg))
        extra = sorted(set(cfg) - options)
        c.expect(not missing, "config", "options of `train --help` missing: %s" % ", ".join(missing))
        c.expect(not extra, "config", "keys that are no option of `train --help`: %s" % ", ".join(extra))
    return cfg


def check_memory(c, e, path):
    mem = c.get(e, "memory", path, "dict")
    if mem is None:
        return
    p = path + ".memory"
    peak = c.nonneg(mem, "peak_bytes", p, "int")
    tags = c.get(mem, "by_tag", p, "dict")
    if tags is not None:
        c.expect(sorted(tags) == sorted(TAGS), p + ".by_tag", "tags %s, expected %s" % (sorted(tags), sorted(TAGS)))
        for t in TAGS:
            v = c.nonneg(tags, t, p + ".by_tag", "int")
            if v is not None and peak is not None:
                c.expect(v <= peak, "%s.by_tag.%s" % (p, t), "peak of one tag (%d) above the total peak (%d)" % (v, peak))
        if peak is not None and all(isinstance(tags.get(t), (int, float)) for t in TAGS):
            c.expect(peak <= sum(tags[t] for t in TAGS), p + ".peak_bytes",
                     "total peak %d above the sum of the tags' peaks %d" % (peak, sum(tags[t] for t in TAGS)))
    c.nonneg(mem, "device_used_bytes", p, "int")
    if "process_device_bytes" not in mem:
        c.expect(False, p + ".process_device_bytes", "missing (null where NVML cannot tell)")
    elif mem["process_device_bytes"] is not None:
        c.nonneg(mem, "process_device_bytes", p, "int")
    rss = c.nonneg(mem, "host_peak_rss_bytes", p, "int")
    if rss is not None:
        c.expect(rss == 0 or rss >= 1 << 20, p + ".host_peak_rss_bytes", "%d: a process is at least 1 MiB (bytes, not KiB?)" % rss)


TRANSPORTS = ("", "nccl", "inproc", "shm", "ipc", "tcp")  # fastest first, as engine/sync.c orders them


def slowest_transport(names):
    return max(names, key=lambda t: TRANSPORTS.index(t) if t in TRANSPORTS else 0, default="")


def check_traffic(c, e, path):
    if "cpu_s" in e:  # reports before it had none
        c.expect(isinstance(e["cpu_s"], (int, float)) and e["cpu_s"] >= 0, path + ".cpu_s", "%r is not >= 0" % (e["cpu_s"],))
    tr = c.get(e, "traffic", path, "dict")
    if tr is None:
        return None
    p = path + ".traffic"
    v = {k: c.nonneg(tr, k, p, "int") for k in
         ("bytes_sent", "bytes_received", "messages", "messages_sent", "messages_received", "dropped")}
    how = c.get(tr, "transport", p, "str")
    if how is not None:
        c.expect(how in TRANSPORTS, p + ".transport", "%r, expected one of %s" % (how, ", ".join(map(repr, TRANSPORTS))))
        c.expect(how != "" or (v["bytes_sent"] == 0 and v["bytes_received"] == 0), p + ".transport",
                 "'' (nothing moved), but the rank sent %s and received %s bytes" % (v["bytes_sent"], v["bytes_received"]))
    got = tr.get("transport_received")
    if got is not None:  # what it received over (reports before it had none)
        c.expect(got in TRANSPORTS, p + ".transport_received",
                 "%r, expected one of %s" % (got, ", ".join(map(repr, TRANSPORTS))))
        c.expect((got == "") == (v["bytes_received"] == 0), p + ".transport_received",
                 "%r, but the rank received %s bytes ('' is nothing received)" % (got, v["bytes_received"]))
        net = ((tr.get("by_link") or {}).get("network") or {}).get("bytes_received")
        c.expect(not (isinstance(net, (int, float)) and net > 0) or got == "tcp", p + ".transport_received",
                 "%r, but %s bytes came over the network (by_link): tcp" % (got, net))
    measured = c.get(tr, "measured", p, "bool")
    if measured is not None and how is not None:
        c.expect(measured == (how != "nccl"), p + ".measured",
                 "%r with transport %r: only nccl's counts are derived (from the ring it ran)" % (measured, how))
    wc = tr.get("wire_collective")
    if wc is not None:  # nccl only: the element type NCCL's collective moves
        c.expect(how == "nccl" and wc in ("fp32", "bf16", "fp16", "fp8e4m3", "fp8e5m2"), p + ".wire_collective",
                 "%r with transport %r: only nccl names its collective's type (fp32, bf16, fp16, fp8e4m3, fp8e5m2)"
                 % (wc, how))
    bc = tr.get("broadcast")
    if bc is not None:  # nccl only: the call that ran the start's broadcast
        c.expect(how == "nccl" and bc == "allreduce", p + ".broadcast",
                 "%r with transport %r: only nccl names its broadcast's call ('allreduce')" % (bc, how))
    busy = tr.get("link_busy_s")
    if busy is not None:  # --link only: the interface's booked seconds each way
        c.expect(isinstance(busy, dict) and all(isinstance(busy.get(k), (int, float)) and busy[k] >= 0
                                                for k in ("tx", "rx")), p + ".link_busy_s", "%r is not {tx, rx} >= 0" % (busy,))
    if None in v.values():
        return None
    c.expect(v["messages"] == v["messages_sent"] + v["messages_received"], p + ".messages",
             "%d != messages_sent + messages_received (%d)" % (v["messages"], v["messages_sent"] + v["messages_received"]))
    c.expect((v["bytes_sent"] > 0) == (v["messages_sent"] > 0), p, "bytes_sent and messages_sent disagree on zero")
    c.expect((v["bytes_received"] > 0) == (v["messages_received"] > 0), p,
             "bytes_received and messages_received disagree on zero")
    if v["messages_sent"]:
        c.expect(v["bytes_sent"] >= v["messages_sent"], p, "fewer bytes than messages sent: every message has a header")
    by = tr.get("by_link")
    if by is not None:  # where the back end tells its links apart: inside the node and across the network add up
        for k in ("bytes_sent", "bytes_received"):
            parts = [(by.get(l) or {}).get(k) for l in ("node", "network")] if isinstance(by, dict) else [None]
            ok = all(isinstance(x, int) and x >= 0 for x in parts) and sum(parts) == v[k]
            c.expect(ok, p + ".by_link", "node + network %s %r != %s %d" % (k, parts, k, v[k]))
        if how in ("shm", "ipc") and isinstance(by, dict):  # the slowest link inside the node: nothing crossed it
            c.expect((by.get("network") or {}).get("bytes_sent") == 0, p + ".by_link.network",
                     "bytes over the network from a rank whose slowest link is %s" % how)
    return v


def backend_of(rep):
    """The report's backend object ({} where it has none: check_backend says so)."""
    b = (rep or {}).get("backend")
    return b if isinstance(b, dict) else {}


def check_backend(c, rep, cfg, key="sync"):
    """backend: the --sync row's name (config's key), family and architecture (one of train's),
    the server processes it started and whether its ranks step in lockstep (not async, not ssp:S
    with S >= 1)."""
    b = c.get(rep, "backend", "", "dict")
    if b is None:
        return {}
    name = c.get(b, "name", "backend", "str")
    c.expect(name == cfg.get(key), "backend.name", "%r, config.%s is %r" % (name, key, cfg.get(key)))
    arch, fam = c.get(b, "architecture", "backend", "str"), c.get(b, "family", "backend", "str")
    c.expect(arch in ARCHITECTURES, "backend.architecture", "unknown architecture %r" % arch)
    c.expect(fam == ARCHITECTURES.get(arch, fam), "backend.family", "%r for architecture %r (expected %r)"
             % (fam, arch, ARCHITECTURES.get(arch)))
    k = c.nonneg(b, "servers", "backend", "int")
    c.expect(k == 0 or arch in ("ps-dedicated", "byteps", "byteps-hierarchical"), "backend.servers", "%s server processes for architecture %r"
             % (k, arch))
    if ARCHITECTURES.get(arch) == "zero":  # the stage the architecture names, as --zero-stage said
        st = c.get(b, "zero_stage", "backend", "int")
        said = cfg.get("zero-stage", cfg.get("zero_stage"))  # train's option, bench's key
        c.expect(st == int(arch.split("-")[1]) and st == said, "backend.zero_stage",
                 "%r for architecture %r, the config's stage %r" % (st, arch, said))
    else:
        c.expect("zero_stage" not in b, "backend.zero_stage", "given for architecture %r" % arch)
    ls = c.get(b, "lockstep", "backend", "bool")
    how = cfg.get("ps-consistency", "sync")
    c.expect(ls is None or ls == (how in ("sync", "ssp:0")), "backend.lockstep", "%s under --ps-consistency %s" % (ls, how))
    return b


def tree_links(n, r, t):
    """(parent, [children]) of rank r in tree t (0 or 1) of --sync tree over n ranks, as
    allreduce/tree.h builds them: tree 0 in-order on the ranks by their lowest set bit, tree 1 its
    mirror (n even) or its shift by one (n odd); -1 for no parent."""
    def btree(x):
        if n < 2:
            return -1, []
        if x == 0:
            top = 1
            while 2 * top < n:
                top *= 2
            return -1, [top]
        b = x & -x
        up = (x - b) | (2 * b)
        parent, h, kids = (up if up < n else x - b), b // 2, []
        if h:
            kids.append(x - h)
            while h and x + h >= n:
                h //= 2
            if h:
                kids.append(x + h)
        return parent, kids
    if t == 0 or n < 2:
        return btree(r)
    odd = n % 2
    where = (r - 1) % n if odd else n - 1 - r
    back = (lambda y: (y + 1) % n) if odd else (lambda y: n - 1 - y)
    p, kids = btree(where)
    return (back(p) if p >= 0 else -1), [back(k) for k in kids]


def tree_degree(n, r):
    """[neighbours of rank r in tree 0, in tree 1]: each sends and receives half of a bucket once
    per neighbour, each way (allreduce/tree.h)."""
    return [(p >= 0) + len(k) for p, k in (tree_links(n, r, t) for t in (0, 1))]


def lockstep(b):
    """Whether every rank took the same steps (backend.lockstep; a report without it: yes)."""
    return b.get("lockstep") is not False


def resumed_at(rep):
    """The step a resumed run began at (summary.resumed_from.step), 0 for a run from the start."""
    rf = ((rep or {}).get("summary") or {}).get("resumed_from")
    st = rf.get("step") if isinstance(rf, dict) else None
    return st if isinstance(st, int) and not isinstance(st, bool) else 0


def budgeted(cfg):
    """Whether --time-budget may have ended the run before --steps."""
    return isinstance(cfg.get("time-budget"), (int, float)) and cfg["time-budget"] > 0


def check_time(c, e, path, cfg, run, rep=None):
    ts = c.get(e, "time_s", path, "dict")
    if ts is None:
        return None
    p = path + ".time_s"
    step = c.get(ts, "step", p, "dict")
    d = {}
    if step is not None:
        d = {k: c.nonneg(step, k, p + ".step") for k in DIST}
        if None not in d.values():
            c.expect(d["min"] <= d["median"] <= d["max"], p + ".step", "median %g not within [min %g, max %g]"
                     % (d["median"], d["min"], d["max"]))
            c.expect(d["min"] <= d["p95"] <= d["max"], p + ".step", "p95 not within [min, max]")
            c.expect(d["median"] <= d["p95"], p + ".step", "p95 below the median")
            c.expect(d["min"] * (1 - REL) <= d["mean"] <= d["max"] * (1 + REL), p + ".step", "mean not within [min, max]")
    phases = c.get(ts, "phases", p, "dict")
    ph = {}
    if phases is not None:
        c.expect(sorted(phases) == sorted(PHASES), p + ".phases", "phases %s, expected %s" % (sorted(phases), PHASES))
        ph = {k: c.nonneg(phases, k, p + ".phases") for k in PHASES}
    busy = c.nonneg(ts, "busy", p)
    gemm = c.nonneg(ts, "gemm", p, required=False)
    timed = c.nonneg(ts, "timed_steps", p, "int")
    if ph and None not in ph.values():
        if busy is not None:
            want = sum(ph[k] for k in BUSY_PHASES)
            c.expect(close(busy, want, 1e-9), p + ".busy", "%g != data+forward+backward+optimizer (%g)" % (busy, want))
        if d.get("mean") is not None and timed:
            # one timeline for every back end: the seven phases add up to the step
            total = sum(ph[k] for k in STEP_PHASES)
            c.expect(abs(total - d["mean"]) <= 0.02 * d["mean"] + 1e-9, p + ".phases",
                     "the seven phases (%g s) do not add up to the mean step (%g s)" % (total, d["mean"]))
            c.expect(ph["idle"] + ph["comm_exposed"] <= d["mean"] * (1 + 1e-6) + 1e-9, p + ".phases",
                     "idle + comm_exposed above the step")
        if gemm is not None:
            c.expect(gemm <= (ph["forward"] + ph["backward"]) * 1.05 + 1e-4, p + ".gemm",
                     "GEMM seconds %g above forward+backward %g" % (gemm, ph["forward"] + ph["backward"]))
        # one rank of ring or none has nobody to talk to; one rank of ps or byteps still has its
        # in-process server, whose update the pull waits for (counted as communication, as on N ranks)
        b = backend_of(rep)
        if b.get("architecture") == "none" or ((run or {}).get("world") == 1 and b.get("family") != "ps"):
            c.expect(ph["comm_total"] <= 1e-3, p + ".phases.comm_total", "%g s of communication with nothing to talk to"
                     % ph["comm_total"])
    steps = ((rep or {}).get("summary") or {}).get("steps") if budgeted(cfg) else cfg.get("steps")
    if isinstance(steps, int):  # --resume: the steps this process took are timed, those before it were not
        steps -= resumed_at(rep)
    if timed is not None and isinstance(steps, int) and isinstance(cfg.get("warmup"), int) and steps > 0 and lockstep(backend_of(rep)):
        s, w = steps, cfg["warmup"]
        c.expect(timed == (s - w if w < s else s), p + ".timed_steps", "%d, expected steps - warmup = %d"
                 % (timed, s - w if w < s else s))
    # run.wall_s is rank 0's: every rank's steps fit in it in lockstep; under async and ssp a slow
    # worker may still be stepping when rank 0, whose own pushes go over inproc, is done
    if timed and d.get("mean") is not None and run and isinstance(run.get("wall_s"), (int, float)) and \
            (lockstep(backend_of(rep)) or e.get("rank") == 0):
        c.expect(d["mean"] * timed <= run["wall_s"] * 1.01 + 1e-3, p + ".step",
                 "timed steps (%g s) take longer than the whole run (%g s): seconds?" % (d["mean"] * timed, run["wall_s"]))
    return d


# ---- train report: ranks and summary --------------------------------------------------------


def check_server(c, e, path, run, rep):
    """A dedicated parameter server's entry: its id, no samples, its own time_s block."""
    sid = c.nonneg(e, "server", path, "int")
    n = (run or {}).get("world")
    if sid is not None and isinstance(e.get("rank"), int) and isinstance(n, int):
        c.expect(e["rank"] == n + sid, path + ".rank", "%d, a server's is world + server id = %d" % (e["rank"], n + sid))
    samples = c.nonneg(e, "samples", path, "int")
    c.expect(samples in (None, 0), path + ".samples", "a server trains on no samples")
    ts = c.get(e, "time_s", path, "dict")
    if ts is None:
        return
    p = path + ".time_s"
    busy, total = c.nonneg(ts, "busy", p), c.nonneg(ts, "busy_total", p)
    serve, steps = c.nonneg(ts, "serve", p), c.nonneg(ts, "steps", p, "int")
    want = (rep.get("summary") or {}).get("steps")
    if isinstance(want, int):  # a resumed server counts this run's steps
        want -= resumed_at(rep)
    if steps is not None and isinstance(want, int):
        # under async and ssp the server counts pushes / N, and up to N - 1 pushes land past the budget
        slack = 0 if lockstep(backend_of(rep)) else 1
        c.expect(abs(steps - want) <= slack, p + ".steps", "%d updates, the run had %d steps" % (steps, want))
    if None not in (busy, total, steps) and steps:
        c.expect(close(busy, total / steps), p + ".busy", "%g != busy_total / steps (%g)" % (busy, total / steps))
    if None not in (total, serve):
        c.expect(total <= serve * (1 + REL) + 1e-6, p + ".busy_total", "busy %g s longer than serving %g s" % (total, serve))
    if serve is not None and run and isinstance(run.get("wall_s"), (int, float)):
        c.expect(serve <= run["wall_s"] + 5, p + ".serve", "served %g s in a run of %g s: seconds?" % (serve, run["wall_s"]))



def check_ranks(c, rep, cfg, run, expect):
    ranks = c.get(rep, "ranks", "", "list")
    if ranks is None:
        return [], []
    workers, servers = [], []
    for i, e in enumerate(ranks):
        path = "ranks[%d]" % i
        if not c.expect(isinstance(e, dict), path, "not an object"):
            continue
        role = c.get(e, "role", path, "str")
        c.expect(role in ("worker", "server"), path + ".role", "expected worker or server, got %r" % role)
        c.nonneg(e, "rank", path, "int")
        c.get(e, "device", path, "str")
        c.get(e, "host", path, "str", required=False)  # reports before it named none
        c.expect(not any(k.startswith("_") for k in e), path, "internal keys left in: %s"
                 % [k for k in e if k.startswith("_")])
        check_memory(c, e, path)
        e["_traffic"] = check_traffic(c, e, path)
        if role == "server":
            servers.append(e)
            check_server(c, e, path, run, rep)
            continue
        workers.append(e)
        c.nonneg(e, "samples", path, "int")
        e["_step"] = check_time(c, e, path, cfg, run, rep)
        check_staleness(c, e, path, cfg, backend_of(rep))
    ids = sorted(e.get("rank") for e in workers if isinstance(e.get("rank"), int))
    n = (run or {}).get("world")
    if isinstance(n, int):
        c.expect(ids == list(range(n)), "ranks", "worker ranks %s, expected 0..%d once each" % (ids, n - 1))
        c.expect(cfg.get("ranks") in (None, n), "config.ranks", "%s but run.world is %d" % (cfg.get("ranks"), n))
    order = [e.get("role") for e in ranks if isinstance(e, dict)]
    c.expect(order == sorted(order, key=lambda r: r != "worker"), "ranks", "servers must follow the workers")
    b = backend_of(rep)
    want_servers = b.get("servers", 0)
    c.expect(len(servers) == want_servers, "ranks", "%d server entries, expected %s (backend.servers, architecture %s)"
             % (len(servers), want_servers, b.get("architecture")))
    sids = sorted(e.get("rank") for e in servers if isinstance(e.get("rank"), int))
    c.expect(len(set(sids)) == len(sids), "ranks", "server ids not unique: %s" % sids)
    if cfg.get("global-batch") == 0 and workers and lockstep(b):
        counts = {e.get("samples") for e in workers}
        c.expect(len(counts) == 1, "ranks[].samples", "per-rank batches, yet workers saw different counts %s"
                 % sorted(counts))
    check_traffic_expectations(c, cfg, workers, servers, n, rep)
    check_gather(c, cfg, b, workers)
    for k, v in expect.items():
        if k == "world":
            c.expect(n == int(v), "run.world", "%s, expected %s" % (n, v))
        elif k == "sync":
            c.expect(cfg.get("sync") == v, "config.sync", "%s, expected %s" % (cfg.get("sync"), v))
        elif k == "servers":
            c.expect(len(servers) == int(v), "ranks", "%d server entries, expected %s" % (len(servers), v))
    return workers, servers


def check_gather(c, cfg, b, workers):
    """by_tag.gather: DataParallel's gathered logits, their gradient and the global batch's labels on
    rank 0, 4 B R (2C + 1) bytes (B = --global-batch, R output rows per sample, C classes); 0
    everywhere else."""
    rows, classes = output_shape(cfg)
    dp = b.get("architecture") == "ps-colocated" and cfg.get("ps-mode") == "dataparallel"
    B = cfg.get("global-batch")
    for e in workers:
        g = ((e.get("memory") or {}).get("by_tag") or {}).get("gather")
        if not isinstance(g, int) or not classes or not isinstance(B, int):
            continue
        want = 4 * B * rows * (2 * classes + 1) if dp and e.get("rank") == 0 else 0
        why = ("4 x global batch x rows per sample (%d) x (2 x classes + 1)" % rows if e.get("rank") == 0
               else "only rank 0 gathers") if dp else "no DataParallel step"
        c.expect(g == want, "ranks[rank %s].memory.by_tag.gather" % e.get("rank"),
                 "%d bytes, expected %d (%s)" % (g, want, why))


def output_shape(cfg):
    """(output rows per sample, classes per row) of the run's model: the MLP's last layer, lenet's
    10 digits, gpt's --seq-len rows over the --vocab tokens. (1, 0) where the config says neither."""
    model = cfg.get("model", "mlp")
    if model == "gpt":
        T, V = cfg.get("seq-len"), cfg.get("vocab")
        return (T, V) if isinstance(T, int) and isinstance(V, int) else (1, 0)
    if model == "lenet":
        return 1, 10
    layers = cfg.get("layers") or []
    return 1, (layers[-1] if layers else 0)


def param_bytes(cfg, workers=()):
    """The gradient's bytes: the MLP's from its layers; another model's from by_tag.params, which
    every worker holds exactly once (the smallest, so that no server's copy is counted)."""
    if cfg.get("model", "mlp") == "mlp":
        layers = cfg.get("layers") or []
        return 4 * sum(a * b + b for a, b in zip(layers, layers[1:]))
    held = [((e.get("memory") or {}).get("by_tag") or {}).get("params") for e in workers]
    held = [p for p in held if isinstance(p, int) and p > 0]
    return min(held) if held else 0


def check_traffic_expectations(c, cfg, workers, servers, n, rep):
    """Units sanity: a back end that moves the gradient every step moves at least that many bytes."""
    b, steps = backend_of(rep), (rep.get("summary") or {}).get("steps")
    if isinstance(steps, int):  # --resume: this run's traffic covers its own steps
        steps -= resumed_at(rep)
    arch, how = b.get("architecture"), (rep.get("summary") or {}).get("transport")
    G = param_bytes(cfg, workers)
    # bf16 / fp16 on the wire: 2 bytes a parameter; FP8: 1 (and a 4-byte scale a message; the ps's
    # parameter replies in bf16, above this floor)
    G //= {"bf16": 2, "fp16": 2, "fp8e4m3": 4, "fp8e5m2": 4}.get(cfg.get("wire", "fp32"), 1)
    if not isinstance(steps, int) or not G or not isinstance(n, int):
        return
    floors = {}  # rank -> (bytes_sent floor, bytes_received floor)
    if arch == "none" or (n == 1 and not servers):
        for e in workers + servers:
            t = e.get("_traffic")
            if t:
                c.expect(t["bytes_sent"] == 0 and t["bytes_received"] == 0, "ranks[rank %s].traffic" % e.get("rank"),
                         "one process alone moved bytes across a process boundary")
        return
    if arch == "ring" and how != "nccl" and n > 1:  # NCCL's bytes are not measured
        per = 2 * (n - 1) / n * G * steps
        floors = {e.get("rank"): (per, per) for e in workers}
    elif arch in ("zero-1", "zero-2", "zero-3") and n > 1:
        # the gradient's reduce-scatter in the wire's type, the parameters' all-gather in fp32 (zero-3:
        # at least once a step, before forward; again before backward but for layers kept gathered)
        per = (n - 1) / n * (G + param_bytes(cfg, workers)) * steps
        floors = {e.get("rank"): (per, per) for e in workers}
    elif arch == "tree" and n > 1:  # half the gradient per tree, once per neighbour, each way
        floors = {}
        for e in workers:
            if isinstance(e.get("rank"), int):
                per = sum(tree_degree(n, e["rank"])) * G / 2 * steps
                floors[e["rank"]] = (per, per)
    elif arch == "byteps" and n > 1:
        # BytePS (OSDI'20, 4.1): each worker link carries 2n(n-1)/W of the gradient each way per step,
        # W = n^2 + kn - 2k; each of the k CPU servers n x = 2n(n-1)/W of it
        k = b.get("servers", 0)
        per = 2 * n * (n - 1) / (n * n + k * n - 2 * k) * G * steps
        floors = {e.get("rank"): (per, per) for e in workers}
    elif arch == "byteps-hierarchical" and n > 1:
        # one worker a machine: each node's first rank carries BytePS's figures for n = M machines;
        # the node's other ranks only the node's own messages
        m, k = cfg.get("nodes") or 1, b.get("servers", 0)
        per = 2 * m * (m - 1) / (m * m + k * m - 2 * k) * G * steps if m > 1 else 0
        floors = {e.get("rank"): (per, per) for e in workers if isinstance(e.get("rank"), int) and e["rank"] % (n // m) == 0}
    elif arch == "ps-colocated" and cfg.get("ps-mode") == "dataparallel":
        # every other rank pushes its gradient and receives the replicate each step; rank 0 the rest
        floors = {e.get("rank"): (G * steps, G * steps) for e in workers if e.get("rank") != 0}
        floors[0] = ((n - 1) * G * steps, (n - 1) * G * steps)
    elif arch in ("ps-colocated", "ps-sharded", "ps-dedicated") and cfg.get("ps-mode", "push") == "push":
        if arch == "ps-dedicated":
            floors = {e.get("rank"): (G * steps, G * steps) for e in workers}
        elif arch == "ps-sharded":
            # a shard in every worker: each pushes the others' N-1 shards and answers their N-1
            # pushes to its own, 2(N-1)/N of the gradient each way per step, as the ring
            per = 2 * (n - 1) / n * G * steps
            floors = {e.get("rank"): (per, per) for e in workers}
        else:
            floors = {e.get("rank"): (G * steps, G * steps) for e in workers if e.get("rank") != 0}
            floors[0] = ((n - 1) * G * steps, (n - 1) * G * steps)
    if b.get("family") == "ps" and servers and not budgeted(cfg):
        K = len(servers)
        for e in servers:
            t = e.get("_traffic")
            if t:
                floor = n * G * steps / K
                if arch in ("byteps", "byteps-hierarchical"):
                    m = (cfg.get("nodes") or n) if arch == "byteps-hierarchical" else n
                    floor = m * 2 * (m - 1) / (m * m + K * m - 2 * K) * G * steps
                for key in ("bytes_sent", "bytes_received"):
                    c.expect(t[key] >= 0.9 * floor, "ranks[server %s].traffic.%s" % (e.get("server"), key),
                             "%d bytes, below its shard of every worker's gradient over %d steps (%d)"
                             % (t[key], steps, floor))
    for e in workers:
        t, f = e.get("_traffic"), floors.get(e.get("rank"))
        if not t or not f or not lockstep(b) or budgeted(cfg):  # at its own pace, or stopped early
            continue
        for key, floor in zip(("bytes_sent", "bytes_received"), f):
            c.expect(t[key] >= 0.95 * floor, "ranks[rank %s].traffic.%s" % (e.get("rank"), key),
                     "%d bytes, below the %d the gradient alone needs over %d steps" % (t[key], floor, steps))


def check_staleness(c, e, path, cfg, b):
    """A worker's staleness under async and ssp:S: the parameters it computed on, in steps (its step
    minus the slowest worker's), mean <= max, max <= S under ssp:S; absent in lockstep."""
    st = c.get(e, "staleness", path, "dict", required=not lockstep(b))
    if st is None:
        return
    p = path + ".staleness"
    c.expect(not lockstep(b), p, "a staleness in a run whose ranks step in lockstep")
    n, mean, mx = c.nonneg(st, "steps", p, "int"), c.nonneg(st, "mean", p), c.nonneg(st, "max", p, "int")
    if None not in (mean, mx):
        c.expect(mean <= mx + 1e-9, p + ".mean", "%g above the max %g" % (mean, mx))
    how = cfg.get("ps-consistency", "")
    if mx is not None and how.startswith("ssp:"):
        S = int(how[4:])
        c.expect(mx <= S, p + ".max", "%d steps stale under ssp:%d" % (mx, S))


def check_summary_staleness(c, s, cfg, workers, steps, b):
    """summary.staleness (async, ssp): the consistency, its bound, the largest and mean staleness
    over the workers, and per step the pushes the server applied from each worker."""
    st = c.get(s, "staleness", "summary", "dict", required=not lockstep(b))
    if st is None:
        return
    p = "summary.staleness"
    how = c.get(st, "consistency", p, "str")
    c.expect(how == cfg.get("ps-consistency"), p + ".consistency", "%r, config says %r" % (how, cfg.get("ps-consistency")))
    mx = c.get(st, "max", p, "num")
    per = [(e.get("staleness") or {}).get("max") for e in workers]
    if mx is not None and per and None not in per:
        c.expect(mx == max(per), p + ".max", "%g != the largest worker's %g" % (mx, max(per)))
    rows = c.get(st, "pushes_per_step", p, "list")
    if rows is not None and isinstance(steps, int):
        c.expect(len(rows) == steps, p + ".pushes_per_step", "%d rows, summary.steps is %d" % (len(rows), steps))
        c.expect(all(isinstance(x, list) and len(x) == len(workers) for x in rows), p + ".pushes_per_step",
                 "each row holds one count per worker")
        past = st.get("pushes_past_last_step", 0)
        total = sum(sum(x) for x in rows if isinstance(x, list)) + (past if isinstance(past, int) else 0)
        local = sum((e.get("staleness") or {}).get("steps", 0) for e in workers)
        c.expect(total == local, p + ".pushes_per_step", "%d pushes counted, the workers took %d steps" % (total, local))


def worker_ratio(workers, value):
    vals = [value(e) for e in workers]
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    s = sum(vals)
    return max(vals) / (s / len(vals)) if s > 0 else 1.0



def step_curve(c, s, key, what, steps, encoded=False):
    """summary[key], one [step, value] point per step 0..steps-1 with every value finite and
    >= 0 (a loss, seconds): the points when they are well-formed, else None (the problem noted).
    encoded: a value may also be "nan", "inf" or "-inf" (a loss that stopped being finite); the
    points come back with those as floats."""
    curve = c.get(s, key, "summary", "list")
    if curve is None or steps is None:
        return None
    p = "summary." + key
    c.expect(len(curve) == steps, p, "%d points, summary.steps is %d" % (len(curve), steps))

    def value(v):
        return report_value(v) if encoded else (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None)
    okpts = all(isinstance(x, list) and len(x) == 2 and isinstance(x[0], (int, float)) and value(x[1]) is not None
                for x in curve)
    if not c.expect(okpts, p, "points must be [step, %s]%s" % (what, " (a non-finite loss as \"nan\", \"inf\" or \"-inf\")"
                                                               if encoded else "")):
        return None
    curve = [[x[0], value(x[1])] for x in curve]
    c.expect([x[0] for x in curve] == list(range(len(curve))), p, "steps not 0..steps-1")
    c.expect(all(x[1] >= 0 for x in curve if math.isfinite(x[1])), p,
             "a %s is negative" % ("time" if what == "seconds" else what))
    if not encoded:
        c.expect(all(math.isfinite(x[1]) for x in curve), p, "a %s is not finite" % ("time" if what == "seconds" else what))
    return curve

def check_summary(c, rep, cfg, workers):
    s = c.get(rep, "summary", "", "dict")
    if s is None:
        return
    samples = c.nonneg(s, "samples", "summary", "int")
    steps = c.nonneg(s, "steps", "summary", "int")
    if steps is not None:
        c.expect(steps >= 1, "summary.steps", "no steps")
        if isinstance(cfg.get("steps"), int) and cfg["steps"] > 0 and budgeted(cfg):
            c.expect(steps <= cfg["steps"], "summary.steps", "%d, above config.steps %d" % (steps, cfg["steps"]))
        elif isinstance(cfg.get("steps"), int) and cfg["steps"] > 0:
            c.expect(steps == cfg["steps"], "summary.steps", "%d, config.steps is %d" % (steps, cfg["steps"]))
    rf = c.get(s, "resumed_from", "summary", "dict", required=bool(cfg.get("resume")))
    if rf is not None:
        c.expect(isinstance(rf.get("dir"), str) and rf.get("dir") == cfg.get("resume"), "summary.resumed_from.dir",
                 "%r, config.resume is %r" % (rf.get("dir"), cfg.get("resume")))
        at = c.nonneg(rf, "step", "summary.resumed_from", "int")
        if at is not None and steps is not None:
            c.expect(1 <= at <= steps, "summary.resumed_from.step", "%d, outside the run's 1..%d steps" % (at, steps))
    if samples is not None and workers:
        got = sum(e.get("samples", 0) for e in workers if isinstance(e.get("samples"), (int, float)))
        c.expect(samples == got, "summary.samples", "%d != the sum over worker ranks (%d)" % (samples, got))
    thr = c.nonneg(s, "throughput_samples_per_s", "summary")
    st = c.nonneg(s, "step_time_s", "summary")
    r0 = [e for e in workers if e.get("rank") == 0]
    r0step = r0[0].get("_step") if r0 else None
    if st is not None and r0step and r0step.get("median") is not None:
        c.expect(close(st, r0step["median"]), "summary.step_time_s", "%g != rank 0's median step %g"
                 % (st, r0step["median"]))
    if thr is not None and samples and steps and r0step and r0step.get("mean") and lockstep(backend_of(rep)):
        per_step = thr * r0step["mean"]
        want = samples / steps
        c.expect(0.5 * want <= per_step <= 2 * want, "summary.throughput_samples_per_s",
                 "%g samples/s x %g s per step = %g samples per step, the run did %g: samples per second?"
                 % (thr, r0step["mean"], per_step, want))
    # a run whose loss stopped being finite says so (diverged, diverged_step); its non-finite
    # values are the strings "nan", "inf", "-inf", and only such a run has them
    diverged = c.get(s, "diverged", "summary", "bool")
    dstep = s.get("diverged_step") if isinstance(s, dict) else None
    if not isinstance(s, dict) or "diverged_step" not in s:
        c.fail("summary.diverged_step", "missing (null when the run did not diverge)")
    elif dstep is not None:
        dstep = c.get(s, "diverged_step", "summary", "int")
    if diverged is not None:
        c.expect(diverged == (dstep is not None), "summary.diverged_step",
                 "%r with diverged %r: a step exactly when the run diverged" % (s.get("diverged_step"), diverged))

    # the replicas: params_agree true/false where the back end promises every worker rank 0's
    # parameters, null where it does not; params_differ_ranks the workers whose hash is not rank 0's
    if not isinstance(s, dict) or "params_agree" not in s:
        c.fail("summary.params_agree", "missing (null where the back end does not promise equal parameters)")
    else:
        agree = s["params_agree"]
        differ = c.get(s, "params_differ_ranks", "summary", "list")
        if agree is not None and not isinstance(agree, bool):
            c.fail("summary.params_agree", "expected true, false or null, got %s" % json.dumps(agree)[:60])
        elif differ is not None and isinstance(rep.get("ranks"), list):
            h = {e.get("rank"): e.get("params_hash") for e in workers if isinstance(e, dict)}
            want = sorted(k for k in h if isinstance(k, int) and k != 0 and h[k] != h.get(0)) if agree is not None else []
            c.expect(differ == want, "summary.params_differ_ranks", "%s, the workers whose params_hash is not rank 0's: %s"
                     % (differ, want))
            if agree is not None:
                c.expect(agree == (not want), "summary.params_agree", "%r with ranks %s differing" % (agree, want))

    def final(key, fraction):
        v = s.get(key) if isinstance(s, dict) else None
        x = report_value(v)
        if key not in s:
            c.fail("summary." + key, "missing")
        elif x is None:
            c.fail("summary." + key, "expected a number (or \"nan\", \"inf\", \"-inf\"), got %s" % json.dumps(v)[:60])
        elif not math.isfinite(x):
            c.expect(diverged is True, "summary." + key, "%s in a run that did not diverge (summary.diverged)" % v)
            return x
        elif x < 0 or (fraction and x > 1):
            c.fail("summary." + key, "%g: %s" % (x, "a fraction in [0, 1]" if fraction else "negative"))
        return x
    loss = final("final_loss", False)
    final("final_train_accuracy", True)
    final("final_accuracy", True)
    final("final_eval_loss", False)
    how = c.get(s, "transport", "summary", "str")
    if how is not None and isinstance(rep.get("ranks"), list):
        ranks_how = [e.get("traffic", {}).get("transport") for e in rep["ranks"] if isinstance(e, dict)]
        want = slowest_transport([t for t in ranks_how if isinstance(t, str)])
        c.expect(how == want, "summary.transport", "%r, the slowest member's is %r" % (how, want))
    curve = step_curve(c, s, "loss_curve", "loss", steps, encoded=True)
    if curve and loss is not None:
        c.expect(same_value(curve[-1][1], loss), "summary.final_loss", "%g != the curve's last loss %g" % (loss, curve[-1][1]))
    if curve and diverged is not None:
        first = next((x[0] for x in curve if not math.isfinite(x[1])), None)
        c.expect(first == dstep, "summary.diverged_step",
                 "%r, but the loss curve's first non-finite point is at step %r" % (s.get("diverged_step"), first))
    tcurve = step_curve(c, s, "time_curve", "seconds", steps)
    if tcurve:
        ts = [p[1] for p in tcurve]
        c.expect(all(b >= a for a, b in zip(ts, ts[1:])), "summary.time_curve", "time goes backwards")
        wall = (rep.get("run") or {}).get("wall_s")
        if isinstance(wall, (int, float)):
            c.expect(ts[-1] <= wall + 1e-6, "summary.time_curve", "last point %.3f s after the run's wall time %.3f s"
                     % (ts[-1], wall))
    ev = c.get(s, "eval_curve", "summary", "list")
    if ev is not None:
        # a diverged run's evaluation may be non-finite too (its strings read as floats here)
        ev = [[p[0]] + [report_value(x) if diverged else x for x in p[1:]] if isinstance(p, list) and p else p for p in ev]
        okpts = all(isinstance(p, list) and len(p) == 3 and all(isinstance(x, (int, float)) for x in p) for p in ev)
        if c.expect(okpts and ev, "summary.eval_curve", "points must be [step, accuracy, loss], at least the final one"):
            c.expect(all(a[0] < b[0] for a, b in zip(ev, ev[1:])), "summary.eval_curve", "steps not increasing")
            c.expect(all(not (p[1] < 0 or p[1] > 1 or p[2] < 0) for p in ev), "summary.eval_curve",
                     "accuracy outside [0, 1] or loss < 0")
            if steps is not None:
                c.expect(ev[-1][0] == steps, "summary.eval_curve", "last point at step %s, expected %d" % (ev[-1][0], steps))
            fa = report_value(s.get("final_accuracy"))
            if fa is not None:
                c.expect(same_value(ev[-1][1], fa), "summary.final_accuracy", "!= the eval curve's last accuracy")
    check_summary_staleness(c, s, cfg, workers, steps, backend_of(rep))
    imb = c.get(s, "imbalance", "summary", "dict")
    if imb is not None:
        recompute = {
            "memory": worker_ratio(workers, lambda e: (e.get("memory") or {}).get("peak_bytes")),
            "traffic": worker_ratio(workers, lambda e: (e["_traffic"]["bytes_sent"] + e["_traffic"]["bytes_received"])
                                    if e.get("_traffic") else None),
            "busy_time": worker_ratio(workers, lambda e: (e.get("time_s") or {}).get("busy")),
        }
        for k, want in recompute.items():
            v = c.get(imb, k, "summary.imbalance", "num")
            if v is None:
                continue
            c.expect(v >= 1 - REL, "summary.imbalance." + k, "%g < 1: max/mean is at least 1" % v)
            if want is not None:
                c.expect(close(v, want, 1e-6), "summary.imbalance." + k,
                         "%g != max/mean over the worker ranks (%g)" % (v, want))
    pred = c.get(s, "prediction", "summary", "dict", required=False)
    if pred is not None:
        model = c.get(pred, "model", "summary.prediction", "str")
        c.expect(model == "alpha-beta", "summary.prediction.model", "%r, expected alpha-beta" % model)
        for k in ("alpha_s", "beta_s_per_byte", "step_comm_s"):
            c.nonneg(pred, k, "summary.prediction")
        c.get(pred, "source", "summary.prediction", "str", required=False)
        fe = c.get(pred, "from_emulated_link", "summary.prediction", "bool", required=False)
        if fe:
            emu = rep.get("config", {}).get("link") if isinstance(rep.get("config"), dict) else None
            c.expect(isinstance(emu, str) and emu not in ("", "none"), "summary.prediction.from_emulated_link",
                     "true, but the run had no --link (config.link %r)" % (emu,))
        link = c.get(pred, "link", "summary.prediction", "str", required=False)
        if link is not None and isinstance(s.get("transport"), str):
            want = s["transport"] or "default"
            c.expect(link == want, "summary.prediction.link", "%r, the run moved over %r" % (link, want))


def check_train(rep, options, expect):
    c = Checker()
    run = check_run(c, rep)
    check_env(c, rep)
    cfg = check_config(c, rep, options)
    check_backend(c, rep, cfg)
    workers, _ = check_ranks(c, rep, cfg, run, expect)
    check_summary(c, rep, cfg, workers)
    known = {"schema", "run", "env", "config", "backend", "ranks", "summary"}
    c.expect(not (set(rep) - known), "", "unknown top-level keys %s (document them)" % sorted(set(rep) - known))
    return c.problems


# ---- bench report -------------------------------------------------------------------------


def check_bench(rep, options, expect):
    c = Checker()
    run = c.get(rep, "run", "", "dict")
    if run is not None:
        for k in ("started", "git", "host", "cmdline"):
            c.get(run, k, "run", "str")
    check_env(c, rep)
    cfg = c.get(rep, "config", "", "dict") or {}
    check_backend(c, rep, cfg)
    for k in ("collective", "op", "type", "sync", "device", "time", "busbw"):
        c.get(cfg, k, "config", "str")
    n = c.nonneg(cfg, "ranks", "config", "int")
    for k in ("min_bytes", "max_bytes", "step_factor", "warmup_iters", "iters"):
        c.nonneg(cfg, k, "config", "int")
    c.nonneg(cfg, "timeout_s", "config")
    if "barrier" in cfg:  # older reports have none: each
        c.expect(cfg["barrier"] in ("each", "none"), "config.barrier", "%r: expected each or none" % (cfg["barrier"],))
    check = c.get(cfg, "check", "config", "bool")
    rows = c.get(rep, "rows", "", "list")
    if rows is None:
        return c.problems
    factor = 2.0 * (n - 1) / n if n and n > 1 else 0.0
    wrong_sum, busbw = 0, []
    for i, r in enumerate(rows):
        p = "rows[%d]" % i
        size = c.nonneg(r, "size_bytes", p, "int")
        count = c.nonneg(r, "count", p, "int")
        t = c.nonneg(r, "time_us", p)
        alg = c.nonneg(r, "algbw_gbps", p)
        bus = c.nonneg(r, "busbw_gbps", p)
        if size is not None and count is not None:
            c.expect(size == 4 * count, p, "size_bytes %d != 4 x count %d floats" % (size, count))
        if size and t and alg is not None:
            want = size / (t * 1e-6) / 1e9
            c.expect(close(alg, want, 1e-6), p + ".algbw_gbps", "%g GB/s != size / time (%g GB/s)" % (alg, want))
        if alg is not None and bus is not None:
            c.expect(close(bus, alg * factor, 1e-6), p + ".busbw_gbps", "%g != algbw x 2(N-1)/N (%g)" % (bus, alg * factor))
            busbw.append(bus)
        if check:
            w = c.nonneg(r, "wrong", p, "int")
            wrong_sum += w or 0
        else:
            c.expect(r.get("wrong", 0) is None, p + ".wrong", "null when --check 0")
        per = c.get(r, "rank_time_us", p, "list")
        if per is not None and t is not None:
            c.expect(len(per) == n, p + ".rank_time_us", "%d entries for %s ranks" % (len(per), n))
            c.expect(per and close(max(per), t), p + ".time_us", "!= the slowest rank's median (%s)" % per)
    sizes = [r.get("size_bytes") for r in rows if isinstance(r, dict)]
    c.expect(sizes == sorted(sizes), "rows", "sizes not ascending")
    s = c.get(rep, "summary", "", "dict")
    if s is not None:
        avg = c.get(s, "avg_busbw_gbps", "summary", "num")
        if avg is not None and busbw:
            c.expect(close(avg, sum(busbw) / len(busbw)), "summary.avg_busbw_gbps", "!= the mean of the rows' busbw")
        w = c.get(s, "wrong", "summary", "int")
        if w is not None:
            c.expect(w == (wrong_sum if check else -1), "summary.wrong", "%d, rows say %d" % (w, wrong_sum if check else -1))
        tr = c.get(s, "traffic", "summary", "list")
        if tr is not None:
            c.expect([e.get("rank") for e in tr] == list(range(n or 0)), "summary.traffic", "not one entry per rank 0..N-1")
            for i, e in enumerate(tr):
                for k in ("bytes_sent", "bytes_received", "messages_sent", "messages_received", "dropped"):
                    c.nonneg(e, k, "summary.traffic[%d]" % i, "int")
                c.get(e, "transport", "summary.traffic[%d]" % i, "str")
            how = c.get(cfg, "transport", "config", "str")
            if how is not None:
                want = slowest_transport([e.get("transport") for e in tr if isinstance(e, dict)])
                c.expect(how == want, "config.transport", "%r, the slowest rank's is %r" % (how, want))
    for k, v in expect.items():
        if k == "world":
            c.expect(n == int(v), "config.ranks", "%s, expected %s" % (n, v))
        elif k == "sync":
            c.expect(cfg.get("sync") == v, "config.sync", "%s, expected %s" % (cfg.get("sync"), v))
    return c.problems


# ---- matrix summary and claims ------------------------------------------------------------

ROW_METRICS = ["throughput_samples_per_s", "step_time_median_s", "step_time_p95_s", "comm_exposed_s",
               "comm_total_s", "predicted_comm_s", "comm_ratio", "mem_peak_max_bytes", "mem_peak_min_bytes",
               "mem_peak_mean_bytes", "rank0_peak_bytes", "rank0_traffic_bytes", "imbalance_memory",
               "imbalance_traffic", "imbalance_busy_time", "final_loss", "final_accuracy", "diverged_step"]


def check_matrix(rep, options, expect):
    c = Checker()
    for k in ("name", "matrix", "written"):
        c.get(rep, k, "", "str")
    for k in ("complete", "interrupted"):
        c.get(rep, k, "", "bool")
    planned, done, failed = (c.nonneg(rep, k, "", "int") for k in ("runs_planned", "runs_done", "runs_failed"))
    ndiverged = c.nonneg(rep, "runs_diverged", "", "int", required=False)  # summaries before it had none
    c.nonneg(rep, "timeout_s", "")
    if rep.get("prediction") is not None:
        pr = c.get(rep, "prediction", "", "dict")
        links = c.get(pr, "links", "prediction", "dict") if pr is not None else None
        if links is not None:
            c.expect(len(links) > 0, "prediction.links", "empty (no prediction is null)")
            for name, l in links.items():
                c.expect(name in ("default", "tcp", "ipc", "shm", "inproc", "nccl"), "prediction.links",
                         "%r: expected default or a transport" % name)
                for k in ("alpha_s", "beta_s_per_byte"):
                    c.nonneg(l, k, "prediction.links." + name)
                c.get(l, "source", "prediction.links." + name, "str")
    axes = c.get(rep, "axes", "", "list") or []
    runs = c.get(rep, "runs", "", "list")
    if runs is None:
        return c.problems
    if done is not None:
        c.expect(done == len(runs), "runs_done", "%d, runs holds %d rows" % (done, len(runs)))
    if planned is not None and done is not None:
        c.expect(done <= planned, "runs_done", "more runs done than planned")
    nbad = ndiv = 0
    for i, r in enumerate(runs):
        p = "runs[%d]" % i
        c.get(r, "cell", p, "str")
        c.nonneg(r, "repeat", p, "int")
        ax = c.get(r, "axes", p, "dict")
        if ax is not None:
            c.expect(sorted(ax) == sorted(axes), p + ".axes", "keys %s, the matrix's axes are %s" % (sorted(ax), axes))
        status = c.get(r, "status", p, "str")
        c.expect(status in ("ok", "failed", "timeout", "diverged", "differ"), p + ".status", "%r" % status)
        nbad += status != "ok"
        ndiv += status == "diverged"
        if isinstance(r, dict) and "diverged_step" in r:  # (missing: flagged with the metrics below)
            # a diverged run reached no loss: never a number there, and its first non-finite step named
            c.expect((status == "diverged") == (r["diverged_step"] is not None), p + ".diverged_step",
                     "%r with status %r: a step exactly when the run diverged" % (r["diverged_step"], status))
        if status == "diverged":
            c.expect(r.get("final_loss") is None and r.get("final_accuracy") is None, p + ".final_loss",
                     "%r: a diverged run has no final loss or accuracy (null)" % (r.get("final_loss"),))
        c.get(r, "exit_code", p, "int")
        c.get(r, "error", p, "str")
        c.nonneg(r, "wall_s", p)
        c.get(r, "resumed", p, "bool")
        how = c.get(r, "transport", p, "str")
        if how is not None:
            c.expect(how in TRANSPORTS, p + ".transport", "%r, expected one of %s" % (how, ", ".join(map(repr, TRANSPORTS))))
        rp = c.get(r, "report", p, "str")
        if status in ("ok", "diverged", "differ") and rp is not None:
            c.expect(rp.endswith("-r%s.json" % r.get("repeat")), p + ".report", "%r: not <cell>-r<k>.json" % rp)
        for k in ROW_METRICS:
            if not isinstance(r, dict) or r.get(k) is None:
                c.expect(isinstance(r, dict) and k in r, "%s.%s" % (p, k), "missing (null when unknown)")
            else:
                c.get(r, k, p, "num")
    if failed is not None:
        c.expect(failed == nbad, "runs_failed", "%d, rows with a status other than ok: %d" % (failed, nbad))
    if ndiverged is not None:
        c.expect(ndiverged == ndiv, "runs_diverged", "%d, rows with status diverged: %d" % (ndiverged, ndiv))
    return c.problems


def check_claims(doc):
    c = Checker()
    if not c.expect(isinstance(doc, list), "", "claims.json is an array of claims"):
        return c.problems
    ids = []
    for i, cl in enumerate(doc):
        p = "[%d]" % i
        ids.append(c.get(cl, "claim", p, "int"))
        c.get(cl, "text", p, "str")
        v = c.get(cl, "verdict", p, "str")
        c.expect(v in ("PASS", "FAIL", "NOT-RUN"), p + ".verdict", "%r, expected PASS, FAIL or NOT-RUN" % v)
        c.get(cl, "numbers", p, "dict")
        c.get(cl, "why", p, "str")
    c.expect(ids == list(range(1, 13)), "", "claims %s, expected 1..12 in order" % ids)
    return c.problems


# ---- main ---------------------------------------------------------------------------------


def check_predict(rep):
    """A `ringside predict` forecast: its assumptions, link and model, a row per N and architecture
    (step = compute + comm), the winners by size and N, the crossovers (docs/matrix.md)."""
    c = Checker()
    for k in c.get(rep, "assumptions", "", "list") or []:
        c.expect(isinstance(k, str) and k, "assumptions", "an assumption that is no text: %r" % (k,))
    link, model = c.get(rep, "link", "", "dict") or {}, c.get(rep, "model", "", "dict") or {}
    c.nonneg(link, "alpha_s", "link")
    c.expect(isinstance(link.get("beta_s_per_byte"), (int, float)) and link["beta_s_per_byte"] > 0, "link.beta_s_per_byte", "not > 0")
    mr = link.get("measured_ranks")
    c.expect(mr is None or (isinstance(mr, list) and len(mr) == 2 and 2 <= mr[0] <= mr[1]), "link.measured_ranks", "%r" % (mr,))
    compute = c.nonneg(model, "compute_s", "model")
    c.nonneg(model, "grad_bytes", "model")
    seen = set()
    for i, r in enumerate(c.get(rep, "rows", "", "list") or []):
        p = "rows[%d]" % i
        n, arch = c.nonneg(r, "ranks", p, "int"), c.get(r, "architecture", p, "str")
        c.expect(arch in ARCHITECTURES and arch not in ("none", "student"), p + ".architecture", "%r" % arch)
        c.expect((n, arch) not in seen, p, "a second row for N=%s %s" % (n, arch))
        seen.add((n, arch))
        comm, step = c.nonneg(r, "comm_s", p), c.nonneg(r, "step_s", p)
        if None not in (comm, step, compute):
            c.expect(close(step, compute + comm, 1e-9), p + ".step_s", "%g != compute %g + comm %g" % (step, compute, comm))
        m = c.get(r, "measured", p, "bool")
        if m is not None and isinstance(n, int):
            c.expect(m == (mr is not None and mr[0] <= n <= mr[1]), p + ".measured", "%s at N=%d, the link measured at %r" % (m, n, mr))
    for i, w in enumerate(c.get(rep, "winners", "", "list") or []):
        c.expect(w.get("architecture") in ARCHITECTURES, "winners[%d].architecture" % i, "%r" % w.get("architecture"))
    c.get(rep, "crossovers", "", "dict")
    return c.problems


def validate_file(path, options, expect):
    def bare(token):  # Python reads NaN and Infinity; JSON (and every other reader) does not
        raise ValueError("%s is no JSON value (a report writes \"nan\", \"inf\", \"-inf\")" % token)
    try:
        with open(path) as f:
            rep = json.load(f, parse_constant=bare)
    except (OSError, ValueError) as e:
        return ["unreadable: %s" % e]
    if os.path.basename(path) == "claims.json":
        return check_claims(rep)
    if not isinstance(rep, dict):
        return ["not a JSON object"]
    schema = rep.get("schema")
    if schema == REPORT_SCHEMA:
        return check_train(rep, options, expect)
    if schema == BENCH_SCHEMA:
        return check_bench(rep, options, expect)
    if schema == MATRIX_SCHEMA:
        return check_matrix(rep, options, expect)
    if schema == PREDICT_SCHEMA:
        return check_predict(rep)
    return ["schema: %r is not %s, %s, %s or %s (readers refuse other versions)"
            % (schema, REPORT_SCHEMA, BENCH_SCHEMA, MATRIX_SCHEMA, PREDICT_SCHEMA)]


def main(argv):
    files, options, expect = [], None, {}
    it = iter(argv)
    for a in it:
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if a == "--options":
            with open(next(it, "")) as f:
                options = help_options(f.read())
        elif a == "--expect":
            k, _, v = next(it, "").partition("=")
            if k not in ("world", "sync", "servers") or not v:
                print("validate_report.py: --expect world=N | sync=NAME | servers=K", file=sys.stderr)
                return 2
            expect[k] = v
        elif a.startswith("-"):
            print("validate_report.py: unknown option %s (see --help)" % a, file=sys.stderr)
            return 2
        else:
            files.append(a)
    if not files:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    bad = 0
    for path in files:
        problems = validate_file(path, options, expect)
        if problems:
            bad += 1
            for p in problems:
                print("%s: %s" % (path, p))
        else:
            print("ok %s" % path)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
