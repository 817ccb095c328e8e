"""The Textual app, driven by Pilot over real study databases built from real bundles."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import BundleBuilder, make_repo
from textual.widgets import DataTable
from textual.worker import WorkerCancelled

from screens.app import WorkbenchApp
from screens.help import HelpScreen
from screens.migration import MigrationScreen
from screens.study import StudyScreen
from storage.database import open_study
from workbench.bundle import import_bundle

SIZE = (80, 24)
EVIL = "[/] [@click=app.quit]x[/] \x1b]0;x\x07"
EVIL_SHOWN = ("[/]", "[@click=app.quit]x[/]", "␛]0;x␇")
"""How EVIL must read on screen: literally, the escape and bell as visible stand-ins."""


def build(bundle: BundleBuilder, tmp_path: Path) -> Path:
    path = tmp_path / "study.db"
    study = open_study(path, create=True)
    try:
        report = import_bundle(study, bundle.root, "ana")
    finally:
        study.close()
    assert report.problems == []
    return path


def screen_text(app: WorkbenchApp) -> str:
    """What the terminal shows now, as plain text."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def widget_text(app: WorkbenchApp, selector: str) -> str:
    """A widget's whole text, however it wraps on screen."""
    return app.screen.query_one(selector).render().plain


def recorded_toasts(app: WorkbenchApp) -> list[tuple[str, str]]:
    """Every toast the app shows from now on, (message, severity: '' when not given), in order."""
    toasts: list[tuple[str, str]] = []
    notify = app.notify

    def record(message, *args, **kwargs):
        toasts.append((str(message), kwargs.get("severity", "")))
        return notify(message, *args, **kwargs)

    app.notify = record  # type: ignore[method-assign]
    return toasts


async def workers_done(app: WorkbenchApp) -> None:
    """Every worker running now has finished. One that its exclusive successor cancelled meanwhile
    (the effort watch's poll, a reload) is done too, not a failure; a worker that raised still fails."""
    for worker in list(app.workers):
        try:
            await worker.wait()
        except WorkerCancelled:
            pass


async def keys_handled(app: WorkbenchApp) -> None:
    """Every key the app has read is handled (screens/keygate.py): keys read together are handed
    on one at a time, and an idle moment (`pilot.pause`) can come before the last of them."""
    import asyncio

    task = app.keys.task
    if task is not None and not task.done():
        await asyncio.wait([task])


async def settle(pilot) -> None:
    await workers_done(pilot.app)
    await pilot.pause()
    await keys_handled(pilot.app)
    await workers_done(pilot.app)
    await pilot.pause()
    await keys_handled(pilot.app)


def table(app: WorkbenchApp) -> DataTable:
    return app.screen.query_one(DataTable)


def column(app: WorkbenchApp, key: str) -> list[str]:
    t = table(app)
    return [t.get_cell_at((row, t.get_column_index(key))).plain for row in range(t.row_count)]


@pytest.fixture
def small_db(small_bundle: BundleBuilder, tmp_path: Path) -> Path:
    return build(small_bundle, tmp_path)


@pytest.fixture
def evil_db(bundle: BundleBuilder, tmp_path: Path) -> Path:
    """Untrusted text in the study title, a migration title, an attempt's claim and command."""
    bundle.study["title"] = f"Study {EVIL}"
    bundle.write_study()
    folder, shas = bundle.add_migration("evil", title=f"Title {EVIL}")
    bundle.write_attempts(
        folder,
        [
            bundle.attempt(0, shas[0]),
            bundle.attempt(
                1,
                shas[1],
                claim=f"Claim {EVIL}",
                command={"argv": ["python", EVIL], "env": {"X": EVIL}},
            ),
        ],
    )
    return build(bundle, tmp_path)


