#!/usr/bin/env python3
"""Fails when the top-level modules of a crate import each other in a circle.

    module_cycles.py CRATE_SRC_DIR...

A crate's graph has an edge a -> b when a file under module `a` names `crate::b` (in a `use`, a path,
or a `crate::{b, ...}` group; comments do not count; `lib.rs` and `main.rs`, which wire the modules
together, are left out). Prints each crate's circles and exits 1 if any crate has one. Issue 21
broke skiff-server's (http <-> grpc, codec -> grpc -> http -> codec, error <-> model) and
skiff-router's (proxy <-> upstream); scripts/test.sh runs this over every crate so none comes back.
"""
import pathlib
import re
import sys


def graph(src):
    modules = {p.stem for p in src.iterdir() if p.suffix == ".rs" or p.is_dir()} - {"lib", "main"}
    edges = {m: set() for m in modules}
    for path in src.rglob("*.rs"):
        top = path.relative_to(src).parts[0].removesuffix(".rs")
        if top not in modules:
            continue
        code = "\n".join(line.split("//")[0] for line in path.read_text().splitlines())
        for match in re.finditer(r"crate::(\{[^}]*\}|\w+)", code):
            group = match.group(1)
            names = re.findall(r"(?:^|[{,]\s*)(\w+)", group) if group.startswith("{") else [group]
            edges[top].update(n for n in names if n in modules and n != top)
    return edges


def circles(edges):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def main():
    failed = False
    for arg in sys.argv[1:]:
        found = circles(graph(pathlib.Path(arg)))
        print(f"{arg}: {'circles ' + str(found) if found else 'no circle'}")
        failed |= bool(found)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
