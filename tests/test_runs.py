"""A re-run is another run of the attempt it re-ran (issue 38): one counted row per agent
attempt, the same counts in the app's header, `workbench verify` and the report, a re-run of a
re-run attached to the original, hidden while its attempt is, listed on the attempt's screen.

Re-runs are made as the runner makes them: a job stored with `storage.jobs.insert_job`, its
output written to the job's log, stored and verified by `workbench.rerun.finish.store_result`.
Their output is another demo attempt's log, so the verifier judges real evidence."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_app import screen_text, settle, table

from cli.main import main
from domain.jobs import JobSpec
from domain.kinds import Outcome
from domain.ladder import counted_outcome, highest_level
from screens.app import WorkbenchApp
from screens.attempt import AttemptScreen, RunsTable
from storage import queries, review, runs, schema
from storage.jobs import insert_job
from storage.logs import log_chunks
from workbench.blind import runs_seen_by
from workbench.report.build import build_report
from workbench.rerun.finish import store_result

MLP = "mlp-classifier"


def attempt_id(db, slug: str, seq: int) -> int:
    migration = queries.get_migration(db, slug)
    found = queries.attempt_id_by_seq(db, migration.id, seq)
    assert found is not None
    return found


def rerun(db, tmp_path: Path, of: int, output_of: int) -> int:
    """A finished re-run of attempt `of` whose output is attempt `output_of`'s log; its attempt id."""
    row = db.execute("SELECT migration_id, log_id FROM attempt WHERE id = ?", [output_of]).fetchone()
    spec = JobSpec(migration_id=row[0], attempt_id=of, backend="local", argv=("python", "train.py"))
    job = insert_job(db, spec, "ana", lambda job_id: tmp_path / f"job-{job_id}")
    job.dir.mkdir(parents=True, exist_ok=True)
    job.log_path.write_bytes(b"".join(log_chunks(db, row[1])))
    exit_code = db.execute("SELECT exit_code FROM attempt WHERE id = ?", [output_of]).fetchone()[0]
    new_id, _ = store_result(db, job, exit_code=exit_code, timed_out=False, started_at="2026-12-01T10:00:00Z",
                             ended_at="2026-12-01T10:05:00Z", reviewer="ana")
    return new_id


def header_counts(db) -> dict[str, int]:
    totals = queries.study_totals(db)
    return {k: totals[k] for k in ("attempts", "failed", "silent", "over_claims")}


def verify_counts(path: Path) -> dict[str, int]:
    """What `workbench verify` says it counted (its `counted:` line on stderr)."""
    result = CliRunner().invoke(main, ["verify", str(path)])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stderr.splitlines() if line.startswith("counted:"))
    found = re.search(r"(\d+) attempts? .* (\d+) verified, (\d+) failed \((\d+) silent\), (\d+) over-claim", line)
    assert found, line
    attempts, _, failed, silent, over = map(int, found.groups())
    return {"attempts": attempts, "failed": failed, "silent": silent, "over_claims": over}


def report_counts(db) -> dict[str, int]:
    t = build_report(db).totals
    return {"attempts": t.attempts.n, "failed": t.failed.part.n, "silent": t.silent.part.n,
            "over_claims": t.over_claims.part.n}


def migration_counts(db) -> dict[str, int]:
    rows = list(queries.iter_migration_summaries(db))
    return {"attempts": sum(r.attempts for r in rows), "failed": sum(r.failed for r in rows),
            "silent": sum(r.silent_failures for r in rows), "over_claims": sum(r.over_claims for r in rows)}


def counted_ladder(db, of: int) -> tuple[str | None, ...]:
    """The attempt's counted ladder as the domain rule gives it from its runs and their overrides."""
    rows = db.execute(
        "SELECT a.seq, v.level, COALESCE(o.outcome, v.outcome), o.id FROM attempt a"
        " JOIN verdict v ON v.attempt_id = a.id AND v.superseded_by IS NULL"
        " LEFT JOIN verdict_override o ON o.id = (SELECT MAX(x.id) FROM verdict_override x WHERE x.verdict_id = v.id)"
        " WHERE a.id = ? OR a.rerun_of = ?", [of, of]).fetchall()
    return tuple(counted_outcome([(seq, outcome, oid) for seq, lvl, outcome, oid in rows if lvl == level])
                 for level in range(1, 6))


