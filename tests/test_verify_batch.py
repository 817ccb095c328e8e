"""Verify as a batch job: the process pool gives the serial path's verdicts, and one attempt
that cannot be written leaves the others of its batch written."""

from __future__ import annotations

import threading
from pathlib import Path

from storage import queries, records, verify_inputs
from storage.database import open_study
from workbench.bundle import import_bundle
from workbench.config import DEMO_BUNDLE
from workbench.verify import VERIFIER, VERSION, batch, study_targets, verify_groups, verify_study
from workbench.verify.settings import merge


def _study(path: Path):
    study = open_study(path, create=True)
    assert not import_bundle(study, DEMO_BUNDLE, "ana").problems
    return study


def _everything(db) -> dict[tuple[str, int], tuple]:
    """Every attempt's current verdicts (outcome, reason, evidence), cause, flags and ratios."""
    out = {}
    for summary in queries.iter_migration_summaries(db):
        m = summary.migration
        for attempt_id, seq in db.execute("SELECT id, seq FROM attempt WHERE migration_id = ?", [m.id]).fetchall():
            v = queries.current_verification(db, attempt_id)
            if v is None:
                continue
            f = queries.current_failure(db, attempt_id)
            out[(m.slug, seq)] = (
                [(d.level, d.outcome, d.reason, d.evidence) for d in queries.verdicts(db, attempt_id)],
                v.highest_level, v.cause, v.silent, v.over_claim, v.time_ratio, v.cost_ratio, v.inputs_hash,
                (f.cause, f.silent, f.note, f.evidence) if f else None,
            )
    return out


def test_the_pool_gives_the_serial_verdicts(tmp_path: Path):
    serial = _study(tmp_path / "serial.db")
    pooled = _study(tmp_path / "pool.db")
    seen: list[tuple[int, int]] = []
    assert threading.active_count() == 1  # else the pool is not used (workers are forked)
    one = verify_study(serial.db, "ana", workers=1)
    two = verify_study(pooled.db, "ana", workers=2, pool_min=0, progress=lambda d, t: seen.append((d, t)))
    assert one.changed == two.changed == len(two.outcomes) > 4
    assert [(o.attempt.id, o.changed) for o in one.outcomes] == [(o.attempt.id, o.changed) for o in two.outcomes]
    a, b = _everything(serial.db), _everything(pooled.db)
    assert a and a == b
    # the first verification judges again once it knows the correct attempts level 5 compares with
    assert seen[0] == (0, two.changed) and seen[-1] in ((two.changed, two.changed), (2 * two.changed, 2 * two.changed))
    # unchanged evidence: nothing judged again, in either mode; progress counts the skipped ones
    seen.clear()
    assert verify_study(pooled.db, "ana", workers=2, pool_min=0, progress=lambda d, t: seen.append((d, t))).changed == 0
    assert seen[0] == (0, two.changed) and seen[-1] == (two.changed, two.changed)
    serial.close()
    pooled.close()


def test_a_caller_with_threads_gets_its_workers_from_a_fork_server(tmp_path: Path):
    """The app verifies in a thread worker: its judges are not forked from the threaded process
    (a lock another thread holds would be copied held) but from a fork server, with the same
    judgements as in-process."""
    study = _study(tmp_path / "s.db")
    db = study.db
    whole, migrations = study_targets(db)
    tasks = [task for m in migrations for task in batch.tasks_of(
        m, whole, merge(queries.verify_settings(db, m.id)), verify_inputs.reference_attempt(db, m.id),
        verify_inputs.agent_attempts(db, m.id, None))]
    here = [batch.judge_task(db, task, {}) for task in tasks]
    seen: dict[str, object] = {}

    def judge_in_a_thread() -> None:
        with batch.Judges(open_study(tmp_path / "s.db").db, 2, str(tmp_path / "s.db"), pool_min=0) as judges:
            done = [pair for task in tasks for pair in judges.submit(task)] + list(judges.drain())
            seen["method"], seen["done"] = judges.start_method, done

    thread = threading.Thread(target=judge_in_a_thread)
    thread.start()
    thread.join()
    assert seen["method"] == "forkserver"
    pooled = {task.attempts[0].id: judged for task, judged in seen["done"]}  # type: ignore[attr-defined]
    assert [[(j.attempt.id, j.digest, j.rows) for j in js] for js in here] == \
        [[(j.attempt.id, j.digest, j.rows) for j in pooled[task.attempts[0].id]] for task in tasks]
    study.close()


def test_a_migration_is_planned_and_judged_only_when_the_ones_before_are_given_back(tmp_path: Path):
    """What keeps a study of 150,000 attempts out of memory: each migration's results come out
    written before the next migration is read, and nothing is kept for the caller."""
    study = _study(tmp_path / "s.db")
    db = study.db
    whole, migrations = study_targets(db)
    assert len(migrations) > 1

    def verified(migration) -> int:
        return db.execute("SELECT count(*) FROM verification v JOIN attempt a ON a.id = v.attempt_id"
                          " WHERE a.migration_id = ? AND v.superseded_by IS NULL", [migration.id]).fetchone()[0]

    groups = verify_groups(db, migrations, whole, "ana", workers=1)
    first = next(groups)
    assert {o.attempt.migration_id for o in first} == {migrations[0].id}
    assert all(o.changed and o.verification_id for o in first) and verified(migrations[0]) == len(first)
    assert [verified(m) for m in migrations[1:]] == [0] * (len(migrations) - 1)
    rest = list(groups)
    assert [[o.attempt.migration_id for o in g] for g in rest] == [[m.id] * verified(m) for m in migrations[1:]]
    study.close()