def shared_repo_bundle(bundle: BundleBuilder, tmp_path: Path, migrations: int) -> list[str]:
    """Many migration folders whose migration.toml all name one repository: quick to import."""
    repo = tmp_path / "shared-repo"
    shas = make_repo(repo, [{"train.py": "print(0)\n"}, {"train.py": "print(1)\n"}])
    for n in range(migrations):
        folder = bundle.root / "migrations" / f"m{n:03d}"
        folder.mkdir(parents=True)
        (folder / "migration.toml").write_text(
            f'title = "Migration {n}"\nrepo = "{repo}"\nbase_commit = "{shas[0]}"\n'
            '[target]\naccelerator = "tpu-v5e"\nchips = 4\nruntime = "torch_xla"\n'
            '[goal]\nmetric = "eval_accuracy"\nreference = 0.9\ndirection = "max"\n'
        )
        (folder / "attempts.jsonl").write_text("")
    return shas


async def test_study_screen_lists_the_migrations(small_db: Path) -> None:
    app = WorkbenchApp(small_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, StudyScreen)
        assert column(app, "slug") == ["cnn-xla", "mlp-xla"]
        assert column(app, "attempts") == ["0", "2"]  # the reference run is not an attempt; #3 is a run of #2
        assert column(app, "level") == ["–", "–"]  # nothing verified yet
        assert app.title == "Test study"
        assert app.sub_title == "study.db"
        text = screen_text(app)
        assert "2 migrations" in text
        assert "tpu-v5e x 4" in text
        assert "Best" in text  # the last column fits at 80 columns
        assert "CNN to torch_xla" in text  # the highlighted migration's title, below


async def test_enter_opens_attempts_q_goes_back_then_quits(small_db: Path) -> None:
    app = WorkbenchApp(small_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("j", "enter")
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen)
        assert app.screen.migration.slug == "mlp-xla"
        assert column(app, "seq") == ["0", "1", "2"]  # the re-run #3 is a run of #2
        assert column(app, "source") == ["ref", "agent", "agent 2 runs"]
        assert column(app, "status") == ["ok", "exit 1", "ok"]
        assert column(app, "ladder") == ["·····"] * 3
        text = screen_text(app)
        assert "MLP to torch_xla" in text
        assert "Commit" in text
        assert "$ PJRT_DEVICE=CPU python train.py" in text  # the highlighted attempt's detail
        await pilot.press("j")
        await pilot.pause()
        assert "(expects L2 matches reference) Runs on 4 chips" in screen_text(app)
        await pilot.press("q")  # goes back, as escape does; it quits only on the study screen
        await pilot.pause()
        assert app.is_running and isinstance(app.screen, StudyScreen)
        assert table(app).cursor_row == 1  # where the reviewer left it
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running


