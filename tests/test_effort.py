"""Human effort: the taxonomy, budgets and stopping rules, review sessions, and their records."""

from __future__ import annotations

import datetime
import json
import sqlite3
from pathlib import Path

import pytest
from conftest import BundleBuilder
from test_cli import fails_cleanly, workbench

from domain import effort
from domain.errors import WorkbenchError
from domain.models import Budgets, DecisionKind, Outcome
from storage import queries, records, schema
from storage.database import open_study
from workbench.bundle import import_bundle

T0 = datetime.datetime(2026, 11, 1, 10, 0, tzinfo=datetime.UTC)


def inputs(**overrides) -> effort.EffortInputs:
    base = dict(
        budgets=Budgets(compute_dollars=10.0, staff_hours=2.0, attempts=5, calendar_days=3.0),
        acceptance_level=4, staff_hourly_rate=90.0,
        runs=(effort.RunCost(1, "agent", 2.5), effort.RunCost(2, "agent", None)),
        agent_attempts=2, intervention_minutes=30.0, review_seconds=1800.0, highest_level=2,
        first_at="2026-11-01T10:00:00Z",
    )
    base.update(overrides)
    return effort.EffortInputs(**base)


# --------------------------------------------------------------------------- the domain


@pytest.mark.parametrize("text, minutes", [("15", 15.0), (" 7.5 ", 7.5), ("1:30", 90.0), (0, 0.0)])
def test_minutes_as_typed(text, minutes) -> None:
    assert effort.parse_minutes(text) == minutes


@pytest.mark.parametrize("text, problem", [
    ("", "enter how many"), ("-1", "negative"), ("1e9", "more than a day"), ("abc", "not a number"),
    ("nan", "not a number"), ("inf", "not a number"), ("1441", "more than a day"),
])
def test_bad_minutes_say_what_is_wrong(text, problem) -> None:
    with pytest.raises(ValueError, match=problem):
        effort.parse_minutes(text)


def test_taxonomy_built_in_then_the_studys_own_other_last() -> None:
    kinds = effort.intervention_kinds({"rebuild_image": "rebuilt the container", "hint": "dup"})
    names = list(kinds)
    assert names[:6] == ["approve_run", "fix_environment", "fix_code", "hint", "revert", "restart_session"]
    assert names[-2:] == ["rebuild_image", "other"]
    assert kinds["hint"] == effort.DEFAULT_KINDS["hint"]  # a study cannot redefine a built-in kind
    with pytest.raises(ValueError, match="not one of"):
        effort.check_kind("bogus", kinds)


def test_standing_continue_with_figures() -> None:
    s = effort.standing(inputs(), now=T0 + datetime.timedelta(days=1))
    assert s.suggestion is DecisionKind.CONTINUE
    assert s.compute_dollars == 2.5 and s.unpriced_runs == 1
    assert s.staff_minutes == 60.0 and s.staff_dollars == 90.0
    assert s.days == pytest.approx(1.0)
    figures = s.figures()
    assert figures["staff_hours"] == 1.0 and figures["budget_attempts"] == 5
    assert figures["highest_level"] == 2 and figures["acceptance_level"] == 4
    assert json.loads(json.dumps(figures)) == figures


@pytest.mark.parametrize("overrides, reason", [
    ({"runs": (effort.RunCost(1, "agent", 10.0),)}, "compute"),
    ({"intervention_minutes": 100.0}, "staff time"),
    ({"agent_attempts": 5}, "attempts"),
    ({"first_at": "2026-10-01T00:00:00Z"}, "calendar days"),
])
def test_a_used_up_budget_suggests_stop(overrides, reason) -> None:
    s = effort.standing(inputs(**overrides), now=T0)
    assert s.suggestion is DecisionKind.STOP
    assert any(r.startswith(reason) and "used up" in r for r in s.reasons)
    assert s.needs_reason(DecisionKind.CONTINUE) and not s.needs_reason(DecisionKind.STOP)


def test_reaching_the_acceptance_level_suggests_accept_even_over_budget() -> None:
    s = effort.standing(inputs(highest_level=4, agent_attempts=9), now=T0)
    assert s.suggestion is DecisionKind.ACCEPT
    level5 = effort.standing(inputs(highest_level=4, acceptance_level=5), now=T0)
    assert level5.suggestion is DecisionKind.CONTINUE


def test_no_budgets_means_never_stop_and_near_limits_are_flagged() -> None:
    s = effort.standing(inputs(budgets=Budgets(), agent_attempts=1000), now=T0)
    assert s.suggestion is DecisionKind.CONTINUE
    near = effort.standing(inputs(agent_attempts=4), now=T0)
    assert any("attempts 4 of 5: over 80%" in r for r in near.reasons)


