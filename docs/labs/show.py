#!/usr/bin/env python3
"""show.py - prints the parts of ringside reports the labs read: memory by tag, traffic and phase times per rank.

usage: python3 docs/labs/show.py REPORT.json [REPORT.json ...]

Train reports (schema ringside.report/1): a summary line, then per rank (workers, then any
dedicated servers) four tables: memory (peak bytes per tag), traffic (bytes and messages over
the whole run, and bytes per step), the network per machine (a cluster's host, from ranks[].host,
or a node under --nodes: its ranks share one NIC, and the bytes that stayed on it are shown beside;
without either every process is a machine) and time (milliseconds per timed step, by phase). Bench reports
(ringside.bench/1): the sweep's rows. Bytes are printed exactly, so that they can be held
against the formulas in the labs. Plain python3, no packages needed.
"""
import json
import signal
import sys

TAGS = ["params", "grads", "activations", "optimizer", "comm", "server", "gather"]
PHASES = ["data", "forward", "backward", "optimizer", "comm_exposed", "idle", "other", "comm_total"]


def b(n):
    return f"{int(n):,}"


def show_train(path, r):
    cfg, s, ranks = r["config"], r["summary"], r["ranks"]
    sync = cfg["sync"]
    if sync == "ps":
        sync += f" {cfg['ps-placement']}" + (f" x{cfg['ps-servers']}" if cfg["ps-placement"] == "dedicated" else "")
        if cfg.get("ps-mode", "push") != "push":
            sync += f" mode {cfg['ps-mode']}"
    layers = ",".join(str(x) for x in cfg["layers"])
    batch = f"global batch {cfg['global-batch']}" if cfg["global-batch"] else f"batch {cfg['batch']} per rank"
    print(f"== {path}: N={r['run']['world']} sync {sync}, layers {layers}, {batch}, {s['steps']} steps")
    im = s["imbalance"]
    print(f"   step {s['step_time_s'] * 1e3:.2f} ms (rank 0 median), {s['throughput_samples_per_s']:.0f} samples/s, "
          f"final loss {s['final_loss']:.6f}, eval accuracy {s['final_accuracy']:.4f}")
    print(f"   imbalance (max/mean over workers): memory {im['memory']:.2f}, traffic {im['traffic']:.2f}, "
          f"busy time {im['busy_time']:.2f}")

    def who(k):
        return f"{k['rank']}" + (f" (server {k['server']})" if k.get("role") == "server" else "")

    print("   memory, peak bytes:")
    print("   " + f"{'rank':>12} {'samples':>8} {'peak':>12} " + " ".join(f"{t:>11}" for t in TAGS))
    for k in ranks:
        m = k["memory"]
        print("   " + f"{who(k):>12} {k['samples']:>8} {b(m['peak_bytes']):>12} " +
              " ".join(f"{b(m['by_tag'][t]):>11}" for t in TAGS))
    steps = s["steps"] or 1
    print(f"   traffic, whole run and per step (whole run / {steps} steps; a rank that forwarded the start-up")
    print("   broadcast of the parameters, rank 0 at least, carries it in both):")
    print("   " + f"{'rank':>12} {'bytes sent':>14} {'received':>14} {'msgs sent':>10} {'received':>10} "
          f"{'sent/step':>14} {'received/step':>14}")
    for k in ranks:
        t = k["traffic"]
        print("   " + f"{who(k):>12} {b(t['bytes_sent']):>14} {b(t['bytes_received']):>14} "
              f"{t['messages_sent']:>10} {t['messages_received']:>10} "
              f"{t['bytes_sent'] / steps:>14,.1f} {t['bytes_received'] / steps:>14,.1f}")
    # the machines' network interfaces: on a cluster (ranks on several hosts, ranks[].host) one per
    # host, under --nodes one per node, shared by its ranks (the bytes that left or entered the
    # machine: traffic.by_link.network, the rest stayed on it: by_link.node); without either every
    # process is a machine of its own, and its NIC carries everything it sent and received
    nodes = r["config"].get("nodes", 0)
    hosts = len({k.get("host", "") for k in ranks}) > 1
    nic = {}
    for k in ranks:
        t, by = k["traffic"], k["traffic"].get("by_link")
        if hosts:
            m = k.get("host", "")
        elif nodes:
            m = k.get("node", k["rank"])
        else:
            m = k["rank"] if k.get("role", "worker") == "worker" else f"s{k.get('server', '')}"
        split = (hosts or nodes) and by
        out, inn = (by["network"]["bytes_sent"], by["network"]["bytes_received"]) if split else (t["bytes_sent"], t["bytes_received"])
        e = nic.setdefault(m, [[], 0, 0, 0, 0, set()])
        e[0].append(str(k["rank"]) + ("" if split or not (hosts or nodes) else "*"))
        e[1] += out
        e[2] += inn
        if split:
            e[3] += by["node"]["bytes_sent"]
            e[4] += by["node"]["bytes_received"]
        e[5].add(f"{t['transport'] or '-'}/{t.get('transport_received', t['transport']) or '-'}")
    link = (r.get("env", {}).get("link") or {}).get("text", "none")
    kind = "host" if hosts else "node" if nodes else "process"
    print(f"   network, per machine ({kind}; NIC --link {link}; bytes per step include the start-up broadcast's")
    print("   share; on-node: what stayed on the machine; transports sent/received; * a member whose bytes are not")
    print("   split by link, all counted as the network's):")
    print("   " + f"{'machine':>8} {'ranks':>10} {'NIC bytes sent':>16} {'received':>14} {'sent/step':>14} {'received/step':>14} "
          f"{'on-node sent':>14} {'received':>14}  transports")
    for m, (who_, out, inn, nout, ninn, how) in nic.items():
        print("   " + f"{m!s:>8} {','.join(who_):>10} {b(out):>16} {b(inn):>14} {out / steps:>14,.1f} {inn / steps:>14,.1f} "
              f"{b(nout):>14} {b(ninn):>14}  {' '.join(sorted(how))}")
    print("   time, ms per timed step:")
    print("   " + f"{'rank':>12} {'step':>8} {'busy':>8} " + " ".join(f"{p:>12}" for p in PHASES))
    for k in ranks:
        t = k["time_s"]
        if k.get("role") == "server":
            busy = t.get("server_busy", t.get("busy", 0))
            print("   " + f"{who(k):>12} {'':>8} {busy * 1e3:>8.3f}   (summing and updating)")
            continue
        print("   " + f"{who(k):>12} {t['step']['median'] * 1e3:>8.3f} {t.get('busy', 0) * 1e3:>8.3f} " +
              " ".join(f"{t['phases'].get(p, 0) * 1e3:>12.3f}" for p in PHASES))
    print()


def show_bench(path, r):
    c = r["config"]
    print(f"== {path}: bench, sync {c['sync']}, N={c['ranks']}, device {c['device']}")
    print(f"   {'size(B)':>12} {'time(us)':>11} {'busbw(GB/s)':>12} {'#wrong':>7}")
    for row in r["rows"]:
        w = "N/A" if row["wrong"] is None else str(int(row["wrong"]))
        print(f"   {row['size_bytes']:>12} {row['time_us']:>11.2f} {row['busbw_gbps']:>12.4f} {w:>7}")
    print(f"   wrong elements in all: {int(r['summary']['wrong'])}")
    print()


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    status = 0
    for path in argv:
        try:
            with open(path) as f:
                r = json.load(f)
        except (OSError, ValueError) as e:
            print(f"show.py: {path}: {e}", file=sys.stderr)
            status = 1
            continue
        schema = r.get("schema", "")
        if schema == "ringside.report/1":
            show_train(path, r)
        elif schema == "ringside.bench/1":
            show_bench(path, r)
        else:
            print(f"show.py: {path}: schema '{schema}' is not one this script reads", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet when piped into head
    sys.exit(main(sys.argv[1:]))