async def test_reference_runs_are_pinned_first(bundle: BundleBuilder, tmp_path: Path) -> None:
    folder, shas = bundle.add_migration("late-ref")
    bundle.write_attempts(
        folder,
        [
            bundle.attempt(1, shas[1]),
            bundle.attempt(2, shas[0], source="reference", expected_level=None, claim=""),
            bundle.attempt(3, shas[2]),
        ],
    )
    app = WorkbenchApp(build(bundle, tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert column(app, "seq") == ["2", "1", "3"]
        assert column(app, "source") == ["ref", "agent", "agent"]


async def test_verdicts_and_failures_show_in_the_ladder(small_db: Path) -> None:
    study = open_study(small_db)
    db = study.db
    (attempt_id,) = db.execute(
        "SELECT a.id FROM attempt a JOIN migration m ON m.id = a.migration_id"
        " WHERE m.slug = 'mlp-xla' AND a.seq = 2"
    ).fetchone()
    for level, outcome in ((1, "pass"), (2, "pass"), (3, "fail")):
        db["verdict"].insert(
            {"attempt_id": attempt_id, "level": level, "outcome": outcome, "reason": "",
             "evidence": "[]", "verifier": "test", "verifier_version": "1"}
        )
    db["failure"].insert(
        {"attempt_id": attempt_id, "cause": "cpu_fallback", "silent": 1, "note": "ran on CPU"}
    )
    db.conn.commit()
    study.close()
    app = WorkbenchApp(small_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert column(app, "level") == ["–", "L2"]
        assert column(app, "silent") == ["0", "1"]
        await pilot.press("G", "enter")
        await settle(pilot)
        assert column(app, "ladder")[2] == "✓✓✗··"
        assert column(app, "failure")[2] == "cpu_fallback silent"
        await pilot.press("j", "j")
        await pilot.pause()
        assert "failure cpu_fallback silent ran on CPU" in screen_text(app)


async def test_help_opens_with_question_mark_and_f1(small_db: Path) -> None:
    app = WorkbenchApp(small_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        described = {row[1] for row in app.screen.rows}  # the help lists every key (it scrolls at 80x24)
        assert {"Quit", "Open", "Bottom"} <= described
        assert "Open" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, StudyScreen)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "Back" in screen_text(app)
        await pilot.press("q")  # q closes the help, as in a pager; it never quits from there
        await pilot.pause()
        assert app.is_running and isinstance(app.screen, MigrationScreen)


async def test_palette_opens_a_migration(small_db: Path) -> None:
    app = WorkbenchApp(small_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Open migration mlp-xla")
        await settle(pilot)
        assert "Open migration mlp-xla" in screen_text(app)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen)
        assert app.screen.migration.slug == "mlp-xla"
        # From a migration, the palette goes back too (as its escape key: "Back (esc)").
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Back")
        await settle(pilot)
        assert "Back (esc)" in screen_text(app)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, StudyScreen)


async def test_migrations_load_a_page_at_a_time(bundle: BundleBuilder, tmp_path: Path) -> None:
    shared_repo_bundle(bundle, tmp_path, 25)
    app = WorkbenchApp(build(bundle, tmp_path), page_size=10)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert table(app).row_count == 10
        assert "25 migrations · 10 loaded" in screen_text(app)
        await pilot.press("j", "j")
        await settle(pilot)
        assert table(app).row_count == 10  # far from the end: nothing more yet
        await pilot.press(*"jjjj")
        await settle(pilot)
        assert table(app).row_count == 20
        await pilot.press("G")
        await settle(pilot)
        assert table(app).row_count == 25
        assert column(app, "slug") == [f"m{n:03d}" for n in range(25)]
        await pilot.press("G")
        await settle(pilot)
        assert table(app).row_count == 25
        assert "25 migrations" in screen_text(app)
        assert "loaded" not in screen_text(app)
        # The palette offers what is loaded.
        await pilot.press("ctrl+p")
        await pilot.press(*"m024")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen.migration.slug == "m024"


async def test_attempts_load_a_page_at_a_time(bundle: BundleBuilder, tmp_path: Path) -> None:
    folder, shas = bundle.add_migration("many", commits=2)
    bundle.write_attempts(folder, [bundle.attempt(seq, shas[1]) for seq in range(25)])
    app = WorkbenchApp(build(bundle, tmp_path), page_size=10)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert table(app).row_count == 10
        await pilot.press("G")
        await settle(pilot)
        assert table(app).row_count == 20
        await pilot.press("G")
        await settle(pilot)
        assert column(app, "seq") == [str(n) for n in range(25)]


async def test_stepping_inside_an_attempt_crosses_pages(bundle: BundleBuilder, tmp_path: Path) -> None:
    """`]` on the attempt screen moves the migration screen's cursor (through the app), which
    loads the next page; the attempt screen's cursor sees those rows and steps on into them."""
    from screens.attempt import AttemptScreen

    folder, shas = bundle.add_migration("many", commits=2)
    bundle.write_attempts(folder, [bundle.attempt(seq, shas[1]) for seq in range(25)])
    app = WorkbenchApp(build(bundle, tmp_path), page_size=10)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, AttemptScreen)
        for _ in range(14):
            await pilot.press("right_square_bracket")
            await settle(pilot)
        assert screen.summary.attempt.seq == 14
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, MigrationScreen)
        assert table(app).cursor_row == 14 and table(app).row_count == 20


