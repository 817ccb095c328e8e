"""Level 2's checkpoint comparison: real state_dicts written by torch.save after real SGD steps,
imported through a bundle (hashed and copied, never unpickled) and verified (relative L2 per
tensor against the reference run's checkpoint)."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from domain.models import FailureCause, Outcome
from storage import queries
from storage.artifacts import artifact_of
from storage.database import open_study
from workbench.bundle import import_bundle
from workbench.verify import tensors as tensor_mod
from workbench.verify import verify_study

P, F, U = Outcome.PASS, Outcome.FAIL, Outcome.UNKNOWN

needs_torch = pytest.mark.skipif(
    tensor_mod.backend() is None,
    reason="torch is not installed: pip install -e '.[tensors]' (torch==2.13.0 CPU) to compare checkpoints",
)


def train(lr: float = 0.1, steps: int = 4, seed: int = 0) -> dict:
    """A small MLP's state_dict after a few real SGD steps on fixed data."""
    import torch

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    x = torch.randn(32, 4)
    y = torch.randint(0, 3, (32,))
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def save(folder: Path, name: str, state: dict) -> str:
    import torch

    path = folder / "checkpoints" / name
    path.parent.mkdir(exist_ok=True)
    torch.save(state, path)
    return f"checkpoints/{name}"


def verdict(db, seq: int, level: int = 2):
    m = queries.get_migration(db, "mlp-xla")
    a = db.execute("SELECT id FROM attempt WHERE migration_id = ? AND seq = ?", [m.id, seq]).fetchone()[0]
    return queries.verdicts(db, a)[level - 1], a


def snapshot(db) -> tuple:
    return (
        db.execute("SELECT * FROM artifact ORDER BY id").fetchall(),
        db.execute("SELECT COUNT(*) FROM audit").fetchone()[0],
    )


@pytest.fixture
def study(tmp_path: Path):
    s = open_study(tmp_path / "s.db", create=True)
    yield s
    s.close()


@needs_torch
def test_level2_compares_real_checkpoints_by_relative_l2(bundle, study, tmp_path: Path) -> None:
    folder, shas = bundle.add_migration("mlp-xla")
    reference = train()
    shape = dict(reference)
    shape["2.weight"] = shape["2.weight"][:2].clone()  # a head of 2 classes where the reference has 3
    missing = {k: v for k, v in reference.items() if k != "0.bias"}
    bundle.write_attempts(folder, [
        bundle.attempt(0, shas[0], checkpoint=save(folder, "ref.pt", reference)),
        bundle.attempt(1, shas[1], checkpoint=save(folder, "same.pt", train())),
        bundle.attempt(2, shas[1], checkpoint=save(folder, "lr.pt", train(lr=0.12))),
        bundle.attempt(3, shas[2], checkpoint=save(folder, "shape.pt", shape)),
        bundle.attempt(4, shas[2], checkpoint=save(folder, "missing.pt", missing)),
        bundle.attempt(5, shas[2]),  # no checkpoint: the series alone decide
    ])
    report = import_bundle(study, bundle.root, "ana")
    assert not report.problems
    db = study.db
    verify_study(db, "ana")

    # an identical run: every tensor within tensor_rtol, the worst ones listed
    v, _ = verdict(db, 1)
    assert v.outcome is P, v.reason
    assert "4 tensors within relative L2 0.001" in v.reason and "loss over 5 steps" in v.reason
    assert {e.ref for e in v.evidence if e.kind == "tensor"} == set(reference)

    # another learning rate: the loss series (identical here) agree, the tensors do not
    v, attempt_id = verdict(db, 2)
    assert v.outcome is F
    assert "beyond relative L2 0.001" in v.reason
    bad = [e for e in v.evidence if e.kind == "tensor"]
    assert bad and all(e.ref in reference and "relative L2" in e.text for e in bad)
    for e in bad:
        assert e.ref in v.reason
    failure = queries.current_failure(db, attempt_id)
    assert queries.current_verification(db, attempt_id).cause is FailureCause.NUMERICAL_MISMATCH
    assert {e.ref for e in failure.evidence} == {e.ref for e in bad}
    # the rel L2 stated is the real one
    e = bad[0]
    a, b = train(lr=0.12)[e.ref], reference[e.ref]
    rel = float((a.double() - b.double()).norm() / b.double().norm())
    assert f"{rel:.3g}" in e.text

    # a tensor of another shape fails, naming it and both shapes
    v, _ = verdict(db, 3)
    assert v.outcome is F
    assert "shape mismatch: 2.weight (2, 8) vs the reference's (3, 8)" in v.reason
    assert [e.ref for e in v.evidence] == ["2.weight"]

    # a missing tensor fails, naming it
    v, _ = verdict(db, 4)
    assert v.outcome is F and "missing tensor(s) the reference has: 0.bias" in v.reason

    # without a checkpoint of its own, the series decide as before
    v, _ = verdict(db, 5)
    assert v.outcome is P and "tensor" not in v.reason


