"""Errors a user can act on: the CLI prints them as one line and exits with status 2."""

from __future__ import annotations


class WorkbenchError(Exception):
    """A problem with the user's input or files, stated in one line."""


class SchemaTooNew(WorkbenchError):
    pass


class ReadOnlyStudy(WorkbenchError):
    """A write asked of a study this process cannot write (a read-only file, folder or mount)."""
