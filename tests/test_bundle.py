"""Importing study bundles: idempotence, and every kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from domain.errors import WorkbenchError
from storage import queries
from storage.database import open_study
from storage.logs import LogReader
from workbench.bundle import import_bundle


def table_counts(db) -> dict[str, int]:
    return {t: db[t].count for t in db.table_names()}


def test_import_builds_migrations_attempts_logs_and_metrics(small_bundle, tmp_path: Path) -> None:
    study = open_study(tmp_path / "s.db", create=True)
    report = import_bundle(study, small_bundle.root, "ana")
    assert report.problems == []
    db = study.db
    assert queries.get_study(db).prices == {"tpu-v5e": 1.2, "cpu": 0.05}
    migration = queries.get_migration(db, "mlp-xla")
    assert migration.target.describe() == "tpu-v5e x 4" and migration.goal.metric == "eval_accuracy"
    attempts = list(queries.iter_attempt_summaries(db, migration.id, folded=False))
    assert [(a.attempt.seq, a.attempt.source.value, a.attempt.exit_code) for a in attempts] == [
        (0, "reference", 0), (1, "agent", 1), (2, "agent", 0), (3, "rerun", 0)
    ]
    assert attempts[3].attempt.rerun_of == attempts[2].attempt.id
    assert len(attempts[1].attempt.commit) == 40
    assert LogReader(db, attempts[1].attempt.log_id).lines(0, 5) == ["step 1 loss 0.5", "run 1 done"]
    series = queries.metric_series(db, attempts[2].attempt.id, "loss")
    assert [p.step for p in series] == [0, 1, 2, 3, 4] and series[1].value == 0.5
    summaries = {s.migration.slug: s for s in queries.migration_summaries(db)}
    assert summaries["mlp-xla"].attempts == 2  # the reference run is not an attempt, the re-run is a run of #2
    study.close()


def test_reimporting_the_same_bundle_changes_nothing(small_bundle, tmp_path: Path) -> None:
    study = open_study(tmp_path / "s.db", create=True)
    first = import_bundle(study, small_bundle.root, "ana")
    before = table_counts(study.db)
    changes = study.db.conn.total_changes
    second = import_bundle(study, small_bundle.root, "ana")
    assert (second.inserted, second.updated) == (0, 0)
    assert second.unchanged == first.inserted
    assert table_counts(study.db) == before
    assert study.db.conn.total_changes == changes
    study.close()


def test_a_changed_record_is_updated_and_audited(small_bundle, tmp_path: Path) -> None:
    study = open_study(tmp_path / "s.db", create=True)
    import_bundle(study, small_bundle.root, "ana")
    folder = small_bundle.root / "migrations" / "mlp-xla"
    lines = (folder / "attempts.jsonl").read_text().splitlines()
    record = json.loads(lines[2])
    record["claim"] = "Now it really matches."
    lines[2] = json.dumps(record)
    (folder / "attempts.jsonl").write_text("\n".join(lines) + "\n")
    report = import_bundle(study, small_bundle.root, "ana")
    assert (report.inserted, report.updated) == (0, 1)
    audit = list(study.db.query("SELECT * FROM audit WHERE action = 'update'"))
    assert len(audit) == 1 and "really matches" in audit[0]["detail"]
    study.close()


def test_repository_as_git_bundle_file_is_cloned_next_to_the_database(bundle, tmp_path: Path) -> None:
    folder, shas = bundle.add_migration("bundled", repo_as_bundle=True)
    bundle.write_attempts(folder, [bundle.attempt(0, shas[0][:8]), bundle.attempt(1, shas[2])])
    study = open_study(tmp_path / "s.db", create=True)
    assert import_bundle(study, bundle.root, "ana").problems == []
    migration = queries.get_migration(study.db, "bundled")
    assert Path(migration.repo) == (tmp_path / "s.repos" / "bundled").resolve()
    first = next(queries.iter_attempt_summaries(study.db, migration.id))
    assert first.attempt.commit == shas[0]  # a short name is stored as the full SHA
    again = import_bundle(study, bundle.root, "ana")
    assert again.problems == [] and again.inserted == again.updated == 0
    study.close()


def test_bad_records_are_reported_by_file_and_line_and_the_rest_imports(bundle, tmp_path: Path) -> None:
    folder, shas = bundle.add_migration("mlp-xla")
    (folder / "metrics" / "7.jsonl").write_text('{"name": "loss", "step": 1, "value": "NaN"}\n')
    bundle.write_attempts(
        folder,
        [
            bundle.attempt(0, shas[0]),
            bundle.attempt(7, shas[1]),
            bundle.attempt(2, "0123456789abcdef0123456789abcdef01234567"),
            bundle.attempt(3, shas[1], exit_code="one"),
            bundle.attempt(4, shas[1], status="exploded"),
            {k: v for k, v in bundle.attempt(5, shas[1]).items() if k != "command"},
            bundle.attempt(6, shas[1], log="logs/nope.log"),
            "[1, 2, 3]",
            bundle.attempt(1, shas[1]),
            '{"seq": 9, "source": "agent", "commi',  # truncated last line
        ],
    )
    (folder / "logs" / "nope.log").unlink()
    study = open_study(tmp_path / "s.db", create=True)
    report = import_bundle(study, bundle.root, "ana")
    path = folder / "attempts.jsonl"
    assert report.problems == [
        f"{path}:2: {folder / 'metrics/7.jsonl'}:1: 'value' must be a number, not str 'NaN'",
        f"{path}:3: commit '0123456789abcdef0123456789abcdef01234567' is not in the repository",
        f"{path}:4: 'exit_code' must be an integer, not str 'one'",
        f"{path}:5: 'status' must be one of ok, nonzero_exit, interrupted, backgrounded, blocked, no_result, not 'exploded'",
        f"{path}:6: missing 'command'",
        f"{path}:7: log 'logs/nope.log' does not exist",
        f"{path}:8: expected a JSON object, not list",
        f"{path}:10: not valid JSON (Unterminated string starting, column 31)",
    ]
    migration = queries.get_migration(study.db, "mlp-xla")
    seqs = [a.attempt.seq for a in queries.iter_attempt_summaries(study.db, migration.id)]
    assert seqs == [0, 1]
    # nothing half-written: no orphan metric points or logs from the failed records
    assert study.db["metric_point"].count == 10
    assert study.db["log"].count == 2
    study.close()


def test_a_bad_record_leaves_the_stored_one_as_it_was(small_bundle, tmp_path: Path) -> None:
    study = open_study(tmp_path / "s.db", create=True)
    import_bundle(study, small_bundle.root, "ana")
    migration = queries.get_migration(study.db, "mlp-xla")
    before = list(queries.iter_attempt_summaries(study.db, migration.id))
    folder = small_bundle.root / "migrations" / "mlp-xla"
    lines = (folder / "attempts.jsonl").read_text().splitlines()
    broken = json.loads(lines[1])
    broken.update(commit="feedfacefeedfacefeedfacefeedfacefeedface", claim="changed")
    lines[1] = json.dumps(broken)
    (folder / "attempts.jsonl").write_text("\n".join(lines) + "\n")
    report = import_bundle(study, small_bundle.root, "ana")
    assert len(report.problems) == 1 and "feedface" in report.problems[0]
    assert list(queries.iter_attempt_summaries(study.db, migration.id)) == before
    study.close()


def test_a_non_utf8_log_is_kept_byte_for_byte_and_reported(bundle, tmp_path: Path) -> None:
    folder, shas = bundle.add_migration("mlp-xla")
    raw = b"step 1 loss 0.5\n\xff\xfe\x00binary\x1b[2J\nend\n"
    (folder / "logs" / "1.log").write_bytes(raw)
    bundle.write_attempts(folder, [bundle.attempt(1, shas[1])])
    study = open_study(tmp_path / "s.db", create=True)
    report = import_bundle(study, bundle.root, "ana")
    assert report.warnings == [
        f"{folder / 'logs/1.log'}: not valid UTF-8 (byte 16); stored as bytes, shown with replacement characters"
    ]
    assert report.problems == [] and report.inserted >= 1  # imported in full: a warning, not a problem
    attempt = next(queries.iter_attempt_summaries(study.db, queries.get_migration(study.db, "mlp-xla").id))
    stored = b"".join(r[0] for r in study.db.execute(
        "SELECT data FROM log_chunk WHERE log_id = ? ORDER BY seq", [attempt.attempt.log_id]))
    assert stored == raw
    study.close()


@pytest.mark.parametrize(
    "study_toml, message",
    [
        ('format = 1\n[study]\ntitle = "x"\n', "missing 'slug'"),
        ('format = 1\n[study]\nslug = 3\ntitle = "x"\n', "'slug' must be a string, not int 3"),
        ('format = 2\n[study]\nslug = "s"\ntitle = "x"\n', "bundle format 2 is not supported"),
        ('format = 1\n[study]\nslug = "s"\ntitle = "x"\n[prices]\ncpu = "cheap"\n', "'cpu' must be a number"),
        ("format = 1\n[study\n", "not valid TOML"),
        (b"\xff\xfe", "not valid TOML"),
    ],
)
def test_a_bad_study_file_is_refused_before_anything_is_written(
    small_bundle, tmp_path: Path, study_toml: str | bytes, message: str
) -> None:
    path = tmp_path / "s.db"
    study = open_study(path, create=True)
    import_bundle(study, small_bundle.root, "ana")
    before = table_counts(study.db)
    target = small_bundle.root / "study.toml"
    if isinstance(study_toml, bytes):
        target.write_bytes(study_toml)
    else:
        target.write_text(study_toml)
    with pytest.raises(WorkbenchError, match=f"^{target}: .*{message}"):
        import_bundle(study, small_bundle.root, "ana")
    assert table_counts(study.db) == before
    study.close()


def test_a_bad_migration_file_skips_that_migration_only(small_bundle, tmp_path: Path) -> None:
    toml = small_bundle.root / "migrations" / "cnn-xla" / "migration.toml"
    toml.write_text(toml.read_text().replace("chips = 4", 'chips = "four"'))
    extra, shas = small_bundle.add_migration("no-base")
    (extra / "migration.toml").write_text(
        (extra / "migration.toml").read_text().replace(shas[0], "f" * 40)
    )
    study = open_study(tmp_path / "s.db", create=True)
    report = import_bundle(study, small_bundle.root, "ana")
    assert report.problems == [
        f"{toml}: 'chips' must be an integer, not str 'four'",
        f"{extra / 'migration.toml'}: base_commit '{'f' * 40}' is not in {extra / 'repo'}",
    ]
    assert [s.migration.slug for s in queries.migration_summaries(study.db)] == ["mlp-xla"]
    study.close()


def test_a_study_database_holds_one_study(small_bundle, tmp_path: Path) -> None:
    study = open_study(tmp_path / "s.db", create=True)
    import_bundle(study, small_bundle.root, "ana")
    toml = small_bundle.root / "study.toml"
    toml.write_text(toml.read_text().replace('slug = "study"', 'slug = "another"'))
    with pytest.raises(WorkbenchError, match="holds study 'study'; the bundle is study 'another'"):
        import_bundle(study, small_bundle.root, "ana")
    study.close()


def test_secrets_in_commands_and_claims_never_reach_the_database(bundle, tmp_path: Path) -> None:
    folder, shas = bundle.add_migration("mlp-xla")
    key = "sk-ant-api03-" + "Q" * 40
    bundle.write_attempts(
        folder,
        [bundle.attempt(1, shas[1], claim=f"I set ANTHROPIC_API_KEY={key} and it runs.",
                        command={"argv": ["python", "train.py", "--hf-token", "hf_" + "x1" * 20],
                                 "env": {"WANDB_API_KEY": "0123456789abcdef", "PJRT_DEVICE": "CPU"}})],
    )
    study = open_study(tmp_path / "s.db", create=True)
    assert import_bundle(study, bundle.root, "ana").problems == []
    study.close()
    raw = b"".join(p.read_bytes() for p in tmp_path.glob("s.db*"))
    assert key.encode() not in raw and b"hf_x1x1" not in raw and b"0123456789abcdef" not in raw
    study = open_study(tmp_path / "s.db")
    attempt = next(queries.iter_attempt_summaries(study.db, queries.get_migration(study.db, "mlp-xla").id)).attempt
    assert attempt.command.env == {"WANDB_API_KEY": "[REDACTED:secret]", "PJRT_DEVICE": "CPU"}
    assert "[REDACTED:anthropic]" in attempt.claim
    study.close()
