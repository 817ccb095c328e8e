"""A reviewer's override through a re-verification (schema m020): it goes on counting where the
verifier says what it said before (a copy on the new verdict, `carried_from` naming the original);
where the verifier's outcome changed it stays on the verdict it judged and `workbench verify` says
it no longer counts. Real verifications of the demo study, through the CLI."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from test_app import recorded_toasts, settle
from test_effort_app import until

from cli.main import main
from domain.kinds import Outcome
from screens.app import WorkbenchApp
from screens.presenters.effort import ledger_entry
from storage import queries, records, runs
from storage.database import open_study
from storage.ledger import ledger_counts, ledger_page
from workbench.report import render
from workbench.report.build import build_report

BOW = "bow-classifier"  # #1 fails level 3 (recompilation): a reviewer passes it


def verify(path, *args: str, reviewer: str = "ana"):
    result = CliRunner().invoke(main, ["verify", str(path), *args], env={"WORKBENCH_REVIEWER": reviewer})
    assert result.exit_code == 0, result.output
    return result


def level3(db, seq: int = 1):
    """Attempt #seq of bow-classifier's current level-3 verdict."""
    attempt = queries.attempt_id_by_seq(db, queries.get_migration(db, BOW).id, seq)
    return next(v for v in queries.verdicts(db, attempt) if v.level == 3)


def override_level3(study, outcome: Outcome, why: str) -> int:
    return records.add_verdict_override(study.db, verdict_id=level3(study.db).id, outcome=outcome, justification=why,
                                        reviewer="ana")


def test_an_override_counts_on_through_a_reverification(demo_study) -> None:
    original = override_level3(demo_study, Outcome.PASS, "the eval loop compiles by design")
    before = (runs.counted_totals(demo_study.db), level3(demo_study.db).effective)
    assert before[1] is Outcome.PASS
    demo_study.close()
    for _ in range(2):  # a copy of a copy names the reviewer's own override
        result = verify(demo_study.path, "--force")
        assert "no longer counts" not in result.stderr
    study = open_study(demo_study.path)
    try:
        db = study.db
        verdict = level3(db)
        assert verdict.outcome is Outcome.FAIL and verdict.effective is Outcome.PASS  # the verifier's, then ana's
        [copy] = verdict.overrides
        assert (copy.reviewer, copy.justification) == ("ana", "the eval loop compiles by design") and copy.id != original
        carried = db.execute("SELECT carried_from FROM verdict_override WHERE verdict_id IN"
                             " (SELECT id FROM verdict WHERE superseded_by IS NOT NULL AND level = 3)"
                             " OR verdict_id = ? ORDER BY id", [verdict.id]).fetchall()
        assert carried == [(None,), (original,), (original,)]
        assert (runs.counted_totals(db), verdict.effective) == before
        assert ledger_counts(db, None)["override"] == 1  # one act of ana's, however often carried
        [entry] = ledger_page(db, None)
        assert (entry.id, entry.detail["counts"]) == (original, 1)
        report = build_report(db)
        # ana's act, once, by its own id (as the ledger names it), judging the current verdict
        assert [(o.id, o.verdict_id, o.seq, o.level, o.outcome, o.effective) for o in report.overrides] == [
            (original, verdict.id, 1, 3, "pass", True)]
        later = records.add_verdict_override(db, verdict_id=verdict.id, outcome=Outcome.FAIL,
                                             justification="the eval loop is not the cause", reviewer="ben")
        assert {e.id: e.detail["counts"] for e in ledger_page(db, None)} == {original: 0, later: 1}
        assert [(o.id, o.outcome, o.effective) for o in build_report(db).overrides] == [
            (original, "pass", False), (later, "fail", True)]
    finally:
        study.close()


@pytest.mark.parametrize("reviewer", ["ana", "ben"])
def test_an_override_stops_counting_where_the_verifier_changed_and_verify_says_so(demo_study, reviewer) -> None:
    """ana is told; ben, who judges #1 blind, is not: the line would tell him its verdicts."""
    from storage.judgements import add_assignments

    override_level3(demo_study, Outcome.UNKNOWN, "cannot tell the eval compiles from the step's")
    attempt = level3(demo_study.db).attempt_id
    add_assignments(demo_study.db, [(attempt, "ben")], blind=True, seed=1, overlap=0.0, assigned_by="ana")
    since = records.now()
    demo_study.close()
    # a longer warm-up: the verifier passes level 3 now, where it failed it
    result = verify(demo_study.path, "--migration", BOW, "--set", "warmup_steps=1000", reviewer=reviewer)
    told = ("override of bow-classifier #1 L3 (unknown, by ana) no longer counts: the verifier now says pass where"
            " it said fail; override again if it stands") in result.stderr
    assert told is (reviewer == "ana")
    study = open_study(demo_study.path)
    try:
        verdict = level3(study.db)
        assert verdict.outcome is Outcome.PASS and verdict.overrides == () and verdict.effective is Outcome.PASS
        assert [(o["seq"], o["level"], o["was"], o["now"]) for o in queries.overrides_left_behind(study.db, since)] == [
            (1, 3, "fail", "pass")]
        assert ledger_counts(study.db, None)["override"] == 1  # still in the record of what ana did
        [entry] = ledger_page(study.db, None)
        assert entry.detail["counts"] == 0
        assert "(no longer counts)" in ledger_entry(entry).plain
        # and in the report: the verifier's outcome then, counted nowhere (the verifier's pass counts)
        report = build_report(study.db)
        assert [(o.id, o.seq, o.level, o.automated, o.outcome, o.effective) for o in report.overrides] == [
            (entry.id, 1, 3, "fail", "unknown", False)]
        bow = next(m for m in report.migrations if m.slug == BOW)
        assert next(a for a in bow.attempt_facts if a.seq == 1).ladder[2] == "pass"
        assert "| bow-classifier | 1 | 3 | fail | unknown | no |" in render(report, "md").decode()
    finally:
        study.close()


async def test_the_apps_verify_says_so_too(demo_study, monkeypatch) -> None:
    """`V` in the app: its toast names the override that stopped counting, as a warning."""
    monkeypatch.setenv("WORKBENCH_REVIEWER", "ana")
    override_level3(demo_study, Outcome.UNKNOWN, "cannot tell the eval compiles from the step's")
    records.add_verify_settings(demo_study.db, migration_id=queries.get_migration(demo_study.db, BOW).id,
                                settings={"warmup_steps": 1000}, source="reviewer", reviewer="ana")
    demo_study.close()
    app = WorkbenchApp(demo_study.path)
    toasts = recorded_toasts(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("V")
        await until(pilot, lambda: any(t.startswith("Verified") for t, _ in toasts), timeout=60)
    [(said, severity)] = [(t, s) for t, s in toasts if t.startswith("Verified")]
    assert severity == "warning"
    assert said.splitlines()[1:] == ["override of bow-classifier #1 L3 (unknown, by ana) no longer counts: the verifier"
                                     " now says pass where it said fail; override again if it stands"]
