#!/usr/bin/env python3
"""Keep docs/architecture.md true: every #include "..." of lib/ goes to the
same layer or a lower one, no two files include each other (directly or in a
loop), every file of lib/ is placed, each listed exception still exists, and
bindings/malloc/ (libhp-malloc) includes only the public headers and its own. TAP output."""
import os
import re
import sys

src = sys.argv[1]
doc = open(os.path.join(src, "docs", "architecture.md")).read()
lib = os.path.join(src, "lib")

layer_of = {}
exceptions = set()
section = None
for line in doc.splitlines():
    if line.startswith("| layer |"):
        section = "layers"
    elif line.startswith("| from |"):
        section = "exceptions"
    elif not line.startswith("|"):
        section = None if not line.strip() else section
    elif section == "layers" and re.match(r"\| \d", line):
        cells = [c.strip() for c in line.strip("|").split("|")]
        n = int(cells[0].split()[0])
        for f in re.findall(r"`([\w.]+\.[ch])`", cells[1]):
            layer_of[f] = n
    elif section == "exceptions" and "`" in line:
        cells = [c.strip() for c in line.strip("|").split("|")]
        a, b = (re.search(r"`([^`]+)`", c).group(1) for c in cells[:2])
        exceptions.add((a, b))

results = []


def check(ok, what):
    results.append((ok, what))


files = sorted(f for f in os.listdir(lib) if f.endswith((".c", ".h")))
incl = {}
for f in files:
    text = open(os.path.join(lib, f)).read()
    incl[f] = [h for h in re.findall(r'^#include "([^"]+)"', text, re.M) if "/" not in h]

unplaced = [f for f in files if f not in layer_of]
check(not unplaced, "every file of lib/ has a layer in docs/architecture.md"
      + (f" (not placed: {', '.join(unplaced)})" if unplaced else ""))
gone = [f for f in layer_of if f not in files]
check(not gone, "every file the table names exists" + (f" (gone: {', '.join(gone)})" if gone else ""))

up, seen_exceptions = [], set()
for f in files:
    for h in incl[f]:
        if f not in layer_of or h not in layer_of:
            continue
        if layer_of[h] > layer_of[f]:
            if (f, h) in exceptions:
                seen_exceptions.add((f, h))
            else:
                up.append(f"{f} (layer {layer_of[f]}) includes {h} (layer {layer_of[h]})")
check(not up, "no include goes to a higher layer" + (": " + "; ".join(up) if up else ""))
stale = sorted(exceptions - seen_exceptions)
check(not stale, "every listed exception is still there"
      + (": " + "; ".join(f"{a} -> {b}" for a, b in stale) if stale else ""))


# Modules: x.c and x.h are one node; stack.h belongs to stack.c and stack_cache.c alike.
def module(name):
    return name[:-2]


edges = {}
for f in files:
    for h in incl[f]:
        if module(h) != module(f):
            edges.setdefault(module(f), set()).add(module(h))
loops = []
state = {}


def visit(m, path):
    state[m] = 1
    for n in sorted(edges.get(m, ())):
        if state.get(n) == 1:
            loops.append(" -> ".join(path[path.index(n):] + [n]))
        elif n not in state:
            visit(n, path + [n])
    state[m] = 2


for m in sorted(edges):
    if m not in state:
        visit(m, [m])
check(not loops, "no two files include each other, directly or in a loop"
      + (": " + "; ".join(loops) if loops else ""))

mdir = os.path.join(src, "bindings", "malloc")
bad = []
for f in sorted(os.listdir(mdir)):
    if f.endswith((".c", ".h")):
        for h in re.findall(r'^#include "([^"]+)"', open(os.path.join(mdir, f)).read(), re.M):
            if h not in ("hpm.h", "hp.h") and not h.startswith("hp/"):
                bad.append(f"{f} includes {h}")
check(not bad, "bindings/malloc/ includes only the public headers and hpm.h"
      + (": " + "; ".join(bad) if bad else ""))

print(f"1..{len(results)}")
for i, (ok, what) in enumerate(results, 1):
    print(f"{'ok' if ok else 'not ok'} {i} - {what}")
sys.exit(0 if all(ok for ok, _ in results) else 1)
