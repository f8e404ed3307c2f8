#!/usr/bin/env python3
# make_seeds.py - writes the seed corpora of the fuzz harnesses (tests/fuzz/corpus/<harness>/): small valid inputs of every kind
#
#   python3 tests/fuzz/make_seeds.py [REPORT.json]   (a real training report makes better claims/gather seeds)
# Idempotent; the regression inputs (regress-*: crashes the fuzzers found, since fixed) stay beside the seeds.
import gzip, json, os, struct, sys

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, "..", ".."))

def put(harness, name, data):
    d = os.path.join(here, "corpus", harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)

# ---- idx: byte 0 = bit 0 images, bits 1-2 how (0 raw, 1 harness-gzip, 2 as .gz, 3 MNIST pair), bit 3 idx_read_images
def idx_images(n, r, c, fill=7):
    return struct.pack(">IIII", 0x803, n, r, c) + bytes((fill * i) & 255 for i in range(n * r * c))
def idx_labels(labels):
    return struct.pack(">II", 0x801, len(labels)) + bytes(labels)
img, lab = idx_images(3, 2, 2), idx_labels([1, 7, 3])
put("idx", "raw-images", bytes([1]) + img)
put("idx", "raw-images-shape", bytes([1 | 8]) + img)
put("idx", "raw-labels", bytes([0]) + lab)
put("idx", "zip-images", bytes([1 | 2]) + img)
put("idx", "zip-labels", bytes([0 | 2]) + lab)
put("idx", "gz-images", bytes([1 | 4]) + gzip.compress(img, mtime=0))
put("idx", "gz-labels", bytes([0 | 4]) + gzip.compress(lab, mtime=0))
put("idx", "mnist-pair", bytes([1 | 6]) + struct.pack(">H", len(img)) + img + lab)
put("idx", "truncated", bytes([1]) + img[:-3])

# ---- config: argv separated by NUL
for i, argv in enumerate([
        ["train"], ["-n", "4", "--sync", "ps"], ["--layers", "784,1024,1024,10", "--batch", "32", "--steps", "10"],
        ["--sync=ring", "--bucket-mb=0.5", "--no-overlap", "--timeout", "3"],
        ["--ps-placement", "dedicated", "--ps-servers", "2", "--global-batch", "4", "-q"],
        ["--lr", "1e-3", "--momentum", "0.5", "--weight-decay", "1e-4", "--seed", "-7", "--drop-last", "--no-shuffle"],
        ["--data", "/nonexistent", "--device", "cpu", "--report", "r.json", "--trace", "t.json", "-v"],
        ["--help"]]):
    put("config", "argv-%d" % i, "\0".join(argv))

# ---- wire: byte 0 has-payload, bytes 1-8 payload bytes (big-endian), then the header frame
MAGIC, TOKEN = 0x53505352, 0
def fnv(text):
    x = 1469598103934665603
    for b in text.encode():
        x = ((x ^ b) * 1099511628211) & (2**64 - 1)
    return x
def header(token, op, step=0, bucket=0, offset=0, count=0, total=0, dtype=1, sender=0, samples=0):
    return struct.pack("<IHHQIIQQQHHI", MAGIC, 1, op, token, step, bucket, offset, count, total, dtype, sender, samples)
tok = fnv("job")
for op, count, dtype in [(1, 8, 1), (2, 0, 1), (3, 8, 1), (4, 0, 1), (5, 8, 1), (6, 4, 1), (7, 4, 1), (8, 0, 1), (9, 5, 2)]:
    el = 1 if dtype == 2 else 4
    put("wire", "op-%d" % op, bytes([1 if count else 0]) + struct.pack(">Q", count * el) +
        header(tok, op, step=3, count=count, total=23, dtype=dtype))

# ---- ps_server: byte 0 = K-1 and id; messages: flags (bits 0-1 identity w0/w1/w7/raw, bits 2-3 frames), 2-byte lengths
STOK = fnv("fuzz-token")
def msg(ident, frames):
    return bytes([ident | ((len(frames) - (ident == 3)) << 2)]) + b"".join(struct.pack(">H", len(f)) + f for f in frames)
def floats(n, v=0.5):
    return struct.pack("<%df" % n, *([v] * n))
