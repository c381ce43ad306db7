#!/usr/bin/env python3
"""Fails when the top-level modules of a crate import each other in a circle.

    module_cycles.py CRATE_SRC_DIR|MODULE_DIR...

A crate's graph has an edge a -> b when a file under module `a` names `crate::b` (in a `use`, a path,
or a `crate::{b, ...}` group; comments do not count; `lib.rs` and `main.rs`, which wire the modules
together, are left out). Test-only code does not count either: a module declared under
`#[cfg(test)]` (`mod tests;`, a top-level `mod fixtures;`) and an inline `#[cfg(test)] mod x { ... }`.
Prints each crate's circles and exits 1 if any crate has one. Issue 21 broke skiff-server's
(http <-> grpc, codec -> grpc -> http -> codec, error <-> model) and skiff-router's
(proxy <-> upstream), issue 35 those of api, cli, http-shell, operator and the node agent;
scripts/test.sh runs this over every crate so none comes back.
"""
import pathlib
import re
import sys


TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])")


def strip_comments(text):
    return "\n".join(line.split("//")[0] for line in text.splitlines())


def without_inline_tests(code):
    """`code` less its inline `#[cfg(test)] mod x { ... }` blocks (braces counted)."""
    out, at = [], 0
    for match in TEST_MOD.finditer(code):
        if match.group(2) != "{" or match.start() < at:
            continue
        out.append(code[at : match.start()])
        depth, i = 1, match.end()
        while i < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        at = i
    out.append(code[at:])
    return "".join(out)


def test_only_files(src):
    """Files of modules declared `#[cfg(test)] mod name;` (and everything under them)."""
    found = set()
    for path in src.rglob("*.rs"):
        for match in TEST_MOD.finditer(strip_comments(path.read_text())):
            if match.group(2) != ";":
                continue
            # A module's children sit beside lib.rs/main.rs/mod.rs, or in a folder named after it.
            folder = path.parent if path.name in ("lib.rs", "main.rs", "mod.rs") else path.with_suffix("")
            name = match.group(1)
            for candidate in (folder / f"{name}.rs", folder / name / "mod.rs"):
                found.add(candidate)
            found.update((folder / name).rglob("*.rs"))
    return found


def crate_root(src):
    """The crate's `src` folder above (or at) `src`: the one holding `lib.rs` or `main.rs`."""
    for folder in [src, *src.parents]:
        if (folder / "lib.rs").exists() or (folder / "main.rs").exists():
            return folder
    return src


def graph(src):
    """Edges between the modules directly under `src`: a crate's `src` folder, or a module's folder
    (such as `cli/src/standalone`), whose modules name each other as `crate::path::b` or `super::b`."""
    root = crate_root(src)
    prefix = "".join(f"{part}::" for part in src.relative_to(root).parts)
    tests = test_only_files(root)
    modules = {p.stem for p in src.iterdir() if (p.suffix == ".rs" or p.is_dir()) and p not in tests}
    modules -= {"lib", "main", "mod"}
    modules -= {p.name for p in src.iterdir() if p.is_dir() and (src / f"{p.name}.rs") in tests}
    edges = {m: set() for m in modules}
    for path in src.rglob("*.rs"):
        parts = path.relative_to(src).parts
        top = parts[0].removesuffix(".rs")
        if top not in modules or path in tests:
            continue
        code = without_inline_tests(strip_comments(path.read_text()))
        paths = [rf"crate::{prefix}"]
        if prefix:
            depth = len(parts) - (1 if path.name == "mod.rs" else 0)
            paths.append(r"(?<![\w:])" + "super::" * depth)
        for start in paths:
            for match in re.finditer(start + r"(\{[^}]*\}|\w+)", code):
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
