"""Issue 14 in the app: the forms that set a study up, calling the same services (and so giving
the same one-line errors) as `workbench migration add` and `workbench reference --log`."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Label, Select, Static

from domain.errors import WorkbenchError
from domain.text import clean
from screens.forms import RecordForm, Save
from screens.typeahead import Input
from workbench import config

NEXT_STEPS = (
    ("N or +", "add a migration here (the form of `workbench migration add`)"),
    ("reference", "workbench reference STUDY SLUG --log FILE (R on a migration)"),
    ("import", "workbench import claude-code STUDY --project DIR"),
    ("watch", "workbench watch STUDY (imports sessions as the agent works)"),
)
"""What an empty study's screen says to do next, in order."""


def next_steps() -> Text:
    out = Text("No migrations in this study yet. Next:\n", style="bold")
    for key, line in NEXT_STEPS:
        out.append(f"  {key:<10}", style="bold")
        out.append(f" {line}\n")
    return out


def _number(value: str, what: str) -> float | None:
    from workbench.studies import finite

    return finite(value, what) if value.strip() else None


TARGETS = ("tpu-v5e:4", "tpu-v5e:8", "tpu-v4:4", "tpu-v6e:4", "cpu:4", "cpu:8")
"""What the target field completes: TPU kinds, and `cpu:N` for a study run on XLA:CPU (docs/setup.md)."""


class NewMigrationForm(RecordForm):
    """`workbench migration add` as a form; dismisses with the new migration's id."""

    form_title = "New migration"
    record_name = "migration"
    FIELDS = (
        ("slug", "Slug (SLUG)", ""), ("repo", "Repository (--repo, a git working tree)", ""),
        ("base", "Base revision (--base; empty: the commit before the agent's work)", ""),
        ("target", "Target (--target ACCEL[:CHIPS])", ""),
        ("runtime", "Runtime (--runtime)", "torch_xla"), ("goal", "Goal metric (--goal)", ""),
        ("reference", "Reference value (--reference-value; empty: the reference run's)", ""),
        ("tolerance", "Tolerance (--tolerance)", "0"), ("command", "Command (--command)", ""),
        ("setup", "Setup, run before the command in each worktree (--setup)", ""),
        ("metrics", "Metric names (--metric LOG WORDS=NAME; ';' between)", ""),
        ("title", "Title (--title)", ""), ("acceptance", "Acceptance level (--acceptance-level)", "4"),
    )

    REQUIRED = frozenset({"slug", "repo", "target", "goal"})

    def compose_fields(self) -> ComposeResult:
        from textual.suggester import SuggestFromList

        for key, label, value in self.FIELDS:
            yield Label(label)
            if key == "target":  # where no TPU is at hand, XLA:CPU devices stand in for its chips
                yield Input(value, id="new-target", placeholder="tpu-v5e:4, or cpu:4 where XLA:CPU stands in for the TPU",
                            suggester=SuggestFromList(TARGETS, case_sensitive=False))
                continue
            yield Input(value, id=f"new-{key}")
            if key == "goal":
                yield Label("Direction (--direction)")
                yield Select([("max: higher is better", "max"), ("min: lower is better", "min")],
                             value="max", allow_blank=False, id="new-direction")

    def build(self) -> Save:
        try:
            return self._build()
        except WorkbenchError as exc:  # the service's one-line checks, said on the form
            raise ValueError(str(exc)) from None

    def _build(self) -> Save:
        from workbench.studies import MigrationSpec, add_migration, finite, open_existing

        got = {key: self.query_one(f"#new-{key}", Input).value for key, _, _ in self.FIELDS}
        for key, label, _ in self.FIELDS:  # the first empty one, in the form's order
            if key in self.REQUIRED and not got[key].strip():
                raise ValueError(f"{label.partition(' (')[0]} is required")
        level = got["acceptance"].strip()
        spec = MigrationSpec(
            slug=got["slug"].strip(), repo=Path(got["repo"].strip()).expanduser(),
            base=got["base"].strip() or None, target=got["target"].strip(),
            runtime=got["runtime"].strip() or "torch_xla", goal=got["goal"].strip(),
            direction=str(self.query_one("#new-direction", Select).value),
            reference_value=_number(got["reference"], "--reference-value"),
            tolerance=finite(got["tolerance"] or "0", "--tolerance", minimum=0.0),
            command=got["command"].strip() or None, title=got["title"].strip() or None,
            setup=got["setup"].strip() or None,
            metric_names=tuple(m.strip() for m in got["metrics"].split(";") if m.strip()),
            acceptance_level=int(level) if level.isdigit() else 0,
        )
        path = self.app.db_path

        def save(_db) -> int:
            sdb = open_existing(path)
            try:
                return add_migration(sdb, spec, config.reviewer())[0].id
            finally:
                sdb.close()

        return save


