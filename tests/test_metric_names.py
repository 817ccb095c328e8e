"""Metric names follow the project's log (issue 38): qualifier words, a pattern that names or
computes its metric, MNIST's lines, per-epoch values, configuration echoes, the goal as written."""

from __future__ import annotations

import subprocess
import sys

import pytest

from domain.errors import WorkbenchError
from workbench.verify.logscan import scan_chunks
from workbench.verify.patterns import compile_patterns

NANOGPT = b"""\
eval_interval = 50
eval_iters = 200
eval_only = False
step 0: train loss 4.2874, val loss 4.2823
iter 0: loss 4.2649, time 1200.93ms, mfu -100.00%
step 200: train loss 2.5608, val loss 2.5126
"""

MNIST = b"""\
Train Epoch: 1 [0/3072 (0%)]\tLoss: 2.300000
Train Epoch: 1 [640/3072 (21%)]\tLoss: 0.902000

Test set: Average loss: 0.3307, Accuracy: 991/1000 (99%)

Train Epoch: 2 [0/3072 (0%)]\tLoss: 0.310000
Train Epoch: 2 [640/3072 (21%)]\tLoss: 0.250000

Test set: Average loss: 0.2001, Accuracy: 995/1000 (100%)

"""


def _series(data: bytes, patterns=(), chunk: int | None = None) -> dict:
    chunks = [data] if chunk is None else [data[i : i + chunk] for i in range(0, len(data), chunk)]
    return scan_chunks(chunks, patterns=compile_patterns(patterns)).point_series()


def test_qualified_names_are_their_own_metrics_and_configuration_echoes_are_not_metrics():
    for chunk in (None, 17):
        series = _series(NANOGPT, chunk=chunk)
        assert series["train_loss"] == {0: 4.2874, 200: 2.5608}
        assert series["val_loss"] == {0: 4.2823, 200: 2.5126}
        assert "loss" not in series or 200 not in series["loss"]
        assert not {"eval_interval", "eval_iters"} & set(series)


LOGGED = b"""\
INFO:train:step 1 loss 0.5
INFO:train:step 2 loss 0.4
INFO:train:final_eval_accuracy: 0.9355
WARNING:train:eval_interval: 50
"""


def test_summary_lines_behind_a_logging_prefix_are_metrics_and_cited_by_line():
    """`INFO:train:final_eval_accuracy: 0.9355` (the logging module's default format) is the goal
    metric's line; a stored series cites it without extracting the log again, as extraction does."""
    from workbench.verify.logscan import LogScanner
    from workbench.verify.steplines import PointLines

    for chunk in (None, 7):
        series = _series(LOGGED, chunk=chunk)
        assert series["final_eval_accuracy"] == {2: 0.9355} and series["loss"] == {1: 0.5, 2: 0.4}
        assert "eval_interval" not in series
    assert scan_chunks([LOGGED]).point("final_eval_accuracy", 2) == (0.9355, 3)
    scanner = LogScanner(compile_patterns(), steps_only=True)
    scanner.feed(LOGGED)
    scanner.finish()
    cite = PointLines(LOGGED, scanner.step_lines, compile_patterns(), lambda at: LOGGED.count(b"\n", 0, at) + 1,
                      lambda: None)
    assert cite.line("final_eval_accuracy", 2) == 3


def test_pytorch_examples_mnist_lines_are_read_by_the_defaults():
    series = _series(MNIST)
    assert series["loss"] == {1: 2.3, 2: 0.902, 3: 0.31, 4: 0.25}
    assert series["test_loss"] == {1: 0.3307, 2: 0.2001}
    assert series["test_accuracy"] == {1: 0.991, 2: 0.995}


def test_values_printed_per_epoch_without_a_step_are_counted_per_epoch():
    """MNIST's test lines carry no step: each counts as the next evaluation, not all as step 0."""
    series = _series(MNIST.replace(b"Train Epoch", b"Train epoch"))
    assert series["test_accuracy"] == {1: 0.991, 2: 0.995} and "loss" not in series


def test_a_pattern_names_its_metric_and_computes_its_value():
    patterns = [{"name": "val_loss", "regex": r"validation: ([0-9.]+)"},
                {"name": "accuracy", "regex": r"right (?P<correct>\d+) of (?P<n>\d+)", "value": "correct / n"},
                {"name": "error", "regex": r"err (?P<e>[0-9.]+)%", "value": "(100 - e) / 100 * -1"}]
    series = _series(b"step 1 loss 2.0\nvalidation: 0.5\nright 991 of 1000\nerr 4.5%\n", patterns)
    assert series["val_loss"] == {1: 0.5}
    assert series["accuracy"] == {1: 0.991}
    assert series["error"] == {1: pytest.approx(-0.955)}


@pytest.mark.parametrize("value", ["__import__('os')", "n ** 2", "missing / n", "n.real", "1 if n else 2"])
def test_a_pattern_value_is_only_arithmetic_over_its_groups(value):
    with pytest.raises(ValueError, match="pattern value"):
        compile_patterns([{"name": "x", "regex": r"(?P<n>\d+)", "value": value}])