def test_sessionizer_counts_only_time_with_input() -> None:
    s = effort.Sessionizer(idle_gap=120, segment=10_000)
    wall = T0
    out = []
    for t in (0, 30, 60, 90):  # 90 s of steady review
        out += s.touch(1, t, wall)
    out += s.tick(90 + 119)
    assert out == []
    out += s.tick(90 + 120)  # idle gap: closed at the last input
    assert [(p.migration_id, p.active_seconds) for p in out] == [(1, 90.0)]
    # a terminal left open overnight: one key, then nothing for hours
    assert s.touch(1, 50_000, wall) == [] and s.tick(50_000 + 8 * 3600) == []
    # another migration closes the first
    s.touch(1, 60_000, wall)
    s.touch(1, 60_050, wall)
    moved = s.touch(2, 60_060, wall)
    assert [(p.migration_id, p.active_seconds) for p in moved] == [(1, 50.0)]
    s.touch(2, 60_100, wall)
    assert [(p.migration_id, p.active_seconds) for p in s.close()] == [(2, 40.0)]


def test_sessionizer_stores_long_sessions_in_segments() -> None:
    s = effort.Sessionizer(idle_gap=120, segment=300)
    pieces = []
    for t in range(0, 1001, 50):
        pieces += s.touch(7, float(t))
    pieces += s.close()
    assert sum(p.active_seconds for p in pieces) == pytest.approx(1000 - 3 * 0)  # no time lost
    assert len(pieces) >= 3 and all(p.active_seconds <= 300 for p in pieces)


# --------------------------------------------------------------------------- storage


@pytest.fixture
def study(small_bundle: BundleBuilder, tmp_path: Path):
    small_bundle.study["staff_hourly_rate"] = 60.0
    small_bundle.write_study()
    with open(small_bundle.root / "study.toml", "a") as fh:
        fh.write('\n[interventions]\nkinds = ["rebuild_image"]\n'
                 '[interventions.describe]\nrebuild_image = "rebuilt the TPU VM image"\n')
    s = open_study(tmp_path / "s.db", create=True)
    assert import_bundle(s, small_bundle.root, "ana").problems == []
    yield s
    s.close()


def test_every_human_table_stays_append_only_after_all_migrations(study) -> None:
    db = study.db
    triggers = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    for table in (*schema.APPEND_ONLY, "budget_change"):
        assert {f"{table}_append_only_update", f"{table}_append_only_delete"} <= triggers, table


def test_study_kinds_come_from_study_toml(study) -> None:
    assert queries.study_intervention_kinds(study.db) == {"rebuild_image": "rebuilt the TPU VM image"}
    m = queries.get_migration(study.db, "mlp-xla")
    new = records.record_intervention(study.db, migration_id=m.id, kind="rebuild_image", minutes="20",
                                      note="", reviewer="ana")
    assert queries.interventions(study.db, m.id)[-1].id == new


def test_bad_study_kind_names_are_refused(bundle: BundleBuilder) -> None:
    from workbench.bundle import parse_study

    with open(bundle.root / "study.toml", "a") as fh:
        fh.write('\n[interventions]\nkinds = ["Bad Kind"]\n')
    with pytest.raises(WorkbenchError, match="kinds: 'Bad Kind'"):
        parse_study(bundle.root / "study.toml")


def test_interventions_per_attempt_and_corrections(study) -> None:
    db = study.db
    m = queries.get_migration(db, "mlp-xla")
    other = queries.get_migration(db, "cnn-xla")
    a1 = queries.attempt_id_by_seq(db, m.id, 1)
    first = records.record_intervention(db, migration_id=m.id, kind="fix_code", minutes=10, note="n",
                                        reviewer="ana", attempt_id=a1)
    records.record_intervention(db, migration_id=m.id, kind="hint", minutes=5, note="", reviewer="ana")
    fix = records.record_intervention(db, migration_id=m.id, kind="fix_code", minutes=25, note="longer",
                                      reviewer="ben", attempt_id=a1, corrects=first)
    assert [i.id for i in queries.attempt_interventions(db, a1)] == [first, fix]
    assert queries.corrected_ids(db, m.id) == {first: fix}
    assert queries.effort_inputs(db, m.id).intervention_minutes == 30.0
    audit_before = db["audit"].count
    for kwargs, problem in (
        (dict(kind="bogus"), "kind: 'bogus'"),
        (dict(minutes=-1), "negative"),
        (dict(minutes=5000), "more than a day"),
        (dict(corrects=first), f"already corrected by #{fix}"),
        (dict(corrects=99), "no intervention #99"),
        (dict(attempt_id=queries.attempt_id_by_seq(db, other.id, 0) or 10_000), "not an attempt"),
    ):
        args = dict(migration_id=m.id, kind="hint", minutes=1, note="", reviewer="ana") | kwargs
        with pytest.raises(ValueError, match=problem):
            records.record_intervention(db, **args)
    assert db["audit"].count == audit_before  # nothing half-written