def _task_inputs(db, migration_id: int) -> tuple:
    """What a migration's verify task carries: the migration, study, settings and reference."""
    from workbench.verify.settings import merge

    return (queries.migration_by_id(db, migration_id), queries.get_study(db),
            merge(queries.verify_settings(db, migration_id)), verify_inputs.reference_attempt(db, migration_id))


def test_one_attempt_failing_leaves_the_rest_of_its_batch(tmp_path: Path):
    study = _study(tmp_path / "s.db")
    db = study.db
    report = verify_study(db, "ana", force=True)
    good, bad = report.outcomes[0], report.outcomes[1]
    judged = {j.attempt.id: j.rows for j in batch.judge_task(
        db, batch.tasks_of(*_task_inputs(db, good.attempt.migration_id), [good.attempt, bad.attempt], force=True)[0], {})}
    broken = judged[bad.attempt.id]._replace(verdicts=[*judged[bad.attempt.id].verdicts[:2], None])  # fails mid-write
    before = db.execute("SELECT count(*) FROM verification").fetchone()[0]
    item = {"reference_attempt_id": None, "verifier": VERIFIER, "verifier_version": VERSION,
            "inputs_hash": "x", "inputs": "{}", "settings": "{}", "reviewer": "ana"}
    ids = records.record_verifications(db, [{**item, "attempt_id": good.attempt.id, "rows": judged[good.attempt.id]},
                                            {**item, "attempt_id": bad.attempt.id, "rows": broken}])
    assert isinstance(ids[0], int) and isinstance(ids[1], Exception)
    assert db.execute("SELECT count(*) FROM verification").fetchone()[0] == before + 1
    assert queries.current_verification(db, good.attempt.id).id == ids[0]
    kept = queries.current_verification(db, bad.attempt.id)  # the failed one rolled back whole
    assert kept.id == bad.verification_id and len(queries.verdicts(db, bad.attempt.id)) == 5
    study.close()


def test_json_rows_are_the_records_as_asdict_gives_them(tmp_path: Path):
    """`verify --json` builds each row from the records' fields directly: the same as
    `jsonable(asdict(...))` of the verification, each verdict's evidence and the failure, on
    every attempt of the demo study."""
    from dataclasses import asdict

    from cli.common import jsonable
    from cli.verify import _json_row, _rows

    study = _study(tmp_path / "s.db")
    db = study.db
    report = verify_study(db, "ana", force=True)
    rows = list(_rows(db, report.outcomes, evidence=True))
    assert len(rows) == len(report.outcomes) and any(row[4] is not None for row in rows)
    for slug, a, v, verdicts, failure, changed, of in rows:
        assert _json_row(slug, a, v, verdicts, failure, changed, of) == {
            "migration": slug, "seq": a.seq, "rerun_of": of, "changed": changed, "verification": jsonable(asdict(v)),
            "levels": [{"level": d.level, "outcome": d.outcome.value, "effective": d.effective.value, "reason": d.reason,
                        "evidence": [asdict(e) for e in d.evidence]} for d in verdicts],
            "failure": jsonable(asdict(failure)) if failure else None, "expected_level": a.expected_level,
        }
    study.close()


def test_each_verdict_is_audited_with_its_id_level_and_outcome(tmp_path: Path):
    """The five verdicts of a run go in with one INSERT ... RETURNING: each audit row of a
    verdict names that verdict's id, level and outcome, in the order of the ids, twice over
    (the second run supersedes the first)."""
    import json

    study = _study(tmp_path / "s.db")
    db = study.db
    for _ in range(2):
        verify_study(db, "ana", force=True)
    audited = [(row[0], json.loads(row[1])) for row in db.execute(
        "SELECT entity_id, detail FROM audit WHERE action = 'insert' AND entity = 'verdict' ORDER BY id").fetchall()]
    stored = db.execute("SELECT id, attempt_id, level, outcome FROM verdict ORDER BY id").fetchall()
    assert len(stored) == len(audited) > 0
    assert [(vid, d["attempt_id"], d["level"], d["outcome"]) for vid, d in audited] == [tuple(row) for row in stored]
    study.close()


