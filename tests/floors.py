#!/usr/bin/env python3
"""floors.py - the house's floors hold: no include runs up a floor, and no include cycle; with --objects, no call runs up a floor either; exit 1 naming each, else 0 (run by make test)

    python3 tests/floors.py ROOT                       the includes of ROOT's sources
    python3 tests/floors.py ROOT --objects OBJDIR      and the built objects' symbols (nm): an
                                                       object that uses a symbol defined on a
                                                       floor above its own is a call up a floor
"""
import os
import re
import subprocess
import sys

# bottom up: a file may include its own floor and the floors below it, never one above
FLOORS = [["base"], ["kernels"], ["data"], ["model"], ["net"], ["engine"], ["allreduce", "ps"], ["experiments"]]
RANK = {d: i for i, ds in enumerate(FLOORS) for d in ds}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def sources(root):
    for d in RANK:
        for dirpath, _, names in os.walk(os.path.join(root, d)):
            for n in sorted(names):
                if n.endswith((".c", ".h", ".cu")):
                    yield os.path.relpath(os.path.join(dirpath, n), root)


def floor(path):
    return path.split(os.sep)[0]


def main(root):
    graph, bad = {}, []
    for f in sources(root):
        edges = []
        for inc in INCLUDE.findall(open(os.path.join(root, f)).read()):
            t = os.path.normpath(os.path.join(os.path.dirname(f), inc))
            if not os.path.exists(os.path.join(root, t)):
                t = os.path.normpath(inc)  # relative to the top (-I.)
            if not os.path.exists(os.path.join(root, t)):
                continue
            edges.append(t)
            if floor(t) not in RANK:
                bad.append("%s includes %s, outside the floors" % (f, t))
            elif RANK[floor(t)] > RANK[floor(f)]:
                bad.append("%s includes %s: up from %s to %s" % (f, t, floor(f), floor(t)))
        graph[f] = edges
    # cycles: depth-first, each found once by its first file
    state, stack = {}, []

    def visit(f):
        state[f] = 1
        stack.append(f)
        for t in graph.get(f, []):
            if state.get(t) == 1:
                bad.append("include cycle: " + " -> ".join(stack[stack.index(t):] + [t]))
            elif t not in state:
                visit(t)
        stack.pop()
        state[f] = 2

    for f in graph:
        if f not in state:
            visit(f)
    for b in bad:
        print("floors: " + b)
    print("floors: %d files, %d includes, %d up a floor or in a cycle" % (len(graph), sum(map(len, graph.values())), len(bad)))
    return 1 if bad else 0


def symbols(objdir):
    """Every call up a floor among the objects under objdir (OBJDIR/<floor>/...o): an undefined
    symbol of one object that another object, on a higher floor, defines. The objects are read
    with nm; a floor's .cu objects count as the floor's."""
    defined, used, nobj = {}, [], 0
    for d in RANK:
        for dirpath, _, names in os.walk(os.path.join(objdir, d)):
            for n in sorted(names):
                if not n.endswith(".o"):
                    continue
                path = os.path.join(dirpath, n)
                rel = os.path.relpath(path, objdir)
                nobj += 1
                out = subprocess.run(["nm", "-P", path], capture_output=True, text=True, check=True).stdout
                for line in out.splitlines():
                    f = line.split()
                    if len(f) < 2:
                        continue
                    if f[1] == "U":
                        used.append((rel, f[0]))
                    elif f[1] in "TDBR":  # global text, data, bss, read-only
                        defined.setdefault(f[0], rel)
    bad = []
    for rel, sym in used:
        where = defined.get(sym)
        if where and RANK[floor(where)] > RANK[floor(rel)]:
            bad.append("%s calls %s (%s): up from %s to %s" % (rel, sym, where, floor(rel), floor(where)))
    for b in sorted(set(bad)):
        print("floors: " + b)
    print("floors: %d objects, %d symbols used, %d calls up a floor" % (nobj, len(used), len(set(bad))))
    return 1 if bad or not nobj else 0


if __name__ == "__main__":
    args = sys.argv[1:]
    objdir = None
    if "--objects" in args:
        i = args.index("--objects")
        objdir = args[i + 1] if i + 1 < len(args) else None
        args = args[:i] + args[i + 2:]
        if not objdir:
            sys.exit("floors: --objects needs a folder of built objects (BUILD/obj)")
    rc = main(args[0] if args else ".")
    if objdir is not None:
        rc |= symbols(objdir)
    sys.exit(rc)
