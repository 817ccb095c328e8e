"""Shared builders: real git repositories, real bundle folders, real SQLite files."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings

# Hypothesis runs derandomized (a fixed seed per test), so a test that passes passes every time;
# HYPOTHESIS_PROFILE=explore searches afresh and keeps failing examples in .hypothesis/ to replay.
hypothesis_settings.register_profile("ci", derandomize=True, database=None)
hypothesis_settings.register_profile("explore", derandomize=False)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Agent",
    "GIT_AUTHOR_EMAIL": "agent@example.com",
    "GIT_COMMITTER_NAME": "Test Agent",
    "GIT_COMMITTER_EMAIL": "agent@example.com",
    "GIT_AUTHOR_DATE": "2026-11-01T10:00:00Z",
    "GIT_COMMITTER_DATE": "2026-11-01T10:00:00Z",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
    ).stdout.strip()


def make_repo(path: Path, versions: list[dict[str, str]]) -> list[str]:
    """A git repository with one commit per version (file name to content); returns the SHAs."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    shas = []
    for number, files in enumerate(versions):
        for name, content in files.items():
            (path / name).write_text(content)
        git(path, "add", "-A")
        git(path, "commit", "-q", "--allow-empty", "-m", f"version {number}")
        shas.append(git(path, "rev-parse", "HEAD"))
    return shas