def _verdicts(db, attempt_id: int, outcomes: list[str]) -> None:
    """Current verdicts as a verification would store them (only what the counts read)."""
    vid = db["verification"].insert({
        "attempt_id": attempt_id, "verifier": "t", "verifier_version": "1", "inputs_hash": "h",
        "at": "2026-11-01T10:00:00Z", "highest_level": 0, "cost_dollars": 1.5}).last_pk
    for level, outcome in enumerate(outcomes, 1):
        db["verdict"].insert({"attempt_id": attempt_id, "level": level, "outcome": outcome,
                              "verifier": "t", "verifier_version": "1", "verification_id": vid})


def test_standing_from_records_overrides_and_budget_edits(study) -> None:
    db = study.db
    m = queries.get_migration(db, "mlp-xla")
    a2 = queries.attempt_id_by_seq(db, m.id, 2)
    _verdicts(db, a2, ["pass", "pass", "pass", "fail", "fail"])
    s = queries.migration_standing(db, m.id)
    assert s.highest_level == 3 and s.suggestion is DecisionKind.CONTINUE
    assert s.attempts == 2  # agent attempts; the rerun costs compute but is not an agent attempt
    assert s.compute_dollars > 1.5  # the verified run's cost plus the others' estimates
    l4 = db.execute("SELECT id FROM verdict WHERE attempt_id = ? AND level = 4", [a2]).fetchone()[0]
    records.add_verdict_override(db, verdict_id=l4, outcome=Outcome.PASS, justification="eval ok",
                                 reviewer="ana")
    assert queries.migration_standing(db, m.id).suggestion is DecisionKind.ACCEPT
    records.add_budget_change(db, migration_id=m.id, compute_dollars=0.01, staff_hours=None, attempts=None,
                              calendar_days=None, acceptance_level=5, reason="want L5", reviewer="ana")
    s = queries.migration_standing(db, m.id)
    assert s.acceptance_level == 5 and s.suggestion is DecisionKind.STOP
    assert queries.effective_budgets(db, m)[0] == Budgets(compute_dollars=0.01)
    with pytest.raises(ValueError, match="acceptance level"):
        records.add_budget_change(db, migration_id=m.id, compute_dollars=None, staff_hours=None,
                                  attempts=None, calendar_days=None, acceptance_level=6, reason="",
                                  reviewer="ana")
    records.add_review_session(db, reviewer="ana", migration_id=m.id, started_at="2026-11-01T10:00:00Z",
                               ended_at="2026-11-01T10:30:00Z", active_seconds=1800)
    s = queries.migration_standing(db, m.id)
    assert s.staff_minutes == 30.0 and s.staff_dollars == 30.0
    assert queries.review_seconds_by_reviewer(db, m.id) == {"ana": 1800.0}


def test_decisions_keep_figures_and_set_the_status(study) -> None:
    db = study.db
    m = queries.get_migration(db, "mlp-xla")
    with pytest.raises(ValueError, match="the rules suggest continue; say why you stop"):
        records.record_decision(db, migration_id=m.id, kind=DecisionKind.STOP, reason="  ", reviewer="ana")
    assert queries.decisions(db, m.id) == []
    d = records.record_decision(db, migration_id=m.id, kind=DecisionKind.STOP, reason="agent is stuck",
                                reviewer="ana")
    made = queries.decisions(db, m.id)[-1]
    assert made.id == d and made.suggested is DecisionKind.CONTINUE and made.figures["attempts"] == 2
    assert made.attempt_id == queries.attempt_id_by_seq(db, m.id, 3)
    assert queries.get_migration(db, "mlp-xla").status.value == "stopped"
    records.record_decision(db, migration_id=m.id, kind=DecisionKind.CONTINUE, reason="", reviewer="ben")
    assert queries.get_migration(db, "mlp-xla").status.value == "in_progress"
    with pytest.raises(ValueError, match="suggestion changed"):
        records.record_decision(db, migration_id=m.id, kind=DecisionKind.CONTINUE, reason="",
                                reviewer="ben", expected=DecisionKind.ACCEPT)
    audit = [(a["entity"], a["action"]) for a in db.query("SELECT * FROM audit WHERE entity IN"
                                                          " ('decision', 'migration') ORDER BY id")]
    assert audit[-4:] == [("decision", "insert"), ("migration", "update")] * 2
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        db.execute("UPDATE decision SET reason = 'x'")


