"""Domain objects cross to verify's worker processes and back pickled (issue 19): a frozen slotted
dataclass pickles as its class called with its fields' values, which must give an equal object of
the same types, for every such class, at every protocol, and for what a verify task sends back."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import domain.attempts
import domain.models as models
import domain.study
from storage import queries, verify_inputs
from storage.database import open_study
from workbench.bundle import import_bundle
from workbench.config import DEMO_BUNDLE
from workbench.verify import batch, study_targets, verify_study
from workbench.verify.settings import merge


def _same(a, b) -> None:
    """Equal, and of the same types all the way down (a tuple stays a tuple)."""
    assert type(a) is type(b) and a == b
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            _same(getattr(a, f.name), getattr(b, f.name))
    elif isinstance(a, (list, tuple)):
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])


def _round_trips(obj) -> None:
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        _same(obj, pickle.loads(pickle.dumps(obj, protocol=protocol)))
    _same(obj, copy.deepcopy(obj))
    _same(obj, copy.copy(obj))


def _instances(db) -> list:
    study, migrations = study_targets(db)
    out: list = [study, *migrations, *(s for s in queries.iter_migration_summaries(db))]
    for m in migrations:
        out += [m.target, m.goal, m.budgets]
        for a in verify_inputs.agent_attempts(db, m.id):
            out += [a, a.command, *(h for h in (a.intended_hardware, a.observed_hardware) if h)]
            failure = queries.current_failure(db, a.id)
            out += [failure] if failure else []
        out += queries.attempt_summaries(db, m.id)
    out += [models.Evidence("log_line", "3", "step 3 loss nan"), models.Evidence("metric", "loss@3")]
    return out


def test_every_domain_object_round_trips(tmp_path) -> None:
    study = open_study(tmp_path / "s.db", create=True)
    try:
        assert not import_bundle(study, DEMO_BUNDLE, "ana").problems
        verify_study(study.db, "ana")
        objects = _instances(study.db)
        kinds = {type(o) for o in objects}
        pickled_by_fields = {c for module in (models, domain.attempts, domain.study) for c in vars(module).values()
                             if isinstance(c, type) and "__reduce__" in vars(c) and dataclasses.is_dataclass(c)}
        assert pickled_by_fields and pickled_by_fields <= kinds, pickled_by_fields - kinds  # each one tried
        for obj in objects:
            _round_trips(obj)
    finally:
        study.close()


def test_what_a_verify_task_sends_back_round_trips(tmp_path) -> None:
    study = open_study(tmp_path / "s.db", create=True)
    try:
        assert not import_bundle(study, DEMO_BUNDLE, "ana").problems
        db = study.db
        study_of, migrations = study_targets(db)
        cache: dict = {}
        judged = []
        for m in migrations:
            for task in batch.tasks_of(m, study_of, merge(queries.verify_settings(db, m.id)),
                                       verify_inputs.reference_attempt(db, m.id), verify_inputs.agent_attempts(db, m.id), True):
                _round_trips(task)
                judged += batch.judge_task(db, task, cache)
        assert judged and all(j.rows is not None for j in judged)
        for j in judged:
            _round_trips(j)
    finally:
        study.close()
