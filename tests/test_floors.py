"""The floors hold (docs/architecture.md): checked on the code, not described.

domain < storage < workbench < screens < cli. Headless modules load without Textual or Rich,
import-linter's contracts hold, no two files import each other round a circle (.ci/import_cycles.py),
SQL stays in storage/, no production function grows past 80 lines and no file past 1,000.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEADLESS = ("domain", "storage", "workbench", "cli")
PRODUCTION = ("domain", "storage", "workbench", "screens", "cli")
MAX_LINES = 80


def modules(*packages: str) -> list[str]:
    """Every module of the packages, by dotted name, found on disk."""
    names = []
    for package in packages:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def sources(*packages: str) -> list[Path]:
    return [p for package in packages for p in sorted((ROOT / package).rglob("*.py"))]


def test_every_headless_module_imports_without_textual_or_rich() -> None:
    """A fresh interpreter imports all of domain, storage, workbench and cli (the app loads lazily)."""
    names = [n for n in modules(*HEADLESS) if n not in ("cli.__main__",)]
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'rich', 'textual_serve'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_sqlite_utils_loads_only_through_storage_sqlite_and_brings_no_dataframes() -> None:
    """sqlite-utils would import pandas and numpy at every start (storage/sqlite.py says why not)."""
    for path in sources(*PRODUCTION):
        if path == ROOT / "storage" / "sqlite.py":
            continue
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and ast.unparse(block.test) == "TYPE_CHECKING" for n in ast.walk(block)}
        runtime = [node.lineno for node in ast.walk(tree) if id(node) not in typing_only and (
            (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlite_utils")
            or (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "sqlite_utils" for a in node.names)))]
        assert not runtime, (path, runtime)
    code = ("import sys, screens.app, storage.database, workbench.verify, workbench.report\n"
            "print(sorted({'numpy', 'pandas'} & set(sys.modules)))\n"
            "import pandas, numpy  # and afterwards they import whole\n"
            "print(pandas.DataFrame({'a': numpy.arange(3)}).shape)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[]", "(3, 1)"]


def test_import_linter_contracts_hold() -> None:
    """The layers and forbidden contracts in pyproject.toml: a broken one names the import chain."""
    lint = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    if not Path(lint).exists():
        pytest.skip("import-linter is not installed: pip install import-linter")
    done = subprocess.run([lint], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr


# An SQL keyword opening a string (uppercase, as every statement here is written), or a call
# that runs SQL. Linear: no nested quantifiers.
SQL = re.compile(r"""[fbr]?["']{1,3}\s*(?:SELECT|INSERT|UPDATE|DELETE|CREATE TABLE|WITH \w+ AS)\s"""
                 r"|\.execute(?:many|script)?\(|\.query\(\s*f?[\"']")


def test_no_sql_outside_storage() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}"
        for path in sources("domain", "workbench", "screens", "cli")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if SQL.search(line)
    ]
    assert not found, f"{len(found)} SQL site(s) outside storage/:\n" + "\n".join(found)


def long_functions(path: Path, root: Path = ROOT) -> list[str]:
    """Functions (methods and nested ones too) longer than MAX_LINES, from `def` to their last line."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.relative_to(root)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_LINES
    ]


def test_the_long_function_check_finds_81_lines_not_80(tmp_path: Path) -> None:
    body = "    x = 1\n"
    (tmp_path / "m.py").write_text("def ok():\n" + body * 79 + "\n\ndef long():\n" + body * 80)
    assert [line.split()[1] for line in long_functions(tmp_path / "m.py", tmp_path)] == ["long"]


def test_no_production_function_over_80_lines() -> None:
    found = [entry for path in sources(*PRODUCTION) for entry in long_functions(path)]
    assert not found, f"{len(found)} function(s) over {MAX_LINES} lines:\n" + "\n".join(found)


def test_the_cli_has_no_long_function_and_no_sql() -> None:
    """The top floor is done: it keeps both rules strictly."""
    long = [entry for path in sources("cli") for entry in long_functions(path)]
    sql = [f"{p.relative_to(ROOT)}:{n}" for p in sources("cli")
           for n, line in enumerate(p.read_text().splitlines(), 1) if SQL.search(line)]
    assert long == [] and sql == []


def test_the_screens_make_text_boxes_only_from_the_keys_in_order_ones() -> None:
    """Textual's own Input and TextArea run their bound keys (backspace, ctrl+u, enter) after the
    characters typed behind them; screens.typeahead's run them in order, so every screen uses those."""
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sources("screens")
        if path.name != "typeahead.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if line.startswith("from textual.widgets import") and re.search(r"\b(Input|TextArea)\b", line)
    ]
    assert not found, "\n".join(found)


def import_circles(root: Path) -> subprocess.CompletedProcess[str]:
    """.ci/import_cycles.py (run by `make lint`) on a tree of the project's packages."""
    return subprocess.run([sys.executable, str(ROOT / ".ci" / "import_cycles.py"), str(root)],
                          capture_output=True, text=True, timeout=120)


def test_the_circle_check_counts_deferred_type_checking_and_import_module_imports(tmp_path: Path) -> None:
    """Each of the three hidden kinds of import closes a circle the check names; a package's
    `from pkg import submodule` is no import of pkg's __init__."""
    package = tmp_path / "domain"
    package.mkdir()
    (package / "__init__.py").write_text("from domain import a\n")
    (package / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from domain.b import B\n")
    (package / "b.py").write_text("def f():\n    from . import c\n")
    (package / "c.py").write_text("import importlib\nX = importlib.import_module('domain.a')\n")
    out = import_circles(tmp_path)
    assert out.returncode == 1 and out.stdout.count("import circle") == 1, out.stdout + out.stderr
    assert "domain.a -> domain.b; domain.b -> domain.c; domain.c -> domain.a" in out.stdout
    (package / "c.py").write_text("X = 1\n")
    assert import_circles(tmp_path).returncode == 0


def test_no_import_circle_between_files() -> None:
    out = import_circles(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr


def test_no_production_file_over_1000_lines() -> None:
    found = [f"{p.relative_to(ROOT)} ({n} lines)" for p in sources(*PRODUCTION)
             if (n := len(p.read_text().splitlines())) > 1000]
    assert not found, "\n".join(found)
