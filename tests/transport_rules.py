#!/usr/bin/env python3
"""transport_rules.py - the host data planes measured under one set of transport rules: how much of the transport still lives in the back ends

    python3 tests/transport_rules.py ROOT     prints the figures; exits 1 when one is over its ceiling

Every host back end (allreduce/: ring, tree and lab 5's mesh; ps/: client, servers,
DataParallel's driver) sends and receives through net/msg.h, which frames, lends zero-copy,
paces the emulated link, stamps and counts. The figures, over allreduce/ and ps/ (comments left
out):
  primitives   ZeroMQ send, receive and poll calls (zmq_send, zmq_msg_recv, zmq_poll, ...) and
               zframe_recv: 0, all of them in the layer;
  link         emulated-link pacing and stamp calls (link_send, link_recv, link_recv_book,
               link_wait_until, link_backlog, link_stamp_*): 0 outside the ring's shared-memory
               lanes, the ring's own transport on one host (at most 4 there);
  counts       places that add to a traffic counter themselves (++ or += on a byte, message,
               dropped or node count, or msg_count_sent / msg_count_received): at most 3 (the
               ring's lanes count their messages through the layer's counters);
  zerocopy     zero-copy thresholds defined anywhere in the tree: exactly 1 (MSG_ZEROCOPY_MIN);
  stamps       files outside net/ that parse a stamp (link_stamp_decode): at most 1 (the lanes);
  zmq          every zmq_* call left: 0, all of them in the layer too (socket set-up with every
               option and queue bound: msg_socket; bind, connect, close: msg_bind, msg_connect,
               msg_close_socket; frames read and kept: msg_id / msg_head / msg_payload, MsgFrame;
               errors: msg_errno, msg_strerror).
"""
import pathlib
import re
import sys

from nonblocking import strip_comments  # tests/nonblocking.py: the same C source, comments left out

CEILINGS = {"primitives": 0, "link": 4, "counts": 3, "zerocopy": 1, "stamps": 1, "zmq": 0}
PRIMITIVE = re.compile(r"\b(zmq_send|zmq_recv|zmq_msg_send|zmq_msg_recv|zmq_sendmsg|zmq_recvmsg|zmq_poll|zmq_send_const|zframe_recv)\s*\(")
LINK = re.compile(r"\blink_(send|recv|recv_book|wait_until|backlog|stamp_encode|stamp_decode)\s*\(")
COUNT = re.compile(r"\b(bytes_sent|bytes_received|messages_sent|messages_received|node_sent|node_received|dropped)\s*(\+\+|\+=)"
                   r"|\bmsg_count_(sent|received)\s*\(")
ZMQ = re.compile(r"\bzmq_\w+\s*\(")
ZEROCOPY = re.compile(r"#\s*define\s+\w*ZERO_?COPY\w*\s")


def sources(root, dirs):
    for d in dirs:
        for f in sorted(pathlib.Path(root, d).glob("*.[ch]")):
            yield f, strip_comments(f.read_text())


def measure(root):
    fig = {k: 0 for k in CEILINGS}
    where = {k: [] for k in CEILINGS}
    for f, text in sources(root, ("allreduce", "ps")):
        name = str(f.relative_to(root))
        for n, line in enumerate(text.splitlines(), 1):
            for key, rx in (("primitives", PRIMITIVE), ("link", LINK), ("counts", COUNT), ("zmq", ZMQ)):
                k = len(rx.findall(line))
                if k:
                    fig[key] += k
                    where[key].append("%s:%d: %s" % (name, n, line.strip()))
        if LINK.search(text) and "link_stamp_decode" in text:
            fig["stamps"] += 1
            where["stamps"].append(name)
    for d in ("base", "kernels", "data", "model", "net", "engine", "allreduce", "ps", "experiments"):
        for f, text in sources(root, (d,)):
            for n, line in enumerate(text.splitlines(), 1):
                if ZEROCOPY.search(line):
                    fig["zerocopy"] += 1
                    where["zerocopy"].append("%s:%d: %s" % (f.relative_to(root), n, line.strip()))
    return fig, where


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    fig, where = measure(root)
    bad = 0
    for k, ceiling in CEILINGS.items():
        over = fig[k] > ceiling or (k == "zerocopy" and fig[k] != 1)
        print("transport_rules: %-10s %4d (ceiling %d)%s" % (k, fig[k], ceiling, "  OVER" if over else ""))
        if over:
            bad += 1
            for w in where[k][:10]:
                print("    " + w)
    print("transport_rules: %d figures over their ceilings" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
