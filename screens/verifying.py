"""Verify from the app (issue 20): `V` on the study, migration and attempt screens runs the
verifier over what that screen shows in a thread worker, with progress in a dialog that `escape`
hides (the run goes on; a toast says when it is done)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import ProgressBar, Static

from domain.text import clean
from screens.base import Scope


def verify_scope(path: Path, scope: Scope, step: Callable[[int, int, str], None]) -> tuple[int, int, list[str]]:
    """Verify every attempt in `scope` as `workbench verify` does, a migration at a time (its
    reference run loaded once, its verdicts written a batch per transaction; unchanged inputs are
    skipped), calling `step(done, total, label)` as attempts are settled, with the migration being
    verified; returns (attempts verified again, attempts, a line for each override that stopped
    counting: workbench.verify.overrides_left_behind). Judged over the cores, in processes
    (workbench/verify/batch.py), so the app's thread only reads and writes. One verify run per
    attempt, as before, took 47 s on 4,428 attempts against 6.9 s (issue 19)."""
    from storage.database import open_study
    from storage.records import now
    from workbench import config
    from workbench.verify import overrides_left_behind, study_targets, verify_groups
    from workbench.verify.batch import default_workers

    slug, seq, _ = scope
    study = open_study(path)
    finished, changed, total, since = 0, 0, 0, now()
    try:
        study_of, migrations = study_targets(study.db, slug)

        def progress(done: int, of: int) -> None:
            nonlocal total
            total = of
            if done < of:  # then the migration after the last finished one is not finished yet
                step(done, of, clean(migrations[finished].slug))

        for group in verify_groups(study.db, migrations, study_of, config.reviewer(), seq=seq,
                                   workers=default_workers(), progress=progress):
            finished += 1
            changed += sum(o.changed for o in group)
        left = overrides_left_behind(study.db, config.reviewer(), since)
    finally:
        study.close()
    step(total, total, "done")
    return changed, total, left


class VerifyProgress(ModalScreen[None]):
    """Progress of a verify run; `escape` hides it while the run goes on."""

    BINDINGS = [
        Binding("escape", "dismiss", "Hide", id="verify.hide",
                tooltip="Hide this dialog; verification goes on and a toast says when it is done"),
    ]

    def __init__(self, label: str) -> None:
        super().__init__(classes="verify-progress")
        self.label = label
        self.progress: tuple[int, int, str] | None = None
        """(attempts done, attempts, the one being verified), as the worker last said."""

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = "Verify"
            box.border_subtitle = "escape hides · the run goes on"
            yield Static(Text(f"Verifying {self.label}…"), id="verify-what")
            yield ProgressBar(total=None, id="verify-bar")  # with the time left: a study takes a while
            yield Static(Text("Listing the attempts…", style="dim"), id="verify-step")

    def step(self, done: int, total: int, label: str) -> None:
        """Record and show how far the run is (the dialog may be hidden or not mounted yet)."""
        self.progress = (done, total, label)
        if self.is_mounted and self.is_attached:
            self._show()

    def on_mount(self) -> None:
        if self.progress is not None:
            self._show()

    def _show(self) -> None:
        assert self.progress is not None
        done, total, label = self.progress
        self.query_one(ProgressBar).update(total=total, progress=done)
        shown = "done" if done >= total else f"{done} of {total} attempts · {label}"
        self.query_one("#verify-step", Static).update(Text(shown))
