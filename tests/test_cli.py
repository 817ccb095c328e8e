"""The `workbench` command, run as a real subprocess the way a user or a script runs it."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cli.main import COMMANDS, main
from workbench import config


def workbench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "WORKBENCH_REVIEWER": "ana", **(env or {})},
        timeout=120,
    )


def fails_cleanly(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    """Exit status 2, one line on stderr naming what is wrong, no traceback."""
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for text in expected:
        assert text in lines[0]


def test_importing_the_cli_loads_neither_textual_nor_rich() -> None:
    code = (
        "import sys, cli.main; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'rich', 'git', 'torch', 'anthropic'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def command_at(path: tuple[str, ...]) -> click.Command:
    """The command at PATH, asked of each group the way click asks when it runs one."""
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None and found.name == name, (path, found)
        command = found
    return command


def command_paths(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and group under GROUP, found by walking click's tree, not by a hand list."""
    found = [path]
    for name in group.list_commands(click.Context(group)):
        command = command_at(path + (name,))
        found += command_paths(command, path + (name,)) if isinstance(command, click.Group) else [path + (name,)]
    return found


@pytest.mark.parametrize("path", command_paths(main), ids=lambda path: " ".join(path) or "workbench")
def test_every_command_has_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0 and "Usage:" in result.output, result.output
    command = command_at(path)
    assert command.help and command.help.strip(), f"{' '.join(path)} has no help text"


def test_the_command_walk_finds_nested_commands() -> None:
    paths = command_paths(main)
    assert ("import", "claude-code") in paths and ("assist", "brief") in paths and ("rerun",) in paths


def test_help_lists_every_command_though_none_is_loaded_until_asked() -> None:
    """The main group loads a command's module only when that command runs (issue 19); its help
    still lists them all, and a mistyped name is still offered its neighbours."""
    shown = workbench("--help").stdout.split("Commands:\n", 1)[1].splitlines()
    assert [line.split()[0] for line in shown] == sorted(COMMANDS)
    assert all(len(line.split()) > 1 for line in shown), shown  # each with its short help
    assert "--project" in workbench("import", "claude-code", "--help").stdout  # cli/setup.py's option
    mistyped = workbench("migra")
    assert mistyped.returncode == 2 and "Did you mean one of: 'migration', 'migrations'?" in mistyped.stderr


