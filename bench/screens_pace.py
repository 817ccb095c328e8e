"""Key to settled screen, through a real terminal (issue 39's "screens at a bare app's pace").

    .venv/bin/python bench/screens_pace.py [--runs 7] [--generated] [--quiet-ms 300] [--keep DIR]
                                           [--against TREE] [--write]

Runs the app in tmux at 120x40 and, for each move, sends the key with `tmux send-keys`, then
reads the pane with `tmux capture-pane -e` (text and colours) every few milliseconds until it
has not changed for --quiet-ms: "first paint" is the first capture that differs from the one
before the key, "settled" the last change before the quiet. The moves a reviewer makes all day:

- Enter on the study opens the first migration (then escape back, settled, before the next run);
- Enter on the migration opens its first attempt (then escape back);
- `]` and `[` step to the next and the previous attempt on the attempt screen;

beside a bare Textual app whose DataTable (100 rows) pushes a screen with a DataTable (40 rows)
and a Static on Enter (escape pops it): the pace of Textual itself on this machine. Each round
runs every move once, the bare app's in the same round, so the ratio shares the machine's load.
On the demo study, and with --generated also on a study of 1,500 attempts (bench/generate.py
--scale 0.1, imported and verified once into --keep). `--against TREE` runs the app from another
checkout too (`git worktree add /tmp/before main`), in the same rounds. Prints the tables;
`--write` rewrites this benchmark's rows of bench/RESULTS.md (bench/results.py).
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SIZE = (120, 40)
SESSION = f"bench-screens-pace-{os.getpid()}"
"""Its own tmux session: two benchmarks on one machine (other checkouts' included) would kill each other's."""

BARE_APP = '''
from textual.app import App
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static


class Next(Screen):
    BINDINGS = [("escape", "app.pop_screen", "Back")]

    def compose(self):
        yield Header()
        table = DataTable(cursor_type="row")
        table.add_columns("#", "name", "status", "value")
        for n in range(40):
            table.add_row(n, f"item {n}", "ok" if n % 3 else "failed", n * 1.5)
        yield table
        yield Static("detail of the item")
        yield Footer()


class Bare(App):
    def compose(self):
        yield Header()
        table = DataTable(cursor_type="row")
        table.add_columns("#", "name", "status", "value")
        for n in range(100):
            table.add_row(n, f"row {n}", "ok" if n % 3 else "failed", n * 0.5)
        yield table
        yield Footer()

    def on_data_table_row_selected(self, event):
        self.push_screen(Next())


Bare().run()
'''


class Pane:
    """A program in a tmux session of its own, read back as the terminal shows it."""

    def __init__(self, command: list[str], env: dict[str, str], quiet: float, cwd: Path = ROOT) -> None:
        self.quiet = quiet
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)
        line = " ".join(f"{k}={v}" for k, v in env.items()) + " " + " ".join(command)
        for attempt in range(5):  # a session killed last stops the server: a new one met it exiting
            made = subprocess.run(["tmux", "new-session", "-d", "-s", SESSION, "-x", str(SIZE[0]), "-y", str(SIZE[1]),
                                   "-c", str(cwd), f"env {line}"], capture_output=True, text=True)
            if made.returncode == 0:
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"tmux new-session failed: {made.stderr.strip()}")

    def capture(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-e", "-t", SESSION],
                              capture_output=True, text=True).stdout

    def settle(self, before: str, start: float, timeout: float = 20.0) -> tuple[float, float]:
        """(first paint, settled) in seconds after `start`: the screen's first change from
        `before`, and its last change once it has stayed the same for the quiet time."""
        first = last = None
        shown = before
        while True:
            now = time.perf_counter()
            if now - start > timeout:
                raise TimeoutError(f"the screen did not settle within {timeout} s")
            seen = self.capture()
            now = time.perf_counter()
            if seen != shown:
                shown, last = seen, now
                first = first or now
            elif last is not None and now - last >= self.quiet:
                return first - start, last - start
            time.sleep(0.002)

    def steady(self, timeout: float = 20.0) -> str:
        """The screen once it has not changed for twice the quiet time (a key pressed while the
        last move still paints would time that move's tail)."""
        shown, since = self.capture(), time.perf_counter()
        end = since + timeout
        while time.perf_counter() - since < 2 * self.quiet:
            if time.perf_counter() > end:
                raise TimeoutError(f"the screen kept changing for {timeout} s")
            time.sleep(0.01)
            seen = self.capture()
            if seen != shown:
                shown, since = seen, time.perf_counter()
        return shown

    def press(self, key: str) -> tuple[float, float]:
        before = self.steady()
        start = time.perf_counter()
        subprocess.run(["tmux", "send-keys", "-t", SESSION, key], check=True)
        return self.settle(before, start)

    def wait_for(self, text: str, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while text not in self.capture():
            if time.monotonic() > end:
                raise TimeoutError(f"{text!r} never showed")
            time.sleep(0.05)

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", SESSION], capture_output=True)


def app_env(tree: Path = ROOT) -> dict[str, str]:
    return {"PYTHONPATH": str(tree), "WORKBENCH_REVIEWER": "bench", "TERM": "xterm-256color"}


def workbench_round(db: Path, quiet: float, shown: str, tree: Path = ROOT) -> dict[str, tuple[float, float]]:
    """Each move once on a freshly started app (its first screen settled before the first key)."""
    pane = Pane([sys.executable, "-m", "cli", "open", str(db)], app_env(tree), quiet, cwd=tree)
    try:
        pane.wait_for(shown)
        out = {"open migration": pane.press("Enter")}
        out["open attempt"] = pane.press("Enter")
        out["]"] = pane.press("]")
        out["["] = pane.press("[")
        return out
    finally:
        pane.close()


def bare_round(script: Path, quiet: float) -> dict[str, tuple[float, float]]:
    pane = Pane([sys.executable, str(script)], {"TERM": "xterm-256color"}, quiet)
    try:
        pane.wait_for("row 0")
        return {"bare push": pane.press("Enter")}
    finally:
        pane.close()


def generated_study(keep: Path) -> Path:
    """bench/generate.py --scale 0.1 (15 migrations, 1,500 attempts), imported and verified once."""
    db = keep / "generated-1500.db"
    if db.exists():
        return db
    out = keep / "generated"
    if not (out / "bundle").is_dir():
        subprocess.run([sys.executable, str(ROOT / "bench" / "generate.py"), str(out), "--scale", "0.1"],
                       check=True, env={**os.environ, **app_env()}, stdout=subprocess.DEVNULL)
    env = {**os.environ, **app_env()}
    tmp = keep / "generated-1500.db.tmp"
    tmp.unlink(missing_ok=True)
    subprocess.run([sys.executable, "-m", "cli", "import", "bundle", str(out / "bundle"), "--db", str(tmp)],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-m", "cli", "verify", str(tmp)], check=True, env=env, stdout=subprocess.DEVNULL)
    tmp.rename(db)
    return db


def demo_study(keep: Path) -> Path:
    db = keep / "demo.db"
    if not db.exists():
        made = subprocess.run([sys.executable, "-m", "cli", "demo", "--no-open"], check=True, env={**os.environ, **app_env()},
                              capture_output=True, text=True).stdout.strip().splitlines()[-1]
        shutil.copy(made, db)
    return db


def table(rows: dict[str, list[tuple[float, float]]], bare: list[tuple[float, float]]) -> str:
    settled_bare = statistics.median(t[1] for t in bare)
    lines = ["| move | first paint, median (ms) | settled, median (ms) | settled range (ms) | x bare push |",
             "| --- | --- | --- | --- | --- |"]
    for move, times in [("bare push", bare), *rows.items()]:
        first = statistics.median(t[0] for t in times) * 1000
        settled = [t[1] * 1000 for t in times]
        ratio = statistics.median(settled) / (settled_bare * 1000)
        lines.append(f"| {move} | {first:.0f} | {statistics.median(settled):.0f} | "
                     f"{min(settled):.0f}-{max(settled):.0f} | x{ratio:.2f} |")
    return "\n".join(lines)


FIGURES = {
    "open migration": "Enter on the study opens the migration screen",
    "open attempt": "Enter on the migration screen opens an attempt",
    "]": "`]` on an attempt opens the next attempt",
    "[": "`[` on an attempt opens the previous attempt",
}
STUDIES = {"demo": "demo study", "1,500 attempts": "1,457 attempts, bench/generate.py --scale 0.1"}


def write_rows(results: dict[str, dict[str, list[tuple[float, float]]]], bare: list[tuple[float, float]],
               against: Path | None, command: str, load: str) -> None:
    """This tree's rows of bench/RESULTS.md: each move on each study, beside the bare push."""
    sys.path.insert(0, str(ROOT / "bench"))
    from results import record

    def ms(times: list[tuple[float, float]], which: int) -> float:
        return statistics.median(t[which] for t in times) * 1000

    for name, study in STUDIES.items():
        rows = results.get(f"{name}, this tree")
        if rows is None:
            continue
        for move, times in rows.items():
            other = results.get(f"{name}, {against}", {}).get(move) if against else None
            record(f"screens: {FIGURES[move]}, key to settled screen ({study}, 120x40, through tmux)",
                   target="at most 1.5x the bare push",
                   latest=f"{ms(times, 1):.0f} ms (first paint {ms(times, 0):.0f} ms), median of {len(times)}"
                          + (f"; the tree at {against} alternated: {ms(other, 1):.0f} ms" if other else ""),
                   baseline=f"a bare Textual app with a DataTable pushing its next screen: {ms(bare, 1):.0f} ms "
                            f"(first paint {ms(bare, 0):.0f} ms)",
                   ratio=f"x{ms(times, 1) / ms(bare, 1):.2f}",
                   when=f"{datetime.date.today()}, {load}", command=command)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--generated", action="store_true", help="also on a generated study of 1,500 attempts")
    parser.add_argument("--quiet-ms", type=float, default=300.0, help="unchanged this long: settled")
    parser.add_argument("--keep", type=Path, help="folder for the studies (kept between runs)")
    parser.add_argument("--against", type=Path, help="another checkout's app, measured in the same rounds")
    parser.add_argument("--write", action="store_true", help="rewrite this benchmark's rows of bench/RESULTS.md")
    args = parser.parse_args()
    if shutil.which("tmux") is None:
        sys.exit("bench/screens_pace.py needs tmux")
    keep = args.keep or Path(tempfile.mkdtemp(prefix="screens-pace-"))
    keep.mkdir(parents=True, exist_ok=True)
    bare_script = keep / "bare_app.py"
    bare_script.write_text(BARE_APP)
    studies = [("demo", demo_study(keep), "bow-classifier")]
    if args.generated:
        studies.append(("1,500 attempts", generated_study(keep), "Migration"))
    trees = [("this tree", ROOT)] + ([(f"{args.against}", args.against.resolve())] if args.against else [])
    quiet = args.quiet_ms / 1000
    results: dict[str, dict[str, list[tuple[float, float]]]] = {
        f"{name}, {label}": {} for name, _, _ in studies for label, _ in trees}
    bare: list[tuple[float, float]] = []
    load = [os.getloadavg()[0]]
    for _ in range(args.runs):
        bare.append(bare_round(bare_script, quiet)["bare push"])
        for name, db, shown in studies:
            for label, tree in trees:
                for move, times in workbench_round(db, quiet, shown, tree).items():
                    results[f"{name}, {label}"].setdefault(move, []).append(times)
        load.append(os.getloadavg()[0])
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"## Screens at a bare app's pace (`bench/screens_pace.py`), {now}, commit {commit}\n")
    print(f"tmux {SIZE[0]}x{SIZE[1]}, {args.runs} rounds, settled = unchanged for {args.quiet_ms:.0f} ms "
          f"(the quiet itself not counted), load average {min(load):.1f}-{max(load):.1f} on "
          f"{os.cpu_count()} cores. Target: settled <= 1.5x the bare push.\n")
    for name, rows in results.items():
        print(f"{name}:\n")
        print(table(rows, bare))
        print()
    if args.write:
        command = " ".join(["bench/screens_pace.py", f"--runs {args.runs}"] + ["--generated"] * args.generated
                           + ([f"--against {args.against}"] if args.against else []) + ["--write"])
        write_rows(results, bare, args.against, command, f"load {min(load):.1f}-{max(load):.1f}")


if __name__ == "__main__":
    main()
