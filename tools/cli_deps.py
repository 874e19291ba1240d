#!/usr/bin/env python3
"""tools/cli_deps.py OBJDIR — which of a program's own files call which, from its objects, and
whether any of them call each other in a circle.

Usage: tools/cli_deps.py build/cli/CMakeFiles/modattn_cli.dir [--quiet]

For every OBJDIR/*.o, `nm` lists the symbols it defines and the ones it leaves undefined; an
undefined symbol that another object of the folder defines is an arrow from this file to that one
(what the library or the C library defines is not counted). Prints each file's arrows, then every
circle (a strongly connected set of more than one file, or a file calling itself through others)
and exits 1 if there is one, 0 if there is none. Why from the objects and not from the headers:
a header says what may be called, an object what is called."""
import os
import subprocess
import sys


def symbols(obj):
    out = subprocess.run(["nm", "--defined-only", obj], capture_output=True, text=True, check=True).stdout
    defined = {ln.split()[-1] for ln in out.splitlines() if len(ln.split()) == 3 and ln.split()[1] in "TDBRC"}
    out = subprocess.run(["nm", "--undefined-only", obj], capture_output=True, text=True, check=True).stdout
    undefined = {ln.split()[-1] for ln in out.splitlines() if ln.split()}
    return defined, undefined


def sccs(nodes, edges):
    """Tarjan's strongly connected components."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    d = sys.argv[1]
    quiet = "--quiet" in sys.argv[2:]
    objs = sorted(f for f in os.listdir(d) if f.endswith(".o"))
    if not objs:
        print(f"cli_deps: no objects in {d}", file=sys.stderr)
        return 2
    name = {o: o[:-2] if o.endswith(".c.o") else o for o in objs}
    syms = {name[o]: symbols(os.path.join(d, o)) for o in objs}
    owner = {}
    for f, (defs, _) in syms.items():
        for s in defs:
            owner.setdefault(s, f)
    edges = {f: set() for f in syms}
    why = {}
    for f, (_, undef) in syms.items():
        for s in undef:
            t = owner.get(s)
            if t and t != f:
                edges[f].add(t)
                why.setdefault((f, t), []).append(s)
    if not quiet:
        for f in sorted(edges):
            calls = ", ".join(f"{t} ({' '.join(sorted(why[(f, t)])[:4])}{' ...' if len(why[(f, t)]) > 4 else ''})"
                              for t in sorted(edges[f]))
            print(f"{f} -> {calls or '-'}")
    circles = [c for c in sccs(list(edges), edges) if len(c) > 1]
    for c in circles:
        arrows = [f"{a} -> {b} ({' '.join(sorted(why[(a, b)]))})" for a in c for b in sorted(edges[a]) if b in c]
        print("circle: " + " <-> ".join(c) + "\n  " + "\n  ".join(arrows))
    print(f"{len(objs)} files, {sum(len(e) for e in edges.values())} arrows, {len(circles)} circles")
    return 1 if circles else 0


if __name__ == "__main__":
    sys.exit(main())
