#!/usr/bin/env python3
"""No file-level call circles inside a folder.

Each folder of tacl builds as its own static library.  Inside one, files
call one another one way (STYLE.md): a file whose functions call
functions (or read tables) of a second file, which calls back into the
first, directly or through others, is a circle.  This reads every
library's object files with nm, draws an edge from a file to each file
of the same library that defines a symbol it leaves undefined, and names
the files of every strongly connected component of more than one file.

Usage: test_circles.py [--expect A.c,B.c] NM LIB [LIB ...]
Exit 0 when no library has a circle, 1 (after naming them) otherwise;
with --expect, 0 only when the one circle found is exactly those files
(the check's own test, on a planted circle).
"""
import subprocess
import sys


def objects(nm, lib):
    """{object: (defined symbols, undefined symbols)} of a static library."""
    out = subprocess.run([nm, "-A", lib], capture_output=True, text=True,
                         check=True).stdout
    objs = {}
    prefix = lib + ":"
    for line in out.splitlines():
        # "lib.a:obj.o:0000000000000000 T name" or "lib.a:obj.o:   U name"
        if not line.startswith(prefix):
            continue
        obj, _, rest = line[len(prefix):].partition(":")
        fields = rest.split()
        if len(fields) < 2:
            continue
        kind, name = fields[-2], fields[-1]
        defs, undefs = objs.setdefault(obj, (set(), set()))
        if kind == "U":
            undefs.add(name)
        elif kind.isupper():
            defs.add(name)
    return objs


def strongly_connected(graph):
    """Tarjan's components of graph ({node: set of nodes})."""
    index, low, stack, on_stack, comps = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def source_name(obj):
    """.../ring.c.o -> ring.c; the meson object name carries the source's
    (a subfolder's as a prefix: planted_circle_a.c)."""
    name = obj.rsplit("/", 1)[-1]
    return name[:-2] if name.endswith(".o") else name


def circles(nm, lib):
    objs = objects(nm, lib)
    owner = {}
    for obj, (defs, _) in objs.items():
        for name in defs:
            owner.setdefault(name, obj)
    graph = {obj: set() for obj in objs}
    why = {}
    for obj, (_, undefs) in objs.items():
        for name in undefs:
            dest = owner.get(name)
            if dest is not None and dest != obj:
                graph[obj].add(dest)
                why.setdefault((obj, dest), name)
    found = []
    for comp in strongly_connected(graph):
        if len(comp) < 2:
            continue
        members = set(comp)
        edges = sorted("%s -> %s (%s)" % (source_name(a), source_name(b),
                                          why[(a, b)])
                       for a in comp for b in graph[a] if b in members)
        found.append(([source_name(o) for o in comp], edges))
    return found


def main(argv):
    expect = None
    if len(argv) > 2 and argv[1] == "--expect":
        expect = sorted(argv[2].split(","))
        argv = argv[:1] + argv[3:]
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[-4], file=sys.stderr)
        return 2
    nm, libs = argv[1], argv[2:]
    bad = 0
    seen = []
    for lib in libs:
        found = circles(nm, lib)
        name = lib.rsplit("/", 1)[-1]
        if not found:
            print("ok: %s has no file-level call circle" % name)
        for files, edges in found:
            bad += 1
            seen.append(sorted(f.rsplit("_", 1)[-1] if expect else f
                               for f in files))
            print("FAIL: %s: the files %s call one another in a circle:"
                  % (name, ", ".join(files)))
            for e in edges:
                print("    " + e)
    if expect is not None:
        ok = seen == [expect]
        print("%s: expected one circle of %s, found %s"
              % ("ok" if ok else "FAIL", ", ".join(expect), seen or "none"))
        return 0 if ok else 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
