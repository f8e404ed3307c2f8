#!/usr/bin/env python3
# plot.py - turns a folder of ringside reports into PNG + SVG figures, figures.json and an index.html
"""usage: plot.py DIR [--out OUTDIR]

Reads every *.json in DIR: train reports ("schema": "ringside.report/1"), bench reports
("ringside.bench/1"), summary.json and claims.json when present. Writes to OUTDIR (default DIR):

  step_time.png/.svg  median step time vs N per back end (dashed: alpha-beta prediction)
  memory.png/.svg     per-rank peak memory stacked by tag at the largest N, one panel per back end
  traffic.png/.svg    per-rank bytes sent+received at the largest N; rank 0 vs the others vs N
  phases.png/.svg     mean phase time per step (data ... idle) per back end and N, stacked
  loss.png/.svg       loss curves of every back end and N over each other
  busbw.png/.svg      bus bandwidth vs message size from bench reports
  figures.json        what each figure shows (series and bar counts) or why it was skipped
  index.html          the figures and the claims table (from claims.json)

A figure whose data is missing is skipped with a note (stderr and index.html). Exit status:
0 when done, 2 when DIR holds no reports (or does not exist), 1 on other errors.
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
import matplotlib.patches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

REPORT_SCHEMA = "ringside.report/1"
BENCH_SCHEMA = "ringside.bench/1"
MATRIX_SCHEMA = "ringside.matrix/1"
PHASES = ["data", "forward", "backward", "comm_exposed", "optimizer", "idle"]
TAGS = ["params", "grads", "activations", "optimizer", "comm", "server", "gather"]
# config keys that never define a different experiment (repeats differ only in these)
NOISE_KEYS = {"seed", "report", "trace", "quiet", "verbose", "threads", "timeout", "device", "ranks"}
# config keys already expressed by the back-end label or the N axis
AXIS_KEYS = {"sync", "ps-placement", "ps-servers", "ps-mode"}
FIGURES = ["step_time", "memory", "traffic", "phases", "loss", "busbw"]


def warn(msg):
    print("plot.py: " + msg, file=sys.stderr)


# ---- reading -------------------------------------------------------------------------------


def schema_family(schema):
    """'ringside.report/1' -> ('ringside.report', '1'); anything else -> (None, None)."""
    if isinstance(schema, str) and "/" in schema:
        fam, ver = schema.rsplit("/", 1)
        return fam, ver
    return None, None


def load_folder(folder):
    """Reads every *.json in folder. Returns a dict: reports, benches, summary, claims, ignored."""
    data = {"reports": [], "benches": [], "summary": None, "claims": None, "ignored": []}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        name = os.path.basename(path)
        if name == "figures.json":
            continue
        try:
            with open(path) as f:
                doc = json.load(f)
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
            doc["_file"] = name
            data["reports"].append(doc)
        elif schema == BENCH_SCHEMA:
            doc["_file"] = name
            data["benches"].append(doc)
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


def backend(rep):
    """The back end's label: the sync name, with the parameter server's non-default options."""
    cfg = rep.get("config", {})
    name = cfg.get("sync", "?")
    if name == "ps":
        if cfg.get("ps-mode") == "dataparallel":
            name += "-dataparallel"
        if cfg.get("ps-placement") == "dedicated":
            k = cfg.get("ps-servers", 1)
            name += "-dedicated" + ("x%d" % k if k and k > 1 else "")
    return name


def workers(rep):
    return [r for r in rep.get("ranks", []) if r.get("role", "worker") == "worker"]


def world(rep):
    """N: the number of worker ranks."""
    run = rep.get("run", {})
    if isinstance(run.get("world"), (int, float)):
        return int(run["world"])
    return len(workers(rep)) or int(rep.get("config", {}).get("ranks", 1))


def varying_keys(reports):
    """Config keys (other than noise and axes) whose values differ between reports."""
    values = {}
    for rep in reports:
        for k, v in rep.get("config", {}).items():
            if k in NOISE_KEYS or k in AXIS_KEYS:
                continue
            values.setdefault(k, set()).add(json.dumps(v, sort_keys=True))
    return sorted(k for k, vs in values.items() if len(vs) > 1)


def series_label(rep, varying):
    """Back end plus the varying options, e.g. 'ps global-batch=4'."""
    cfg = rep.get("config", {})
    extra = []
    for k in varying:
        v = cfg.get(k)
        if isinstance(v, list):
            v = ",".join(str(x) for x in v)
        extra.append("%s=%s" % (k, v))
    return " ".join([backend(rep)] + extra)


def group(reports, varying):
    """{series: {N: [reports...]}} (repeats in one list)."""
    out = {}
    for rep in reports:
        out.setdefault(series_label(rep, varying), {}).setdefault(world(rep), []).append(rep)
    return out


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


def fig_step_time(data, series):
    rows = summary_rows(data["summary"])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    measured = predicted = 0
    for i, (label, by_n) in enumerate(sorted(series.items())):
        ns = sorted(by_n)
        ys = [statistics.median(r["summary"]["step_time_s"] for r in by_n[n]) * 1e3 for n in ns]
        color = "C%d" % (i % 10)
        (line,) = ax.plot(ns, ys, "o-", color=color, label=label + " (measured step)")
        line.set_gid(safe_id("series", "step_time", label, "measured"))
        measured += 1
        preds = [(n, [prediction_of(r, rows) for r in by_n[n]]) for n in ns]
        preds = [(n, statistics.median(p)) for n, p in preds if p and all(x is not None for x in p)]
        if preds:
            (pline,) = ax.plot([p[0] for p in preds], [p[1] * 1e3 for p in preds], "--", color=color,
                               label=label + " (alpha-beta comm prediction)")
            pline.set_gid(safe_id("series", "step_time", label, "predicted"))
            predicted += 1
    ax.set_xscale("log", base=2)
    allns = sorted({n for by_n in series.values() for n in by_n})
    ax.set_xticks(allns)
    ax.set_xticklabels([str(n) for n in allns])
    ax.set_xlabel("N (worker ranks)")
    ax.set_ylabel("step time, ms (median over timed steps and repeats)")
    ax.set_title("Step time vs N")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    note = "" if predicted else "no alpha-beta prediction in these reports"
    return fig, {"series": measured + predicted, "measured": measured, "predicted": predicted,
                 "bars": 0, "note": note}


def largest_n_reports(series):
    """The largest N any series reached (N > 1 preferred) and each series' report there."""
    ns = sorted({n for by_n in series.values() for n in by_n})
    big = ns[-1]
    return big, {label: representative(by_n[big]) for label, by_n in sorted(series.items()) if big in by_n}


