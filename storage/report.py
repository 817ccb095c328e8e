"""Reads for workbench/report that storage/queries.py does not already give (the chosen
migrations): the report holds no SQL of its own."""

from __future__ import annotations

from domain.models import Migration
from storage.converters import migration_from_row
from storage.sqlite import Database


def report_migrations(db: Database) -> list[Migration]:
    """Every migration of the study, by slug."""
    return [migration_from_row(r) for r in db.query("SELECT * FROM migration ORDER BY slug")]