@dataclass
class BundleBuilder:
    """Writes a bundle folder as docs/bundle-format.md describes it."""

    root: Path
    study: dict[str, Any] = field(
        default_factory=lambda: {
            "slug": "study",
            "title": "Test study",
            "staff_hourly_rate": 100.0,
            "reviewers": ["ana"],
        }
    )
    prices: dict[str, float] = field(default_factory=lambda: {"tpu-v5e": 1.2, "cpu": 0.05})

    def write_study(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        lines = ["format = 1", "", "[study]"]
        lines += [f"{k} = {json.dumps(v)}" for k, v in self.study.items()]
        lines += ["", "[prices]"] + [f'"{k}" = {v}' for k, v in self.prices.items()]
        (self.root / "study.toml").write_text("\n".join(lines) + "\n")

    def add_migration(
        self,
        slug: str,
        *,
        commits: int = 3,
        repo_as_bundle: bool = False,
        title: str = "MLP to torch_xla",
    ) -> tuple[Path, list[str]]:
        folder = self.root / "migrations" / slug
        folder.mkdir(parents=True)
        source = folder / "repo" if not repo_as_bundle else self.root.parent / f"{slug}-src"
        shas = make_repo(
            source, [{"train.py": f"print('version {n}')\n"} for n in range(commits)]
        )
        repo = "repo"
        if repo_as_bundle:
            git(source, "bundle", "create", str(folder / "repo.bundle"), "--all")
            repo = "repo.bundle"
        (folder / "migration.toml").write_text(
            f'title = {json.dumps(title)}\nrepo = "{repo}"\nbase_commit = "{shas[0]}"\n'
            "[target]\naccelerator = \"tpu-v5e\"\nchips = 4\nruntime = \"torch_xla\"\n"
            "[goal]\nmetric = \"eval_accuracy\"\nreference = 0.9\ndirection = \"max\"\n"
            "tolerance = 0.01\n[budgets]\ncompute_dollars = 50.0\nattempts = 10\n"
        )
        (folder / "logs").mkdir()
        (folder / "metrics").mkdir()
        (folder / "attempts.jsonl").write_text("")
        return folder, shas

    @staticmethod
    def attempt(seq: int, commit: str, **overrides: Any) -> dict[str, Any]:
        record = {
            "seq": seq,
            "source": "reference" if seq == 0 else "agent",
            "commit": commit,
            "command": {"argv": ["python", "train.py"], "cwd": ".", "env": {"PJRT_DEVICE": "CPU"}},
            "started_at": f"2026-11-01T10:0{seq % 10}:00Z",
            "ended_at": f"2026-11-01T10:0{seq % 10}:30Z",
            "status": "ok",
            "exit_code": 0,
            "exit_code_source": "process",
            "expected_level": None if seq == 0 else 2,
            "claim": "" if seq == 0 else "Runs on 4 chips and matches the GPU numbers.",
            "intended_hardware": {"kind": "tpu-v5e", "count": 4},
            "observed_hardware": None,
            "log": f"logs/{seq}.log",
            "metrics": f"metrics/{seq}.jsonl",
        }
        record.update(overrides)
        return record

    @staticmethod
    def write_attempts(folder: Path, records: list[dict[str, Any] | str]) -> None:
        """Records as JSON lines; a str is written as it is (for malformed lines)."""
        for record in records:
            if isinstance(record, dict):
                if record.get("log"):
                    log = folder / record["log"]
                    if not log.exists():
                        log.write_text(f"step 1 loss 0.5\nrun {record['seq']} done\n")
                if record.get("metrics"):
                    metrics = folder / record["metrics"]
                    if not metrics.exists():
                        metrics.write_text(
                            "".join(
                                json.dumps({"name": "loss", "step": s, "value": 1.0 / (s + 1)}) + "\n"
                                for s in range(5)
                            )
                        )
        (folder / "attempts.jsonl").write_text(
            "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)
        )


@pytest.fixture
def bundle(tmp_path: Path) -> BundleBuilder:
    builder = BundleBuilder(tmp_path / "bundle")
    builder.write_study()
    return builder


@pytest.fixture
def small_bundle(bundle: BundleBuilder) -> BundleBuilder:
    """Two migrations: one with a reference and three agent attempts, one with none."""
    folder, shas = bundle.add_migration("mlp-xla")
    bundle.write_attempts(
        folder,
        [
            bundle.attempt(0, shas[0]),
            bundle.attempt(1, shas[1], status="nonzero_exit", exit_code=1),
            bundle.attempt(2, shas[2]),
            bundle.attempt(3, shas[2], source="rerun", rerun_of=2),
        ],
    )
    bundle.add_migration("cnn-xla", commits=1, title="CNN to torch_xla")
    return bundle


@pytest.fixture(scope="session")
def demo_source(tmp_path_factory) -> Path:
    """The bundled demo study, imported and verified once per test session. Never open it for writing."""
    from storage.database import open_study
    from workbench import config
    from workbench.bundle import import_bundle
    from workbench.verify import verify_study

    path = tmp_path_factory.mktemp("demo-source") / "demo.db"
    study = open_study(path, create=True)
    try:
        assert import_bundle(study, config.DEMO_BUNDLE, "ana").problems == []
        verify_study(study.db, "ana")
    finally:
        study.close()
    return path


@pytest.fixture(scope="module")
def demo_db(demo_source: Path, tmp_path_factory) -> Path:
    """A copy of the demo study per test module: the app records review time, so modules don't share one."""
    import shutil

    path = tmp_path_factory.mktemp("demo") / "demo.db"
    shutil.copy(demo_source, path)
    return path


@pytest.fixture
def demo_study(demo_source: Path, tmp_path: Path):
    """A copy of the demo study for this test alone, open (closed after it): a test may write to it."""
    import shutil

    from storage.database import open_study

    path = tmp_path / "demo.db"
    shutil.copy(demo_source, path)
    study = open_study(path)
    yield study
    study.close()


@pytest.fixture
def api():
    """A local stand-in for Anthropic's Messages API (tests/assist_helpers.py), scripted per test."""
    from assist_helpers import MessagesAPI

    server = MessagesAPI()
    yield server
    server.close()


@pytest.fixture
def claims_study(bundle: BundleBuilder, tmp_path: Path):
    """One migration whose three agent attempts have claims the rules read no level from."""
    from assist_helpers import CLAIMS

    from storage.database import open_study
    from workbench.bundle import import_bundle

    folder, shas = bundle.add_migration("mlp-xla", commits=4)
    bundle.write_attempts(folder, [bundle.attempt(0, shas[0])] + [
        bundle.attempt(seq, shas[seq], expected_level=None, claim=CLAIMS[seq]) for seq in (1, 2, 3)
    ])
    db = open_study(tmp_path / "s.db", create=True)
    report = import_bundle(db, bundle.root, "ana")
    assert not report.problems
    yield db
    db.close()


QUICK_SKIPPED_FILES = frozenset({"test_rerun_xla.py", "test_verify_variants.py", "test_report_html.py",
                                 "test_app_serve.py"})
"""`make test-quick` (WORKBENCH_TESTS=quick) leaves out the torch_xla runs and the browser tests;
CI (`.ci/run`) and `make test` run everything."""
QUICK_SKIPPED_FIXTURES = frozenset({"torch_python"})
"""Fixtures that start a torch_xla interpreter in files that are otherwise quick."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("WORKBENCH_TESTS") != "quick":
        return
    skip = pytest.mark.skip(reason="make test-quick leaves out the torch_xla and browser tests (make test runs them)")
    for item in items:
        if item.path.name in QUICK_SKIPPED_FILES or QUICK_SKIPPED_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(skip)
