"""Evidence the verifier reads where the run states it (issue 35): non-finite points kept and
named, facts read from logs wherever they are printed."""

from __future__ import annotations

import json
import math
from pathlib import Path

from domain.models import FailureCause, Outcome
from storage import queries
from storage.database import open_study
from workbench.bundle import import_bundle
from workbench.verify import verify_study

P, F, U = Outcome.PASS, Outcome.FAIL, Outcome.UNKNOWN


def _loss(step: int) -> float:
    return 2.0 / (1 + 0.05 * step)


def _log(steps: int, nan_from: int | None = None) -> str:
    lines = [f"step {s}/{steps} loss {'nan' if nan_from is not None and s >= nan_from else f'{_loss(s):.6f}'}"
             for s in range(1, steps + 1)]
    return "\n".join(lines + ["eval_accuracy 0.95", ""])


def _points(steps: int, nan_from: int | None = None, value: float = math.nan) -> str:
    return "".join(json.dumps({"name": "loss", "step": s,
                               "value": value if nan_from is not None and s >= nan_from else _loss(s)}) + "\n"
                   for s in range(1, steps + 1))


def _verdicts(db, slug: str, seq: int):
    m = queries.get_migration(db, slug)
    a = db.execute("SELECT id FROM attempt WHERE migration_id = ? AND seq = ?", [m.id, seq]).fetchone()[0]
    return a, {v.level: v for v in queries.verdicts(db, a)}, queries.current_failure(db, a)


def test_a_bundle_attempt_with_nan_and_infinite_points_is_kept_and_its_divergence_named(bundle, tmp_path: Path):
    folder, shas = bundle.add_migration("mlp-xla")
    (folder / "logs" / "0.log").write_text(_log(60))
    (folder / "metrics" / "0.jsonl").write_text(_points(60))
    (folder / "logs" / "1.log").write_text(_log(60, nan_from=35))
    (folder / "metrics" / "1.jsonl").write_text(_points(60, nan_from=35))
    (folder / "logs" / "2.log").write_text(_log(60))
    (folder / "metrics" / "2.jsonl").write_text(_points(60, nan_from=50, value=math.inf))
    bundle.write_attempts(folder, [bundle.attempt(0, shas[0]), bundle.attempt(1, shas[1]),
                                   bundle.attempt(2, shas[2])])
    study = open_study(tmp_path / "s.db", create=True)
    try:
        report = import_bundle(study, bundle.root, "ana")
        assert report.problems == []
        attempt_id, _, _ = _verdicts(study.db, "mlp-xla", 1)
        series = {p.step: p.value for p in queries.metric_series(study.db, attempt_id, "loss")}
        assert len(series) == 60 and all(math.isnan(series[s]) for s in range(35, 61))
        assert series[34] == _loss(34)
        again = import_bundle(study, bundle.root, "ana")  # NaN equals NaN: nothing changed
        assert again.problems == [] and again.inserted == again.updated == 0

        verify_study(study.db, "ana", slug="mlp-xla")
        _, levels, failure = _verdicts(study.db, "mlp-xla", 1)
        assert levels[1].outcome is F and "loss is NaN from step 35" in levels[1].reason
        assert "reached step 60 of 60" not in levels[1].reason
        assert levels[2].outcome is F and "loss is NaN from step 35" in levels[2].reason
        assert "nan%" not in levels[2].reason
        assert failure.cause is FailureCause.NON_FINITE and failure.silent
        _, levels, failure = _verdicts(study.db, "mlp-xla", 2)
        assert "loss is infinite from step 50" in levels[1].reason
        assert failure.cause is FailureCause.NON_FINITE
    finally:
        study.close()


def test_a_log_whose_loss_turns_nan_fails_level_1_and_names_the_step(bundle, tmp_path: Path):
    """The same run read from its log alone (no stored series): level 1 no longer says it reached
    step 60 of 60, level 2 names the first NaN step instead of a '(nan%)' difference."""
    folder, shas = bundle.add_migration("mlp-xla")
    (folder / "logs" / "0.log").write_text(_log(60))
    (folder / "logs" / "1.log").write_text(_log(60, nan_from=35))
    bundle.write_attempts(folder, [bundle.attempt(0, shas[0], metrics=None), bundle.attempt(1, shas[1], metrics=None)])
    study = open_study(tmp_path / "s.db", create=True)
    try:
        assert import_bundle(study, bundle.root, "ana").problems == []
        verify_study(study.db, "ana", slug="mlp-xla")
        _, levels, failure = _verdicts(study.db, "mlp-xla", 1)
        assert levels[1].outcome is F and "loss is NaN from step 35" in levels[1].reason, levels[1].reason
        assert "(log line 35)" in " ".join(e.text for e in levels[1].evidence)
        assert "nan%" not in levels[2].reason and "loss is NaN from step 35" in levels[2].reason
        assert failure.cause is FailureCause.NON_FINITE and failure.silent
    finally:
        study.close()