async def test_untrusted_text_is_shown_literally_everywhere(evil_db: Path) -> None:
    app = WorkbenchApp(evil_db)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        assert app.title == "Study [/] [@click=app.quit]x[/] ␛]0;x␇"
        text = screen_text(app)
        for shown in EVIL_SHOWN:
            assert shown in text  # the header and the migration's title
        assert "\x1b" not in text and "\x07" not in text
        await pilot.click("#migration-detail")
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("j")
        await pilot.pause()
        text = screen_text(app)
        assert "Claim [/] [@click=app.quit]x[/] ␛]0;x␇" in text
        assert "python '[/] [@click=app.quit]x[/] ␛]0;x␇'" in text
        assert "Title [/] [@click=app.quit]x[/] ␛]0;x␇" in text
        assert "\x1b" not in text and "\x07" not in text
        await pilot.click("#attempt-detail")
        await pilot.click("#migration-header")
        await pilot.press("question_mark")
        await pilot.pause()
        await pilot.press("escape")
        await pilot.press("ctrl+p")
        await pilot.press(*"evil")
        await settle(pilot)
        text = screen_text(app)
        assert "Open migration evil" in text
        assert "Title [/] [@click=app.quit]x[/] ␛]0;x␇" in text  # the palette's help line
        await pilot.press("escape")
        await pilot.pause()
        assert app.is_running
        assert isinstance(app.screen, MigrationScreen)


async def test_untrusted_text_at_80_by_24(evil_db: Path) -> None:
    app = WorkbenchApp(evil_db)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "[@click=app.quit]x[/]" in screen_text(app)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("j")
        await pilot.pause()
        assert "Claim [/] [@click=app.quit]x[/]" in screen_text(app)
        assert app.is_running