def test_a_rerun_replaces_its_attempts_verdict_and_every_count_agrees(demo_study) -> None:
    db = demo_study.db
    before = header_counts(db)
    crashed, good = attempt_id(db, MLP, 1), attempt_id(db, MLP, 4)  # #1 crashed (L1 fails); #4 reached L4
    assert before == report_counts(db) == migration_counts(db) == verify_counts(demo_study.path)
    new = rerun(db, demo_study.path.parent, crashed, output_of=good)
    assert db.execute("SELECT source, rerun_of FROM attempt WHERE id = ?", [new]).fetchone() == ("rerun", crashed)
    own = {r.id: r for r in runs.attempt_runs(db, crashed)}
    assert list(own) == [crashed, new] and own[new].ladder[0] is Outcome.PASS

    after = header_counts(db)
    assert after["attempts"] == before["attempts"]  # a run of #1, not a seventh attempt
    assert after == report_counts(db) == migration_counts(db) == verify_counts(demo_study.path)
    ladder = counted_ladder(db, crashed)
    assert ladder[0] == "pass"  # the latest run passed level 1: the crash no longer counts
    counted = runs.counted_ladders(db, [queries.get_migration(db, MLP).id])[crashed]
    assert counted["effective"] == ladder and counted["runs"] == 2
    facts = {a.id: a for m in build_report(db).migrations for a in m.attempt_facts}
    assert facts[crashed].level == highest_level(dict(zip(range(1, 6), ladder)))
    assert review.ladder_counts(db).attempts == after["attempts"]

    # the migration lists #1 once, with its counted ladder, marked with its runs
    rows = list(queries.iter_attempt_summaries(db, queries.get_migration(db, MLP).id))
    assert new not in {r.attempt.id for r in rows}
    first = next(r for r in rows if r.attempt.id == crashed)
    assert first.runs == 2 and tuple(o and o.value for o in first.ladder) == ladder
    # its failure is the one of the run that decided its lowest failing level, as counted: here level 3,
    # which the re-run left unknown, so the crashed run's fail (and its cause) still stands
    lowest = next(n for n, o in enumerate(ladder, start=1) if o == "fail")
    decider = dict(counted["decided"]).get(lowest, crashed)
    assert (lowest, decider) == (3, crashed) and own[new].ladder[2] is Outcome.UNKNOWN
    assert first.failure is not None and first.failure.attempt_id == decider


def test_an_override_counts_the_same_everywhere(demo_study) -> None:
    from storage import records

    db = demo_study.db
    crashed, good = attempt_id(db, MLP, 1), attempt_id(db, MLP, 4)
    new = rerun(db, demo_study.path.parent, crashed, output_of=good)
    # a reviewer fails level 1 of the re-run's attempt on its original run: the override wins
    verdict = db.execute("SELECT id FROM verdict WHERE attempt_id = ? AND level = 1 AND superseded_by IS NULL",
                         [crashed]).fetchone()[0]
    records.add_verdict_override(db, verdict_id=verdict, outcome=Outcome.FAIL, justification="the crash stands",
                                 reviewer="ana")
    assert counted_ladder(db, crashed)[0] == "fail"
    assert header_counts(db) == report_counts(db) == migration_counts(db) == verify_counts(demo_study.path)
    # an override on the re-run, later, wins over the older one
    verdict = db.execute("SELECT id FROM verdict WHERE attempt_id = ? AND level = 1 AND superseded_by IS NULL",
                         [new]).fetchone()[0]
    records.add_verdict_override(db, verdict_id=verdict, outcome=Outcome.PASS, justification="ran fine here",
                                 reviewer="ana")
    assert counted_ladder(db, crashed)[0] == "pass"
    assert header_counts(db) == report_counts(db) == migration_counts(db) == verify_counts(demo_study.path)


def test_a_rerun_of_a_rerun_is_a_run_of_the_original(demo_study) -> None:
    db = demo_study.db
    crashed, good = attempt_id(db, MLP, 1), attempt_id(db, MLP, 4)
    first = rerun(db, demo_study.path.parent, crashed, output_of=good)
    second = rerun(db, demo_study.path.parent, first, output_of=crashed)  # re-ran the re-run: it crashed again
    assert db.execute("SELECT rerun_of FROM attempt WHERE id = ?", [second]).fetchone()[0] == crashed
    assert [r.id for r in runs.attempt_runs(db, second)] == [crashed, first, second]
    assert counted_ladder(db, crashed)[0] == "fail"  # the latest run failed level 1 again
    row = next(r for r in queries.iter_attempt_summaries(db, queries.get_migration(db, MLP).id)
               if r.attempt.id == crashed)
    assert row.runs == 3 and row.failure is not None and row.failure.attempt_id == second  # its failure shows
    assert header_counts(db) == report_counts(db) == migration_counts(db) == verify_counts(demo_study.path)


