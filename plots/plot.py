#!/usr/bin/env python3
# plot.py - turns a folder of ringside reports into PNG + SVG figures, figures.json and an index.html
"""usage: plot.py DIR [--out OUTDIR] [--x AXIS] [--facet AXIS] [--filter KEY=VALUE ...]

Reads every *.json in DIR: train reports ("schema": "ringside.report/1"), bench reports
("ringside.bench/1"), summary.json and claims.json when present. Writes to OUTDIR (default DIR):

  step_time.png/.svg  median step time vs AXIS (default N) per configuration; dashed: the
                      alpha-beta prediction of communication per step (a prediction, not a step)
  memory.png/.svg     per-rank peak memory stacked by tag at the largest N, one panel per
                      configuration (past 8: rank 0, the largest other rank and a server per configuration)
  traffic.png/.svg    per-process bytes sent+received at the largest N; rank 0 vs the others vs N
  phases.png/.svg     one bar per configuration: data ... idle, other stacked (they add up to the
                      step), comm_total as an outline (it overlaps compute), server work beside
  loss.png/.svg       loss curves of every configuration over each other; a run whose loss stopped
                      being finite is drawn up to there, marked "diverged at step K" (never as loss 0)
  busbw.png/.svg      bus bandwidth vs message size from bench reports
  states.png/.svg     where the state lives (ZeRO's Figure 1 measured): memory per rank by tag, one bar per
                      architecture (rank 0 and the others apart for DataParallel's server, a dedicated
                      server's process beside its workers), one panel per configuration and N; drawn
                      where a folder holds a ZeRO run (--sync zero) beside another architecture
  figures.json        what each figure shows (series and bar counts) or why it was skipped
  index.html          the figures and the claims table (from claims.json)

A configuration is a matrix variant (summary.json's rows name it) or the back end, plus every
option that differs between the reports. --x AXIS puts AXIS ("ranks", "variant", or any train
option, e.g. bucket-mb) on the step-time figure's x axis; --facet AXIS draws one panel per value
of AXIS (step time and phases); --filter KEY=VALUE keeps the reports where option KEY (or
"variant") is VALUE (repeatable: all must hold). Figures stay under 2,000 px wide and legible at
32 configurations. A figure whose data is missing is skipped with a note (stderr and
index.html). Exit status: 0 when done, 2 when DIR holds no reports (or does not exist, or the
filters leave none), 1 on other errors.
"""

import argparse
import glob
import html
import json
import os
import re
import statistics
import sys

try:
    import matplotlib
except ImportError:
    sys.exit("plot.py: error: %s cannot import matplotlib; `bash plots/find_python.sh` prints a python3 "
             "that can (or says how to get one)" % sys.executable)

matplotlib.use("Agg")
import matplotlib.lines  # noqa: E402
import matplotlib.patches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

REPORT_SCHEMA = "ringside.report/1"
BENCH_SCHEMA = "ringside.bench/1"
PREDICT_SCHEMA = "ringside.predict/1"
MATRIX_SCHEMA = "ringside.matrix/1"
# the phases that add up to a worker's step (report schema); comm_total overlaps them, drawn apart
PHASES = ["data", "forward", "backward", "optimizer", "comm_exposed", "idle", "other"]
TAGS = ["params", "grads", "activations", "optimizer", "comm", "server", "gather"]
# config keys that never define a different experiment (repeats differ only in these)
NOISE_KEYS = {"seed", "report", "trace", "quiet", "verbose", "threads", "timeout", "device", "ranks"}
# config keys already expressed by the back-end label or the N axis
AXIS_KEYS = {"sync", "ps-placement", "ps-servers", "ps-mode"}
MAX_WIDTH_IN = 17.5   # 1,925 px at the 110 dpi figures are saved with
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
FIGURES = ["step_time", "memory", "traffic", "phases", "loss", "busbw", "table1", "forecast", "states"]


def warn(msg):
    print("plot.py: " + msg, file=sys.stderr)


# ---- reading -------------------------------------------------------------------------------


def schema_family(schema):
    """'ringside.report/1' -> ('ringside.report', '1'); anything else -> (None, None)."""
    if isinstance(schema, str) and "/" in schema:
        fam, ver = schema.rsplit("/", 1)
        return fam, ver
    return None, None


MAX_REPORT_BYTES = 256 << 20   # as ringside's own readers (engine/report.h REPORT_MAX_BYTES)
MAX_VALUE = 1e18               # the largest figure a measurement may hold (bytes, seconds, samples)


class BadReport(Exception):
    """A report whose shape or values are not a report ringside wrote: its file and the field."""


def _measure(obj, path, required=False):
    """A number in [0, MAX_VALUE] (a measurement), or None where absent or null and not required."""
    if obj is None:
        if required:
            raise BadReport("%s: missing" % path)
        return None
    if isinstance(obj, bool) or not isinstance(obj, (int, float)) or not 0 <= obj <= MAX_VALUE:
        raise BadReport("%s: %s is not a measurement (a number from 0 to %g)" % (path, json.dumps(obj)[:40], MAX_VALUE))
    return obj


def _block(obj, key, path, kind=dict, required=False):
    """obj[key] when it is of kind; None where absent and not required; BadReport otherwise."""
    v = obj.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, kind):
        raise BadReport("%s%s: %s" % (path + "." if path else "", key, "missing" if v is None else "expected %s, got %s"
                                       % ("an object" if kind is dict else "a list", json.dumps(v)[:40])))
    return v


def check_report(doc):
    """Raises BadReport naming the first field plot.py reads that is missing, of the wrong type or
    out of range (as tests/validate_report.py checks them): a report is outside input."""
    for key in ("config", "run", "backend"):
        _block(doc, key, "")
    cfg = doc.get("config") or {}
    if "ranks" in cfg and (isinstance(cfg["ranks"], bool) or not isinstance(cfg["ranks"], int) or cfg["ranks"] < 1):
        raise BadReport("config.ranks: %s is not an integer from 1" % json.dumps(cfg["ranks"])[:40])
    run = doc.get("run") or {}
    if "world" in run and (isinstance(run["world"], bool) or not isinstance(run["world"], int) or run["world"] < 1):
        raise BadReport("run.world: %s is not an integer from 1" % json.dumps(run["world"])[:40])
    be = doc.get("backend") or {}
    if "servers" in be and be["servers"] is not None and (isinstance(be["servers"], bool) or not isinstance(be["servers"], int)
                                                          or be["servers"] < 0):
        raise BadReport("backend.servers: %s is not an integer from 0" % json.dumps(be["servers"])[:40])
    ranks = _block(doc, "ranks", "", list, required=True)
    for i, e in enumerate(ranks):
        at = "ranks[%d]" % i
        if not isinstance(e, dict):
            raise BadReport("%s: expected an object, got %s" % (at, json.dumps(e)[:40]))
        if "role" in e and not isinstance(e["role"], str):
            raise BadReport("%s.role: expected a string" % at)
        _measure(e.get("samples"), at + ".samples")
        mem = _block(e, "memory", at) or {}
        _measure(mem.get("peak_bytes"), at + ".memory.peak_bytes")
        for tag, v in (_block(mem, "by_tag", at + ".memory") or {}).items():
            _measure(v, "%s.memory.by_tag.%s" % (at, tag))
        tr = _block(e, "traffic", at) or {}
        for k in ("bytes_sent", "bytes_received"):
            _measure(tr.get(k), "%s.traffic.%s" % (at, k))
        ts = _block(e, "time_s", at) or {}
        _measure(ts.get("busy"), at + ".time_s.busy")
        for k, v in (_block(ts, "phases", at + ".time_s") or {}).items():
            _measure(v, "%s.time_s.phases.%s" % (at, k))
    summ = _block(doc, "summary", "", dict, required=True)
    _measure(summ.get("step_time_s"), "summary.step_time_s", required=True)
    _block(summ, "loss_curve", "summary", list)
    pred = _block(summ, "prediction", "summary") or {}
    _measure(pred.get("step_comm_s"), "summary.prediction.step_comm_s")