def test_import_then_list_migrations_and_attempts(small_bundle, tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    result = workbench("import", "bundle", str(small_bundle.root), "--db", str(db))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "7 new, 0 updated, 0 unchanged"
    again = workbench("import", "bundle", str(small_bundle.root), "--db", str(db))
    assert again.stdout.strip() == "0 new, 0 updated, 7 unchanged"

    table = workbench("migrations", str(db)).stdout.splitlines()
    assert table[0].split() == ["migration", "status", "target", "attempts", "failed", "silent", "interventions", "level"]
    assert table[1].split()[:6] == ["cnn-xla", "in_progress", "tpu-v5e", "x", "4", "0"]
    assert table[2].split()[:6] == ["mlp-xla", "in_progress", "tpu-v5e", "x", "4", "2"]  # #3 is a run of #2

    listed = json.loads(workbench("attempts", str(db), "mlp-xla", "--json").stdout)
    assert [(a["seq"], a["source"], a["status"], a["exit_code"], a["runs"]) for a in listed] == [
        (0, "reference", "ok", 0, 1), (1, "agent", "nonzero_exit", 1, 1), (2, "agent", "ok", 0, 2)
    ]
    every = json.loads(workbench("attempts", str(db), "mlp-xla", "--json", "--all-runs").stdout)
    assert [(a["seq"], a["source"]) for a in every][-1] == (3, "rerun")
    plain = workbench("attempts", str(db), "mlp-xla").stdout.splitlines()
    assert plain[2].split()[:4] == ["1", "agent", "nonzero_exit", "1"]


def test_attempts_lists_what_the_apps_rows_show(demo_study) -> None:
    """Each attempt's counted ladder, level, cause and over-claim beside its record, as the
    migration screen's rows show them."""
    demo_study.close()
    listed = workbench("attempts", str(demo_study.path), "mlp-classifier").stdout.splitlines()
    assert listed[0].split() == ["seq", "source", "status", "exit", "L1-5", "level", "cause", "over", "expected",
                                 "runs", "commit", "command"]
    rows = {line.split()[0]: line.split() for line in listed[1:]}
    assert rows["0"][:5] == ["0", "reference", "ok", "0", "·····"] and rows["0"][5] == "1"  # no verdicts: runs next
    assert rows["1"][2:9] == ["nonzero_exit", "1", "✗?✗??", "0", "api_misuse", "over", "1"]
    assert rows["3"][4:10] == ["✓✗✓✗✗", "1", "numerical_mismatch", "(silent)", "over", "4"]
    assert rows["4"][4:9] == ["✓✓✓✓✗", "4", "slower_or_costlier", "(silent)", "4"]  # no over-claim


def test_default_database_comes_from_workbench_db(small_bundle, tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    result = workbench("import", "bundle", str(small_bundle.root), env={"WORKBENCH_DB": str(db)})
    assert result.returncode == 0 and db.exists()


def test_bad_input_gives_one_line_and_exit_status_2(small_bundle, tmp_path: Path) -> None:
    fails_cleanly(workbench("migrations", str(tmp_path / "missing.db")), "missing.db", "no such study database")
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"\x00\x01 not sqlite at all" * 50)
    fails_cleanly(workbench("attempts", str(garbage), "x"), "garbage.db", "not an SQLite database")
    fails_cleanly(workbench("open", str(tmp_path / "nope.db")), "nope.db", "no such study database")

    db = tmp_path / "s.db"
    assert workbench("import", "bundle", str(small_bundle.root), "--db", str(db)).returncode == 0
    fails_cleanly(workbench("attempts", str(db), "no-such-migration"), "no migration 'no-such-migration'")

    before = hashlib.sha256(db.read_bytes()).hexdigest()
    toml = small_bundle.root / "study.toml"
    toml.write_text(toml.read_text().replace("staff_hourly_rate = 100.0", 'staff_hourly_rate = "lots"'))
    fails_cleanly(
        workbench("import", "bundle", str(small_bundle.root), "--db", str(db)),
        "study.toml", "'staff_hourly_rate' must be a number",
    )
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    fails_cleanly(workbench("import", "bundle", str(tmp_path / "nowhere"), "--db", str(tmp_path / "new.db")), "not a directory")
    assert not (tmp_path / "new.db").exists()


def test_bad_records_print_one_line_each_and_exit_2(bundle, tmp_path: Path) -> None:
    folder, shas = bundle.add_migration("mlp-xla")
    bundle.write_attempts(folder, [bundle.attempt(0, shas[0]), bundle.attempt(1, "f" * 40)])
    (folder / "logs" / "0.log").write_bytes(b"ok\n\xc3\x28 broken utf-8\n")
    db = tmp_path / "s.db"
    result = workbench("import", "bundle", str(bundle.root), "--db", str(db))
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"{folder / 'attempts.jsonl'}:2: commit '{'f' * 40}' is not in the repository",
        f"warning: {folder / 'logs/0.log'}: not valid UTF-8 (byte 3); stored as bytes, shown with replacement characters",
    ]
    assert result.stdout.strip() == "3 new, 0 updated, 0 unchanged; 1 problem reported; 1 warning"


def test_a_newer_database_is_refused_by_the_cli(tmp_path: Path) -> None:
    from sqlite_utils import Database

    from storage.database import open_study

    db = tmp_path / "s.db"
    open_study(db, create=True).close()
    Database(db)["_sqlite_migrations"].insert({"migration_set": "workbench", "name": "m900_new", "applied_at": "x"})
    fails_cleanly(workbench("migrations", str(db)), "newer workbench", "upgrade workbench")


