#!/usr/bin/env python3
"""claims_explained.py - a claims.json whose every FAIL is explained: exit 0 when each FAILing claim names a measured why for every check off it (numbers.unexplained == 0), else 1 naming the claims"""
import json
import sys


def main(path):
    claims = json.load(open(path))
    bad = []
    for c in claims:
        if c["verdict"] != "FAIL":
            continue
        left = c["numbers"].get("unexplained")
        if left is None or left > 0:
            bad.append("claim %d FAILs with %s unexplained: %s" % (c["claim"], "all" if left is None else left, c["why"]))
        else:
            print("claim %d FAILs, every check off it explained (%s)" % (c["claim"], c["why"]))
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: claims_explained.py DIR/claims.json")
    sys.exit(main(sys.argv[1]))