def test_verify_lists_a_rerun_under_its_attempt(demo_study) -> None:
    import json

    db = demo_study.db
    new = rerun(db, demo_study.path.parent, attempt_id(db, MLP, 1), output_of=attempt_id(db, MLP, 4))
    new_seq = db.execute("SELECT seq FROM attempt WHERE id = ?", [new]).fetchone()[0]
    result = CliRunner().invoke(main, ["verify", str(demo_study.path), "--migration", MLP])
    assert result.exit_code == 0, result.output
    rows = [line.split()[1:4] for line in result.stdout.splitlines()[1:] if line.startswith(MLP)]
    assert rows == [["1", "✗?✗??", "0"], [str(new_seq), "(re-run", "of"], ["2", "✓✓✗✓✗", "2"],
                    ["3", "✓✗✓✗✗", "1"], ["4", "✓✓✓✓✗", "4"]]
    assert f"{new_seq} (re-run of #1)" in result.stdout
    assert "of 5 runs: 4 attempts, 1 re-run" in result.stderr and "counted: 4 attempts" in result.stderr
    listed = json.loads(CliRunner().invoke(main, ["verify", str(demo_study.path), "--migration", MLP,
                                                  "--json"]).stdout)
    assert [(r["seq"], r["rerun_of"]) for r in listed] == [(1, None), (new_seq, 1), (2, None), (3, None), (4, None)]


def test_m018_flattens_a_stored_chain(demo_study) -> None:
    db = demo_study.db
    crashed, good = attempt_id(db, MLP, 1), attempt_id(db, MLP, 4)
    first = rerun(db, demo_study.path.parent, crashed, output_of=good)
    second = rerun(db, demo_study.path.parent, crashed, output_of=good)
    db.execute("UPDATE attempt SET rerun_of = ? WHERE id = ?", [first, second])  # as a study before m018 kept it
    db.conn.commit()
    assert runs.root_of(db, second) == crashed  # reads follow an old chain
    schema.m018_runs_of_an_attempt(db)
    assert db.execute("SELECT rerun_of FROM attempt WHERE id = ?", [second]).fetchone()[0] == crashed
    assert "idx_attempt_rerun_of" in {i.name for i in db.table("attempt").indexes}


def test_a_rerun_is_hidden_while_its_attempt_is(demo_study) -> None:
    from storage.judgements import add_assignments, add_judgement

    db = demo_study.db
    crashed, good = attempt_id(db, MLP, 1), attempt_id(db, MLP, 4)
    new = rerun(db, demo_study.path.parent, crashed, output_of=good)
    add_assignments(db, [(crashed, "ben")], blind=True, seed=1, overlap=0.0, assigned_by="ana")
    assert queries.hidden_attempts(db, "ben", [crashed, new]) == {crashed, new}
    assert queries.hidden_attempts(db, "ana", [crashed, new]) == set()
    seen = {r.id: r for r in runs_seen_by(db, "ben", crashed)}
    assert seen[new].hidden and seen[new].ladder == (None,) * 5
    add_judgement(db, attempt_id=crashed, reviewer="ben", levels=[Outcome.FAIL] + [Outcome.UNKNOWN] * 4,
                  cause=None, note="", blind=True, active_seconds=10.0)
    assert queries.hidden_attempts(db, "ben", [crashed, new]) == set()
    # in a blind study a re-run shows once its attempt is judged: the attempt's counted verdicts are its
    from storage.judgements import set_study_blind

    set_study_blind(db, True, "ana")
    assert queries.hidden_attempts(db, "ben", [crashed, new]) == set()
    assert queries.hidden_attempts(db, "cy", [crashed, new]) == {crashed, new}