def load_folder(folder):
    """Reads every *.json in folder. Returns a dict: reports, benches, summary, claims, ignored."""
    data = {"reports": [], "benches": [], "forecasts": [], "summary": None, "claims": None, "ignored": []}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        name = os.path.basename(path)
        if name == "figures.json":
            continue
        try:
            if os.path.getsize(path) > MAX_REPORT_BYTES:
                raise BadReport("%.1f MB, more than a report may be (%d MiB)" % (os.path.getsize(path) / 1e6,
                                                                                  MAX_REPORT_BYTES >> 20))
            with open(path) as f:
                doc = json.load(f)
        except BadReport as e:
            raise BadReport("%s: %s" % (name, e))
        except (OSError, ValueError) as e:
            data["ignored"].append((name, "unreadable: %s" % e))
            continue
        if name == "summary.json":
            if isinstance(doc, dict) and doc.get("schema") == MATRIX_SCHEMA:
                data["summary"] = doc
            else:
                data["ignored"].append((name, "schema %s: this plot.py reads %s only"
                                        % (doc.get("schema") if isinstance(doc, dict) else None, MATRIX_SCHEMA)))
            continue
        if name == "claims.json":
            data["claims"] = doc
            continue
        schema = doc.get("schema") if isinstance(doc, dict) else None
        if schema == REPORT_SCHEMA:
            try:
                check_report(doc)
            except BadReport as e:
                raise BadReport("%s: %s" % (name, e))
            doc["_file"] = name
            data["reports"].append(doc)
        elif schema == BENCH_SCHEMA:
            doc["_file"] = name
            data["benches"].append(doc)
        elif schema == PREDICT_SCHEMA:
            doc["_file"] = name
            data["forecasts"].append(doc)
        elif schema_family(schema)[0] in ("ringside.report", "ringside.bench"):
            data["ignored"].append((name, "schema %s: this plot.py reads %s and %s only"
                                    % (schema, REPORT_SCHEMA, BENCH_SCHEMA)))
        else:
            data["ignored"].append((name, "not a ringside report"))
    return data


def summary_rows(summary):
    """summary.json's rows: one per matrix run."""
    rows = summary.get("runs") if isinstance(summary, dict) else None
    return rows if isinstance(rows, list) else []


def claims_list(claims):
    """claims.json: an array of {claim, text, verdict, numbers, why}."""
    return [c for c in claims if isinstance(c, dict)] if isinstance(claims, list) else []


# ---- what a report is ----------------------------------------------------------------------


def architecture(rep):
    """The report's backend.architecture ("ring", "ps-dedicated", ...; docs/report-schema.md), as
    train's registry names it; None for a report without it (an older build's)."""
    b = rep.get("backend")
    a = b.get("architecture") if isinstance(b, dict) else None
    return a if isinstance(a, str) else None


def backend(rep):
    """The back end's label: the sync name, with the parameter server's non-default options."""
    cfg = rep.get("config", {})
    name, arch = cfg.get("sync", "?"), architecture(rep)
    if arch in ("ps-colocated", "ps-sharded", "ps-dedicated"):
        if cfg.get("ps-mode") == "dataparallel":
            name += "-dataparallel"
        if arch == "ps-dedicated":
            k = rep["backend"].get("servers", 1)
            name += "-dedicated" + ("x%d" % k if k and k > 1 else "")
        elif arch == "ps-sharded":
            name += "-sharded"
    elif arch in ("zero-1", "zero-2", "zero-3"):  # ZeRO's stages, one name each
        name = arch
    return name


def workers(rep):
    return [r for r in rep.get("ranks", []) if r.get("role", "worker") == "worker"]


def world(rep):
    """N: the number of worker ranks."""
    run = rep.get("run", {})
    if isinstance(run.get("world"), (int, float)):
        return int(run["world"])
    return len(workers(rep)) or int(rep.get("config", {}).get("ranks", 1))


def option_text(rep, key):
    """The value of option key in a report as text ("variant": its matrix variant; "ranks": N)."""
    if key == "variant":
        return rep.get("_variant") or ""
    if key in ("ranks", "N"):
        return str(world(rep))
    v = rep.get("config", {}).get(key)
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v == int(v):
        return str(int(v))
    return "" if v is None else str(v)


def option_value(rep, key):
    """option_text as a number when it is one (for an x axis), else the text."""
    t = option_text(rep, key)
    try:
        return float(t)
    except ValueError:
        return t


def varying_keys(reports, skip=()):
    """Config keys (other than noise, the axes and skip) whose values differ between reports."""
    values = {}
    for rep in reports:
        for k, v in rep.get("config", {}).items():
            if k in NOISE_KEYS or k in skip or k in AXIS_KEYS:
                continue
            values.setdefault(k, set()).add(json.dumps(v, sort_keys=True))
    return sorted(k for k, vs in values.items() if len(vs) > 1)


def series_label(rep, varying, skip=()):
    """The configuration: its variant (or back end) plus the varying options, e.g. 'ps global-batch=4'."""
    name = rep.get("_variant") if "variant" not in skip else None
    extra = ["%s=%s" % (k, option_text(rep, k)) for k in varying if k not in skip]
    return " ".join([name or backend(rep)] + extra)


def group(reports, varying, x="ranks", skip=()):
    """{series: {x value: [reports...]}} (repeats in one list); x "ranks" is N."""
    out = {}
    for rep in reports:
        key = world(rep) if x in ("ranks", "N") else option_value(rep, x)
        out.setdefault(series_label(rep, varying, skip), {}).setdefault(key, []).append(rep)
    return out


def layout(fig, rect=(0, 0, 1, 1)):
    """tight_layout inside rect (figure fractions): the room outside it is for legends and notes."""
    fig.tight_layout(rect=rect)