def rank_name(entry, i):
    if entry.get("role", "worker") == "server":
        return "server %s" % entry.get("rank", i)
    return "rank %s" % entry.get("rank", i)


def fig_memory(data, series):
    big, chosen = largest_n_reports(series)
    tags = [t for t in TAGS if any(e.get("memory", {}).get("by_tag", {}).get(t, 0) > 0
                                   for rep in chosen.values() for e in rep.get("ranks", []))]
    if not tags:
        return None, "no memory accounted by tag in the reports at N=%d" % big
    fig, axes = plt.subplots(1, len(chosen), figsize=(4 + 3 * len(chosen), 4.5), sharey=True, squeeze=False)
    bars = 0
    for ax, (label, rep) in zip(axes[0], chosen.items()):
        entries = rep.get("ranks", [])
        xs = list(range(len(entries)))
        bottom = [0.0] * len(entries)
        for ti, tag in enumerate(tags):
            vals = [e.get("memory", {}).get("by_tag", {}).get(tag, 0) for e in entries]
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
        ax.set_xticklabels([rank_name(e, i) for i, e in enumerate(entries)], rotation=45, ha="right",
                           fontsize=8)
        ax.set_title("%s, N=%d" % (label, big), fontsize=10)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(human_bytes))
        ax.grid(True, axis="y", alpha=0.3)
    axes[0][0].set_ylabel("peak bytes per tag (rank 0 hatched)")
    handles = [matplotlib.patches.Patch(color="C%d" % ti, label=tag) for ti, tag in enumerate(tags)]
    axes[0][-1].legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle("Per-rank peak memory by tag at the largest N")
    fig.tight_layout()
    note = "" if len(chosen) > 1 else "one back end only at N=%d: nothing to compare it with" % big
    return fig, {"series": 0, "bars": bars, "panels": len(chosen), "n": big, "note": note}


def traffic_of(entry):
    t = entry.get("traffic", {})
    return t.get("bytes_sent", 0) + t.get("bytes_received", 0)


def fig_traffic(data, series):
    big, chosen = largest_n_reports(series)
    if not any(traffic_of(e) for rep in chosen.values() for e in rep.get("ranks", [])):
        return None, "no data-plane traffic in the reports at N=%d (one rank, or --sync none)" % big
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    bars = lines = 0
    width = 0.8 / max(1, len(chosen))
    for si, (label, rep) in enumerate(chosen.items()):
        entries = rep.get("ranks", [])
        xs = [i + si * width for i in range(len(entries))]
        cont = left.bar(xs, [traffic_of(e) for e in entries], width=width, color="C%d" % si, label=label)
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
    left.set_title("Per-process traffic at N=%d" % big, fontsize=10)
    left.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(human_bytes))
    left.legend(fontsize=8)
    for si, (label, by_n) in enumerate(sorted(series.items())):
        ns = sorted(by_n)
        r0, rest = [], []
        for n in ns:
            rep = representative(by_n[n])
            w = workers(rep)
            r0.append(sum(traffic_of(e) for e in w if e.get("rank") == 0))
            others = [traffic_of(e) for e in w if e.get("rank") != 0]
            rest.append(statistics.mean(others) if others else float("nan"))
        (a,) = right.plot(ns, r0, "o-", color="C%d" % si, label=label + " rank 0")
        (b,) = right.plot(ns, rest, "s:", color="C%d" % si, label=label + " other ranks (mean)")
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
    right.set_title("Rank 0 vs the other ranks", fontsize=10)
    right.grid(True, alpha=0.3)
    right.legend(fontsize=8)
    fig.tight_layout()
    return fig, {"series": lines, "bars": bars, "n": big, "note": ""}