def test_an_older_study_keeps_its_points_and_then_holds_nan(tmp_path: Path):
    """The schema step that lets metric_point hold NaN (as NULL) keeps the points it finds."""
    from storage import schema
    from storage.sqlite import Database

    path = tmp_path / "old.db"
    db = Database(path)
    schema.migrations.apply(db, stop_before="m015_metric_point_non_finite")
    cols = {c.name for c in db.table("metric_point").columns}
    assert cols == {"attempt_id", "name", "step", "value"}
    db.conn.execute("PRAGMA foreign_keys = OFF")
    db.execute("INSERT INTO metric_point VALUES (7, 'loss', 1, 0.5)")
    db.conn.commit()
    schema.migrations.apply(db)
    assert db.execute("SELECT * FROM metric_point").fetchall() == [(7, "loss", 1, 0.5)]
    db.execute("INSERT INTO metric_point VALUES (7, 'loss', 2, ?)", [math.nan])
    assert db.execute("SELECT value FROM metric_point WHERE step = 2").fetchone() == (None,)
    assert db.execute("SELECT * FROM metric_last").fetchall() == [(7, "loss", 2, None)]  # m021, its trigger


NO_EXECUTION_REPORT = """\
Metric: DeviceLockWait
  TotalSamples: 6
  Accumulator: 024.746us
  Percentiles: 1%=000.211us; 5%=000.211us; 50%=003.091us; 99%=015.496us
Counter: RegisterXLAFunctions
  Value: 1
Counter: MarkStep
  Value: 60
"""
"""torch_xla's report at exit of a process that trained on host tensors (printed by torch_xla
2.x on XLA:CPU for such a script: no CompileTime, ExecuteTime or transfers)."""

EXECUTED_REPORT = """\
Metric: CompileTime
  TotalSamples: 3
  Accumulator: 120ms
Metric: ExecuteTime
  TotalSamples: 60
  Accumulator: 30ms
Counter: UncachedCompile
  Value: 3
Counter: MarkStep
  Value: 60
"""


def _study(bundle, tmp_path: Path, logs: dict[int, str], **records):
    """A migration whose reference (seq 0, a correct CPU run) and attempts have these logs and no
    stored series; `records[seq]` overrides an attempt's record."""
    folder, shas = bundle.add_migration("mlp-xla")
    attempts = []
    for seq, text in logs.items():
        (folder / "logs" / f"{seq}.log").write_text(text)
        attempts.append(bundle.attempt(seq, shas[min(seq, 2)], metrics=None,
                                       intended_hardware={"kind": "cpu", "count": 4},
                                       **records.get(f"a{seq}", {})))
    bundle.write_attempts(folder, attempts)
    study = open_study(tmp_path / "s.db", create=True)
    assert import_bundle(study, bundle.root, "ana").problems == []
    verify_study(study.db, "ana", slug="mlp-xla")
    return study


def test_a_run_that_finished_then_hung_until_timeout_is_a_hang_at_exit(bundle, tmp_path: Path):
    study = _study(bundle, tmp_path, {0: _log(60), 1: _log(60), 2: "\n".join(_log(60).splitlines()[:20]) + "\n"},
                   a1={"exit_code": 124, "status": "nonzero_exit"}, a2={"exit_code": 124, "status": "nonzero_exit"})
    try:
        _, levels, failure = _verdicts(study.db, "mlp-xla", 1)
        assert levels[1].outcome is F and "reached step 60 of 60, then hung at exit" in levels[1].reason
        assert failure.cause is FailureCause.HANG_AT_EXIT and not failure.silent
        _, levels, failure = _verdicts(study.db, "mlp-xla", 2)  # stopped short: a real timeout
        assert failure.cause is FailureCause.TIMEOUT
    finally:
        study.close()


def test_device_kind_and_replica_batch_statements_are_read(bundle, tmp_path: Path):
    """`device_kind=XLA:CPU` names the kind; a per-replica batch equal to the global batch over 4
    replicas means every replica reads the same batch (a correct port says 8)."""
    head = "replicas=4 per_replica_batch={} global_batch=32 device_kind=XLA:CPU num_devices=4\n"
    study = _study(bundle, tmp_path, {0: _log(60), 1: head.format(8) + _log(60), 2: head.format(32) + _log(60)})
    try:
        _, levels, failure = _verdicts(study.db, "mlp-xla", 1)
        assert levels[3].outcome is P and "ran on CPU x 4" in levels[3].reason
        assert "kind not stated" not in levels[3].reason
        assert [levels[n].outcome for n in (1, 2, 3, 4)] == [P, P, P, P]
        _, levels, failure = _verdicts(study.db, "mlp-xla", 2)
        assert levels[3].outcome is F and "replicas read the same data" in levels[3].reason
        assert "4 replicas each read a batch of 32 where the global batch is 32" in levels[3].reason
        assert failure.cause is FailureCause.REPLICAS_SAME_DATA and failure.silent
        assert [e.ref for e in failure.evidence] == ["1"]
    finally:
        study.close()