def style(i, n=20):
    """A colour and marker for series i of n: the ten default colours up to 10 series, else tab20's
    colours, then the markers: distinct for 160 series."""
    if n <= 10:
        return "C%d" % i, MARKERS[0]
    return plt.get_cmap("tab20")(i % 20), MARKERS[(i // 20) % len(MARKERS)]


def legend_width(n, labels=()):
    """Inches a legend of n entries needs right of the axes: 24 entries a column, each column as
    wide as its longest label at 7 points (about 0.058 in a character) plus its marker."""
    longest = max([len(str(l)) for l in labels] or [40])
    return max(1, -(-n // 24)) * (0.45 + 0.058 * longest)


def fig_width(want_in):
    return min(MAX_WIDTH_IN, want_in)


def legend_outside(ax, n, fontsize=7, handles=None, room=None, **kw):
    """A legend of n entries right of the figure's axes, in as many columns as 24 entries each
    need: a figure legend in the legend_width(n) inches the figure keeps free on its right (the
    layout's rect leaves them out)."""
    fig = ax.figure
    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    else:
        labels = [h.get_label() for h in handles]
    x = 1 - (room or legend_width(n, labels)) / fig.get_size_inches()[0] + 0.005
    return fig.legend(handles, labels, fontsize=fontsize, loc="upper left", bbox_to_anchor=(x, 0.93), ncol=max(1, -(-n // 24)),
                      borderaxespad=0, **kw)


def representative(reps):
    """One report of a set of repeats: the one with the median step time (first on ties)."""
    if len(reps) == 1:
        return reps[0]
    ordered = sorted(reps, key=lambda r: (r.get("summary", {}).get("step_time_s", 0), r["_file"]))
    return ordered[(len(ordered) - 1) // 2]


def prediction_of(rep, rows):
    """Predicted communication seconds per step: summary.prediction.step_comm_s, else the
    predicted_comm_s of the summary.json row whose report is this file; None when neither."""
    pred = rep.get("summary", {}).get("prediction")
    if isinstance(pred, dict) and isinstance(pred.get("step_comm_s"), (int, float)):
        return float(pred["step_comm_s"])
    for row in rows:
        if isinstance(row, dict) and row.get("report") == rep["_file"]:
            p = row.get("predicted_comm_s")
            if isinstance(p, (int, float)):
                return float(p)
    return None


def safe_id(*parts):
    """An SVG id from parts: letters, digits, '-', '_' and '.' only."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(str(p) for p in parts))


def human_bytes(x, _pos=None):
    for unit in ["B", "KiB", "MiB", "GiB", "TiB"]:
        if abs(x) < 1024 or unit == "TiB":
            return ("%.0f %s" if unit == "B" else "%.1f %s") % (x, unit)
        x /= 1024.0


# ---- figures: each returns (fig, manifest entry) or (None, reason) ------------------------


def fig_step_time(data, series, x="ranks", facet=None):
    rows = summary_rows(data["summary"])
    panels = sorted(series) if facet else [None]
    ncols = min(3, len(panels))
    nrows = -(-len(panels) // ncols)
    labels = sorted({label for p in panels for label in (series[p] if facet else series)})
    colour = {label: style(i, len(labels)) for i, label in enumerate(labels)}
    legend_w = legend_width(len(labels), labels)
    width = fig_width(5.2 * ncols + legend_w)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, 3.8 * nrows + 0.9), squeeze=False, sharey=True)
    measured = predicted = 0
    categorical = False
    for pi, panel in enumerate(panels):
        ax = axes[pi // ncols][pi % ncols]
        ser = series[panel] if facet else series
        allx = sorted({k for by_x in ser.values() for k in by_x}, key=lambda v: (isinstance(v, str), v))
        categorical = any(isinstance(v, str) for v in allx) or x not in ("ranks", "N")
        pos = {v: i for i, v in enumerate(allx)} if categorical else {v: v for v in allx}
        for label, by_x in sorted(ser.items()):
            xs = sorted(by_x, key=lambda v: (isinstance(v, str), v))
            ys = [statistics.median(r["summary"]["step_time_s"] for r in by_x[k]) * 1e3 for k in xs]
            c, mk = colour[label]
            (line,) = ax.plot([pos[k] for k in xs], ys, "-", marker=mk, color=c, label=label)
            line.set_gid(safe_id("series", "step_time", panel or "", label, "measured"))
            measured += 1
            preds = [(k, [prediction_of(r, rows) for r in by_x[k]]) for k in xs]
            preds = [(k, statistics.median(p)) for k, p in preds if p and all(v is not None for v in p)]
            if preds:
                (pline,) = ax.plot([pos[p[0]] for p in preds], [p[1] * 1e3 for p in preds], "--", marker=mk,
                                   fillstyle="none", color=c, linewidth=1)
                pline.set_gid(safe_id("series", "step_time", panel or "", label, "predicted"))
                predicted += 1
        if categorical:
            ax.set_xticks(range(len(allx)))
            ax.set_xticklabels(["%g" % v if isinstance(v, float) else str(v) for v in allx], rotation=30 if len(allx) > 6 else 0, ha="right" if len(allx) > 6 else "center",
                               fontsize=8)
        else:
            ax.set_xscale("log", base=2)
            ax.set_xticks(allx)
            ax.set_xticklabels(["%g" % v for v in allx])
        ax.set_xlabel("N (worker ranks)" if x in ("ranks", "N") else x)
        if pi % ncols == 0:
            ax.set_ylabel("ms per step")
        if facet:
            ax.set_title("%s = %s" % (facet, panel), fontsize=9)
        ax.grid(True, alpha=0.3)
    for pi in range(len(panels), nrows * ncols):
        axes[pi // ncols][pi % ncols].set_visible(False)
    # one legend for the configurations (colours), one for what the two line styles mean
    last = axes[0][min(ncols, len(panels)) - 1]
    handles = [matplotlib.lines.Line2D([], [], color=colour[l][0], marker=colour[l][1], label=l) for l in labels]
    legend_outside(last, len(handles), handles=handles, title="configuration")
    kinds = [matplotlib.lines.Line2D([], [], color="0.3", label="measured step time (median)")]
    if predicted:
        kinds.append(matplotlib.lines.Line2D([], [], color="0.3", linestyle="--", marker="o", fillstyle="none",
                                             label="PREDICTED communication per step\n(alpha-beta model, not a step time)"))
    fig.legend(handles=kinds, loc="lower center", ncol=len(kinds), fontsize=8, frameon=False)
    fig.suptitle("Step time (solid, measured) and predicted communication (dashed, alpha-beta)", fontsize=10)
    h = fig.get_size_inches()[1]
    layout(fig, (0, 0.55 / h, 1 - legend_w / width, 1 - 0.35 / h))
    note = "" if predicted else "no alpha-beta prediction in these reports"
    return fig, {"series": measured + predicted, "measured": measured, "predicted": predicted,
                 "bars": 0, "panels": len(panels), "note": note}


def largest_n_reports(series):
    """The largest N any series reached (N > 1 preferred) and each series' report there."""
    ns = sorted({n for by_n in series.values() for n in by_n})
    big = ns[-1]
    return big, {label: representative(by_n[big]) for label, by_n in sorted(series.items()) if big in by_n}


def rank_name(entry, i):
    if entry.get("role", "worker") == "server":
        return "server %s" % entry.get("rank", i)
    return "rank %s" % entry.get("rank", i)


def mem_tag(e, tag):
    return e.get("memory", {}).get("by_tag", {}).get(tag, 0)


def fig_memory(data, series):
    big, chosen = largest_n_reports(series)
    tags = [t for t in TAGS if any(mem_tag(e, t) > 0 for rep in chosen.values() for e in rep.get("ranks", []))]
    if not tags:
        return None, "no memory accounted by tag in the reports at N=%d" % big
    handles = [matplotlib.patches.Patch(color="C%d" % ti, label=tag) for ti, tag in enumerate(tags)]
    bars = 0
    if len(chosen) > 8:
        # compact: one row per configuration, a thin bar each for rank 0, the largest other worker
        # and the largest dedicated server, stacked by tag
        kinds = [("rank 0", "//"), ("largest other rank", ""), ("largest server", "..")]
        labels = list(chosen)
        fig, ax = plt.subplots(figsize=(fig_width(12), 1.2 + 0.42 * len(labels)))
        for ki, (who, hatch) in enumerate(kinds):
            picks = []
            for label in labels:
                rep = chosen[label]
                w = workers(rep)
                es = {"rank 0": [e for e in w if e.get("rank") == 0], "largest other rank": [e for e in w if e.get("rank") != 0],
                      "largest server": [e for e in rep.get("ranks", []) if e.get("role") == "server"]}[who]
                picks.append(max(es, key=lambda e: e.get("memory", {}).get("peak_bytes", 0)) if es else None)
            ys = [len(labels) - 1 - i + 0.27 * (1 - ki) for i in range(len(labels))]
            left = [0.0] * len(labels)
            for ti, tag in enumerate(tags):
                vals = [mem_tag(e, tag) if e else 0 for e in picks]
                cont = ax.barh(ys, vals, left=left, height=0.25, color="C%d" % ti, hatch=hatch, edgecolor="white", linewidth=0)
                for patch, label, e in zip(cont.patches, labels, picks):
                    patch.set_gid(safe_id("bar", "memory", label, who, tag))
                bars += sum(1 for e in picks if e)
                left = [a + v for a, v in zip(left, vals)]
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels[::-1], fontsize=8)
        ax.set_ylim(-0.6, len(labels) - 0.4)
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(human_bytes))
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(6))
        ax.set_xlabel("peak bytes by tag")
        ax.grid(True, axis="x", alpha=0.3)
        handles += [matplotlib.patches.Patch(facecolor="white", edgecolor="black", hatch=h, label="%s%s" % (who, " (top)" if i == 0 else ""))
                    for i, (who, h) in enumerate(kinds)]
        legend_outside(ax, len(handles), fontsize=8, handles=handles, room=2.2)
        ax.set_title("Peak memory by tag at N=%d per configuration: rank 0 (top), the largest other rank, the largest server" % big,
                     fontsize=10)
        layout(fig, (0, 0, 1 - 2.2 / fig_width(12), 1))
        return fig, {"series": 0, "bars": bars, "panels": 1, "n": big, "note": "compact: %d configurations" % len(chosen)}
    ncols = min(4, len(chosen))
    nrows = -(-len(chosen) // ncols)
    width = fig_width(1.2 + 3.9 * ncols + 1.3)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, 3.6 * nrows + 0.5), sharey=True, squeeze=False)
    for pi, (label, rep) in enumerate(chosen.items()):
        ax = axes[pi // ncols][pi % ncols]
        entries = rep.get("ranks", [])
        xs = list(range(len(entries)))
        bottom = [0.0] * len(entries)
        for ti, tag in enumerate(tags):
            vals = [mem_tag(e, tag) for e in entries]
            cont = ax.bar(xs, vals, bottom=bottom, color="C%d" % ti, label=tag, edgecolor="none")
            for x, patch, e in zip(xs, cont.patches, entries):
                patch.set_gid(safe_id("bar", "memory", label, rank_name(e, x), tag))
                if e.get("rank") == 0 and e.get("role", "worker") == "worker":
                    patch.set_edgecolor("black")
                    patch.set_linewidth(1.8)
                    patch.set_hatch("//")
            bars += len(vals)
            bottom = [b + v for b, v in zip(bottom, vals)]
        ax.set_xticks(xs)
        ax.set_xticklabels([rank_name(e, i).replace("rank ", "r").replace("server ", "s") for i, e in enumerate(entries)],
                           fontsize=7, rotation=90 if len(entries) > 10 else 0)
        ax.set_title("%s, N=%d" % (label, big), fontsize=9)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(human_bytes))
        ax.grid(True, axis="y", alpha=0.3)
    for pi in range(len(chosen), nrows * ncols):
        axes[pi // ncols][pi % ncols].set_visible(False)
    axes[0][0].set_ylabel("peak bytes per tag (rank 0 hatched)")
    legend_outside(axes[0][ncols - 1], len(handles), fontsize=8, handles=handles, room=1.3)
    fig.suptitle("Per-process peak memory by tag at the largest N (r: rank, s: dedicated server)", fontsize=10)
    layout(fig, (0, 0, 1 - 1.3 / width, 1))
    note = "" if len(chosen) > 1 else "one back end only at N=%d: nothing to compare it with" % big
    return fig, {"series": 0, "bars": bars, "panels": len(chosen), "n": big, "note": note}


def traffic_of(entry):
    t = entry.get("traffic", {})
    return t.get("bytes_sent", 0) + t.get("bytes_received", 0)


def fig_traffic(data, series):
    big, chosen = largest_n_reports(series)
    if not any(traffic_of(e) for rep in chosen.values() for e in rep.get("ranks", [])):
        return None, "no data-plane traffic in the reports at N=%d (one rank, or --sync none)" % big
    labels = sorted(series)
    colour = {label: style(i, len(labels)) for i, label in enumerate(labels)}
    compact = len(chosen) > 8
    legend_w = legend_width(len(labels), labels)
    fig_w = fig_width(11 + legend_w)
    fig, (left, right) = plt.subplots(1, 2, figsize=(fig_w, max(4.5, 1.2 + 0.42 * len(chosen)) if compact else 4.5),
                                      gridspec_kw={"width_ratios": [1.5, 1] if compact else [1, 1]})
    bars = lines = 0
    if compact:  # one row per configuration: rank 0, the other ranks' mean, the largest dedicated server
        kinds = [("rank 0", "#4c72b0"), ("other ranks (mean)", "#8c8c8c"), ("largest server", "#c44e52")]
        rows = list(chosen)
        for ki, (who, col) in enumerate(kinds):
            vals = []
            for label in rows:
                rep = chosen[label]
                w = workers(rep)
                others = [traffic_of(e) for e in w if e.get("rank") != 0]
                serv = [traffic_of(e) for e in rep.get("ranks", []) if e.get("role") == "server"]
                vals.append({"rank 0": sum(traffic_of(e) for e in w if e.get("rank") == 0),
                             "other ranks (mean)": statistics.mean(others) if others else None,
                             "largest server": max(serv) if serv else None}[who])
            ys = [len(rows) - 1 - i + 0.27 * (1 - ki) for i in range(len(rows))]
            keep = [(y, v, label) for y, v, label in zip(ys, vals, rows) if v is not None]
            cont = left.barh([k[0] for k in keep], [k[1] for k in keep], height=0.25, color=col, label=who)
            for patch, (_, _, label) in zip(cont.patches, keep):
                patch.set_gid(safe_id("bar", "traffic", label, who))
            bars += len(keep)
        left.set_yticks(range(len(rows)))
        left.set_yticklabels(rows[::-1], fontsize=8)
        left.set_ylim(-0.6, len(rows) - 0.4)
        left.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(human_bytes))
        left.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(5))
        left.set_xlabel("bytes sent + received")
        left.grid(True, axis="x", alpha=0.3)
        left.legend(fontsize=8, loc="lower right")
    else:
        width = 0.8 / max(1, len(chosen))
        for si, (label, rep) in enumerate(chosen.items()):
            entries = rep.get("ranks", [])
            xs = [i + si * width for i in range(len(entries))]
            cont = left.bar(xs, [traffic_of(e) for e in entries], width=width, color=colour[label][0], label=label)
            for x, patch, e in zip(range(len(entries)), cont.patches, entries):
                patch.set_gid(safe_id("bar", "traffic", label, rank_name(e, x)))
                if e.get("rank") == 0 and e.get("role", "worker") == "worker":
                    patch.set_edgecolor("black")
                    patch.set_linewidth(1.8)
            bars += len(entries)
        most = max(len(rep.get("ranks", [])) for rep in chosen.values())
        left.set_xticks([i + 0.4 - width / 2 for i in range(most)])
        left.set_xticklabels(["%d" % i for i in range(most)])
        left.set_xlabel("process (workers by rank, then dedicated servers)")
        left.set_ylabel("bytes sent + received")
        left.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(human_bytes))
        left.grid(True, axis="y", alpha=0.3)
    left.set_title("Per-process traffic at N=%d" % big, fontsize=10)
    for label, by_n in sorted(series.items()):
        ns = sorted(by_n)
        r0, rest = [], []
        for n in ns:
            rep = representative(by_n[n])
            w = workers(rep)
            r0.append(sum(traffic_of(e) for e in w if e.get("rank") == 0))
            others = [traffic_of(e) for e in w if e.get("rank") != 0]
            rest.append(statistics.mean(others) if others else float("nan"))
        c, mk = colour[label]
        (a,) = right.plot(ns, r0, "-", marker=mk, color=c, label=label)
        (b,) = right.plot(ns, rest, ":", marker=mk, fillstyle="none", color=c)
        a.set_gid(safe_id("series", "traffic", label, "rank0"))
        b.set_gid(safe_id("series", "traffic", label, "others"))
        lines += 2
    right.set_xscale("log", base=2)
    allns = sorted({n for by_n in series.values() for n in by_n})
    right.set_xticks(allns)
    right.set_xticklabels([str(n) for n in allns])
    right.set_xlabel("N (worker ranks)")
    right.set_ylabel("bytes sent + received")
    right.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(human_bytes))
    right.set_title("Rank 0 (solid) vs the other ranks' mean (dotted)", fontsize=10)
    right.grid(True, alpha=0.3)
    legend_outside(right, len(labels))
    layout(fig, (0, 0, 1 - legend_w / fig_w, 1))
    return fig, {"series": lines, "bars": bars, "n": big, "note": "compact: %d configurations" % len(chosen) if compact else ""}