def test_a_batch_is_written_as_one_run_at_a_time_writes_it(tmp_path: Path):
    """`record_verifications` writes a batch with one statement per kind of row: the rows, their
    ids and the audit rows, in order, are what `write_verification` run by run writes, first
    over nothing and then superseding (the study's attempts, some with a failure, some without)."""
    import json
    import shutil

    first = _study(tmp_path / "a.db")
    db = first.db
    outcomes = verify_study(db, "ana", force=True).outcomes
    judged = [j for migration_id in dict.fromkeys(o.attempt.migration_id for o in outcomes)
              for task in batch.tasks_of(*_task_inputs(db, migration_id), [o.attempt for o in outcomes
                                                                           if o.attempt.migration_id == migration_id], force=True)
              for j in batch.judge_task(db, task, {})]
    assert len(judged) > 2 and all(j.rows.failure for j in judged)
    items = [{"attempt_id": j.attempt.id, "reference_attempt_id": None, "verifier": VERIFIER, "verifier_version": VERSION,
              "inputs_hash": j.digest, "inputs": j.inputs, "settings": "{}", "reviewer": "bo",
              "rows": j.rows._replace(failure=None) if i % 2 else j.rows}  # runs with a failure and without
             for i, j in enumerate(judged)]
    first.close()
    shutil.copy(tmp_path / "a.db", tmp_path / "b.db")

    def tables(path: Path, write) -> dict[str, list[tuple]]:
        study = open_study(path)
        db = study.db
        for table, by in (("verification", "id"), ("verdict", "verification_id"), ("failure", "verification_id")):
            db.execute(f"UPDATE {table} SET superseded_by = {by} WHERE attempt_id = ?", [items[0]["attempt_id"]])
        for _ in range(2):
            with records.immediate(db):
                write(db, items)
        out = {table: db.execute(f"SELECT * FROM {table} ORDER BY id").fetchall() for table in ("verification", "verdict", "failure")}
        out["verification"] = [row[:8] + row[9:] for row in out["verification"]]  # without `at`
        out["audit"] = [(*row[:5], {k: v for k, v in json.loads(row[5]).items() if k != "at"}) for row in db.execute(
            "SELECT id, reviewer, action, entity, entity_id, detail FROM audit ORDER BY id").fetchall()]
        study.close()
        return out

    batched = tables(tmp_path / "a.db", records._write_verifications)
    one_by_one = tables(tmp_path / "b.db", lambda db, items: [records.write_verification(db, **item) for item in items])
    assert [len(batched[t]) for t in batched] == [len(one_by_one[t]) for t in one_by_one]
    for table in batched:
        assert batched[table] == one_by_one[table], table


def _break_log(db, attempt_id: int) -> None:
    """The attempt's stored log made one a scan cannot read: a step number of 5,000 digits (past
    the digits Python turns into an int)."""
    bad = b"step 1 loss 2\nstep " + b"9" * 5000 + b" loss 3\n"
    log_id = db.execute("SELECT log_id FROM attempt WHERE id = ?", [attempt_id]).fetchone()[0]
    db.execute("DELETE FROM log_chunk WHERE log_id = ? AND seq > 0", [log_id])
    db.execute("UPDATE log_chunk SET data = ? WHERE log_id = ? AND seq = 0", [bad, log_id])
    db.conn.commit()


def test_an_attempt_whose_evidence_breaks_the_judging_is_named_and_the_others_are_written(tmp_path: Path):
    """Evidence the judging cannot take stops that attempt only: in-process and over the pool, every
    other attempt gets its verdicts, and the error raised at the end names the one left out (and,
    when it is the reference run that broke, says so for each of its migration's attempts)."""
    import pytest

    from domain.errors import WorkbenchError

    for workers, pool_min in ((1, None), (2, 0)):
        study = _study(tmp_path / f"s{workers}.db")
        db = study.db
        outcomes = verify_study(db, "ana").outcomes
        broken = outcomes[1].attempt
        _break_log(db, broken.id)
        with pytest.raises(WorkbenchError) as raised:
            verify_study(db, "ana", force=True, workers=workers, pool_min=pool_min)
        slug = queries.migration_by_id(db, broken.migration_id).slug
        assert str(raised.value) == (f"1 attempt not verified: {slug}#{broken.seq} could not be judged"
                                     " (a number in its log has more than 4300 digits)")
        current = {o.attempt.id: queries.current_verification(db, o.attempt.id).id for o in outcomes}
        assert all(current[o.attempt.id] != o.verification_id for o in outcomes if o.attempt.id != broken.id)
        assert current[broken.id] == outcomes[1].verification_id  # its verdicts as they were
        _break_log(db, verify_inputs.reference_attempt(db, broken.migration_id).id)
        with pytest.raises(WorkbenchError, match=f"{slug}#{broken.seq} could not be judged \\(its reference run: a number in its log"):
            verify_study(db, "ana", force=True, workers=workers, pool_min=pool_min)
        study.close()


def test_verify_lists_the_attempts_it_verified_then_names_the_one_it_could_not(tmp_path: Path):
    import json

    from click.testing import CliRunner

    from cli.main import main

    study = _study(tmp_path / "s.db")
    outcomes = verify_study(study.db, "ana").outcomes
    _break_log(study.db, outcomes[0].attempt.id)
    study.close()
    result = CliRunner().invoke(main, ["verify", str(tmp_path / "s.db"), "--force", "--json"])
    assert result.exit_code == 2
    listed = json.loads(result.stdout)
    assert len(listed) == len(outcomes) - 1 and all(row["changed"] for row in listed)
    assert "1 attempt not verified:" in result.stderr and "could not be judged" in result.stderr
