"""Environments for `workbench explain`'s libraries factor: the target environment with the
reference's versions of the packages that differ, one per variant, cached (docs/explain.md).

An environment is a venv made by the target venv's interpreter (`python -m venv --without-pip`,
so it runs the same base Python) whose site-packages holds only the pinned distributions and a
`.pth` that adds the target venv's site-packages after them (`site.addsitedir`, so the target's
own `.pth` files work too): the pinned versions win, everything else is the target's. The target's
console scripts are copied with their `#!` line pointed at the new interpreter. pip
installs the pins from wheels only (`--no-deps --no-index --find-links DIR`): nothing is fetched.
Each lives under `<cache>/explain-envs/<hash of target, its Python and the pins>` and is reused.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

MARKER = "workbench-env.json"
"""Written last, when the environment is complete: its presence is the cache hit."""


def cache_root() -> Path:
    """`WORKBENCH_EXPLAIN_ENVS` if set, else `explain-envs` in the user cache (XDG_CACHE_HOME)."""
    env = os.environ.get("WORKBENCH_EXPLAIN_ENVS")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "workbench" / "explain-envs"


@dataclass(frozen=True, slots=True)
class Layered:
    """An environment made (or found) for a variant, or why there is none."""

    path: Path | None
    """The venv's folder (a job's `options["venv"]`); None when it could not be made."""
    cached: bool
    """Found complete in the cache: nothing was built."""
    seconds: float
    """Time spent here: building it, or finding it."""
    reason: str
    """Why there is none; empty when there is one."""


def _purelib(python: Path) -> tuple[str, str]:
    done = subprocess.run([str(python), "-c", "import sys, sysconfig; print(sysconfig.get_paths()['purelib']);"
                           "print('%d.%d' % sys.version_info[:2])"], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise OSError(f"{python} did not start: {done.stderr.strip()[-300:]}")
    purelib, version = done.stdout.split()
    return purelib, version


def _scripts(target: Path, into: Path, python: Path) -> None:
    """The target's console scripts (`torchrun`, ...), their `#!` line pointed at the layered
    interpreter (its final path), so a command run through one is varied too."""
    own = f"#!{target / 'bin' / 'python'}"
    for script in sorted((target / "bin").iterdir()):
        if (into / script.name).exists() or not script.is_file():
            continue
        try:
            with open(script, "rb") as fh:
                head = fh.readline(4096)
        except OSError:
            continue
        if not head.decode(errors="replace").startswith(own):
            continue
        body = script.read_bytes().split(b"\n", 1)
        (into / script.name).write_bytes(f"#!{python}\n".encode() + (body[1] if len(body) > 1 else b""))
        (into / script.name).chmod(0o755)


def _pip_install(python: Path, into: Path, pins: dict[str, str], find_links: list[str],
                 timeout: float) -> subprocess.CompletedProcess[str]:
    """pip (the target's, else the workbench's own) installing `pins` into the environment whose
    interpreter is `into` (`pip --python`), from wheels only."""
    import sys

    links = [a for d in find_links for a in ("--find-links", str(Path(d).resolve()))]
    args = ["-m", "pip", "--python", str(into), "install", "--no-deps", "--no-index", "--ignore-installed",
            "--no-input", "--disable-pip-version-check", "--no-warn-script-location", *links,
            *(f"{n}=={v}" for n, v in sorted(pins.items()))]
    done = subprocess.run([str(python), *args], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0 and "No module named pip" in done.stderr:
        done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout)
    return done


def env_key(target: Path, python_version: str, pins: dict[str, str]) -> str:
    text = json.dumps({"target": str(target), "python": python_version, "pins": sorted(pins.items())})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def layered(target: Path | str, pins: dict[str, str], find_links: list[str], *, root: Path | None = None,
            timeout: float = 600) -> Layered:
    """The target venv with `pins` (distribution -> version) installed over it, from wheels in
    `find_links`; made once, then found in the cache."""
    started = time.monotonic()

    def none(reason: str) -> Layered:
        return Layered(None, False, round(time.monotonic() - started, 2), reason)

    target = Path(target).resolve()
    python = target / "bin" / "python"
    if not python.is_file():
        return none(f"the target environment {target} has no bin/python")
    if not pins:
        return none("no package versions to change")
    try:
        purelib, version = _purelib(python)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return none(str(exc))
    where = (root or cache_root()) / env_key(target, version, pins)
    if (where / MARKER).is_file():
        return Layered(where, True, round(time.monotonic() - started, 2), "")
    wanted = ", ".join(f"{n} {v}" for n, v in sorted(pins.items()))
    if not find_links:
        return none(f"no wheels to install the reference's versions from ({wanted}): give --find-links DIR")
    where.parent.mkdir(parents=True, exist_ok=True)
    tmp = where.parent / f".{where.name}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        made = subprocess.run([str(python), "-m", "venv", "--without-pip", str(tmp)], capture_output=True,
                              text=True, timeout=timeout)
        if made.returncode != 0:
            return none(f"python -m venv failed: {made.stderr.strip()[-300:]}")
        site = tmp / "lib" / f"python{version}" / "site-packages"
        (site / "_workbench_layer.pth").write_text(f"import site; site.addsitedir({purelib!r})\n")
        _scripts(target, tmp / "bin", where / "bin" / "python")
        pip = _pip_install(python, tmp / "bin" / "python", pins, find_links, timeout)
        if pip.returncode != 0:
            said = [ln.strip() for ln in pip.stderr.splitlines() if ln.strip().startswith("ERROR")]
            return none(f"the reference's versions ({wanted}) could not be installed from "
                        f"{', '.join(find_links)}: {said[-1] if said else pip.stderr.strip()[-300:]}")
        check = subprocess.run([str(tmp / "bin" / "python"), "-c",
                                "import importlib.metadata as m, json, sys; "
                                "print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))", *sorted(pins)],
                               capture_output=True, text=True, timeout=timeout)
        seen = json.loads(check.stdout) if check.returncode == 0 else {}
        wrong = {n: seen.get(n) for n, v in pins.items() if seen.get(n) != v}
        if wrong:
            return none(f"after installing, the environment reports {wrong} instead of the reference's versions")
        seconds = round(time.monotonic() - started, 2)
        (tmp / MARKER).write_text(json.dumps({"target": str(target), "python": version, "pins": pins,
                                              "find_links": find_links, "build_seconds": seconds}, indent=1))
        try:
            tmp.rename(where)
        except OSError:  # another explain made it meanwhile: use that one
            if not (where / MARKER).is_file():
                raise
        return Layered(where, False, seconds, "")
    except subprocess.TimeoutExpired as exc:
        return none(f"building the environment took over {exc.timeout:g} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