def phase_of(e, p):
    v = e.get("time_s", {}).get("phases", {}).get(p, 0)
    return v if isinstance(v, (int, float)) else 0


def server_busy_of(rep):
    """Seconds of reduce + update per timed step in the processes that host a server: rank 0
    under a colocated ps, the dedicated server entries (the largest); 0 when the report has none."""
    vals = [e.get("time_s", {}).get("server_busy", 0) for e in rep.get("ranks", [])
            if e.get("role") == "server" or isinstance(e.get("time_s", {}).get("server_busy"), (int, float))]
    vals = [v for v in vals if isinstance(v, (int, float))]
    return max(vals) if vals else 0


def mean_phases(rep):
    """Each phase's seconds per timed step, averaged over the worker ranks; comm_total beside them,
    and the server's busy time. Missing phases (older reports: other, server_busy) count 0."""
    w = workers(rep)
    out = {p: statistics.mean(phase_of(e, p) for e in w) if w else 0 for p in PHASES + ["comm_total"]}
    out["server_busy"] = server_busy_of(rep)
    return out


PHASE_COLOURS = {"data": "#8c8c8c", "forward": "#4c72b0", "backward": "#55a868", "optimizer": "#8172b2",
                 "comm_exposed": "#c44e52", "idle": "#dd8452", "other": "#cccccc"}