INIT = 0xffffffff
buckets = [(15, 23), (0, 15)]                      # as the harness plans them (4,3,2 MLP)
def training(K=1, sid=0, steps=2):
    lo = sid * (23 // K) + min(sid, 23 % K); hi = lo + 23 // K + (1 if sid < 23 % K else 0)
    out = bytes([(K - 1) | (sid << 1)])
    parts = [(b, max(a, lo), min(z, hi)) for b, (a, z) in enumerate(buckets) if max(a, lo) < min(z, hi)]
    for b, a, z in parts:
        out += msg(0, [header(STOK, 1, step=INIT, bucket=b, offset=a, count=z - a, total=23), floats(z - a)])
    for w in (0, 1):
        out += msg(w, [header(STOK, 2, step=INIT, sender=w, total=23)])
    for s in range(steps):
        out += msg(0, [header(STOK, 4, step=s, samples=8, total=23)])
        for w in (0, 1):
            for b, a, z in parts:
                out += msg(w, [header(STOK, 3, step=s, bucket=b, offset=a, count=z - a, total=23, sender=w), floats(z - a, 0.1 * w)])
    for w in (0, 1):
        out += msg(w, [header(STOK, 8, sender=w)])
    return out
put("ps_server", "train-1server", training())
put("ps_server", "train-2servers-0", training(2, 0))
put("ps_server", "train-2servers-1", training(2, 1))
def allreduce(total=150, calls=2, per=64):
    out = bytes([0])
    for c in range(calls):
        for w in (0, 1):
            for ch in range((total + per - 1) // per):
                hi = total - ch * per; lo = max(hi - per, 0)
                out += msg(w, [header(STOK, 6, step=c, bucket=ch, offset=lo, count=hi - lo, total=total, sender=w), floats(hi - lo)])
    return out + msg(0, [header(STOK, 8, sender=0)]) + msg(1, [header(STOK, 8, sender=1)])
put("ps_server", "allreduce", allreduce())
put("ps_server", "strangers", bytes([0]) + msg(2, [header(STOK, 2, step=INIT)]) + msg(3, [b"w12345678", header(STOK, 8)]) +
    msg(0, [header(STOK ^ 1, 8)]) + msg(0, [b"short"]) + msg(1, [header(STOK, 8, sender=0)]))

# ---- ctrl: byte 0 = mode (0 join, 1 gather, 2 barrier, 3 member); messages: flags (bit 0 peer, bits 1-3 frames-1), 2-byte lengths
CTOK = "0123456789abcdef"
def cmsg(peer, frames):
    frames = [f.encode() if isinstance(f, str) else f for f in frames]
    return bytes([peer | ((len(frames) - 1) << 1)]) + b"".join(struct.pack(">H", len(f)) + f for f in frames)
canon = "data=synthetic\nlayers=784,1024,1024,10\nbatch=64\n"
put("ctrl", "join", bytes([0]) + cmsg(0, ["JOIN 1 " + CTOK, canon, "tcp://127.0.0.1:5000"]) +
    cmsg(1, ["JOIN 2 wrong-token", canon, "tcp://x:1"]) + cmsg(1, ["JOIN 9 " + CTOK, canon]))
put("ctrl", "gather", bytes([1]) + cmsg(0, ["GATHER 1 " + CTOK, '{"rank": 1}']) + cmsg(1, ["GATHER 1 " + CTOK, "dup"]) +
    cmsg(1, ["BARRIER 2 " + CTOK]))
put("ctrl", "barrier", bytes([2]) + cmsg(0, ["BARRIER 1 " + CTOK]) + cmsg(1, ["GATHER 2 " + CTOK, "x"]))
put("ctrl", "member", bytes([3]) + cmsg(0, ["WELCOME 0 " + CTOK, "a", "b"]) + cmsg(0, ["REFUSE 0 " + CTOK, "--batch (1 here, 2 on rank 0)"]))
put("ctrl", "member-refused", bytes([3]) + cmsg(0, ["REFUSE 0 " + CTOK, "--batch (1 here, 2 on rank 0)"]))

# ---- matrix: the repo's matrices, and one with an --only filter after a NUL
mdir = os.path.join(root, "experiments", "matrices")
for name in sorted(os.listdir(mdir)):
    if name.endswith(".json"):
        put("matrix", name[:-5], open(os.path.join(mdir, name), "rb").read())
small = {"name": "t", "base": {"layers": [8, 4, 2], "steps": 2, "device": "cpu"},
         "axes": {"sync": ["ps", "ring"], "ranks": [1, 2], "layers": ["8,4,2", [8, 2]]},
         "exclude": [{"sync": "ps", "ranks": 1}], "repeats": 2, "timeout_s": 5, "alpha_s": 1e-5, "beta_s_per_byte": 1e-9}
put("matrix", "small-only", json.dumps(small) + "\0sync=ring,layers=8,4,2")
put("matrix", "bench-missing", json.dumps({"axes": {"batch": [1, 2]}, "bench": "no-such-bench.json"}))
put("matrix", "links", json.dumps({"axes": {"sync": ["ring", "ps"]}, "alpha_s": 1e-4, "beta_s_per_byte": 1e-9,
                                   "links": {"shm": {"alpha_s": 2e-5, "beta_s_per_byte": 3e-10}, "tcp": "no-such-bench.json"}}))

# ---- claims and gather: from a real report when one is given, else a minimal one
rep = None
if len(sys.argv) > 1:
    rep = json.load(open(sys.argv[1]))
    rep.get("run", {}).update({"host": "host", "cmdline": "ringside train", "git": "seed"})
    rep.get("config", {}).update({"report": "r.json"})
if rep is None:
    rep = {"schema": "ringside.report/1", "config": {"sync": "ring", "ranks": 2, "layers": [16, 8, 4], "batch": 64, "steps": 4, "seed": 1},
           "backend": {"name": "ring", "family": "allreduce", "architecture": "ring", "servers": 0, "lockstep": True},
           "ranks": [{"rank": r, "role": "worker", "samples": 256, "memory": {"peak_bytes": 17688},
                      "traffic": {"bytes_sent": 3136, "bytes_received": 3872},
                      "time_s": {"busy": 0.001, "phases": {"forward": 1e-4, "comm_total": 2e-4, "comm_exposed": 1e-4}}} for r in (0, 1)],
           "summary": {"steps": 4, "loss_curve": [[0, 1.4], [1, 1.3], [2, 1.2], [3, 1.1]],
                       "prediction": {"step_comm_s": 1e-4}}}
text = json.dumps(rep, separators=(",", ":"))
ps = json.loads(text); ps["config"]["sync"] = "ps"; ps["ranks"][0]["memory"]["peak_bytes"] *= 3
ps["backend"] = {"name": "ps", "family": "ps", "architecture": "ps-colocated", "servers": 0, "lockstep": True}
summary = {"runs": [{"report": "a-r0.json", "predicted_comm_s": 2e-4}]}
put("claims", "one-report", text)
put("claims", "repeats-summary", "\0".join([text, json.dumps(summary), text, json.dumps(ps)]))
put("claims", "other-schema", json.dumps({"schema": "ringside.report/9"}))
put("claims", "bench-report", json.dumps({"schema": "ringside.bench/1", "rows": []}))
entries = []
for e in rep["ranks"]:
    e = dict(e)
    e["_curve"] = {"loss_sum": [64.0, 60.0, 58.0, 50.0], "correct": [10, 20, 30, 40], "samples": [64, 64, 64, 64]}
    entries.append(json.dumps(e, separators=(",", ":")))
server = {"rank": 2, "role": "server", "server": 0, "samples": 0, "memory": {"peak_bytes": 100},
          "traffic": {"bytes_sent": 1, "bytes_received": 2}, "time_s": {"busy": 0.0}}
put("gather", "two-workers", bytes([3]) + "\0".join(entries).encode())
put("gather", "with-server", bytes([3]) + "\0".join(entries + [json.dumps(server)]).encode())
put("gather", "trace", bytes([0]) + json.dumps({"rank": 0, "_trace": [{"name": "x", "ph": "X", "ts": 1, "dur": 2}]}).encode())
# ---- checkpoint: a manifest, NUL, a part (DIR/step-000003/MANIFEST and rank-0.bin; fuzz_checkpoint.c's run)
def fnv_bytes(data):
    x = 1469598103934665603
    for b in data:
        x = ((x ^ b) * 1099511628211) & (2**64 - 1)
    return x
def ckpt_part(step=3, job=7):
    body = b"params".ljust(16, b"\0") + struct.pack("<Q", 16) + struct.pack("<4f", step, 1, 2, 3)
    body += b"note".ljust(16, b"\0") + struct.pack("<Q", 5) + b"hello"
    head = b"RSCKPT01" + struct.pack("<IIqQ", 1, 2, step, job)
    return head + body + struct.pack("<Q", fnv_bytes(head + body))
OPTS = "lr=0.1\nsteps=9\n"
def manifest(part, **over):
    m = {"schema": 1, "build": "seed", "step": 3, "model": "mlp", "params": 4, "world": 1, "servers": 0,
         "options_hash": "%016x" % fnv(OPTS), "options": OPTS, "checkpoint_every": 3,
         "parts": [{"name": "rank-0.bin", "bytes": len(part), "fnv1a64": "%016x" % fnv_bytes(part[:-8])}]}
    m.update(over)
    return json.dumps(m, indent=1).encode()
part = ckpt_part()
put("checkpoint", "complete", manifest(part) + b"\0" + part)
put("checkpoint", "edited", manifest(part, options="lr=0.2\nsteps=9\n") + b"\0" + part)
put("checkpoint", "regress-huge-numbers", manifest(part, params=5e122, step=1e300, world=1e300, checkpoint_every=1e300) + b"\0" + part)
put("checkpoint", "regress-huge-params", manifest(part, params=5e122) + b"\0" + part)
put("checkpoint", "no-part", manifest(part))

# ---- predict: a fit file, NUL, a train report (--links, --model); a fit alone takes --grad-bytes
fit = {"schema": "ringside.fit/1", "links": {"ipc": {"transport": "ipc", "link": "", "alpha_s": 1e-5, "beta_s_per_byte": 1e-9,
                                                      "min_ranks": 2, "max_ranks": 8, "min_bytes": 1024, "max_bytes": 16777216}}}
model = {"schema": "ringside.report/1", "config": {"model": "mlp"}, "run": {"world": 2},
         "ranks": [{"rank": 0, "memory": {"by_tag": {"params": 101640}}, "time_s": {"busy": 0.012}}]}
put("predict", "fit-and-report", json.dumps(fit) + "\0" + json.dumps(model))
put("predict", "fit-only", json.dumps(fit))
huge = json.loads(json.dumps(fit)); huge["links"]["ipc"].update({"min_ranks": 1e300, "max_ranks": 1e300})
put("predict", "regress-huge-ranks", json.dumps(huge))
print("seeds written to", os.path.join(here, "corpus"))
