#!/usr/bin/env python3
"""tools/check_layers.py — fails on an arrow against the layer order of tools/layers.txt.

Two views of the same rule (docs/ARCHITECTURE.md):
  includes  every #include "..." of every source file in a layer's folders (always; no build
            needed): a file may include headers of its own unit and of lower ranks only;
  symbols   with --build DIR: `nm` over the objects of each layer's CMake target in that build
            tree: every undefined symbol an object uses that another unit defines must be defined
            in a lower rank (or be one of the seam symbols of layers.txt).
An upward arrow, an arrow between two units of one rank (two backends, cli and python), a library
file including something outside the layers, or a public header no layer owns is an error (exit 1).
A circle between layers needs an upward arrow, so it is caught by the same rule; the layer graph's
strongly connected components are printed as well when there is one.

--file-cycles (optional, never fails unless --strict-file-cycles): the circles between files (one
object file uses a symbol of another that uses one of the first, directly or around a loop), from
the same nm data, within each layer; for cleaning up, not a layering rule.

Usage: tools/check_layers.py [--src DIR] [--build DIR] [--file-cycles] [--strict-file-cycles] [-v]
"""
import argparse
import fnmatch
import os
import re
import subprocess
import sys
from collections import defaultdict

SOURCE_EXT = (".c", ".h", ".cpp", ".hpp", ".inc", ".cc")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


class Layers:
    def __init__(self, path):
        self.units = []     # (rank, name, target pattern, folder pattern)
        self.headers = {}   # public header path -> unit name
        self.rank = {}      # unit or layer name -> rank
        self.layer_of = {}  # unit -> layer name
        self.seams = set()  # (from unit, to unit, symbol)
        self.sealed = {}    # layer -> the layers that may use it (besides itself)
        self.folders = []   # (folder, layer name, wildcard)
        self.targets = []   # (target pattern, layer name)
        for ln, line in enumerate(open(path), 1):
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            if line[0] == "layer" and len(line) >= 5:
                rank, name, target = int(line[1]), line[2], line[3]
                self.rank[name] = rank
                self.targets.append((target, name))
                for p in line[4:]:
                    if p.startswith("include/"):
                        self.headers[p] = name
                    elif p.endswith("/*"):
                        self.folders.append((p[:-2], name, True))
                    else:
                        self.folders.append((p.rstrip("/"), name, False))
            elif line[0] == "sealed" and len(line) >= 2:
                self.sealed[line[1]] = set(line[2:])
            elif line[0] == "seam" and len(line) == 4:
                self.seams.add((line[1], line[2], line[3]))
            else:
                sys.exit(f"{path}:{ln}: cannot read this line")

    def unit_of_path(self, rel):
        """The unit of a repository-relative path, or None when it is outside the layers."""
        if rel in self.headers:
            return self.headers[rel]
        for folder, name, wild in self.folders:
            if rel.startswith(folder + "/"):
                if wild:
                    sub = rel[len(folder) + 1:].split("/", 1)
                    return f"{folder}/{sub[0]}" if len(sub) == 2 else None
                return name
        return None

    def unit_of_target(self, target):
        for pat, name in self.targets:
            if pat.endswith("*") and target.startswith(pat[:-1]):
                folder = next(f for f, n, w in self.folders if n == name and w)
                return f"{folder}/{target[len(pat) - 1:]}"
            if pat == target:
                return name
        return None

    def rank_of(self, unit):
        if unit in self.rank:
            return self.rank[unit]
        for folder, name, wild in self.folders:
            if wild and unit.startswith(folder + "/"):
                return self.rank[name]
        raise KeyError(unit)

    def layer_name(self, unit):
        return unit.split("/", 1)[0] if "/" in unit else unit

    def allowed(self, src, dst, symbol=None):
        if src == dst:
            return True
        if (src, dst, symbol) in self.seams:
            return True
        sealed = self.sealed.get(self.layer_name(dst))
        if sealed is not None and self.layer_name(src) not in sealed:
            return False
        return self.rank_of(dst) < self.rank_of(src)


