"""Each attempt's stored verdict code (schema m019, issue 39): kept by triggers on `verdict`, so it
matches its current verdicts whichever path wrote them, and filled in when an older study is
upgraded. The report reads its automated ladders from it."""

from __future__ import annotations

import shutil
from pathlib import Path

from domain.kinds import Outcome
from storage import records, schema
from storage.database import open_study
from storage.report import _OUTCOME_CODES
from workbench.report import build_report, render
from workbench.verify import verify_study

STORED = "SELECT id, verdict_code FROM attempt ORDER BY id"
COMPUTED = f"SELECT id, {schema.VERDICT_CODE.format(a='a.id')} FROM attempt a ORDER BY id"


def codes_agree(db) -> list[tuple[int, int | None]]:
    stored = db.execute(STORED).fetchall()
    assert stored == db.execute(COMPUTED).fetchall()
    return stored


def downgrade_to_m018(path: Path) -> None:
    """The study as the workbench before m019 left it: no column, no triggers, m019 not applied (nor
    m022, whose index holds the column: undone too)."""
    import sqlite3

    conn = sqlite3.connect(path)
    with conn:
        for name in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER verdict_code_{name}")
        conn.execute("DROP INDEX idx_attempt_report")
        for name in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER own_failure_silent_{name}")
        conn.execute("DROP INDEX idx_verification_report")
        conn.execute("ALTER TABLE attempt DROP COLUMN own_failure_silent")
        conn.execute("ALTER TABLE attempt DROP COLUMN verdict_code")
        conn.execute(f"DELETE FROM {schema.MIGRATIONS_TABLE}"
                     " WHERE name IN ('m019_attempt_verdict_code', 'm022_report_groups')")
    conn.close()


def test_the_sql_code_uses_the_outcomes_order_the_reader_decodes() -> None:
    assert _OUTCOME_CODES == {"pass": 1, "fail": 2, "unknown": 3}
    assert [o.value for o in Outcome] == ["pass", "fail", "unknown"]


def test_an_older_study_gets_its_codes_and_the_same_report(demo_source: Path, tmp_path: Path) -> None:
    path = tmp_path / "demo.db"
    shutil.copy(demo_source, path)
    with_column = open_study(path)
    before = {fmt: render(build_report(with_column.db), fmt) for fmt in ("md", "json")}
    verified = codes_agree(with_column.db)
    with_column.close()
    assert sum(code is not None for _, code in verified) >= 5  # the demo's verified attempts
    downgrade_to_m018(path)

    upgraded = open_study(path)  # backs up, then applies m019 and m022
    try:
        assert list(tmp_path.glob("demo.db.schema*.bak"))
        assert [m.name for m in schema.migrations.applied(upgraded.db)][-2:] == ["m019_attempt_verdict_code",
                                                                                  "m022_report_groups"]
        assert codes_agree(upgraded.db) == verified
        assert {fmt: render(build_report(upgraded.db), fmt) for fmt in before} == before
    finally:
        upgraded.close()


def test_a_re_verification_keeps_the_codes(demo_study) -> None:
    db = demo_study.db
    first = codes_agree(db)
    db.execute("UPDATE verdict SET outcome = 'fail' WHERE id = (SELECT MIN(id) FROM verdict"
               " WHERE outcome = 'pass' AND superseded_by IS NULL)")  # as a hand-edited study
    changed = codes_agree(db)
    assert changed != first
    verify_study(db, "ana", force=True)  # supersedes every verdict, writes new ones
    assert codes_agree(db) == first
    assert db.execute("SELECT COUNT(*) FROM verdict WHERE superseded_by IS NOT NULL").fetchone()[0] > 0


def test_each_write_of_a_verdict_keeps_its_attempts_code(demo_study) -> None:
    db = demo_study.db
    attempt, verification = db.execute(
        "SELECT attempt_id, id FROM verification WHERE superseded_by IS NULL ORDER BY id LIMIT 1").fetchone()
    other = db.execute("SELECT id FROM attempt WHERE id != ? AND verdict_code IS NULL ORDER BY id LIMIT 1",
                       [attempt]).fetchone()[0]
    level5 = db.execute("SELECT id, outcome FROM verdict WHERE attempt_id = ? AND level = 5 AND superseded_by IS NULL",
                        [attempt]).fetchone()
    with db.conn:
        if level5 is not None:  # free level 5, then store a known outcome there
            db.execute("DELETE FROM verdict WHERE id = ?", [level5[0]])
            codes_agree(db)
        db.execute("INSERT INTO verdict (attempt_id, level, outcome, reason, evidence, verifier, verifier_version,"
                   " verification_id) VALUES (?, 5, 'unknown', 'r', '[]', 'test', '1', ?)", [attempt, verification])
    code = dict(codes_agree(db))[attempt]
    assert (code >> 8) & 3 == 3  # level 5: unknown
    new = db.execute("SELECT id FROM verdict WHERE attempt_id = ? AND level = 5 AND superseded_by IS NULL",
                     [attempt]).fetchone()[0]
    db.execute("UPDATE verdict SET level = 6 WHERE id = ?", [new])  # outside 1 to 5: not in the code
    assert (dict(codes_agree(db))[attempt] >> 8) & 3 == 0
    db.execute("UPDATE verdict SET level = 5, attempt_id = ? WHERE id = ?", [other, new])  # moved: both change
    stored = dict(codes_agree(db))
    assert stored[other] == 3 << 8 and (stored[attempt] >> 8) & 3 == 0
    db.execute("UPDATE verdict SET superseded_by = id WHERE id = ?", [new])
    assert dict(codes_agree(db))[other] is None  # no current verdict left


def test_an_override_leaves_the_code_and_changes_the_report(demo_study) -> None:
    db = demo_study.db
    verdict_id, attempt, level = db.execute(
        "SELECT id, attempt_id, level FROM verdict WHERE outcome = 'fail' AND superseded_by IS NULL"
        " ORDER BY id LIMIT 1").fetchone()
    before = dict(codes_agree(db))[attempt]
    facts = {a.id: a for m in build_report(db).migrations for a in m.attempt_facts}
    assert facts[attempt].ladder[level - 1] == "fail"
    with db.conn:
        records.add_verdict_override(db, verdict_id=verdict_id, outcome=Outcome.PASS,
                                     justification="checked by hand", reviewer="bob")
    assert dict(codes_agree(db))[attempt] == before  # the verifier's outcomes: the code
    facts = {a.id: a for m in build_report(db).migrations for a in m.attempt_facts}
    assert facts[attempt].ladder[level - 1] == "pass"  # the report applies the override