async def test_the_attempt_screen_lists_its_runs_and_opens_one(demo_study) -> None:
    db = demo_study.db
    crashed, good = attempt_id(db, MLP, 1), attempt_id(db, MLP, 4)
    new = rerun(db, demo_study.path.parent, crashed, output_of=good)
    new_seq = db.execute("SELECT seq FROM attempt WHERE id = ?", [new]).fetchone()[0]
    demo_study.close()
    app = WorkbenchApp(demo_study.path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("j", "enter")  # mlp-classifier
        await settle(pilot)
        rows = table(app)
        assert rows.row_count == 5  # the reference and four agent attempts: no row for the re-run
        assert "2 runs" in screen_text(app)
        await pilot.press("j", "enter")  # #1 (the reference run is the first row)
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, AttemptScreen) and screen.summary.attempt.id == crashed
        await pilot.press("R")
        await settle(pilot)
        runs_table = screen.query_one(RunsTable)
        assert screen.focused is runs_table and runs_table.row_count == 2
        assert "Runs of this attempt" in screen_text(app)
        await pilot.press("j", "enter")
        await settle(pilot)
        shown = app.screen
        assert isinstance(shown, AttemptScreen) and shown.summary.attempt.id == new
        assert f"#{new_seq} re-run of #1 · " in screen_text(app)  # its heading names the attempt it re-ran
        assert shown.anchor == crashed  # not a row of the list: it stands where its attempt does
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert app.screen is shown and shown.summary.attempt.seq == 2  # ] steps on from #1