def test_a_goal_may_be_named_as_the_log_writes_it():
    from workbench.studies import check_goal

    assert check_goal("val loss", 2.5, "min", 0.1).metric == "val_loss"
    with pytest.raises(WorkbenchError, match="is not a metric name"):
        check_goal("val;loss", 2.5, "min", 0.1)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "WORKBENCH_REVIEWER": "ana"})


def test_verify_set_says_what_it_stored_and_refuses_a_pattern_that_does_not_compile(small_bundle, tmp_path):
    from storage import queries
    from storage.database import open_study
    from workbench.bundle import import_bundle

    db = tmp_path / "s.db"
    study = open_study(db, create=True)
    assert import_bundle(study, small_bundle.root, "ana").problems == []
    study.close()
    pattern = 'patterns=[{"name": "val_loss", "regex": "validation: ([0-9.]+)"}]'
    done = _cli("verify", str(db), "--migration", "mlp-xla", "--set", pattern)
    assert done.returncode == 0, done.stderr
    assert 'stored for mlp-xla: patterns = [{"name": "val_loss", "regex": "validation: ([0-9.]+)"}]' in done.stderr
    again = _cli("verify", str(db), "--migration", "mlp-xla", "--set", pattern)
    assert "unchanged for mlp-xla: patterns" in again.stderr
    bad = _cli("verify", str(db), "--migration", "mlp-xla", "--set", 'patterns=[{"name": "x", "regex": "(unclosed"}]')
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--set:" in bad.stderr
    study = open_study(db)
    try:
        m = queries.get_migration(study.db, "mlp-xla")
        assert queries.verify_settings(study.db, m.id)["patterns"][0]["name"] == "val_loss"
    finally:
        study.close()


def test_a_reference_run_without_the_goal_metric_lists_what_it_read_and_how_to_add_a_pattern(tmp_path):
    import shlex

    from tests.conftest import make_repo

    repo, db = tmp_path / "mnist", tmp_path / "s.db"
    script = "print(" + repr(MNIST.decode()) + ")\nprint('Best top1: 99.5')\n"
    make_repo(repo, [{"main.py": script}])
    command = f"{shlex.quote(sys.executable)} main.py"
    assert _cli("init", str(db), "--title", "T").returncode == 0
    assert _cli("migration", "add", str(db), "m", "--repo", str(repo), "--base", "HEAD", "--target", "cpu",
                "--goal", "top1", "--direction", "max", "--reference-value", "99", "--command", command
                ).returncode == 0
    failed = _cli("reference", str(db), "m", "--run")
    assert failed.returncode == 2 and len(failed.stderr.strip().splitlines()) == 1, failed.stderr
    said = failed.stderr
    assert "the goal metric 'top1' is not in the reference's output" in said
    assert "test_accuracy (line 9: 'Test set: Average loss: 0.2001, Accuracy: 995/1000 (100%)')" in said
    assert "loss (line 7: 'Train Epoch: 2 [640/3072 (21%)]" in said
    assert "--set 'patterns=[" in said and '"name": "top1"' in said
    output = said.split("(output: ", 1)[1].split(")", 1)[0]
    assert "Best top1: 99.5" in open(output).read()  # the failed run keeps its output
    pattern = 'patterns=[{"name": "top1", "regex": "Best top1: (?P<value>[0-9.]+)"}]'
    assert _cli("verify", str(db), "--migration", "m", "--set", pattern).returncode == 0
    made = _cli("reference", str(db), "m", "--run")
    assert made.returncode == 0, made.stderr


@pytest.mark.parametrize("chunk", [None, 7, 40])
def test_a_custom_patterns_values_with_no_step_count_per_epoch(chunk):
    """Issue 38: a project's own pattern on a log with no step lines credits each value to the
    epoch its line or a line before it states, else counts them 1, 2, ...; never all on step 0."""
    top1 = [{"name": "top1", "regex": r"Best top1: (?P<value>[0-9.]+)"}]
    stated = MNIST.replace(b"(100%)\n", b"(100%)\nBest top1: 99.5\n").replace(b"(99%)\n", b"(99%)\nBest top1: 99.1\n")
    assert _series(stated, top1, chunk)["top1"] == {1: 99.1, 2: 99.5}
    unstated = b"loading\nBest top1: 90.0\nsaving\nBest top1: 95.0\nBest top1: 97.0\n"
    assert _series(unstated, top1, chunk)["top1"] == {1: 90.0, 2: 95.0, 3: 97.0}
    later = b"Epoch [3/10]\nBest top1: 90.0\nepoch=4 lr 0.1\nBest top1: 95.0\nstep 9 loss 1.0\nBest top1: 97.0\n"
    assert _series(later, top1, chunk)["top1"] == {3: 90.0, 4: 95.0, 9: 97.0}


def test_summary_lines_before_any_step_line_count_per_epoch_and_are_extracted_not_cited_by_step_lines():
    from workbench.verify.logscan import steps_only_suits

    log = b"eval_accuracy 0.50\neval_accuracy 0.75\nstep 3 loss 1.0\neval_accuracy 0.90\n"
    assert _series(log)["eval_accuracy"] == {1: 0.5, 2: 0.75, 3: 0.9}
    assert not steps_only_suits(compile_patterns(), log)  # PointLines would place them on step 0
    assert steps_only_suits(compile_patterns(), b"step 3 loss 1.0\neval_accuracy 0.90\n")