def test_a_reimport_keeps_decided_status_and_budget_edits(study, small_bundle: BundleBuilder) -> None:
    db = study.db
    m = queries.get_migration(db, "mlp-xla")
    records.record_decision(db, migration_id=m.id, kind=DecisionKind.STOP, reason="enough", reviewer="ana")
    records.add_budget_change(db, migration_id=m.id, compute_dollars=99.0, staff_hours=1.0, attempts=3,
                              calendar_days=None, acceptance_level=4, reason="", reviewer="ana")
    import_bundle(study, small_bundle.root, "ana")
    m = queries.get_migration(db, "mlp-xla")
    assert m.status.value == "stopped"
    assert queries.effective_budgets(db, m) == (Budgets(99.0, 1.0, 3, None), 4)


# --------------------------------------------------------------------------- the CLI


@pytest.fixture
def study_db(study) -> Path:
    path = study.path
    study.close()
    return path


def test_cli_intervene_and_decide(study_db: Path) -> None:
    db = str(study_db)
    ok = workbench("intervene", db, "mlp-xla", "--kind", "hint", "--minutes", "12", "--note", "use SPMD",
                   "--attempt", "1")
    assert ok.returncode == 0 and ok.stdout.strip() == "intervention 1 recorded", ok.stderr
    fixed = workbench("intervene", db, "mlp-xla", "--kind", "hint", "--minutes", "15", "--corrects", "1")
    assert fixed.returncode == 0, fixed.stderr
    fails_cleanly(workbench("intervene", db, "mlp-xla", "--kind", "nope", "--minutes", "1"), "--kind", "nope")
    fails_cleanly(workbench("intervene", db, "mlp-xla", "--kind", "hint", "--minutes", "-5"), "--minutes")
    fails_cleanly(workbench("intervene", db, "mlp-xla", "--kind", "hint", "--minutes", "9999"), "more than a day")
    fails_cleanly(workbench("intervene", db, "mlp-xla", "--kind", "hint", "--minutes", "1", "--attempt", "42"),
                  "--attempt")
    fails_cleanly(workbench("intervene", db, "nope", "--kind", "hint", "--minutes", "1"), "no migration")
    fails_cleanly(workbench("decide", db, "mlp-xla", "stop"), "--reason", "suggest continue")
    done = workbench("decide", db, "mlp-xla", "stop", "--reason", "out of ideas")
    assert done.returncode == 0 and "decision 1: stop, attempt #" in done.stdout
    assert "(the latest) (the rules suggested continue)" in done.stdout
    assert "attempts=2" in done.stdout
    s = open_study(study_db)
    try:
        rows = list(s.db.query("SELECT reviewer, kind, minutes, corrects FROM intervention ORDER BY id"))
        assert rows == [{"reviewer": "ana", "kind": "hint", "minutes": 12.0, "corrects": None},
                        {"reviewer": "ana", "kind": "hint", "minutes": 15.0, "corrects": 1}]
        assert queries.get_migration(s.db, "mlp-xla").status.value == "stopped"
    finally:
        s.close()


def test_cli_help_for_the_effort_commands() -> None:
    for args in (["intervene"], ["decide"]):
        result = workbench(*args, "--help")
        assert result.returncode == 0 and "Usage:" in result.stdout


def test_cli_notes_hold_what_the_apps_box_holds(study_db: Path) -> None:
    """A note, reason or justification given on the command line is capped at the app's NOTE_MAX,
    with the box's words; refused whole (nothing recorded) rather than cut."""
    from domain.text import NOTE_MAX

    db = str(study_db)
    long = "n" * (NOTE_MAX + 5)
    fails_cleanly(workbench("intervene", db, "mlp-xla", "--kind", "hint", "--minutes", "1", "--note", long),
                  "--note holds at most 10,000 characters: 5 characters too many; nothing was recorded")
    fails_cleanly(workbench("decide", db, "mlp-xla", "stop", "--reason", long), "--reason holds at most 10,000")
    fails_cleanly(workbench("override", db, "mlp-xla", "1", "--level", "2", "--outcome", "pass",
                            "--justification", long), "--justification holds at most 10,000")
    fails_cleanly(workbench("judge", db, "mlp-xla", "1", "--levels", "pass,pass,pass,pass,pass", "--note", long),
                  "--note holds at most")
    study = open_study(study_db)
    try:
        m = queries.get_migration(study.db, "mlp-xla")
        assert queries.interventions(study.db, m.id) == [] and queries.decisions(study.db, m.id) == []
    finally:
        study.close()
    fits = workbench("intervene", db, "mlp-xla", "--kind", "hint", "--minutes", "1", "--note", "n" * NOTE_MAX)
    assert fits.returncode == 0, fits.stderr