def mean_phases(rep):
    """Each phase's seconds per timed step, averaged over the worker ranks."""
    w = workers(rep)
    return {p: statistics.mean(e.get("time_s", {}).get("phases", {}).get(p, 0) for e in w) if w else 0
            for p in PHASES}


def fig_phases(data, series):
    cells = []  # (label, N, {phase: seconds}) with the median over repeats
    for label, by_n in sorted(series.items()):
        for n in sorted(by_n):
            per = [mean_phases(r) for r in by_n[n]]
            cells.append((label, n, {p: statistics.median(x[p] for x in per) for p in PHASES}))
    if not any(v for _, _, ph in cells for v in ph.values()):
        return None, "no phase times in the reports"
    fig, ax = plt.subplots(figsize=(max(7, 0.7 * len(cells) + 3), 4.8))
    xs = list(range(len(cells)))
    bottom = [0.0] * len(cells)
    bars = 0
    for pi, phase in enumerate(PHASES):
        vals = [ph[phase] * 1e3 for _, _, ph in cells]
        cont = ax.bar(xs, vals, bottom=bottom, color="C%d" % pi, label=phase)
        for patch, (label, n, _) in zip(cont.patches, cells):
            patch.set_gid(safe_id("bar", "phases", label, "N%d" % n, phase))
        bars += len(vals)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(xs)
    ax.set_xticklabels(["%s\nN=%d" % (label, n) for label, n, _ in cells], fontsize=8)
    ax.set_ylabel("ms per timed step (mean over worker ranks)")
    ax.set_title("Where a step's time goes")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig, {"series": 0, "bars": bars, "cells": len(cells), "note": ""}


def fig_loss(data, series):
    curves = []
    for label, by_n in sorted(series.items()):
        for n in sorted(by_n):
            curve = representative(by_n[n]).get("summary", {}).get("loss_curve") or []
            if curve:
                curves.append(("%s N=%d" % (label, n), curve))
    if not curves:
        return None, "no loss curves in the reports"
    fig, ax = plt.subplots(figsize=(7, 4.5))
    styles = ["-", "--", ":", "-."]
    positive = True
    for i, (label, curve) in enumerate(curves):
        xs = [p[0] for p in curve]
        ys = [p[1] for p in curve]
        positive = positive and all(y > 0 for y in ys)
        (line,) = ax.plot(xs, ys, styles[i % len(styles)], color="C%d" % (i % 10), label=label, linewidth=1.2)
        line.set_gid(safe_id("series", "loss", label))
    if positive:
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (global, sample-weighted)")
    ax.set_title("Loss curves")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig, {"series": len(curves), "bars": 0, "note": ""}


def bench_label(bench):
    cfg = bench.get("config", {})
    return "%s N=%s (%s)" % (cfg.get("sync", "?"), cfg.get("ranks", "?"), cfg.get("device", "?"))


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


FIGURE_FUNCS = {"step_time": fig_step_time, "memory": fig_memory, "traffic": fig_traffic,
                "phases": fig_phases, "loss": fig_loss, "busbw": fig_busbw}
CAPTIONS = {
    "step_time": "Median step time vs N per back end; dashed: the alpha-beta prediction of communication per step.",
    "memory": "Per-rank peak memory stacked by tag at the largest N, one panel per back end; rank 0 hatched.",
    "traffic": "Data-plane bytes sent + received per process at the largest N, and rank 0 vs the other ranks as N grows.",
    "phases": "Mean time per timed step in each phase (mean over worker ranks, median over repeats).",
    "loss": "Global sample-weighted training loss per step, every back end and N over each other.",
    "busbw": "Bus bandwidth vs message size from `ringside bench` reports.",
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
    args = ap.parse_args(argv)
    if not os.path.isdir(args.dir):
        print("plot.py: error: %s is not a folder" % args.dir, file=sys.stderr)
        return 2
    data = load_folder(args.dir)
    for name, why in data["ignored"]:
        warn("ignoring %s: %s" % (name, why))
    if not data["reports"] and not data["benches"]:
        print("plot.py: error: no ringside reports in %s (expected *.json with \"schema\": \"%s\" or \"%s\"; "
              "make some with `ringside matrix ... --out %s`)" % (args.dir, REPORT_SCHEMA, BENCH_SCHEMA, args.dir),
              file=sys.stderr)
        return 2
    out = args.out or args.dir
    os.makedirs(out, exist_ok=True)
    plt.rcParams["svg.hashsalt"] = "ringside"
    series = group(data["reports"], varying_keys(data["reports"]))
    manifest = {}
    for name in FIGURES:
        if name != "busbw" and not series:
            fig, entry = None, "no train reports (%s)" % REPORT_SCHEMA
        else:
            fig, entry = FIGURE_FUNCS[name](data, series)
        if fig is None:
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