async def test_a_missing_database_is_a_message_not_a_traceback(tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    app = WorkbenchApp(missing)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.is_running
        assert "Cannot read the study" in screen_text(app)
        assert widget_text(app, "#problem") == f"{missing}: no such study database"
        await pilot.press("q")
        await pilot.pause()
    assert not missing.exists()


async def test_a_file_that_is_not_a_database_is_a_message(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite [/] \x1b]0;x\x07" * 100)
    app = WorkbenchApp(junk)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.is_running
        assert "Cannot read the study" in screen_text(app)
        assert "not an SQLite database" in widget_text(app, "#problem")


async def test_an_empty_study_says_so(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    open_study(path, create=True).close()
    app = WorkbenchApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "No migrations in this study yet" in screen_text(app)
        await pilot.press("enter", "j", "G", "g")
        await pilot.pause()
        assert isinstance(app.screen, StudyScreen)


def test_no_literal_colours_in_the_screens() -> None:
    """Colours come from the theme (tcss variables, `palette.tone("$text-error")`), so every
    Textual theme works: no named or hex colour in a style of screens/ or app.tcss."""
    import re

    import screens
    from workbench.config import ASSETS

    named = re.compile(r"[\"'](?:[a-z ]* )?(?:red|green|yellow|blue|cyan|magenta|white|black)(?: [a-z ]*)?[\"']"
                       r"|#[0-9a-fA-F]{6}\b")
    found = []
    paths = [*Path(screens.__file__).parent.rglob("*.py"), ASSETS / "styles" / "app.tcss"]
    for path in paths:
        if path.name == "palette.py":
            continue  # the stand-ins used before a theme is read
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if named.search(line):
                found.append(f"{path.name}:{n}: {line.strip()}")
    assert not found, found


async def test_the_presenters_colours_follow_the_theme(tmp_path: Path) -> None:
    from textual.color import Color

    from screens.presenters.palette import tone

    path = tmp_path / "empty.db"
    open_study(path, create=True).close()
    app = WorkbenchApp(path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        dark = tone("bold $text-success")
        assert dark == "bold " + Color.parse(app.get_css_variables()["text-success"]).hex6
        app.theme = "textual-light"
        await pilot.pause()
        light = tone("bold $text-success")
        assert light == "bold " + Color.parse(app.get_css_variables()["text-success"]).hex6
        assert light != dark


def _binding_owners() -> list[type]:
    """Every App, Screen and Widget class defined in `screens/`, found by walking the package."""
    import importlib
    import inspect
    import pkgutil

    from textual.dom import DOMNode

    import screens

    owners: dict[str, type] = {}
    for info in pkgutil.walk_packages(screens.__path__, "screens."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, DOMNode) and cls.__module__ == module.__name__:
                owners[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return [owners[name] for name in sorted(owners)]


BINDING_OWNERS = _binding_owners()


def test_every_message_lives_in_messages_py() -> None:
    """One place for the screens' messages (screens/messages.py), each a dataclass."""
    import dataclasses
    import importlib
    import inspect
    import pkgutil

    from textual.message import Message

    import screens

    elsewhere, plain = [], []
    for info in pkgutil.walk_packages(screens.__path__, "screens."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            for found in (cls, *vars(cls).values()):
                if not (inspect.isclass(found) and issubclass(found, Message)):
                    continue
                if found.__module__.startswith("screens.") and found.__module__ != "screens.messages":
                    elsewhere.append(f"{found.__module__}.{found.__qualname__}")
                if found.__module__ == "screens.messages" and not dataclasses.is_dataclass(found):
                    plain.append(found.__qualname__)
    assert not elsewhere and not plain, (elsewhere, plain)


def test_the_binding_walk_finds_the_screens_and_widgets() -> None:
    names = {owner.__name__ for owner in BINDING_OWNERS}
    assert {"WorkbenchApp", "StudyScreen", "MigrationScreen", "AttemptScreen", "CompareScreen",
            "HelpScreen", "BriefScreen", "NavTable", "LogPane", "DiffPane", "CurvesPane",
            "VerdictList", "InterventionForm"} <= names
    assert sum(len(owner.__dict__.get("BINDINGS", [])) for owner in BINDING_OWNERS) > 50


@pytest.mark.parametrize("owner", BINDING_OWNERS, ids=lambda owner: f"{owner.__module__}.{owner.__qualname__}")
def test_every_binding_can_be_remapped_and_none_steals_typing(owner: type) -> None:
    """Each of our bindings, in every class of screens/, has an id (for `set_keymap`) and a
    tooltip; no single-letter binding is priority, so none fires while the reviewer types in
    an input."""
    from textual.binding import Binding

    for binding in owner.__dict__.get("BINDINGS", []):
        assert isinstance(binding, Binding), (owner.__name__, binding)
        assert binding.id and binding.tooltip, (owner.__name__, binding.key)
        assert not (binding.priority and len(binding.key) == 1), (owner.__name__, binding.key)


def test_binding_ids_name_one_binding_each() -> None:
    """A keymap entry remaps one thing: an id is not shared by bindings of different actions."""
    actions: dict[str, set[str]] = {}
    for owner in BINDING_OWNERS:
        for binding in owner.__dict__.get("BINDINGS", []):
            actions.setdefault(binding.id, set()).add(binding.action)
    assert {i: a for i, a in actions.items() if len(a) > 1} == {}


def test_no_sql_in_the_screens() -> None:
    """The screens read through named functions in `storage/`; no SQL string, no `execute`."""
    import re

    import screens

    sql = re.compile(r"\b(SELECT\s.*\bFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|PRAGMA\s)|\.execute\(")
    found = []
    for path in Path(screens.__file__).parent.rglob("*.py"):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if sql.search(line):
                found.append(f"{path.name}:{n}: {line.strip()}")
    assert not found, found


@pytest.mark.skipif(not __import__("workbench.config").config.DEMO_BUNDLE.is_dir(),
                    reason="the demo bundle is not generated yet")
def test_the_demo_opens_with_verdicts(tmp_path: Path) -> None:
    """`workbench demo` verifies the study once after building it."""
    from test_cli import workbench

    done = workbench("demo", "--no-open", env={"XDG_DATA_HOME": str(tmp_path), "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    study = open_study(Path(done.stdout.strip()))
    try:
        assert study.db.execute("SELECT count(*) FROM verdict").fetchone()[0] > 0
    finally:
        study.close()