def check_includes(lay, src_root, verbose):
    errors, edges = [], defaultdict(set)
    for top in sorted({f for f, _, _ in lay.folders}):
        for dirpath, dirs, files in os.walk(os.path.join(src_root, top)):
            dirs.sort()
            for fn in sorted(files):
                if not fn.endswith(SOURCE_EXT) and ".inc" not in fn:
                    continue
                path = os.path.join(dirpath, fn)
                rel = os.path.relpath(path, src_root)
                unit = lay.unit_of_path(rel)
                if unit is None:
                    continue
                try:
                    text = open(path, encoding="utf-8", errors="replace").read()
                except OSError:
                    continue
                for m in INCLUDE_RE.finditer(text):
                    inc = m.group(1)
                    line = text.count("\n", 0, m.start()) + 1
                    if inc.startswith("modattn/"):
                        target = "include/" + inc
                        if not os.path.exists(os.path.join(src_root, target)):
                            continue  # generated or not ours
                        dst = lay.headers.get(target)
                        if dst is None:
                            errors.append(f"{rel}:{line}: includes {target}, which no layer owns: "
                                          f"add it to tools/layers.txt")
                            continue
                    else:
                        local = os.path.join(os.path.dirname(rel), inc)
                        if os.path.exists(os.path.join(src_root, local)):
                            target = os.path.normpath(local)
                        elif os.path.exists(os.path.join(src_root, inc)):
                            target = inc
                        else:
                            continue  # a generated header (build/generated) or a third party's
                        dst = lay.unit_of_path(target)
                        if dst is None:
                            errors.append(f"{rel}:{line}: includes {target}, outside the library's layers")
                            continue
                    edges[(unit, dst)].add(f"{rel}:{line} -> {target}")
                    if not lay.allowed(unit, dst):
                        errors.append(f"{rel}:{line}: {unit} (rank {lay.rank_of(unit)}) includes {target} "
                                      f"of {dst} (rank {lay.rank_of(dst)}): {arrow_kind(lay, unit, dst)}")
    # the public headers: a header may include headers of its own layer and below only
    for hdr, unit in sorted(lay.headers.items()):
        path = os.path.join(src_root, hdr)
        if not os.path.exists(path):
            errors.append(f"tools/layers.txt names {hdr}, which does not exist")
            continue
        text = open(path, encoding="utf-8").read()
        for m in INCLUDE_RE.finditer(text):
            target = "include/" + m.group(1)
            dst = lay.headers.get(target)
            if dst is None:
                if os.path.exists(os.path.join(src_root, target)):
                    errors.append(f"{hdr}: includes {target}, which no layer owns: add it to tools/layers.txt")
                continue
            edges[(unit, dst)].add(f"{hdr} -> {target}")
            if not lay.allowed(unit, dst):
                errors.append(f"{hdr}: {unit} (rank {lay.rank_of(unit)}) includes {target} of {dst} "
                              f"(rank {lay.rank_of(dst)}): {arrow_kind(lay, unit, dst)}")
    for hdr in sorted(os.listdir(os.path.join(src_root, "include/modattn"))):
        rel = "include/modattn/" + hdr
        if hdr.endswith(".h") and rel not in lay.headers:
            errors.append(f"{rel}: no layer owns this public header: add it to tools/layers.txt")
    return errors, edges


def arrow_kind(lay, src, dst):
    if lay.rank_of(dst) > lay.rank_of(src):
        return "an upward arrow"
    if lay.rank_of(dst) == lay.rank_of(src):
        return "an arrow between two units of one rank"
    return (f"{lay.layer_name(dst)} is sealed: only {', '.join(sorted(lay.sealed[lay.layer_name(dst)]))} "
            f"may name it (go through the device or attention tables)")


def nm_objects(objs):
    """{object: (defined globals, undefined)}, from one `nm -A -P` over all the objects."""
    out = {o: (set(), set()) for o in objs}
    r = subprocess.run(["nm", "-A", "-P"] + list(objs), capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"nm: {r.stderr.strip()}")
    for line in r.stdout.splitlines():
        # "path/file.o: symbol type [value size]"
        head, sep, rest = line.partition(": ")
        f = rest.split()
        if not sep or len(f) < 2 or head not in out:
            continue
        if f[1] == "U":
            out[head][1].add(f[0])
        elif f[1] in "TDBRVWCGSui":  # defined globals (lower case but u, i: local)
            out[head][0].add(f[0])
    return out


def find_objects(lay, build):
    """{object path: unit} for every object of a layer target in the build tree."""
    objs = {}
    for dirpath, dirs, files in os.walk(build):
        base = os.path.basename(dirpath)
        if base.endswith(".dir") and os.path.basename(os.path.dirname(dirpath)) == "CMakeFiles":
            unit = lay.unit_of_target(base[:-4])
            if unit is None:
                continue
            for dp, _, fs in os.walk(dirpath):
                for fn in fs:
                    if fn.endswith(".o"):
                        objs[os.path.join(dp, fn)] = unit
    return objs