OWN_WORDS = """\
for epoch in range(1, 4):
    print(f"step {epoch * 10} loss {1.0 / epoch:.4f}")
    print(f"| Epoch {epoch} | Val Loss {2.0 / epoch:.4f} | Top-1 acc = {0.5 + epoch / 10:.2f} |")
"""


def _study_of(tmp_path, script: str, *migration_options: str):
    import shlex

    from tests.conftest import make_repo

    repo, db = tmp_path / "own", tmp_path / "s.db"
    make_repo(repo, [{"train.py": script}])
    assert _cli("init", str(db), "--title", "T").returncode == 0
    added = _cli("migration", "add", str(db), "m", "--repo", str(repo), "--base", "HEAD", "--target", "cpu",
                 "--direction", "min", "--command", f"{shlex.quote(sys.executable)} train.py", *migration_options)
    assert added.returncode == 0, added.stderr
    return db, added.stdout


def _stored(db, name: str) -> dict[int, float]:
    from storage import queries
    from storage.database import open_study

    study = open_study(db)
    try:
        m = queries.get_migration(study.db, "m")
        ref = queries.reference_attempt_id(study.db, m.id)
        return {p.step: p.value for p in queries.metric_series(study.db, ref, name)}
    finally:
        study.close()


def test_metric_maps_the_logs_words_to_a_name_the_goal_and_the_reference_run_follow(tmp_path):
    """Issue 38: `--metric "Val Loss=val_loss"` reads the log's own words as the metric; a goal
    given as the log writes it resolves through it, and the reference run is read with it."""
    db, said = _study_of(tmp_path, OWN_WORDS, "--goal", "Val Loss", "--metric", "Val Loss=val_loss",
                         "--metric", "Top-1 acc=top1")
    assert "goal val_loss min" in said
    made = _cli("reference", str(db), "m", "--run")
    assert made.returncode == 0, made.stderr
    assert _stored(db, "val_loss") == {10: 2.0, 20: 1.0, 30: pytest.approx(0.6667)}
    assert _stored(db, "top1") == {10: 0.6, 20: 0.7, 30: 0.8}
    edited = _cli("migration", "edit", str(db), "m", "--metric", "Top-1 acc=", "--goal", "Top-1 acc")
    assert edited.returncode == 0 and "metric_names" in edited.stdout, edited.stderr
    from storage import queries
    from storage.database import open_study

    study = open_study(db)
    try:
        m = queries.get_migration(study.db, "m")
        assert queries.verify_settings(study.db, m.id)["metric_names"] == {"Val Loss": "val_loss"}
        assert m.goal.metric == "Top-1_acc"  # no longer mapped: the words joined
    finally:
        study.close()


@pytest.mark.parametrize("given", ["val loss", "=x", "Val Loss=9lives", "Val Loss=a b"])
def test_a_bad_metric_mapping_is_refused_in_one_line(tmp_path, given):
    from tests.conftest import make_repo

    repo, db = tmp_path / "r", tmp_path / "s.db"
    make_repo(repo, [{"train.py": "print(1)\n"}])
    assert _cli("init", str(db), "--title", "T").returncode == 0
    done = _cli("migration", "add", str(db), "m", "--repo", str(repo), "--base", "HEAD", "--target", "cpu",
                "--goal", "loss", "--direction", "min", "--metric", given)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--metric:" in done.stderr, done.stderr
    assert "no migration" in _cli("migration", "edit", str(db), "m", "--title", "x").stderr  # nothing written


def test_verify_force_reads_the_reference_runs_series_again_with_the_names_added_since(tmp_path):
    """Issue 38: series the workbench extracted when it ran the reference are read again from the
    stored log by `verify --force` (and by a `--set` of an extraction setting) with the names and
    patterns in force now; before, the stored series stayed as first read."""
    db, _ = _study_of(tmp_path, OWN_WORDS, "--goal", "loss")
    assert _cli("reference", str(db), "m", "--run").returncode == 0
    assert _stored(db, "val_loss") == {}
    assert _cli("migration", "edit", str(db), "m", "--metric", "Val Loss=val_loss").returncode == 0
    forced = _cli("verify", str(db), "--force")
    assert forced.returncode == 0, forced.stderr
    assert "m: series read again from the logs of 1 run" in forced.stderr
    assert _stored(db, "val_loss") == {10: 2.0, 20: 1.0, 30: pytest.approx(0.6667)}
    pattern = 'patterns=[{"name": "top1", "regex": "acc = (?P<value>[0-9.]+)"}]'
    assert _cli("verify", str(db), "--migration", "m", "--set", pattern).returncode == 0
    assert _stored(db, "top1") == {10: 0.6, 20: 0.7, 30: 0.8}
    again = _cli("verify", str(db), "--force")
    assert "read again" not in again.stderr  # unchanged series are not rewritten
