"""The ladder's rules are written once in Python (domain/ladder.py) and once in SQL for study-wide
counts (storage/queries.py): on seeded studies with overrides, superseded verdicts, missing levels
and corrected expectations, both give every attempt the same level and the same over-claim flag."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_launch_queries import build_study

from domain.ladder import effective_outcome, highest_level, over_claim
from storage import queries
from storage.queries import EFFECTIVE_VERDICTS, attempt_stats, level_of


@pytest.mark.parametrize("seed", range(4))
def test_sql_and_python_agree_on_level_and_over_claim(tmp_path: Path, seed: int) -> None:
    study = build_study(tmp_path / "s.db", seed)
    try:
        db = study.db
        stats = db.execute(f"WITH {EFFECTIVE_VERDICTS}, {attempt_stats()} "
                           "SELECT id, verified, level, over_claim FROM attempt_stat").fetchall()
        per_row = dict(db.execute(f"WITH {EFFECTIVE_VERDICTS} SELECT a.id, {level_of('a')} FROM attempt a"
                                  " WHERE a.source != 'reference'").fetchall())
        assert len(stats) > 10
        for attempt_id, verified, level, flag in stats:
            verdicts = queries.verdicts(db, attempt_id)
            outcomes = {v.level: effective_outcome(v.outcome.value, [o.outcome.value for o in v.overrides])
                        for v in verdicts}
            assert bool(verified) == bool(verdicts)
            assert level == highest_level(outcomes) == per_row[attempt_id], attempt_id
            expected = queries.effective_expected_level(db, attempt_id).level
            python = over_claim(expected, outcomes, verified=bool(verified))
            assert (None if flag is None else bool(flag)) == python, attempt_id
    finally:
        study.close()