class ReferenceForm(RecordForm):
    """`workbench reference --log` (or `--run --replicates N`) as a form; dismisses with the
    reference attempt's id (the last one recorded)."""

    form_title = "Record a reference run"
    record_name = "reference run"

    def __init__(self, slug: str) -> None:
        super().__init__()
        self.slug = slug

    def compose_fields(self) -> ComposeResult:
        from textual.widgets import Checkbox

        yield Static(Text(f"The original code's run of {clean(self.slug)}, from its files, or run here at the"
                          " base commit. Several logs (space-separated), or replicates run here, are the"
                          " reference run with other seeds: level 2 measures the noise from them."),
                     classes="form-info")
        yield Checkbox("Run it here (--run, at the base commit)", id="ref-run")
        yield Label("Replicates (--run --replicates N: seed N in WORKBENCH_SEED)")
        yield Input("1", id="ref-replicates", type="integer")
        for key, label in (("log", "Log file(s) (--log)"), ("metrics", "Metrics, JSON Lines (--metrics; one per log)"),
                           ("wall", "Wall-clock seconds (--wall; one per log)"), ("hardware", "Hardware (--hardware ACCEL:N)"),
                           ("command", "Command (--command; default the migration's)")):
            yield Label(label)
            yield Input(id=f"ref-{key}")

    def build(self) -> Save:
        from textual.widgets import Checkbox

        from workbench.studies import open_existing, record_references

        got = {key: self.query_one(f"#ref-{key}", Input).value.strip()
               for key in ("log", "metrics", "wall", "hardware", "command", "replicates")}
        replicates = int(got["replicates"]) if got["replicates"].isdigit() else 0
        if not 1 <= replicates <= 100:
            raise ValueError("--replicates: from 1 to 100 runs")
        if self.query_one("#ref-run", Checkbox).value:
            if got["log"] or got["metrics"] or got["wall"]:
                raise ValueError("--run: the run is measured here; leave the log, metrics and wall empty")
            return self._run_here(got, replicates)
        if replicates > 1:
            raise ValueError("--replicates needs --run (give several logs instead)")
        if not got["log"]:
            raise ValueError("--log: give the reference run's log file")
        try:
            walls = [_number(w, "--wall") for w in got["wall"].replace(",", " ").split()]
        except WorkbenchError as exc:
            raise ValueError(str(exc)) from None
        path, slug = self.app.db_path, self.slug

        def save(_db) -> int:
            logs = _paths(got["log"])
            metrics = _paths(got["metrics"]) or [None] * len(logs)
            sdb = open_existing(path)
            try:
                return record_references(
                    sdb, slug, logs=logs, metrics=metrics, walls=walls or [None] * len(logs),
                    hardware=got["hardware"] or None, command=got["command"] or None, reviewer=config.reviewer())[-1].id
            finally:
                sdb.close()

        return save

    def _run_here(self, got: dict[str, str], replicates: int) -> Save:
        """`workbench reference --run --replicates N` in the save's worker (minutes: the form says
        saving until the runs end; the app stays responsive)."""
        from domain.models import Hardware
        from workbench.reference_run import run_replicates
        from workbench.rerun.preflight import target_venv
        from workbench.studies import open_existing, parse_target

        try:
            hardware = Hardware(*parse_target(got["hardware"], "--hardware")) if got["hardware"] else None
        except WorkbenchError as exc:
            raise ValueError(str(exc)) from None
        path, slug = self.app.db_path, self.slug

        def save(_db) -> int:
            import os

            sdb = open_existing(path)
            try:
                return run_replicates(sdb, slug, replicates, command=got["command"] or None, env={},
                                      venv=target_venv(os.environ.get("WORKBENCH_TARGET_VENV") or None), timeout=None,
                                      hardware=hardware, reviewer=config.reviewer())[-1].id
            finally:
                sdb.close()

        return save


def _paths(text: str) -> list[Path]:
    """One file, or several separated by spaces (quoted as a shell would where a name has one);
    read in the save's worker, where looking at the disk may wait."""
    import shlex

    if not text:
        return []
    whole = Path(text).expanduser()
    if whole.exists():
        return [whole]
    try:
        return [Path(p).expanduser() for p in shlex.split(text)]
    except ValueError:  # an unmatched quote: one name, refused by the service if it is not a file
        return [whole]