async def test_the_runs_show_under_the_overview_on_a_short_terminal(demo_study) -> None:
    """At 80x24 the overview fills the pane: the runs table scrolls with it, a row per run, where it
    was left one line high (its header) under the overview's text."""
    db = demo_study.db
    crashed, good = attempt_id(db, MLP, 1), attempt_id(db, MLP, 4)
    rerun(db, demo_study.path.parent, crashed, output_of=good)
    demo_study.close()
    app = WorkbenchApp(demo_study.path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("j", "enter", "j", "enter")  # mlp-classifier, #1
        await settle(pilot)
        await pilot.press("R")  # focuses the runs: the overview scrolls to them
        await settle(pilot)
        runs_table = app.screen.query_one(RunsTable)
        assert runs_table.row_count == 2 and runs_table.size.height == 3  # its header and both runs
        assert re.search(r"re-run +ok", screen_text(app)) and re.search(r"\n +1 +agent ", screen_text(app))


def verdict_pane_text(screen: AttemptScreen) -> str:
    """Every option of the verdicts pane as plain text, however far it scrolls."""
    from screens.widgets.verdict_list import VerdictList

    pane = screen.query_one(VerdictList)
    return "\n".join(verdict_pane_text_of(pane.get_option_at_index(n) for n in range(pane.option_count)))


async def test_the_verdicts_pane_says_which_rerun_decided_a_level(demo_study, monkeypatch) -> None:
    from storage.judgements import add_assignments
    from workbench.blind import attempt_seen_by

    db = demo_study.db
    third, good = attempt_id(db, MLP, 3), attempt_id(db, MLP, 4)  # #3 fails levels 2 and 4, #4 passes them
    new = rerun(db, demo_study.path.parent, third, output_of=good)
    new_seq = db.execute("SELECT seq FROM attempt WHERE id = ?", [new]).fetchone()[0]
    assert runs.decided_by_other_runs(db, third) == (None, ((2, Outcome.PASS, new_seq), (4, Outcome.PASS, new_seq)))
    # the re-run's pane: level 3, which it leaves unknown, counts #3's own pass
    assert [v.effective for v in queries.verdicts(db, new) if v.level == 3] == [Outcome.UNKNOWN]
    assert runs.decided_by_other_runs(db, new) == (3, ((3, Outcome.PASS, 3),))
    # blind: nothing of it shows while the attempt's verdicts are hidden
    add_assignments(db, [(third, "ben")], blind=True, seed=1, overlap=0.0, assigned_by="ana")
    assert attempt_seen_by(db, "ben", third).decided == ()
    assert len(attempt_seen_by(db, "ana", third).decided) == 2
    demo_study.close()
    monkeypatch.setenv("WORKBENCH_REVIEWER", "ana")
    app = WorkbenchApp(demo_study.path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("j", "enter")  # mlp-classifier
        await settle(pilot)
        await pilot.press("j", "j", "j", "enter")  # #3 (the reference run is the first row)
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, AttemptScreen) and screen.summary.attempt.id == third
        await pilot.press("4")
        await settle(pilot)
        shown = verdict_pane_text(screen)
        assert shown.count("counted:") == 2 and shown.count(f"counted: ✓ pass — re-run #{new_seq}") == 2
        level_2 = shown[shown.index("L2 "):shown.index("L3 ")]
        assert "✗ fail" in level_2 and "counted: ✓ pass" in level_2  # its own fail, and what counts
        # as its row and header count it: levels 1 to 4 pass
        assert [o and o.value for o in screen.summary.ladder][:4] == ["pass"] * 4
        assert "counted:" in screen_text(app)


def test_a_reruns_pane_says_what_its_attempt_counts_where_another_run_decided(demo_study) -> None:
    """A re-run's own verdicts need not be what counts: a later re-run, an earlier run where it
    judged nothing, or an override on another run decides. Its pane says so, naming the attempt and
    the run, as the attempt's pane does."""
    from screens.presenters.verdicts import verdict_options
    from storage import records

    db = demo_study.db
    third, good = attempt_id(db, MLP, 3), attempt_id(db, MLP, 4)  # #3 fails levels 2 and 4, #4 passes them
    first = rerun(db, demo_study.path.parent, third, output_of=good)
    second = rerun(db, demo_study.path.parent, third, output_of=third)  # the latest: fails them again
    second_seq = db.execute("SELECT seq FROM attempt WHERE id = ?", [second]).fetchone()[0]
    # level 3: the re-runs leave it unknown, so #3's own pass counts
    assert [v.effective for v in queries.verdicts(db, second) if v.level == 3] == [Outcome.UNKNOWN]
    fail, own_pass = Outcome.FAIL, (3, Outcome.PASS, 3)
    assert runs.decided_by_other_runs(db, first) == (3, ((2, fail, second_seq), own_pass, (4, fail, second_seq)))
    assert runs.decided_by_other_runs(db, second) == (3, (own_pass,))
    assert runs.decided_by_other_runs(db, third) == (None, ())  # it fails 2 and 4 itself, as is counted
    assert runs.decided_by_other_runs(db, attempt_id(db, MLP, 0)) == (None, ())  # the reference run
    # an override on the attempt's own run wins over both re-runs
    verdict = db.execute("SELECT id FROM verdict WHERE attempt_id = ? AND level = 2 AND superseded_by IS NULL",
                         [third]).fetchone()[0]
    records.add_verdict_override(db, verdict_id=verdict, outcome=Outcome.PASS, justification="tolerance too tight",
                                 reviewer="ana")
    counted_for, decided = runs.decided_by_other_runs(db, second)
    assert (counted_for, decided) == (3, ((2, Outcome.PASS, 3), own_pass))
    shown = verdict_pane_text_of(verdict_options(queries.verdicts(db, second), decided, counted_for))
    assert [line for line in shown if "counted" in line] == ["  counted for #3: ✓ pass — run #3"] * 2
    counted_for, decided = runs.decided_by_other_runs(db, first)
    shown = verdict_pane_text_of(verdict_options(queries.verdicts(db, first), decided, counted_for))
    assert [line for line in shown if "counted" in line] == [  # level 2 it passes itself, as now counted
        "  counted for #3: ✓ pass — run #3", f"  counted for #3: ✗ fail — re-run #{second_seq}"]


async def test_a_blind_reviewer_sees_no_counted_line_on_the_attempt_or_its_rerun(demo_study, monkeypatch) -> None:
    """ben judges #3 blind: neither its pane nor its re-run's says what a re-run decided."""
    from storage.judgements import add_assignments

    db = demo_study.db
    third, good = attempt_id(db, MLP, 3), attempt_id(db, MLP, 4)
    new = rerun(db, demo_study.path.parent, third, output_of=good)
    rerun(db, demo_study.path.parent, third, output_of=third)  # so the first re-run's pane would have lines
    add_assignments(db, [(third, "ben")], blind=True, seed=1, overlap=0.0, assigned_by="ana")
    demo_study.close()
    monkeypatch.setenv("WORKBENCH_REVIEWER", "ben")
    app = WorkbenchApp(demo_study.path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        for run in (third, new):
            app.open_attempt(MLP, run)  # what the palette's "Open attempt" does
            await settle(pilot)
            screen = app.screen
            assert isinstance(screen, AttemptScreen) and screen.summary.attempt.id == run and screen.summary.hidden
            await pilot.press("4")
            await settle(pilot)
            shown = verdict_pane_text(screen) + screen_text(app)
            assert "counted" not in shown and "✓" not in shown and "✗" not in shown, shown


def test_a_level_only_a_rerun_judged_shows_on_its_attempts_pane() -> None:
    from screens.presenters.verdicts import verdict_options

    [option] = verdict_options([], ((3, Outcome.FAIL, 7),))
    assert option.id == "counted:3"  # no verdict of this run to override or jump into
    assert verdict_pane_text_of([option]) == ["L3 intended hardware no verdict on this run",
                                            "  counted: ✗ fail — re-run #7"]


def verdict_pane_text_of(options) -> list[str]:
    import io

    from rich.console import Console

    console = Console(width=200, record=True, file=io.StringIO())
    for option in options:
        console.print(option.prompt)
    return [line.rstrip() for line in console.export_text().splitlines()]


async def test_the_palette_opens_a_rerun_though_it_is_not_a_row(demo_study) -> None:
    db = demo_study.db
    crashed, good = attempt_id(db, MLP, 1), attempt_id(db, MLP, 4)
    new = rerun(db, demo_study.path.parent, crashed, output_of=good)
    demo_study.close()
    app = WorkbenchApp(demo_study.path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.open_attempt(MLP, new)  # what the palette's "Open attempt" does
        await settle(pilot)
        assert isinstance(app.screen, AttemptScreen) and app.screen.summary.attempt.id == new
        assert "not in this migration" not in screen_text(app)


def test_a_list_filter_matching_a_rerun_finds_its_attempt(demo_study) -> None:
    from storage.review import filtered_attempts, parse_filter

    db = demo_study.db
    crashed, good = attempt_id(db, MLP, 1), attempt_id(db, MLP, 4)
    rerun(db, demo_study.path.parent, crashed, output_of=good)
    mid = queries.get_migration(db, MLP).id
    found = filtered_attempts(db, mid, parse_filter("source:rerun"), after=None, limit=50)
    assert [(s.attempt.id, s.runs) for s in found] == [(crashed, 2)]


def filtered_seqs(db, raw: str, blind_to: str | None = None) -> list[int]:
    mid = queries.get_migration(db, MLP).id
    return [s.attempt.seq for s in review.filtered_attempts(db, mid, review.parse_filter(raw), after=None,
                                                           limit=50, blind_to=blind_to)]


def assert_filters_agree_with_rows(db) -> None:
    """Each level, over-claim and silent filter lists exactly the rows that show it."""
    rows = list(queries.iter_attempt_summaries(db, queries.get_migration(db, MLP).id))

    def shown(row) -> str:
        if not any(row.ladder):
            return "none"
        return str(highest_level({n: o.value for n, o in enumerate(row.ladder, start=1) if o}))

    for level in ("none", "0", "1", "2", "3", "4", "5"):
        assert filtered_seqs(db, f"level:{level}") == [r.attempt.seq for r in rows if shown(r) == level], level
    for yes in (True, False):
        word = "yes" if yes else "no"
        assert filtered_seqs(db, f"overclaim:{word}") == [r.attempt.seq for r in rows if bool(r.over_claim) == yes]
        assert filtered_seqs(db, f"silent:{word}") == [
            r.attempt.seq for r in rows if bool(r.failure and r.failure.silent) == yes]


def test_list_filters_judge_an_attempt_by_its_counted_values(demo_study) -> None:
    db = demo_study.db
    # #3 reached level 1 (fails 2; numerical mismatch) and expected 4: an over-claim
    assert filtered_seqs(db, "level:1") == [3] and filtered_seqs(db, "overclaim:yes") == [1, 3]
    assert filtered_seqs(db, "cause:num") == [3]
    assert_filters_agree_with_rows(db)
    # its re-run passes levels 1, 2 and 4 and leaves 3 unknown: counted, #3 reaches 4 as it claimed
    rerun(db, demo_study.path.parent, attempt_id(db, MLP, 3), output_of=attempt_id(db, MLP, 4))
    assert filtered_seqs(db, "level:1") == [] and filtered_seqs(db, "level:4") == [3, 4]
    assert filtered_seqs(db, "level:<=1") == [1] and filtered_seqs(db, "overclaim:yes") == [1]
    # its row shows the failure of the run that failed its lowest failing level (5): the re-run's
    assert filtered_seqs(db, "cause:num") == [] and filtered_seqs(db, "cause:slower") == [3, 4]
    # #1 crashed (API misuse, not silent); its re-run fails level 2 silently, as #3 did
    rerun(db, demo_study.path.parent, attempt_id(db, MLP, 1), output_of=attempt_id(db, MLP, 3))
    assert filtered_seqs(db, "silent:yes") == [1, 2, 3, 4] and filtered_seqs(db, "cause:api") == []
    assert filtered_seqs(db, "level:1 overclaim:no") == [1]  # it reached the level 1 it expected
    assert_filters_agree_with_rows(db)
    # the other terms still hold when any run meets them, all on the same run
    assert filtered_seqs(db, "source:rerun") == [1, 3] and filtered_seqs(db, "source:rerun level:4") == [3]
    assert filtered_seqs(db, "source:agent status:nonzero") == [1] and filtered_seqs(db, "source:rerun status:nonzero") == []
    from storage.judgements import add_assignments

    add_assignments(db, [(attempt_id(db, MLP, 3), "ben")], blind=True, seed=1, overlap=0.0, assigned_by="ana")
    assert filtered_seqs(db, "source:rerun", blind_to="ben") == [1]


def test_the_migration_filter_counts_as_its_row(demo_study) -> None:
    db = demo_study.db

    def slugs(raw: str) -> list[str]:
        """Page by page, one migration a page: each page reads the next migrations until one matches."""
        found: list[str] = []
        while page := review.filtered_migrations(db, review.parse_filter(raw), after=found[-1] if found else None,
                                                 limit=1):
            found += [m.migration.slug for m in page]
        return found

    def agree() -> None:
        rows = list(queries.iter_migration_summaries(db))
        for level in ("none", *map(str, range(6))):
            want = [r.migration.slug for r in rows if str(r.highest_level).lower() == level]
            assert slugs(f"level:{level}") == want, level
        for word, yes in (("yes", True), ("no", False)):
            assert slugs(f"silent:{word}") == [r.migration.slug for r in rows if (r.silent_failures > 0) == yes]
            assert slugs(f"overclaim:{word}") == [r.migration.slug for r in rows if (r.over_claims > 0) == yes]

    assert slugs("level:4") == ["bow-classifier", MLP]
    agree()
    # #4, the migration's best, re-run: it crashes now, so mlp's best counted attempt is #2 at level 2
    rerun(db, demo_study.path.parent, attempt_id(db, MLP, 4), output_of=attempt_id(db, MLP, 1))
    assert slugs("level:4") == ["bow-classifier"] and slugs("level:2") == [MLP]
    agree()
    # #1's re-run fails level 2 silently: its row's failure is no longer the crash's
    rerun(db, demo_study.path.parent, attempt_id(db, MLP, 1), output_of=attempt_id(db, MLP, 3))
    assert slugs("cause:api") == [MLP]  # #4's row shows the crash's failure: API misuse
    agree()


@pytest.mark.parametrize(("runs", "want"), [
    ([], None),
    ([(1, "fail", None), (5, "pass", None)], "pass"),          # the latest run that passed or failed
    ([(1, "fail", None), (5, "unknown", None)], "fail"),       # unknown does not undo a fail
    ([(1, "unknown", None), (5, "unknown", None)], "unknown"),
    ([(1, "pass", 7), (5, "fail", None)], "pass"),             # a reviewer's override wins
    ([(1, "pass", 7), (5, "fail", 9)], "fail"),                # the latest override
    ([(1, None, None), (3, "pass", None)], "pass"),            # a run without a verdict at the level
])
def test_the_counted_outcome_rule(runs, want) -> None:
    assert counted_outcome(runs) == want


def test_a_reruns_times_read_as_its_attempts() -> None:
    """Imports store UTC as `Z`, the runner (storage.records.now) as `+00:00`: the screens show
    both alike, side by side in the runs table; another offset is shown as stored."""
    from screens.presenters.render import stamp, when
    from storage.records import now

    assert now().endswith("+00:00")
    assert stamp("2026-12-06T19:31:14.249+00:00") == stamp("2026-12-06T19:31:14.249Z") == "2026-12-06 19:31:14.249"
    assert stamp("2026-12-06T21:31:14+02:00") == "2026-12-06 21:31:14+02:00"
    assert (when("2026-12-06T19:31:14.249+00:00", "2026-12-06T19:31:32.257+00:00")
            == "2026-12-06 19:31:14.249 → 19:31:32.257 (18 s)")