def test_a_metrics_report_without_execution_fails_level_3_even_when_the_log_says_xla(bundle, tmp_path: Path):
    head = "device xla:0 device_kind=XLA:CPU num_devices=4\n"
    study = _study(bundle, tmp_path, {0: _log(60), 1: head + _log(60) + NO_EXECUTION_REPORT,
                                      2: head + _log(60) + EXECUTED_REPORT})
    try:
        _, levels, failure = _verdicts(study.db, "mlp-xla", 1)
        assert levels[3].outcome is F and "ran without the accelerator runtime" in levels[3].reason
        assert failure.cause is FailureCause.NO_ACCELERATOR_RUNTIME and failure.silent
        assert "no CompileTime, ExecuteTime" in failure.evidence[0].text
        _, levels, failure = _verdicts(study.db, "mlp-xla", 2)
        assert levels[3].outcome is P, levels[3].reason
    finally:
        study.close()


OWN_FORMAT = """\
for i in range(1, 6):
    print(f"step {i}/5 loss {1.0 / i:.6f}", flush=True)
print("Accuracy = 0.95", flush=True)
"""


def test_a_rerun_extracts_its_series_with_the_migrations_patterns(tmp_path):
    """Issue 38: a re-run's stored series are read with the migration's `patterns` setting, as the
    verifier reads logs, not with the defaults alone."""
    from storage import records
    from tests.rerun_helpers import attempt, study_with_script
    from workbench.rerun import jobs
    from workbench.rerun.jobs import JobState

    study = study_with_script(tmp_path, OWN_FORMAT)
    try:
        m = queries.get_migration(study.db, "toy")
        with records.immediate(study.db):
            records.add_verify_settings(study.db, migration_id=m.id, source="test", reviewer="ana", settings={
                "patterns": [{"name": "accuracy", "regex": r"(?m)^(?P<name>Accuracy) = (?P<value>[0-9.]+)$"}]})
        spec = jobs.with_changes(jobs.spec_for(study.db, attempt(study, "toy", 1), "local"),
                                 argv=("python3", "train.py"))
        job = jobs.wait(study.db, jobs.launch(study, spec, "ana").id, timeout=120)
        assert job.state is JobState.FINISHED, job.error
        assert [(p.step, p.value) for p in queries.metric_series(study.db, job.result_attempt_id, "Accuracy")] \
            == [(5, 0.95)]
    finally:
        study.close()


def test_a_sharding_spec_that_splits_the_batch_over_fewer_devices_fails_level_3(bundle, tmp_path: Path):
    """`devices=[2,1,1,2]0,1,2,3 last_tile_dim_replicate` names 4 devices but splits the batch 2
    ways (a (2, 2) mesh); `devices=[4,1]0,1,2,3` splits it over all 4."""
    head = "mesh_shape=(2, 2) device_kind=XLA:CPU\ninput sharding: {devices=[%s]0,1,2,3%s}\n"
    study = _study(bundle, tmp_path, {0: _log(60), 1: head % ("4,1", "") + _log(60),
                                      2: head % ("2,1,1,2", " last_tile_dim_replicate") + _log(60)})
    try:
        _, levels, failure = _verdicts(study.db, "mlp-xla", 1)
        assert levels[3].outcome is P, levels[3].reason
        _, levels, failure = _verdicts(study.db, "mlp-xla", 2)
        assert levels[3].outcome is F and "batch split over fewer devices than intended: 2 ways over 4" \
            in levels[3].reason
        assert failure.cause is FailureCause.BATCH_UNDERSPLIT and failure.silent
        assert [e.ref for e in failure.evidence] == ["2"]
    finally:
        study.close()


def test_a_reruns_series_are_read_again_with_names_given_after_it_ran(tmp_path):
    """Issue 38: a re-run's series, stored as its log was read when it ended, are read again from
    the stored log with the migration's names and patterns in force now (`extract_again`, what
    `workbench verify --force` does first); an imported attempt's series, which came with it, stay."""
    from storage import records
    from tests.rerun_helpers import attempt, study_with_script
    from workbench.rerun import jobs
    from workbench.rerun.jobs import JobState
    from workbench.verify.runseries import extract_again

    study = study_with_script(tmp_path, OWN_FORMAT)
    try:
        m = queries.get_migration(study.db, "toy")
        spec = jobs.with_changes(jobs.spec_for(study.db, attempt(study, "toy", 1), "local"),
                                 argv=("python3", "train.py"))
        job = jobs.wait(study.db, jobs.launch(study, spec, "ana").id, timeout=120)
        assert job.state is JobState.FINISHED, job.error
        assert queries.metric_series(study.db, job.result_attempt_id, "accuracy") == []
        with records.immediate(study.db):
            records.add_verify_settings(study.db, migration_id=m.id, source="test", reviewer="ana",
                                        settings={"metric_names": {"Accuracy =": "accuracy"}})
        assert extract_again(study.db, m.id, "ana") == [job.result_attempt_id]
        assert [(p.step, p.value) for p in queries.metric_series(study.db, job.result_attempt_id, "accuracy")] \
            == [(5, 0.95)]
        assert extract_again(study.db, m.id, "ana") == []
    finally:
        study.close()
