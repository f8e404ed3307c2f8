#!/usr/bin/env python3
"""floors.py - the house's floors hold: no include runs up a floor, and no include cycle; exit 1 naming each, else 0 (run by make test)"""
import os
import re
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
