#!/usr/bin/env python3
"""nonblocking.py - the polling back ends never sit in a blocking CUDA call: a dead peer must end in --timeout, not a hang

    python3 tests/nonblocking.py ROOT     checks ROOT/allreduce/*.cu; exits 1 naming every offending line

allreduce/nccl.cu waits only by polling an event and the communicator's asynchronous error
(nccl_wait, nccl_poll), so that a stalled or dead peer becomes an error after --timeout. Any of
these on a stream that holds an NCCL collective would wait for it with no timeout:
cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize, a plain cudaMemcpy, a kernel
context's sync (k->sync, which synchronises its stream), and a copy to the host whose
destination is not the back end's pinned buffer (a copy into pageable memory returns only once
it is done). Comments are not code: they are left out before the check.
"""
import pathlib
import re
import sys

RULES = [
    (re.compile(r"\bcuda(Stream|Device|Event)Synchronize\s*\("), "a blocking synchronise"),
    (re.compile(r"\bcudaMemcpy\s*\("), "a plain cudaMemcpy (synchronous)"),
    (re.compile(r"->\s*sync\s*\("), "a kernel context's sync (synchronises its stream)"),
]
D2H = re.compile(r"cudaMemcpyAsync\s*\(\s*([^,]+),.*cudaMemcpyDeviceToHost")


def strip_comments(text):
    """The text with /* */ and // comments blanked, newlines kept (so line numbers hold)."""
    out = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", out)


def check(root):
    bad, files = [], sorted(pathlib.Path(root, "allreduce").glob("*.cu"))
    for f in files:
        for n, line in enumerate(strip_comments(f.read_text()).splitlines(), 1):
            where = "%s:%d" % (f.relative_to(root), n)
            for rx, what in RULES:
                if rx.search(line):
                    bad.append("%s: %s: %s" % (where, what, line.strip()))
            m = D2H.search(line)
            if m and not m.group(1).strip().startswith("&s->pinned"):
                bad.append("%s: a copy to host memory that is not pinned (it blocks until done): %s" % (where, line.strip()))
    return files, bad


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    files, bad = check(root)
    for b in bad:
        print(b)
    print("nonblocking: %d files, %d blocking calls" % (len(files), len(bad)))
    return 1 if bad or not files else 0


if __name__ == "__main__":
    sys.exit(main())