@needs_torch
def test_tensor_rtol_setting_decides(bundle, study) -> None:
    folder, shas = bundle.add_migration("mlp-xla")
    bundle.write_attempts(folder, [
        bundle.attempt(0, shas[0], checkpoint=save(folder, "ref.pt", train())),
        bundle.attempt(1, shas[1], checkpoint=save(folder, "lr.pt", train(lr=0.12))),
    ])
    assert not import_bundle(study, bundle.root, "ana").problems
    db = study.db
    verify_study(db, "ana")
    assert verdict(db, 1)[0].outcome is F
    result = subprocess.run(
        [sys.executable, "-m", "cli", "verify", str(study.path), "--migration", "mlp-xla",
         "--set", "tensor_rtol=0.5"],
        capture_output=True, text=True, env={**os.environ, "WORKBENCH_REVIEWER": "ana"}, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    v, _ = verdict(db, 1)
    assert v.outcome is P and "within relative L2 0.5" in v.reason


@needs_torch
def test_reimport_changes_nothing_and_a_changed_checkpoint_reverifies(bundle, study, tmp_path: Path) -> None:
    folder, shas = bundle.add_migration("mlp-xla")
    bundle.write_attempts(folder, [
        bundle.attempt(0, shas[0], checkpoint=save(folder, "ref.pt", train())),
        bundle.attempt(1, shas[1], checkpoint=save(folder, "run.pt", train())),
    ])
    assert not import_bundle(study, bundle.root, "ana").problems
    db = study.db
    # stored by content beside the database, recorded with the attempt
    attempt_id = db.execute("SELECT id FROM attempt WHERE seq = 1").fetchone()[0]
    row = artifact_of(db, attempt_id)
    source = folder / "checkpoints" / "run.pt"
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    assert row["sha256"] == sha and row["size"] == source.stat().st_size and row["name"] == "checkpoints/run.pt"
    assert Path(row["file"]) == tmp_path / "s.artifacts" / sha
    assert Path(row["file"]).read_bytes() == source.read_bytes()
    assert verify_study(db, "ana").changed == 1

    before = snapshot(db)
    again = import_bundle(study, bundle.root, "ana")
    assert (again.inserted, again.updated, again.problems) == (0, 0, [])
    assert snapshot(db) == before
    assert verify_study(db, "ana").changed == 0
    assert verdict(db, 1)[0].outcome is P

    # the same name with other bytes: one update, the old copy kept, and the verdict redone
    save(folder, "run.pt", train(lr=0.12))
    changed = import_bundle(study, bundle.root, "ana")
    assert (changed.inserted, changed.updated) == (0, 1)
    assert artifact_of(db, attempt_id)["sha256"] != sha
    assert (tmp_path / "s.artifacts" / sha).is_file()
    assert verify_study(db, "ana").changed == 1
    v, _ = verdict(db, 1)
    assert v.outcome is F and "beyond relative L2" in v.reason
    history = db.execute("SELECT COUNT(*) FROM verification WHERE attempt_id = ?", [attempt_id]).fetchone()[0]
    assert history == 2

    # dropping the field forgets the artifact: the series decide again
    records = [json.loads(line) for line in (folder / "attempts.jsonl").read_text().splitlines()]
    del records[1]["checkpoint"]
    bundle.write_attempts(folder, records)
    assert import_bundle(study, bundle.root, "ana").updated == 1
    assert artifact_of(db, attempt_id) is None
    verify_study(db, "ana")
    v, _ = verdict(db, 1)
    assert v.outcome is P and "tensor" not in v.reason


def test_a_missing_checkpoint_is_reported_with_file_and_line(bundle, study) -> None:
    folder, shas = bundle.add_migration("mlp-xla")
    (folder / "checkpoints").mkdir()
    (folder / "checkpoints" / "0.pt").write_bytes(b"not read on import")
    bundle.write_attempts(folder, [
        bundle.attempt(0, shas[0], checkpoint="checkpoints/0.pt"),
        bundle.attempt(1, shas[1], checkpoint="checkpoints/1.pt"),
        bundle.attempt(2, shas[1], checkpoint=7),
        bundle.attempt(3, shas[1], checkpoint="checkpoints"),
    ])
    report = import_bundle(study, bundle.root, "ana")
    path = folder / "attempts.jsonl"
    assert report.problems == [
        f"{path}:2: checkpoint 'checkpoints/1.pt' does not exist",
        f"{path}:3: 'checkpoint' must be a string, not int 7",
        f"{path}:4: checkpoint 'checkpoints' is not a file",
    ]
    db = study.db
    # the bad records are skipped whole, in their own transactions; the good one is in
    assert [r[0] for r in db.execute("SELECT seq FROM attempt ORDER BY seq")] == [0]
    assert db.execute("SELECT name FROM artifact").fetchall() == [("checkpoints/0.pt",)]


class _Boom:
    def __reduce__(self):
        return (os.system, (f"touch {_Boom.marker}",))


def test_import_never_unpickles_and_level2_refuses_pickled_code(bundle, study, tmp_path: Path) -> None:
    """A checkpoint that would run code when unpickled: import only hashes and copies it, and the
    verifier's weights_only load refuses it (unknown, with the reason), running nothing."""
    marker = tmp_path / "ran"
    _Boom.marker = marker
    folder, shas = bundle.add_migration("mlp-xla")
    (folder / "checkpoints").mkdir()
    (folder / "checkpoints" / "evil.pt").write_bytes(pickle.dumps({"w": _Boom()}))
    (folder / "checkpoints" / "ref.pt").write_bytes(pickle.dumps({"w": _Boom()}))
    bundle.write_attempts(folder, [
        bundle.attempt(0, shas[0], checkpoint="checkpoints/ref.pt"),
        bundle.attempt(1, shas[1], checkpoint="checkpoints/evil.pt"),
    ])
    assert not import_bundle(study, bundle.root, "ana").problems
    assert not marker.exists()
    verify_study(study.db, "ana")
    assert not marker.exists()
    v, _ = verdict(study.db, 1)
    assert v.outcome is P  # the series agree; the checkpoints could not be compared
    if tensor_mod.backend() is None:
        assert "checkpoint comparison skipped: torch is not installed" in v.reason
    else:
        assert "checkpoint comparison skipped: cannot read 'checkpoints/ref.pt'" in v.reason


def test_without_torch_the_series_decide_and_the_verdict_says_so(bundle, study, monkeypatch) -> None:
    folder, shas = bundle.add_migration("mlp-xla")
    (folder / "checkpoints").mkdir()
    for n in range(2):
        (folder / "checkpoints" / f"{n}.pt").write_bytes(f"checkpoint {n}".encode())
    bundle.write_attempts(folder, [
        bundle.attempt(0, shas[0], checkpoint="checkpoints/0.pt"),
        bundle.attempt(1, shas[1], checkpoint="checkpoints/1.pt"),
    ])
    assert not import_bundle(study, bundle.root, "ana").problems
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    monkeypatch.setattr(tensor_mod, "backend", lambda: None)
    db = study.db
    verify_study(db, "ana")
    v, attempt_id = verdict(db, 1)
    assert v.outcome is P
    assert v.reason.endswith("checkpoint comparison skipped: torch is not installed (pip install 'workbench[tensors]')")
    inputs = json.loads(db.execute("SELECT inputs FROM verification WHERE attempt_id = ?", [attempt_id]).fetchone()[0])
    assert inputs["tensor_backend"] == "absent"
    assert inputs["attempt"]["checkpoint_sha256"] == hashlib.sha256(b"checkpoint 1").hexdigest()
    # installing torch changes an input: the skipped comparison is redone
    monkeypatch.setattr(tensor_mod, "backend", lambda: "2.13.0")
    assert verify_study(db, "ana").changed == 1


@needs_torch
def test_safetensors_checkpoints_when_the_package_is_installed(bundle, study) -> None:
    pytest.importorskip("safetensors", reason="safetensors is optional; not installed")
    from safetensors.torch import save_file

    folder, shas = bundle.add_migration("mlp-xla")
    (folder / "checkpoints").mkdir()
    save_file(train(), str(folder / "checkpoints" / "ref.safetensors"))
    save_file(train(lr=0.12), str(folder / "checkpoints" / "lr.safetensors"))
    bundle.write_attempts(folder, [
        bundle.attempt(0, shas[0], checkpoint="checkpoints/ref.safetensors"),
        bundle.attempt(1, shas[1], checkpoint="checkpoints/lr.safetensors"),
    ])
    assert not import_bundle(study, bundle.root, "ana").problems
    verify_study(study.db, "ana")
    v, _ = verdict(study.db, 1)
    assert v.outcome is F and "beyond relative L2" in v.reason


@needs_torch
def test_compare_edge_cases() -> None:
    import torch

    ref = {"w": torch.ones(3), "z": torch.zeros(2), "n": torch.tensor(3)}
    assert tensor_mod.compare(dict(ref), ref, 1e-3).outcome is P
    nan = {**ref, "w": torch.tensor([1.0, float("nan"), 1.0])}
    result = tensor_mod.compare(nan, ref, 1e-3)
    assert result.outcome is F and "w nan" in result.reason
    off_zero = {**ref, "z": torch.tensor([0.0, 1e-6])}
    assert tensor_mod.compare(off_zero, ref, 1e-3).outcome is F  # an all-zero reference compares absolutely
    half = {**ref, "w": torch.ones(3, dtype=torch.bfloat16)}
    assert tensor_mod.compare(half, ref, 1e-3).outcome is P  # dtypes may differ; values decide
    extra = {**ref, "extra": torch.ones(1)}
    assert "tensor(s) the reference does not have: extra" in tensor_mod.compare(extra, ref, 1e-3).reason
