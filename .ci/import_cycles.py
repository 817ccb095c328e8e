"""Fails on any import circle between the product's files (issue 39), however deferred.

import-linter checks the floors between packages; this checks files. Every import counts: at the
top of a file, inside functions, under `if TYPE_CHECKING:`, and `importlib.import_module("...")`
with a literal name, since a circle made lazy is still a circle of the design. `from pkg import
name` is an import of the submodule pkg.name where that is a file, else of pkg itself.

Usage: python .ci/import_cycles.py [ROOT]   (default: the repository). Exit 1 names each circle.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGES = ("domain", "storage", "workbench", "screens", "cli")


def modules(root: Path) -> tuple[dict[str, Path], set[str]]:
    """Dotted name -> file, for every .py file of the packages (a package by its __init__.py); and
    the names of their compiled modules (a .c source), which import nothing of the project."""
    found: dict[str, Path] = {}
    compiled: set[str] = set()
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
        compiled.update(".".join(p.relative_to(root).with_suffix("").parts) for p in (root / package).rglob("*.c"))
    return found, compiled


def imports(tree: ast.AST, name: str, is_package: bool, submodules: set[str]) -> set[str]:
    """Every module the file imports. `from pkg import a` imports pkg.a where that is a module of
    the project, else pkg itself."""
    here = name if is_package else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                out.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in submodules else base)
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and (getattr(node.func, "attr", None) == "import_module"
                   or getattr(node.func, "id", None) in ("import_module", "__import__"))):
            out.add(node.args[0].value)
    return out


def graph(root: Path) -> dict[str, set[str]]:
    """Module -> the project's modules (files) it imports, itself left out."""
    files, compiled = modules(root)
    edges: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_bytes(), str(path))
        found = imports(tree, name, path.name == "__init__.py", set(files) | compiled)
        edges[name] = {target for target in found if target in files and target != name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    edges = graph(root)
    found = cycles(edges)
    for component in found:
        members = set(component)
        print("import circle: " + "; ".join(
            f"{m} -> {', '.join(sorted(edges[m] & members))}" for m in component))
    if not found:
        print(f"import_cycles: no circle among {len(edges)} files")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