def test_control_characters_in_names_never_reach_the_terminal(bundle, tmp_path: Path) -> None:
    folder, shas = bundle.add_migration("evil", title="x\x1b]0;pwned\x07[/] title")
    bundle.write_attempts(folder, [bundle.attempt(1, shas[1], command={"argv": ["python", "\x1b[2Jtrain.py"]})])
    db = tmp_path / "s.db"
    assert workbench("import", "bundle", str(bundle.root), "--db", str(db)).returncode == 0
    out = workbench("attempts", str(db), "evil").stdout
    assert "\x1b" not in out and "\u241b[2Jtrain.py" in out


@pytest.mark.skipif(not config.DEMO_BUNDLE.is_dir(), reason="the demo bundle is not generated yet")
def test_demo_builds_its_database_once_from_the_bundle(tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path)}
    first = workbench("demo", "--no-open", env=env)
    assert first.returncode == 0, first.stderr
    path = Path(first.stdout.strip())
    assert path.is_file() and str(tmp_path) in str(path)
    stamp = path.stat().st_mtime_ns
    assert workbench("demo", "--no-open", env=env).returncode == 0
    assert path.stat().st_mtime_ns == stamp
    slugs = [line.split()[0] for line in workbench("migrations", str(path)).stdout.splitlines()[1:]]
    assert len(slugs) >= 1
    attempts = [a for slug in slugs for a in json.loads(workbench("attempts", str(path), slug, "--json").stdout)]
    assert {"reference", "agent"} <= {a["source"] for a in attempts}
    assert any(a["status"] == "nonzero_exit" and a["exit_code"] not in (0, None) for a in attempts)
    assert any(a["status"] == "ok" and a["exit_code"] == 0 for a in attempts)


@pytest.mark.skipif(not config.DEMO_BUNDLE.is_dir(), reason="the demo bundle is not generated yet")
def test_demo_verdicts_of_an_older_verifier_are_made_again_at_open(tmp_path: Path) -> None:
    """A demo built by an older workbench kept that verifier's verdicts: opening it now verifies
    again what an older version judged, and leaves an up-to-date file as it is."""
    import sqlite3

    from workbench.verify.evidence import VERSION

    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path)}
    path = Path(workbench("demo", "--no-open", env=env).stdout.strip())
    with sqlite3.connect(path) as conn:  # as a demo built by verifier 1.0.0 left it
        conn.execute("UPDATE verification SET verifier_version = '1.0.0', inputs_hash = 'old' || inputs_hash")
        conn.execute("UPDATE verdict SET verifier_version = '1.0.0'")
    conn.close()
    again = workbench("demo", "--no-open", env=env)
    assert again.returncode == 0, again.stderr
    assert f"demo: verdicts of verifier 1.0.0 made again with {VERSION}" in again.stderr
    conn = sqlite3.connect(path)
    try:
        current = conn.execute("SELECT DISTINCT verifier_version FROM verification WHERE superseded_by IS NULL")
        assert {row[0] for row in current} == {VERSION}
    finally:
        conn.close()
    stamp = path.stat().st_mtime_ns
    third = workbench("demo", "--no-open", env=env)
    assert third.returncode == 0 and "made again" not in third.stderr
    assert path.stat().st_mtime_ns == stamp


