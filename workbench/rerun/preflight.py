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


def target_venv(text: str | None, flag: str = "--venv") -> str | None:
    """A local target environment as an absolute path, read from the caller's folder (the runner
    works in the job's worktree, where a relative path names nothing); refused by name when it
    has no bin/python."""
    if not text:
        return None
    path = os.path.abspath(os.path.expanduser(text))
    if not os.path.isfile(os.path.join(path, "bin", "python")):
        raise JobEnvironmentError(f"{flag} {text}: {path} has no bin/python, so it is not a virtual"
                                  f" environment: {ENV_FIX}")
    return path


def resolved(spec: JobSpec) -> JobSpec:
    """The spec with a local run's target venv made absolute from the caller's folder (a remote
    backend's venv is a path on the remote host and stays as given)."""
    from dataclasses import replace

    venv = spec.options.get("venv")
    if spec.backend != "local" or not venv:
        return spec
    return replace(spec, options={**spec.options, "venv": target_venv(str(venv))})


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


def _which(name: str, path: str, where: Path) -> str | None:
    """Where `name` is for a process started in `where` with `path`: a name with a slash is a
    file from `where`, any other is looked up on `path`."""
    if "/" in name:
        found = where / name
        return str(found) if found.is_file() and os.access(found, os.X_OK) else None
    return shutil.which(name, path=path)


def interpreter(argv: tuple[str, ...], path: str, where: Path) -> str | None:
    """The Python the command runs under (its own, or the one beside its launcher), on `path`."""
    name = program(argv)
    base = os.path.basename(name)
    if is_interpreter(name):
        found = _which(name, path, where)
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


def _can_import(python: str, modules: tuple[str, ...], env: dict[str, str], where: Path) -> str | None:
    """The first module `python` cannot import (None when all import), as the run would: its
    environment, in its folder of the commit's checkout."""
    for module in modules:
        try:
            done = subprocess.run([python, "-c", f"import {module}"], env=env, cwd=str(where), capture_output=True,
                                  timeout=IMPORT_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return module
        if done.returncode != 0:
            return module
    return None


def check(db: Database, spec: JobSpec) -> None:
    """Raise JobEnvironmentError (one line naming the fix) when a local run could not start."""
    from storage.jobs import run_source

    if spec.backend != "local":
        return
    commit, repo = run_source(db, spec)
    check_local(repo, commit, spec.argv, spec.cwd, spec.env, spec.options)


def check_local(repo: Path, commit: str | None, argv: tuple[str, ...], cwd: str, env: dict[str, str],
                options: dict[str, object]) -> None:
    """The local checks, run as the job will run: in a checkout of the commit (a throwaway
    detached worktree), in the command's folder there, with the environment the local backend
    gives the command (the target venv first on PATH), less the probe."""
    import tempfile

    from workbench.rerun import worktree

    if options.get("venv"):
        target_venv(str(options["venv"]))
    if not commit:
        return _check_in(repo, None, argv, repo / cwd, env, options)
    # A folder name of its own: git names the worktree's entry after it, and a job's `src` being
    # removed at the same moment would take a same-named entry with it.
    tree = worktree.add(repo, commit, Path(tempfile.mkdtemp(prefix="workbench-preflight-")))
    try:
        _check_in(repo, commit, argv, tree / cwd, env, options)
    finally:
        worktree.remove(repo, tree)


def _check_in(repo: Path, commit: str | None, argv: tuple[str, ...], where: Path, env: dict[str, str],
              options: dict[str, object]) -> None:
    from workbench.rerun.backends import has_tpu, local_environment

    run_env = local_environment(env, options)
    run_env.pop("PYTHONPATH", None)
    if env.get("PYTHONPATH"):
        run_env["PYTHONPATH"] = env["PYTHONPATH"]
    path = run_env.get("PATH", os.defpath)
    name = program(argv)
    if not name or _which(name, path, where) is None:
        place = "in the commit's checkout" if "/" in name else "on the target environment's PATH"
        raise JobEnvironmentError(f"{name or 'the command'} is not {place}: {ENV_FIX}")
    needed = needed_modules(repo, commit)
    if not needed:
        return
    python = interpreter(argv, path, where)
    if python is None:
        raise JobEnvironmentError(f"no Python on the target environment's PATH: {ENV_FIX}")
    missing = _can_import(python, needed, run_env, where)
    if missing:
        raise JobEnvironmentError(missing_module_line(missing, python))
    if "torch_xla" in needed and env.get("PJRT_DEVICE", "").upper() == "TPU" and not has_tpu():
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