def check_symbols(lay, build, verbose):
    objs = find_objects(lay, build)
    if not objs:
        return [f"{build}: no objects of the layer targets (build it first)"], {}, {}, {}
    units = set(objs.values())
    for need in ("core", "device", "attn"):
        if need not in units:
            return [f"{build}: no objects of layer {need}: is this a modattn build tree?"], {}, {}, {}
    syms = nm_objects(sorted(objs))
    definer = defaultdict(set)  # symbol -> objects defining it
    for o, (d, _) in syms.items():
        for s in d:
            definer[s].add(o)
    errors, edges, file_edges = [], defaultdict(set), defaultdict(set)
    for o, (_, u) in sorted(syms.items()):
        src = objs[o]
        for s in sorted(u):
            where = definer.get(s)
            if not where:
                continue  # a third-party library's
            dst_units = {objs[w] for w in where}
            if src in dst_units:
                for w in where:
                    if objs[w] == src and w != o:
                        file_edges[o].add(w)
                continue
            for dst in sorted(dst_units):
                edges[(src, dst)].add(f"{short(o)} uses {s} ({short(next(w for w in where if objs[w] == dst))})")
                if not lay.allowed(src, dst, s):
                    errors.append(f"{short(o)} ({src}) uses {s}, defined in {dst}: {arrow_kind(lay, src, dst)}")
    return errors, edges, file_edges, objs


def short(o):
    m = re.search(r"CMakeFiles/([^/]+)\.dir/(.*)\.o$", o)
    return f"{m.group(2)}" if m else o


def sccs(nodes, succ):
    """Tarjan's strongly connected components of size > 1."""
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ.get(v, ()):
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--src", default=os.path.dirname(here), help="the source tree (default: this one)")
    ap.add_argument("--layers", default=None, help="the layer file (default: SRC/tools/layers.txt)")
    ap.add_argument("--build", help="a build tree: check the objects' symbols with nm too")
    ap.add_argument("--file-cycles", action="store_true", help="also list circles between files (needs --build)")
    ap.add_argument("--strict-file-cycles", action="store_true", help="fail on circles between files")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every arrow between layers")
    a = ap.parse_args()
    lay = Layers(a.layers or os.path.join(a.src, "tools", "layers.txt"))

    errors, inc_edges = check_includes(lay, a.src, a.verbose)
    all_edges = defaultdict(set)
    for k, v in inc_edges.items():
        all_edges[k] |= v
    nobj = 0
    file_edges, objs = {}, {}
    if a.build:
        e, sym_edges, file_edges, objs = check_symbols(lay, a.build, a.verbose)
        errors += e
        nobj = len(objs)
        for k, v in sym_edges.items():
            all_edges[k] |= v
    succ = defaultdict(set)
    seam_text = {(fs, fd): {f" uses {sym} (" for (gs, gd, sym) in lay.seams if (gs, gd) == (fs, fd)}
                 for (fs, fd, _) in lay.seams}
    for (s, d), why in all_edges.items():
        marks = seam_text.get((s, d), set())
        if not all(any(m in w for m in marks) for w in why):  # an edge made of seam symbols only is no arrow
            succ[s].add(d)
    circles = sccs({u for e in all_edges for u in e}, succ)
    for c in circles:
        errors.append("a circle between layers: " + " <-> ".join(c))

    if a.verbose:
        for (s, d), why in sorted(all_edges.items()):
            print(f"  {s} -> {d}: {len(why)} ({sorted(why)[0]})")
    if a.file_cycles or a.strict_file_cycles:
        if not a.build:
            sys.exit("--file-cycles needs --build DIR")
        by_unit = defaultdict(set)
        for o, u in objs.items():
            by_unit[u].add(o)
        found = 0
        for unit in sorted(by_unit):
            for c in sccs(by_unit[unit], file_edges):
                found += 1
                print(f"file circle in {unit}: " + " <-> ".join(short(o) for o in c))
        print(f"check_layers: {found} circle(s) between files" + ("" if found else " (none)"))
        if found and a.strict_file_cycles:
            errors.append(f"{found} circle(s) between files (--strict-file-cycles)")

    units = sorted({u for e in all_edges for u in e}, key=lambda u: (lay.rank_of(u), u))
    if errors:
        for e in errors:
            print("check_layers: " + e)
        print(f"check_layers: FAILED: {len(errors)} arrow(s) against tools/layers.txt")
        return 1
    print(f"check_layers: ok: {len(units)} units, {len(all_edges)} arrows, all downward "
          f"(includes{', and nm over ' + str(nobj) + ' objects' if a.build else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