def test_the_wheel_ships_the_stylesheet_and_the_demo_bundle(tmp_path: Path) -> None:
    """Package data, not files of the clone: every tracked bundle file and the stylesheet are in the wheel."""
    pytest.importorskip("setuptools", reason="building a wheel needs setuptools: pip install setuptools")
    root = Path(__file__).resolve().parents[1]
    tracked = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout.split()
    source = tmp_path / "src"
    for name in tracked:
        if (root / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((root / name).read_bytes())
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path / "dist")], check=True, capture_output=True, timeout=300)
    import zipfile

    (wheel,) = (tmp_path / "dist").glob("workbench-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    # the repository's assets/ folder ships as the workbench_assets package (setup.py)
    wanted = {"workbench_assets/" + n.removeprefix("assets/") for n in tracked if n.startswith("assets/demo/bundle/")}
    wanted |= {"workbench_assets/styles/app.tcss", "workbench_assets/__init__.py"}
    assert len(wanted) > 20 and wanted <= shipped, sorted(wanted - shipped)
    assert not any(n.startswith(("workbench_assets/demo/project/", "assets/")) for n in shipped)
    assert "workbench_assets/demo/generate.py" not in shipped


def test_a_checkout_without_an_install_finds_the_assets_folder(tmp_path: Path) -> None:
    """Run from the clone's folder with nothing installed (no site-packages, so no editable install
    either), workbench/config.py finds the stylesheet and the demo bundle in assets/."""
    root = Path(__file__).resolve().parents[1]
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from workbench import config; "
            "print(config.STYLESHEET); print(config.DEMO_BUNDLE)")
    out = subprocess.run([sys.executable, "-S", "-c", code, str(root)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    stylesheet, bundle = map(Path, out.stdout.split())
    assert stylesheet == root / "assets" / "styles" / "app.tcss" and stylesheet.is_file()
    assert bundle == root / "assets" / "demo" / "bundle" and (bundle / "migrations").is_dir()


def test_bad_paths_ports_and_values_give_one_line_each(small_bundle, tmp_path: Path) -> None:
    """Issue 20: every command that fails on user input exits 2 with one line, never a traceback."""
    import socket

    db = str(tmp_path / "s.db")
    assert workbench("import", "bundle", str(small_bundle.root), "--db", db).returncode == 0
    fails_cleanly(workbench("report", db, "-o", str(tmp_path / "no" / "dir" / "r.md")), "r.md", "cannot write")
    if Path("/proc/version").exists():
        fails_cleanly(workbench("report", db, "-o", "/proc/version"), "/proc/version", "cannot write")
    fails_cleanly(workbench("verify", db, "--migration", "mlp-xla", "--attempt", "999"), "has no attempt 999")
    fails_cleanly(workbench("rerun", db, "mlp-xla", "1", "--chips", "-3", "--yes"), "--chips", "x>=1")
    fails_cleanly(workbench("rerun", db, "mlp-xla", "1", "--timeout", "0", "--yes"), "--timeout")
    fails_cleanly(workbench("intervene", db, "mlp-xla", "--kind", "hint", "--minutes", "3", "--note", ""), "--note")
    fails_cleanly(workbench("attempts"), "Missing argument 'DB'", "workbench attempts -h")
    fails_cleanly(workbench("no-such-command"), "no-such-command")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        fails_cleanly(workbench("serve", db, "--port", str(port)), f"127.0.0.1:{port}", "in use")
    assert json.loads(workbench("migrations", db, "--json").stdout)[1]["interventions"] == 0  # nothing written


def _json_values(seed: int, count: int) -> list:
    """Random JSON-able values, nested: every scalar type json writes (NaN, infinities, big ints,
    non-ASCII and control characters), empty containers, tuples, and keys that are not strings."""
    import random

    rng = random.Random(seed)
    scalars = [None, True, False, 0, -7, 2**70, 1.5, -0.0, 1e-310, 1e300, float("nan"), float("inf"),
               float("-inf"), "", "plain", "é\u2603\U0001f600", "tab\tnew\nline\x00\x1b[31m\"\\", ]
    keys = ["k", "", "é", "\n", 3, 2.5, True, None, False]

    def value(depth: int):
        kind = rng.randrange(5 if depth < 4 else 1)
        if kind == 0 or kind == 1:
            return rng.choice(scalars)
        if kind == 2:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        if kind == 3:
            return tuple(value(depth + 1) for _ in range(rng.randrange(3)))
        return {rng.choice(keys): value(depth + 1) for _ in range(rng.randrange(4))}

    return [value(0) for _ in range(count)]


@pytest.mark.parametrize("items", [[], [{"a": [1, {"b": None}], "c": "x\ny\r\nz\r", "e": []}],
                                   [1, "two", {"3": [3, []]}, {}], _json_values(7, 300)])
@pytest.mark.parametrize("in_memory", [8 << 20, 200])
def test_spooled_rows_print_as_echo_json_prints_them(items, in_memory, capsys) -> None:
    """`workbench verify` spools its rows (150,000 of them stay off the heap), in memory or in a
    file, and prints what echo_json prints for the list; its items read back as they were added."""
    from cli.common import Spooled, echo_json

    spooled = Spooled()
    spooled.IN_MEMORY = in_memory
    for item in items:
        spooled.add(item)
    spooled.echo()
    echo_json(items)
    out = capsys.readouterr().out
    assert out[: len(out) // 2] == out[len(out) // 2 :] == json.dumps(items, indent=2) + "\n"
    assert json.dumps(list(spooled.items())) == json.dumps(items)  # NaN is not NaN: compared as text


def test_spooled_rows_moved_to_a_file_read_back_as_they_were_added() -> None:
    """Rows past the in-memory limit move to a temporary file (tempfile.SpooledTemporaryFile's
    rollover, done by hand so that a short list never imports tempfile); every row, table or
    JSON, reads back the same on either side of the move."""
    import io

    from cli.common import Spooled

    rows = [[n, "x" * (n % 37), None if n % 5 == 0 else f"\u00e9\n{n}"] for n in range(400)]
    for headers in (None, ["n", "text", "other"]):
        kept, moved = Spooled(headers), Spooled(headers)
        moved.IN_MEMORY = 1000
        for row in rows:
            kept.add(row)
            moved.add(row)
        assert isinstance(kept.file, io.StringIO) and not isinstance(moved.file, io.StringIO)
        assert list(moved.items()) == list(kept.items()) and len(list(kept.items())) == 400
        if headers:
            assert list(moved.lines()) == list(kept.lines())


def test_a_table_is_cleaned_cells_in_columns_as_wide_as_their_widest() -> None:
    from cli.common import table

    rows = [["1", "\x1b[31mred\x1b[0m", None], ["wide cell", "", 7]]
    assert table(["n", "colour", "x"], rows).splitlines() == [
        "n          colour        x",
        "1          \u241b[31mred\u241b[0m",  # control characters shown, never sent to the terminal
        "wide cell                7",
    ]


def test_indented_json_is_json_dumps_with_indent_2() -> None:
    """`indented` (what `--json` prints, without json's generators) writes json.dumps(value,
    indent=2) character for character, with each newline as asked."""
    from cli.common import indented

    for item in _json_values(19, 3000):
        expected = json.dumps(item, indent=2)
        assert indented(item) == expected
        assert indented(item, "\n  ") == expected.replace("\n", "\n  ")
    for bad in ({"set": {1}}, [object()], {(1, 2): 1}):
        with pytest.raises(TypeError):
            indented(bad)


def test_a_study_file_in_a_commands_place_opens_it(tmp_path: Path, monkeypatch) -> None:
    """`workbench study.db` is `workbench open study.db` (as `harlequin file.db` opens its file); a
    name that is no file and no command still gets click's error with its close matches."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "verify").write_bytes(b"")  # a file named like a command: the command wins
    study = tmp_path / "s.db"
    study.write_bytes(b"")
    with click.Context(main) as ctx:
        name, command, args = main.resolve_command(ctx, [str(study), "--flag"])
        assert (name, command and command.name, args) == ("open", "open", [str(study), "--flag"])
        assert main.resolve_command(ctx, ["verify"])[0] == "verify"
    missing = CliRunner().invoke(main, [str(tmp_path / "none.db")])
    assert missing.exit_code == 2 and "No such command" in missing.output
    typo = CliRunner().invoke(main, ["verfy"])
    assert typo.exit_code == 2 and "Did you mean 'verify'" in typo.output
