"""The shape of the source tree: the largest files, classes and functions, and
the import cycles between qgc's modules (top-level and function-local imports
alike, as `python -X importtime` would not show the local ones).

    python scripts/code_report.py [--top N] [--json]
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: source folder → the package it installs as (pyproject's package-dir)
PACKAGES = {"qgc": "qgc", "dialects": "qgc.dialects", "passes": "qgc.passes",
            "runtime": "qgc.runtime"}


def modules() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in sorted((REPO / folder).rglob("*.py")):
            parts = path.relative_to(REPO / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The qgc modules `name` imports, anywhere in the file: `from pkg import
    mod` is an edge to `pkg.mod` where that is a module, else to `pkg`. A
    package's module-level `__getattr__` (PEP 562: a name re-exported lazily,
    `qgc.prompt_ids`) is the package's interface, not a dependency of its
    own, and is left out."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    tree = ast.parse(path.read_text())
    lazy = {id(n) for fn in tree.body if path.name == "__init__.py"
            and isinstance(fn, ast.FunctionDef) and fn.name == "__getattr__"
            for n in ast.walk(fn)}
    for node in ast.walk(tree):
        if id(node) in lazy:
            continue
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(filter(None, [package.rsplit(".", node.level - 1)[0], base]))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def sizes(path: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    classes, functions = [], []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if isinstance(node, ast.ClassDef):
            classes.append((length, f"{path.relative_to(REPO)}:{node.name}"))
        else:
            functions.append((length, f"{path.relative_to(REPO)}:{node.name}"))
    return classes, functions


def report(top: int) -> dict:
    mods = modules()
    graph = {name: imports_of(name, path, set(mods)) for name, path in mods.items()}
    files, classes, functions = [], [], []
    for path in mods.values():
        files.append((len(path.read_text().splitlines()), str(path.relative_to(REPO))))
        c, f = sizes(path)
        classes += c
        functions += f
    return {"files": sorted(files, reverse=True)[:top],
            "classes": sorted(classes, reverse=True)[:top],
            "functions": sorted(functions, reverse=True)[:top],
            "files_over_800_lines": sum(n > 800 for n, _ in files),
            "modules": len(mods),
            "import_cycles": cycles(graph)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    found = report(args.top)
    if args.json:
        print(json.dumps(found, indent=1))
        return 0
    for what in ("files", "classes", "functions"):
        print(f"largest {what} (lines):")
        for n, name in found[what]:
            print(f"  {n:5d}  {name}")
    print(f"files over 800 lines: {found['files_over_800_lines']} of {found['modules']}")
    print(f"import cycles: {len(found['import_cycles'])}")
    for component in found["import_cycles"]:
        print(f"  {len(component)} modules: {', '.join(component)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
