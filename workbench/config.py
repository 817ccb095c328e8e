"""Where things live and who is working: the package data, the default database and the reviewer's name."""

from __future__ import annotations

import os
from pathlib import Path

_ASSETS = {"ASSETS": (), "STYLESHEET": ("styles", "app.tcss"), "DEMO_BUNDLE": ("demo", "bundle")}
"""ASSETS: the package data, the repository's assets/ folder, installed as the workbench_assets
package wherever pip or pipx put it (setup.py maps it); STYLESHEET and DEMO_BUNDLE within it."""


def __getattr__(name: str) -> Path:
    """The package data's paths, found on first use: importlib.resources costs ~8 ms of every
    command's start-up. A checkout run from its folder without an install (PYTHONPATH) has no
    workbench_assets package: there the folder itself is the data."""
    if name not in _ASSETS:
        raise AttributeError(name)
    from importlib.resources import files

    try:
        root = Path(str(files("workbench_assets")))
    except ModuleNotFoundError:
        root = Path(__file__).resolve().parent.parent / "assets"
    return root.joinpath(*_ASSETS[name])


def data_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("workbench", appauthor=False))


def default_db() -> Path:
    """`WORKBENCH_DB` if set, else study.db in the user data dir."""
    env = os.environ.get("WORKBENCH_DB")
    return Path(env) if env else data_dir() / "study.db"


def demo_db() -> Path:
    return data_dir() / "demo.db"


def reviewer() -> str:
    """`WORKBENCH_REVIEWER` if set, else the login name."""
    name = os.environ.get("WORKBENCH_REVIEWER")
    if name:
        return name
    import getpass  # (and termios) only when the variable is not set

    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
