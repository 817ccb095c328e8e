"""Checks that a re-run's program can start at all, before the job is queued and after it ran.

A run that dies before the program starts (no interpreter, no torch or torch_xla in the target
environment, a TPU asked for on a machine without one) says nothing about the agent's code: it
is an environment failure of the job, never an attempt. `check` finds the usual ones before
anything is stored (local backend); `diagnose` recognises them in a finished run's output (any
backend), so the runner stores no attempt for them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from domain.jobs import ENV_FIX, JobEnvironmentError, JobSpec, missing_module_line
from storage.sqlite import Database

IMPORT_TIMEOUT_S = 300.0
TAIL_BYTES = 16 << 10
"""How much of a failed run's output `diagnose` reads: the traceback that ended it."""

_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)?)?")
_LAUNCHERS = frozenset({"torchrun", "accelerate", "xla_run", "xla_dist"})
_ASSIGNMENT = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]*=")  # a name starts a word: linear
# The last line of the traceback that ended the run: torch or torch_xla itself is missing.
# Linear: one bounded alternation, anchored at a line start.
_MISSING = re.compile(rb"^(?:ModuleNotFoundError|ImportError): No module named '(torch_xla|torch)'", re.M)
_NO_DEVICE = re.compile(rb"libtpu not found|TPU initialization failed|TPU is already in use")
"""What torch_xla says when PJRT_DEVICE=TPU finds no usable TPU (literal phrases: linear)."""
_NOT_FOUND = (126, 127)
NO_TPU_FIX = "run it where the TPU is (--backend ssh/gcloud/skypilot) or pass --env PJRT_DEVICE=CPU (virtual XLA:CPU devices)"


def run_path(spec: JobSpec) -> str:
    """The PATH the command will see: the target venv's bin/ first (backends.Local does the same)."""
    path = spec.env.get("PATH") or os.environ.get("PATH", os.defpath)
    venv = spec.options.get("venv")
    return f"{Path(str(venv)) / 'bin'}{os.pathsep}{path}" if venv else path


def program(argv: tuple[str, ...]) -> str:
    """The program the command starts, past `env` and leading `VAR=value` words."""
    words = list(argv)
    while words and (words[0] == "env" or _ASSIGNMENT.match(words[0])):
        words.pop(0)
    return words[0] if words else ""


def is_interpreter(name: str) -> bool:
    """A Python or a launcher of one: missing, it is the environment's fault, not the command's."""
    base = os.path.basename(name)
    return bool(_PYTHON.fullmatch(base)) or base in _LAUNCHERS


def interpreter(argv: tuple[str, ...], path: str) -> str | None:
    """The Python the command runs under (its own, or the one beside its launcher), on `path`."""
    name = program(argv)
    base = os.path.basename(name)
    if is_interpreter(name):
        found = shutil.which(name, path=path)
        if found is None or _PYTHON.fullmatch(base):
            return found
        beside = Path(found).parent / "python"
        return str(beside) if beside.exists() else shutil.which("python3", path=path)
    return shutil.which("python3", path=path) or shutil.which("python", path=path)


def needed_modules(repo: Path, commit: str | None) -> tuple[str, ...]:
    """torch / torch_xla when the commit's Python files import them (git grep, nothing checked out)."""
    if not commit:
        return ()
    needed = []
    for module in ("torch", "torch_xla"):
        done = subprocess.run(
            ["git", "-C", str(repo), "grep", "-q", "-E", rf"^\s*(import|from)\s+{module}\b", commit, "--", "*.py"],
            capture_output=True,
        )
        if done.returncode == 0:
            needed.append(module)
    return tuple(needed)


def _can_import(python: str, modules: tuple[str, ...], spec: JobSpec, path: str) -> str | None:
    """The first module `python` cannot import (None when all import), with the run's environment."""
    env = {**os.environ, **spec.env, "PATH": path}
    env.pop("PYTHONPATH", None)
    for module in modules:
        try:
            done = subprocess.run([python, "-c", f"import {module}"], env=env, capture_output=True,
                                  timeout=IMPORT_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return module
        if done.returncode != 0:
            return module
    return None


def check(db: Database, spec: JobSpec) -> None:
    """Raise JobEnvironmentError (one line naming the fix) when a local run could not start."""
    from storage.jobs import run_source
    from workbench.rerun.backends import has_tpu

    if spec.backend != "local":
        return
    path = run_path(spec)
    name = program(spec.argv)
    if not name or ("/" not in name and shutil.which(name, path=path) is None):
        raise JobEnvironmentError(f"{name or 'the command'} is not on the target environment's PATH: {ENV_FIX}")
    commit, repo = run_source(db, spec)
    needed = needed_modules(repo, commit)
    if not needed:
        return
    python = interpreter(spec.argv, path)
    if python is None:
        raise JobEnvironmentError(f"no Python on the target environment's PATH: {ENV_FIX}")
    missing = _can_import(python, needed, spec, path)
    if missing:
        raise JobEnvironmentError(missing_module_line(missing, python))
    if "torch_xla" in needed and spec.env.get("PJRT_DEVICE", "").upper() == "TPU" and not has_tpu():
        raise JobEnvironmentError(f"PJRT_DEVICE=TPU but this machine has no TPU: {NO_TPU_FIX}")


def diagnose(log: Path, exit_code: int | None, argv: tuple[str, ...]) -> str | None:
    """Why a finished run never started its program, from its exit and the end of its output; else None."""
    if exit_code in (0, None):
        return None
    try:
        with open(log, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - TAIL_BYTES))
            tail = fh.read()
    except OSError:
        tail = b""
    found = list(_MISSING.finditer(tail))
    if found:
        return missing_module_line(found[-1].group(1).decode(), program(argv) or "python")
    device = _NO_DEVICE.search(tail)
    if device:
        return f"no usable TPU where it ran ({device.group(0).decode()}): {NO_TPU_FIX}"
    if exit_code in _NOT_FOUND and (b"not found" in tail or b"No such file" in tail):
        return f"{program(argv) or 'the program'} was not found where the run started: {ENV_FIX}"
    return None