def fig_phases(data, series, facet=None):
    panels = sorted(series) if facet else [None]
    cells = {}  # panel -> [(label, N, {phase: seconds})], the median over repeats
    for panel in panels:
        ser = series[panel] if facet else series
        cells[panel] = []
        for label, by_n in sorted(ser.items()):
            for n in sorted(by_n):
                per = [mean_phases(r) for r in by_n[n]]
                keys = PHASES + ["comm_total", "server_busy"]
                cells[panel].append((label, n, {p: statistics.median(x[p] for x in per) for p in keys}))
    if not any(v for cs in cells.values() for _, _, ph in cs for v in ph.values()):
        return None, "no phase times in the reports"
    most = max(len(cs) for cs in cells.values())
    ncols = min(2, len(panels))
    nrows = -(-len(panels) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(fig_width(9.5 * ncols), max(2.4, 0.6 + 0.3 * most) * nrows + 1.2),
                             squeeze=False, sharex=True)
    bars = markers = 0
    servers = False
    for pi, panel in enumerate(panels):
        ax = axes[pi // ncols][pi % ncols]
        cs = cells[panel]
        ys = [len(cs) - 1 - i for i in range(len(cs))]
        left = [0.0] * len(cs)
        for phase in PHASES:  # these add up to the step: stacked
            vals = [ph[phase] * 1e3 for _, _, ph in cs]
            cont = ax.barh([y + 0.1 for y in ys], vals, left=left, height=0.6, color=PHASE_COLOURS[phase], label=phase)
            for patch, (label, n, _) in zip(cont.patches, cs):
                patch.set_gid(safe_id("bar", "phases", panel or "", label, "N%d" % n, phase))
            bars += len(vals)
            left = [a + v for a, v in zip(left, vals)]
        for y, (label, n, ph) in zip(ys, cs):  # comm_total overlaps compute: an outline, never stacked
            if ph["comm_total"] > 0:
                r = matplotlib.patches.Rectangle((0, y + 0.1 - 0.36), ph["comm_total"] * 1e3, 0.72, fill=False,
                                                 edgecolor="black", linewidth=1.2, linestyle="--")
                r.set_gid(safe_id("marker", "phases", panel or "", label, "N%d" % n, "comm_total"))
                ax.add_patch(r)
                markers += 1
            if ph["server_busy"] > 0:  # the server's reduce + update, a thin hatched bar below its bar
                b = ax.barh([y - 0.32], [ph["server_busy"] * 1e3], height=0.16, color="white", edgecolor="#c44e52",
                            hatch="////", linewidth=0.8)
                b.patches[0].set_gid(safe_id("bar", "phases", panel or "", label, "N%d" % n, "server_busy"))
                bars += 1
                servers = True
        ax.set_yticks(ys)
        ax.set_yticklabels(["%s, N=%d" % (label, n) for label, n, _ in cs], fontsize=8 if len(cs) <= 16 else 7)
        ax.set_ylim(-0.6, len(cs) - 0.4)
        ax.grid(True, axis="x", alpha=0.3)
        if facet:
            ax.set_title("%s = %s" % (facet, panel), fontsize=9)
        if pi // ncols == nrows - 1:
            ax.set_xlabel("ms per timed step (mean over worker ranks, median over repeats)")
    for pi in range(len(panels), nrows * ncols):
        axes[pi // ncols][pi % ncols].set_visible(False)
    handles = [matplotlib.patches.Patch(color=PHASE_COLOURS[p], label=p) for p in PHASES]
    handles.append(matplotlib.patches.Patch(fill=False, edgecolor="black", linestyle="--", label="comm_total (overlaps compute)"))
    if servers:
        handles.append(matplotlib.patches.Patch(facecolor="white", edgecolor="#c44e52", hatch="////",
                                                label="server busy (reduce + update)"))
    rows = -(-len(handles) // 5)
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 5), fontsize=8, frameon=False)
    fig.suptitle("Where a step's time goes: the stacked phases add up to the step", fontsize=10)
    h = fig.get_size_inches()[1]
    layout(fig, (0, (0.12 + 0.22 * rows) / h, 1, 1 - 0.3 / h))
    return fig, {"series": 0, "bars": bars, "markers": markers, "cells": sum(len(c) for c in cells.values()),
                 "panels": len(panels), "note": ""}


NONFINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def loss_points(summ):
    """A report's loss curve as (steps, losses, diverged_step): a loss that is not finite (the
    report's "nan", "inf", "-inf", or anything else that is no number) becomes NaN, a gap in the
    line; diverged_step is the first such step (summary.diverged_step where the report says
    "diverged": true), None when the run did not diverge."""
    xs, ys = [], []
    for p in summ.get("loss_curve") or []:
        if not isinstance(p, list) or len(p) != 2 or not isinstance(p[0], (int, float)):
            continue
        v = p[1]
        y = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else NONFINITE.get(v, float("nan"))
        xs.append(p[0])
        ys.append(y if y == y and abs(y) != float("inf") else float("nan"))
    first = next((x for x, y in zip(xs, ys) if y != y), None)
    said = summ.get("diverged_step")
    if summ.get("diverged") is True and isinstance(said, (int, float)) and not isinstance(said, bool):
        first = int(said)
    return xs, ys, first


def fig_loss(data, series):
    """Loss against steps (left) and, where the reports carry summary.time_curve, against seconds
    of training (right: rank 0's clock; under async ps the first local step that computed on each
    server step's parameters), one line per configuration in both."""
    curves = []
    for label, by_n in sorted(series.items()):
        for n in sorted(by_n):
            summ = representative(by_n[n]).get("summary", {})
            curve = loss_points(summ)
            times = summ.get("time_curve") or []
            if curve[0]:
                curves.append(("%s N=%d" % (label, n), curve, times if len(times) == len(curve[0]) else []))
    # a diverged run's legend entry says so (its label, the figure's id, stays as it is)
    shown = [c[0] if c[1][2] is None else "%s (diverged at step %d)" % (c[0], c[1][2]) for c in curves]
    if not curves:
        return None, "no loss curves in the reports"
    timed = any(t for _, _, t in curves)
    diverged = [s for s, c in zip(shown, curves) if c[1][2] is not None]
    fig, axes = plt.subplots(1, 2 if timed else 1, figsize=(11 if timed else 7, 4.5), squeeze=False)
    ax, axt = axes[0][0], (axes[0][1] if timed else None)
    styles = ["-", "--", ":", "-."]
    positive = True
    for i, (label, (xs, ys, first), times) in enumerate(curves):
        positive = positive and all(y > 0 for y in ys if y == y)
        st, color = styles[(i // 20) % len(styles)], style(i, len(curves))[0]
        # a diverged run: drawn up to its last finite loss (NaN leaves a gap), an x there, and a
        # dotted line at the step its loss stopped being finite
        last = [(x, y) for x, y in zip(xs, ys) if y == y and (first is None or x < first)][-1:] if first is not None else []
        (line,) = ax.plot(xs, ys, st, color=color, label=shown[i], linewidth=1.2, marker="x" if last else None,
                          markevery=[xs.index(last[0][0])] if last else None)
        line.set_gid(safe_id("series", "loss", label))
        if first is not None:
            mark = ax.axvline(first, color=color, linestyle=":", linewidth=1.2)
            mark.set_gid(safe_id("marker", "loss", "diverged", label))
        if axt is not None and times:
            (tline,) = axt.plot([p[1] for p in times], ys, st, color=color, linewidth=1.2, marker="x" if last else None,
                                markevery=[xs.index(last[0][0])] if last else None)
            tline.set_gid(safe_id("series", "loss_time", label))
    for a in [ax] + ([axt] if axt is not None else []):
        if positive:
            a.set_yscale("log")
        a.grid(True, alpha=0.3)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (global, sample-weighted)")
    ax.set_title("Loss curves")
    if axt is not None:
        axt.set_xlabel("seconds of training (rank 0's clock)")
        axt.set_title("Loss against time")
    legend_w = legend_width(len(curves), shown)
    base_w = 11 if timed else 7
    width = fig_width(base_w + legend_w)
    fig.set_size_inches(width, 4.5)
    legend_outside(ax, len(curves), room=legend_w)
    layout(fig, (0, 0, 1 - legend_w / width, 1))
    note = "" if timed else "no time_curve in the reports: loss against steps only"
    if diverged:
        note += ("; " if note else "") + "diverged (loss not finite from the dotted line on, no loss drawn there): " + ", ".join(diverged)
    return fig, {"series": len(curves), "bars": 0, "diverged": diverged, "note": note}


DP_BESIDE = "DataParallel's server (not in Table 1)"


def table1_arch(rep):
    """(architecture, k) of a report on a line of BytePS's Table 1, or None: the ring, the
    colocated sharded ps (k = 0), k dedicated servers, byteps with k servers; and, drawn beside
    them with no line of its own, DataParallel's server in rank 0."""
    cfg = rep.get("config", {})
    arch, k = architecture(rep), (rep.get("backend") or {}).get("servers", 0)
    if cfg.get("ps-consistency", "sync") != "sync" or cfg.get("ps-mode", "push") != "push" or cfg.get("straggler"):
        return None
    return {"ring": ("ring", None), "ps-colocated": (DP_BESIDE, None), "ps-sharded": ("colocated PS (sharded)", 0),
            "ps-dedicated": ("non-colocated PS", k), "byteps": ("BytePS", k)}.get(arch)


def table1_line(arch, n, k):
    """Table 1's time in units of M / B (Jiang et al., OSDI 2020, 4.1)."""
    if arch in ("ring", "colocated PS (sharded)"):
        return 2 * (n - 1) / n
    if arch == "non-colocated PS":
        return max(1.0, n / k)
    return 2 * n * (n - 1) / (n * n + k * n - 2 * k)


def fig_table1(data, series):
    """BytePS's Table 1 against the testbed: comm per step (mean over workers, median over repeats)
    against the CPU servers k, one panel per n, one colour per architecture, the paper's lines
    dashed (M the gradient on the wire, B the emulated link's rate)."""
    pts = {}  # (n, arch) -> {k: [ms...]}; lines need M and B
    MB = {}
    for rep in data["reports"]:
        link = (rep.get("env", {}).get("link") or {}).get("bandwidth_bytes_per_s")
        a = table1_arch(rep)
        n = world(rep)
        if not link or not a or n < 2:
            continue
        arch, k = a
        w = workers(rep)
        comm = [phase_of(e, "comm_total") for e in w]
        comm = [c for c in comm if c is not None]
        if not comm:
            continue
        M = min(mem_tag(e, "params") for e in w) / (2 if rep.get("config", {}).get("wire", "fp32") != "fp32" else 1)
        MB[n] = (M, link)
        pts.setdefault((n, arch), {}).setdefault(k, []).append(1e3 * sum(comm) / len(comm))
    if not pts:
        return None, "no runs under an emulated --link on BytePS's Table 1 lines (experiments/matrices/byteps.json)"
    ns = sorted({n for n, _ in pts})
    archs = ["ring", "colocated PS (sharded)", "non-colocated PS", "BytePS", DP_BESIDE]
    fig, axes = plt.subplots(1, len(ns), figsize=(5.5 * len(ns), 4.2), squeeze=False)
    for col, n in enumerate(ns):
        ax = axes[0][col]
        M, B = MB[n]
        ks = list(range(0, n + 1))
        for i, arch in enumerate(archs):
            color = style(i, len(archs))[0]
            got = pts.get((n, arch))
            if arch in ("ring", DP_BESIDE):  # flat in k; only the ring has a line of Table 1
                if arch == "ring":
                    ax.plot(ks, [table1_line(arch, n, 0) * M / B * 1e3] * len(ks), "--", color=color, linewidth=1,
                            label="%s: Table 1" % arch if col == 0 else None)
                if got:
                    y = statistics.median(got[None])
                    (l,) = ax.plot(ks, [y] * len(ks), "-" if arch == "ring" else ":", color=color, label=arch,
                                   linewidth=1.4)
                    l.set_gid(safe_id("series", "table1", "n%d" % n, arch))
                continue
            lk = [k for k in ks if (arch != "non-colocated PS" or k >= 1) and (arch != "colocated PS (sharded)" or k == 0)]
            ax.plot(lk, [table1_line(arch, n, k) * M / B * 1e3 for k in lk], "--", color=color, linewidth=1,
                    label="%s: Table 1" % arch if col == 0 and len(lk) > 1 else None)  # every dashed line drawn in the legend
            if got:
                xs = sorted(got)
                (l,) = ax.plot(xs, [statistics.median(got[k]) for k in xs], "o-", color=color, label=arch, linewidth=1.4)
                l.set_gid(safe_id("series", "table1", "n%d" % n, arch))
        ax.set_xlabel("CPU servers k")
        ax.set_ylabel("comm per step (ms)")
        ax.set_title("n = %d workers, M = %s, B = %s/s" % (n, human_bytes(M), human_bytes(B)))
        ax.set_xticks(ks)
        ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="best")
    layout(fig)
    return fig, {"series": sum(len(v) for v in pts.values()), "bars": 0,
                 "note": "solid: measured; dashed: BytePS's Table 1 (the ring's flat at every k); "
                                                      "dotted: DataParallel's server, beside"}


def bench_label(bench):
    """"ps N=4 (cpu)"; a placement other than colocated and server processes are named too
    ("ps sharded N=4", "ps dedicated K=2 N=4", "byteps k=2 N=4"), so that no two series share one."""
    cfg = bench.get("config", {})
    sync, extra, arch = cfg.get("sync", "?"), "", architecture(bench)
    placement, servers = cfg.get("ps_placement"), cfg.get("ps_servers")
    if placement and placement != "colocated":
        extra += " " + placement
    if isinstance(servers, (int, float)) and arch in ("byteps", "ps-dedicated"):
        extra += " %s=%d" % ("k" if arch == "byteps" else "K", servers)
    return "%s%s N=%s (%s)" % (sync, extra, cfg.get("ranks", "?"), cfg.get("device", "?"))


def fig_busbw(data, series):
    benches = [(bench_label(b), b) for b in data["benches"]]
    benches = [(label, [r for r in b.get("rows", []) if r.get("size_bytes", 0) > 0
                        and isinstance(r.get("busbw_gbps"), (int, float))]) for label, b in benches]
    benches = [(label, rows) for label, rows in benches if rows]
    if not benches:
        return None, "no bench reports (%s): run `ringside bench ... --report DIR/bench-<sync>.json`" % BENCH_SCHEMA
    fig, ax = plt.subplots(figsize=(7, 4.5))
    seen = {}
    for i, (label, rows) in enumerate(sorted(benches, key=lambda b: b[0])):
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label = "%s (%d)" % (label, seen[label])
        rows = sorted(rows, key=lambda r: r["size_bytes"])
        (line,) = ax.plot([r["size_bytes"] for r in rows], [r["busbw_gbps"] for r in rows], "o-",
                          color="C%d" % (i % 10), label=label)
        line.set_gid(safe_id("series", "busbw", label))
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(human_bytes))
    ax.set_xlabel("message size")
    ax.set_ylabel("bus bandwidth, GB/s (algbw x 2(N-1)/N)")
    ax.set_title("All-reduce bus bandwidth vs message size")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig, {"series": len(benches), "bars": 0, "note": ""}


def fig_forecast(data, series):
    """`ringside predict`'s forecast: communication per step against N, one line per architecture,
    log-log; the N where the link was measured shaded, the rest extrapolated."""
    if not data["forecasts"]:
        return None, "no forecast (%s): run `ringside predict ... --report DIR/forecast.json`" % PREDICT_SCHEMA
    f = sorted(data["forecasts"], key=lambda d: d["_file"])[0]
    lines = {}
    for r in f.get("rows", []):
        if isinstance(r, dict) and isinstance(r.get("comm_s"), (int, float)) and r["comm_s"] > 0:
            lines.setdefault(r.get("architecture", "?"), []).append((r["ranks"], r["comm_s"]))
    if not lines:
        return None, "%s holds no rows" % f["_file"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (arch, pts) in enumerate(sorted(lines.items())):
        pts.sort()
        (l,) = ax.plot([p[0] for p in pts], [p[1] * 1e3 for p in pts], "o-", ms=3, color="C%d" % (i % 10), label=arch)
        l.set_gid(safe_id("series", "forecast", arch))
    mr = (f.get("link") or {}).get("measured_ranks")
    if isinstance(mr, list) and len(mr) == 2:
        ax.axvspan(mr[0], mr[1], color="0.85", zorder=0, label="link measured (N = %d..%d)" % tuple(mr))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("ranks N")
    ax.set_ylabel("communication per step, ms (alpha-beta forecast)")
    ax.set_title("Forecast: %s" % f["_file"])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig, {"series": len(lines), "bars": 0, "note": "a forecast, not a measurement: %s" % "; ".join(f.get("assumptions", [])[:2])}


# where the state lives: the tags bottom to top, the model states first (ZeRO's Figure 1 counts
# them), then what the formula leaves out; each with what it is, for the legend
STATE_TAGS = [("params", "params (model state)"), ("grads", "grads (model state)"),
              ("optimizer", "optimizer (model state)"), ("server", "server: a parameter\nserver's state"),
              ("gather", "gather: DataParallel's\noutputs on rank 0"), ("activations", "activations\n(not sharded)"),
              ("comm", "comm: buffers to communicate\n(ZeRO counts them apart)")]
STATE_STYLE = {"params": ("C0", ""), "grads": ("C1", ""), "optimizer": ("C2", ""), "server": ("C3", ""),
               "gather": ("C4", ""), "activations": ("0.55", ""), "comm": ("white", "xxx")}
# the options that shape one model only (a panel of another model leaves them out of its title)
MODEL_KEYS = {"mlp": {"layers"}, "gpt": {"vocab", "n-layer", "n-head", "n-embd", "seq-len"}}
MODEL_KEYS["all"] = set().union(*MODEL_KEYS.values())
STATE_ORDER = ["ps-colocated", "ps-dedicated", "ps-sharded", "byteps", "ring", "tree", "zero-1", "zero-2", "zero-3"]


def state_bars(rep):
    """[(label, entry)]: the processes one report's bar group shows. DataParallel's server: rank 0
    and the largest other rank; server processes of their own: the largest worker and the largest
    server; elsewhere the largest worker (the ranks are alike)."""
    peak = lambda e: e.get("memory", {}).get("peak_bytes", 0)  # noqa: E731
    w, srv = workers(rep), [e for e in rep.get("ranks", []) if e.get("role") == "server"]
    name = architecture(rep) if architecture(rep) == "ps-colocated" else backend(rep)
    if architecture(rep) == "ps-colocated" and len(w) > 1:
        return [(name + ": rank 0", [e for e in w if e.get("rank") == 0][0]),
                (name + ": other ranks", max([e for e in w if e.get("rank") != 0], key=peak))]
    bars = [(name + (": a worker" if srv else ""), max(w, key=peak))] if w else []
    return bars + ([(name + ": a server", max(srv, key=peak))] if srv else [])


def is_zero(rep):
    """A run of ZeRO's sharded data parallelism (backend.family "zero")."""
    return (rep.get("backend") or {}).get("family") == "zero"


def fig_states(data, series):
    """Where the state lives: memory per rank by tag, one bar per architecture (the process that
    holds the most of it; DataParallel's rank 0 and its other ranks apart, a dedicated server
    beside its workers), one panel per configuration and N, the panels of a configuration on one
    scale. Drawn where a ZeRO run stands beside another architecture."""
    reports = [rep for by_n in series.values() for reps in by_n.values() for rep in reps]
    if not any(map(is_zero, reports)):
        return None, "no ZeRO run (--sync zero) in these reports (experiments/matrices/memory.json draws it)"
    keys = varying_keys(reports, skip=("zero-stage",))
    panels = {}  # (configuration, N) -> {architecture label: report}
    for rep in reports:
        if world(rep) < 2 or architecture(rep) not in STATE_ORDER:
            continue
        model = rep.get("config", {}).get("model", "mlp")
        conf = " ".join("%s=%s" % (k, option_text(rep, k)) for k in keys
                        if k not in MODEL_KEYS["all"] - MODEL_KEYS.get(model, set())) or "every configuration"
        panels.setdefault((conf, world(rep)), {}).setdefault(backend(rep), []).append(rep)
    panels = {k: v for k, v in panels.items() if len(v) > 1}
    if not panels:
        return None, "no ZeRO run beside another architecture at one N"
    # the configurations from where the model states weigh most to where activations do
    def act_share(conf):
        shares = [mem_tag(e, "activations") / max(1, sum(mem_tag(e, t) for t, _ in STATE_TAGS))
                  for (c, _), v in panels.items() if c == conf for reps in v.values() for _, e in state_bars(reps[0])]
        return (statistics.median(shares), conf)
    confs = sorted({c for c, _ in panels}, key=act_share)
    ns = sorted({n for _, n in panels})
    tags = [(t, d) for t, d in STATE_TAGS
            if any(mem_tag(e, t) > 0 for v in panels.values() for reps in v.values() for _, e in state_bars(reps[0]))]
    legend_w = 2.9
    width = fig_width(1.0 + 4.6 * len(ns) + legend_w)
    col_w = (width - legend_w - 1.0) / len(ns)
    fig, axes = plt.subplots(len(confs), len(ns), figsize=(width, 1.2 + 3.5 * len(confs)), sharey="row", squeeze=False)
    bars = 0
    for (conf, n), by_arch in sorted(panels.items()):
        ax = axes[confs.index(conf)][ns.index(n)]
        order = sorted(by_arch, key=lambda a: (STATE_ORDER.index(architecture(by_arch[a][0])), a))
        picks = [(label, e) for a in order for label, e in state_bars(representative(by_arch[a]))]
        xs = list(range(len(picks)))
        bottom = [0.0] * len(picks)
        for tag, _ in tags:
            colour, hatch = STATE_STYLE[tag]
            vals = [mem_tag(e, tag) / 1048576.0 for _, e in picks]
            cont = ax.bar(xs, vals, bottom=bottom, width=0.72, color=colour, hatch=hatch, edgecolor="0.35",
                          linewidth=0.4)
            for (label, _), patch, v in zip(picks, cont.patches, vals):
                if v > 0:  # a tag this process does not hold draws nothing
                    patch.set_gid(safe_id("bar", "states", conf, n, label, tag))
            bars += sum(1 for v in vals if v > 0)
            bottom = [b + v for b, v in zip(bottom, vals)]
        for x, top, (label, e) in zip(xs, bottom, picks):  # the model states' sum, over the bar; a tick where they end
            states = sum(mem_tag(e, t) for t in ("params", "grads", "optimizer", "server"))
            ax.plot([x - 0.36, x + 0.36], [states / 1048576.0] * 2, color="black", linewidth=1.2)
            ax.annotate(human_bytes(states), (x, top), xytext=(0, 2), textcoords="offset points", ha="center",
                        va="bottom", fontsize=6.5, rotation=90 if len(picks) > 6 and col_w < 4 else 0)
        ax.margins(y=0.16)
        ax.set_xticks(xs)
        ax.set_xticklabels([label for label, _ in picks], fontsize=7, rotation=40, ha="right", rotation_mode="anchor")
        ax.set_title("%s, N=%d" % (conf, n), fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    for ri in range(len(confs)):
        shown = [ci for ci, n in enumerate(ns) if (confs[ri], n) in panels]
        for ci in range(len(ns)):
            axes[ri][ci].set_visible(ci in shown)
        axes[ri][shown[0]].set_ylabel("peak MiB per tag, one process")  # the row's scale on its first panel
        axes[ri][shown[0]].yaxis.set_tick_params(labelleft=True)
    handles = [matplotlib.patches.Patch(facecolor=STATE_STYLE[t][0], hatch=STATE_STYLE[t][1], edgecolor="0.35", label=d)
               for t, d in reversed(tags)]
    handles.append(matplotlib.lines.Line2D([], [], color="black", linewidth=1.2,
                                           label="model states, their sum\nprinted over the bar (params +\ngrads + optimizer + server)"))
    legend_outside(axes[0][-1], len(handles), fontsize=8, handles=handles, room=legend_w)
    fig.suptitle("Where the state lives: memory per rank by tag, per architecture (ZeRO's Figure 1, measured)", fontsize=11)
    layout(fig, (0, 0, 1 - legend_w / width, 0.97))
    return fig, {"series": 0, "bars": bars, "panels": len(panels), "n": ns, "configurations": len(confs), "note": ""}


FIGURE_FUNCS = {"step_time": fig_step_time, "memory": fig_memory, "traffic": fig_traffic,
                "phases": fig_phases, "loss": fig_loss, "busbw": fig_busbw, "table1": fig_table1,
                "forecast": fig_forecast, "states": fig_states}
CAPTIONS = {
    "step_time": "Median step time per configuration (solid); dashed: the alpha-beta PREDICTION of communication per step, not a step time.",
    "memory": "Per-process peak memory stacked by tag at the largest N, one panel per configuration (past 8: rank 0, the largest other rank and server); rank 0 hatched.",
    "traffic": "Data-plane bytes sent + received per process at the largest N, and rank 0 vs the other ranks as N grows.",
    "phases": "One bar per configuration: the phases that add up to a step, stacked (mean over worker ranks, median over repeats); comm_total dashed outline (it overlaps compute); the server's reduce + update as a thin hatched bar below.",
    "loss": "Global sample-weighted training loss against steps (left) and against seconds of training (right, where the reports carry time_curve), every back end and N over each other.",
    "busbw": "Bus bandwidth vs message size from `ringside bench` reports.",
    "forecast": "`ringside predict`: each architecture's alpha-beta communication per step against N (log-log); shaded where the link was measured, extrapolated elsewhere.",
    "states": "Where the state lives (ZeRO's Figure 1, measured): memory per process by tag for each architecture, model states (params, grads, optimizer, a server's state) at the bottom with their sum printed on the bar, activations and the communication buffers above them; DataParallel's rank 0 and its other ranks apart, a dedicated server's process beside its workers; one panel per configuration and N.",
    "table1": "BytePS's Table 1 (OSDI 2020): communication per step against the CPU servers k, one panel per n, measured (solid) and the paper's line (dashed) per architecture, DataParallel's server in rank 0 beside them (dotted: not in the table), under the emulated link.",
}


# ---- writing -------------------------------------------------------------------------------


def save(fig, out, name):
    """Writes name.png and name.svg (no dates, fixed SVG ids: the same input gives the same files)."""
    fig.savefig(os.path.join(out, name + ".png"), dpi=110, metadata={"Software": None})
    fig.savefig(os.path.join(out, name + ".svg"), metadata={"Date": None})
    plt.close(fig)


def claims_html(claims):
    if claims is None:
        return "<p class=note>claims not decided: run <code>ringside claims DIR</code></p>"
    rows = claims_list(claims)
    if not rows:
        return "<p class=note>claims.json holds no claims</p>"
    out = ["<table><tr><th>claim</th><th>verdict</th><th>text</th><th>numbers</th><th>why</th></tr>"]
    for c in rows:
        verdict = str(c.get("verdict", "?"))
        nums = json.dumps(c.get("numbers", {}), indent=1, sort_keys=True)
        out.append("<tr><td>%s</td><td class='v %s'>%s</td><td>%s</td>"
                   "<td><details><summary>numbers</summary><pre>%s</pre></details></td><td>%s</td></tr>"
                   % (html.escape(str(c.get("claim", ""))), html.escape(verdict.replace(" ", "-")),
                      html.escape(verdict), html.escape(str(c.get("text", ""))), html.escape(nums),
                      html.escape(str(c.get("why", "")))))
    out.append("</table>")
    return "\n".join(out)


def write_index(out, folder, data, manifest):
    parts = ["<!doctype html><html><head><meta charset=utf-8><title>ringside: %s</title>" % html.escape(folder),
             "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}img{max-width:100%}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}"
             ".note{color:#a60}.PASS{background:#cfc}.FAIL{background:#fcc}.NOT-RUN{background:#eee}</style>",
             "</head><body><h1>ringside results: %s</h1>" % html.escape(folder),
             "<p>%d train report%s, %d bench report%s%s.</p>" % (
                 len(data["reports"]), "" if len(data["reports"]) == 1 else "s",
                 len(data["benches"]), "" if len(data["benches"]) == 1 else "s",
                 ", summary.json" if data["summary"] is not None else ""),
             "<h2>Claims</h2>", claims_html(data["claims"]), "<h2>Figures</h2>"]
    for name in FIGURES:
        entry = manifest[name]
        parts.append("<h3 id='%s'>%s</h3>" % (name, name))
        if entry["status"] == "skipped":
            parts.append("<p class=note>skipped: %s</p>" % html.escape(entry["reason"]))
            continue
        parts.append("<p>%s</p>" % html.escape(CAPTIONS[name]))
        if entry.get("note"):
            parts.append("<p class=note>note: %s</p>" % html.escape(entry["note"]))
        parts.append("<a href='%s.svg'><img src='%s.png' alt='%s'></a> <a href='%s.svg'>SVG</a>"
                     % (name, name, name, name))
    if data["ignored"]:
        parts.append("<h2>Files not read</h2><ul>")
        parts += ["<li>%s: %s</li>" % (html.escape(n), html.escape(why)) for n, why in data["ignored"]]
        parts.append("</ul>")
    parts.append("</body></html>")
    with open(os.path.join(out, "index.html"), "w") as f:
        f.write("\n".join(parts) + "\n")


def main(argv):
    ap = argparse.ArgumentParser(prog="plot.py", description=__doc__.split("\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", metavar="DIR", help="folder of reports (ringside matrix --out DIR, or train --report DIR/x.json)")
    ap.add_argument("--out", metavar="OUTDIR", help="where figures go (default: DIR)")
    ap.add_argument("--x", metavar="AXIS", default="ranks",
                    help="the step-time figure's x axis: ranks (N, the default), variant, or a train option (bucket-mb, ...)")
    ap.add_argument("--facet", metavar="AXIS", help="one panel per value of AXIS (step time and phases)")
    ap.add_argument("--filter", metavar="KEY=VALUE", action="append", default=[],
                    help="keep the reports whose option KEY (or variant) is VALUE; repeatable, all must hold")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.dir):
        print("plot.py: error: %s is not a folder" % args.dir, file=sys.stderr)
        return 2
    filters = []
    for f in args.filter:
        if "=" not in f:
            print("plot.py: error: --filter %s: expected KEY=VALUE" % f, file=sys.stderr)
            return 2
        filters.append(tuple(f.split("=", 1)))
    try:
        data = load_folder(args.dir)
    except BadReport as e:  # refused whole: nothing drawn from a folder holding it
        print("plot.py: error: %s: %s; refusing the folder (nothing drawn)" % (args.dir, e), file=sys.stderr)
        return 2
    for name, why in data["ignored"]:
        warn("ignoring %s: %s" % (name, why))
    if not data["reports"] and not data["benches"] and not data["forecasts"]:
        print("plot.py: error: no ringside reports in %s (expected *.json with \"schema\": \"%s\" or \"%s\"; "
              "make some with `ringside matrix ... --out %s`)" % (args.dir, REPORT_SCHEMA, BENCH_SCHEMA, args.dir),
              file=sys.stderr)
        return 2
    variant_of = {r.get("report"): (r.get("axes") or {}).get("variant") for r in summary_rows(data["summary"])
                  if isinstance(r, dict)}
    for rep in data["reports"]:
        rep["_variant"] = variant_of.get(rep["_file"]) or ""
    known = set(k for rep in data["reports"] for k in rep.get("config", {})) | {"variant", "ranks", "N"}
    for key in [k for k, _ in filters] + [a for a in (args.x, args.facet) if a]:
        if data["reports"] and key not in known:
            print("plot.py: error: '%s' is not an option of these reports (nor variant or ranks)" % key, file=sys.stderr)
            return 2
    reports = [r for r in data["reports"] if all(option_text(r, k) == v for k, v in filters)]
    if filters and not reports:
        print("plot.py: error: --filter %s leaves none of the %d reports" % (" ".join(args.filter), len(data["reports"])),
              file=sys.stderr)
        return 2
    out = args.out or args.dir
    os.makedirs(out, exist_ok=True)
    plt.rcParams["svg.hashsalt"] = "ringside"
    facet = args.facet
    skip_x = (args.x,) if args.x not in ("ranks", "N") else ()
    skip_f = (facet,) if facet else ()
    varying = varying_keys(reports, skip_x + skip_f)
    series = group(reports, varying_keys(reports))  # by N: memory, traffic, loss

    def by_panel(x, skip):
        return {k: group([r for r in reports if option_text(r, facet) == k], varying, x, skip)
                for k in sorted({option_text(r, facet) for r in reports})}
    if facet:
        step_series = by_panel(args.x, skip_x + skip_f)
        varying = varying_keys(reports, skip_f)  # the phases' bars keep the x axis' option in their labels
        phase_series = by_panel("ranks", skip_f)
    else:
        step_series = group(reports, varying, args.x, skip_x)
        phase_series = series
    calls = {"step_time": lambda: fig_step_time(data, step_series, args.x, facet),
             "phases": lambda: fig_phases(data, phase_series, facet)}
    manifest = {}
    for name in FIGURES:
        if name not in ("busbw", "forecast") and not series:
            fig, entry = None, "no train reports (%s)" % REPORT_SCHEMA
        else:
            fig, entry = calls[name]() if name in calls else FIGURE_FUNCS[name](data, series)
        if fig is None:
            # a folder without a forecast, or without a ZeRO run, is complete without its figure
            if not (name == "forecast" and not data["forecasts"]) and not (name == "states" and not any(map(is_zero, reports))):
                warn("skipping %s: %s" % (name, entry))
            manifest[name] = {"status": "skipped", "reason": entry}
            continue
        save(fig, out, name)
        entry.update({"status": "drawn", "files": [name + ".png", name + ".svg"]})
        manifest[name] = entry
    with open(os.path.join(out, "figures.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    write_index(out, args.dir, data, manifest)
    drawn = [n for n in FIGURES if manifest[n]["status"] == "drawn"]
    print("# plots: %d figures in %s (%s); %s" % (len(drawn), out, ", ".join(drawn),
                                                 os.path.join(out, "index.html")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
