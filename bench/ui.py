"""The review app on a large study: launch time, `j` latency and memory with a huge log open.

    .venv/bin/python bench/ui.py [--log-mb 1024] [--runs 7] [--presses 200] [--keep DIR]
    .venv/bin/python bench/ui.py --launch-only [--against TREE] [--cached-bytecode] [--runs 15] [--keep DIR]
    .venv/bin/python bench/ui.py --pauses [--against TREE] [--log-mb 16] [--runs 5] [--presses 60] [--keep DIR]

Generates a study of 150 migrations and 15,150 attempts (bench/report.py's SQL generator: a
reference and 100 verified attempts per migration) and streams a synthetic training log of
--log-mb megabytes into the store chunk by chunk (never held in memory), attached to
project-001's attempt #1. Then, each in fresh processes:

- launch: from process start to the study screen showing its first page of migrations and
  its footer's keys (headless, 120x40), against a bare Textual app that shows one 100-row
  DataTable; medians of --runs, and their ratio;
- `j`: on project-001's attempt table, the time from a `j` key event (posted to the app as the
  driver posts it; Pilot's `press` adds about 100 ms of its own waiting, measured) until the
  frame in which the detail below the table names the next attempt is handed to the terminal
  driver (`App._display`); p50/p95 of --presses, beside the same on a bare app with a 101-row
  table and a Static. Work the app does after that frame is not in it;
- memory: resident set size with the big log open in the attempt's log pane, at its last line,
  after the error/warning scan finished (VmRSS, and the peak VmHWM);
- garbage collection: every collection's generation and duration (`gc.callbacks`) during the
  `j` presses and in the log pane (opening the attempt, the scan, opening the pane, the jump to
  the last line), and the objects the collector tracks after the presses, by type.

`--pauses` runs the `j` and log pane child alone, --runs times, and prints the garbage
collector's pauses with the latencies they land on; `--launch-only` measures the launch alone; `--against TREE` launches the app from another
checkout too (for example `git worktree add /tmp/before main`), on the same study, each round
running this tree, the other and the bare app one after the other, so before and after share
the machine's load; with `--pauses`, it alternates this tree's app and the other's under this
tree's child script.

Prints a Markdown section for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import io
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MIGRATIONS = 150
ATTEMPTS = 15_000
SIZE = (120, 40)


# --- the study ------------------------------------------------------------------------------------
class SyntheticLog(io.RawIOBase):
    """A training log of `size` bytes made up as it is read: step lines, an XLA warning every
    50 steps, a traceback near the end."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.made = 0
        self.step = 0
        self.pending = b""

    def readable(self) -> bool:
        return True

    def _lines(self, want: int) -> bytes:
        parts = []
        got = 0
        while got < want:
            self.step += 1
            line = (f"step {self.step} loss {1.0 / self.step ** 0.5:.6f} grad_norm 0.4{self.step % 97:02d}"
                    f" step_time 0.0{self.step % 89:02d} lr 0.001 tokens_per_second 1834{self.step % 10}\n")
            if self.step % 50 == 0:
                line += ("2026-12-02 15:29:33.400928: W external/xla/xla/service/sharding_propagation.cc:"
                         f"{self.step % 3000}] sharding propagation fell back to replication\n")
            parts.append(line)
            got += len(line)
        return "".join(parts).encode()

    def read(self, n: int = -1) -> bytes:
        left = self.size - self.made
        if left <= 0:
            return b""
        n = left if n is None or n < 0 else min(n, left)
        while len(self.pending) < n:
            self.pending += self._lines(max(n - len(self.pending), 1 << 16))
        out, self.pending = self.pending[:n], self.pending[n:]
        if self.made + len(out) >= self.size:
            out = out[:-1] + b"\n"
        self.made += len(out)
        return out


def generate(path: Path, log_mb: int) -> tuple[float, float]:
    """The study, then the big log; returns (seconds for the study, seconds for the log)."""
    spec = importlib.util.spec_from_file_location("bench_report", ROOT / "bench" / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    started = time.perf_counter()
    module.generate(path, ATTEMPTS, MIGRATIONS)
    study_s = time.perf_counter() - started

    from storage.database import open_study
    from storage.logs import _store_stream

    started = time.perf_counter()
    study = open_study(path)
    try:
        with study.db.conn:
            log_id = _store_stream(study.db, SyntheticLog(log_mb << 20), f"bench-{log_mb}")
            study.db.conn.execute(
                "UPDATE attempt SET log_id = ? WHERE seq = 1 AND migration_id ="
                " (SELECT id FROM migration WHERE slug = 'project-001')", [log_id])
    finally:
        study.close()
    return study_s, time.perf_counter() - started


# --- launch -----------------------------------------------------------------------------------------
LAUNCH_WORKBENCH = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from screens.app import WorkbenchApp
from textual.widgets import DataTable

app = WorkbenchApp(Path({db!r}), keymap_path=Path("/nonexistent"))
app.effort.start = lambda: None

def check():  # the first page in the table, and the footer's keys (Footer recomposes after mounting)
    screen = app.screen
    if (screen.query(DataTable) and screen.query_one(DataTable).row_count
            and (not screen.query("Footer") or screen.query("FooterKey"))):
        app.exit(time.time())

app.call_later(lambda: app.set_interval(0.002, check))
print(app.run(headless=True, size={size!r}))
"""

LAUNCH_BARE = """
import sys, time
from textual.app import App
from textual.widgets import DataTable

class Bare(App):
    def compose(self):
        yield DataTable()

    def on_mount(self):
        table = self.query_one(DataTable)
        table.add_columns("Migration", "Status", "Attempts")
        for n in range(100):
            table.add_row(f"project-{{n:03d}}", "in progress", str(n))
        self.call_after_refresh(lambda: self.exit(time.time()))

print(Bare().run(headless=True, size={size!r}))
"""


def launch(script: str, env: dict[str, str] | None = None) -> float:
    started = time.time()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT,
                          env=env or {**os.environ, "WORKBENCH_REVIEWER": "bench"})
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    return float(done.stdout.strip().splitlines()[-1]) - started


# --- j latency and memory (in a child: Pilot) ------------------------------------------------------------
FRAME_CLOCK = """
class FrameClock:
    \"\"\"Times a key to the frame that shows its effect: the first one handed to the terminal
    driver (App._display) in which `widget` starts with the wanted text.\"\"\"

    def __init__(self, app, widget):
        self.app, self.want, self.at = app, None, None
        display = app._display

        def timed(screen, renderable):
            display(screen, renderable)
            if self.at is None and self.want and str(widget.render()).startswith(self.want):
                self.at = time.perf_counter()

        app._display = timed

    async def press(self, key, character, want):
        \"\"\"(when the key was posted, seconds to the frame)\"\"\"
        self.want, self.at = want, None
        started = time.perf_counter()
        self.app.post_message(events.Key(key, character))  # as the terminal driver delivers it
        while self.at is None:
            await asyncio.sleep(0.0005)
            if time.perf_counter() - started > 10:
                raise SystemExit(f"no frame with {want!r} after 10 s")
        return started, self.at - started
"""

PILOT = """
import asyncio, collections, gc, sys, time, json
sys.path.insert(0, {root!r})
from pathlib import Path
from screens.app import WorkbenchApp
from screens.migration import AttemptTable
from textual import events
{frame_clock}
def rss():
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024

pauses, marks, clock = [], {{}}, [0.0]

def on_gc(phase, info):  # (generation, start, seconds) of every collection
    if phase == "start":
        clock[0] = time.perf_counter()
    else:
        pauses.append((info["generation"], clock[0], time.perf_counter() - clock[0]))

gc.callbacks.append(on_gc)

def tracked():
    objects = gc.get_objects()
    return len(objects), collections.Counter(type(o).__name__ for o in objects).most_common(6)

async def settle(pilot):
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()

async def main():
    app = WorkbenchApp(Path({db!r}), keymap_path=Path("/nonexistent"))
    app.effort.start = lambda: None
    out = {{"gc": pauses, "marks": marks}}
    async with app.run_test(size={size!r}) as pilot:
        await settle(pilot)
        out["rss_study"] = rss()
        app.open_migration("project-001")
        while not app.screen.query(AttemptTable):
            await pilot.pause(0.01)
        await settle(pilot)
        screen = app.screen
        table = screen.query_one(AttemptTable)
        detail = screen.query_one("#attempt-detail")
        times, starts = [], []
        clock = FrameClock(app, detail)
        marks["j"] = time.perf_counter()
        for n in range({presses}):
            if table.cursor_row >= table.row_count - 1:
                await pilot.press("g")
                await settle(pilot)
            want = screen.ordered()[table.cursor_row + 1].attempt.seq
            await pilot.pause()
            started, took = await clock.press("j", "j", f"#{{want}} ")
            times.append(took)
            starts.append(started)
        marks["j_end"] = time.perf_counter()
        out["j"], out["j_starts"] = times, starts
        out["tracked_after_j"] = tracked()
        # the big log: project-001 attempt #1; its error/warning scan starts as the attempt opens
        from screens.widgets.log_view import LogPane, LogView
        await pilot.press("g", "j")
        await settle(pilot)
        started = marks["log"] = time.perf_counter()
        await pilot.press("enter")
        while not app.screen.query(LogPane):
            await pilot.pause(0.01)
        pane = app.screen.query_one(LogPane)
        while not pane.scan_done and time.perf_counter() - started < {scan_limit}:
            await pilot.pause(0.02)
        out["scan_s"] = time.perf_counter() - started if pane.scan_done else None
        out["warnings"] = len(pane.warnings)
        out["rss_log_scanned"] = rss()
        await settle(pilot)
        # keys posted as the terminal driver posts them (Pilot's press adds its own waiting), the
        # clock stopped once the key's effect is there, then one refresh to paint it
        view = app.screen.query_one(LogView)
        started = time.perf_counter()
        app.post_message(events.Key("3", "3"))
        while not (view.display and view.region.height and app.screen.focused is view):
            await asyncio.sleep(0.0005)
        await pilot.pause(0)
        out["log_open_s"] = time.perf_counter() - started
        await settle(pilot)
        started = marks["log_end"] = time.perf_counter()
        app.post_message(events.Key("G", "G"))
        while view.scroll_y < view.max_scroll_y or not view.max_scroll_y:
            await asyncio.sleep(0.0005)
        await pilot.pause(0)
        out["log_end_s"] = time.perf_counter() - started
        marks["log_done"] = time.perf_counter()
        out["rss_log_open"] = rss()
        out["log_lines"] = view.line_count
        out["log_end_text"] = view.raw_line(out["log_lines"] - 1)[:60]
        out["tracked_at_log_end"] = tracked()
    print(json.dumps(out))

asyncio.run(main())
"""


BARE_J = """
import asyncio, json, time
from textual import events
from textual.app import App
from textual.widgets import DataTable, Static
{frame_clock}
class Bare(App):
    def compose(self):
        yield DataTable(cursor_type="row", zebra_stripes=True)
        yield Static(id="detail")

    def on_mount(self):
        table = self.query_one(DataTable)
        table.add_columns(*"# Src Status L1-5 Failure Claim Intv Exp Commit Command".split())
        for n in range(101):
            table.add_row(str(n), "agent", "ok", "✓✓✗✓✗", "numerical_mismatch silent", "over", "0",
                          "L4", "93f8f40", f"python train.py --seed={{n}}")

    def on_data_table_row_highlighted(self, event):
        self.query_one("#detail", Static).update(f"#{{event.cursor_row}} agent · ok")

async def main():
    app = Bare()
    async with app.run_test(size={size!r}) as pilot:
        await pilot.pause()
        table, detail = app.query_one(DataTable), app.query_one("#detail")
        times, clock = [], FrameClock(app, detail)
        for n in range({presses}):
            if table.cursor_row >= table.row_count - 1:
                table.move_cursor(row=0)
                await pilot.pause()
            want = table.cursor_row + 1
            await pilot.pause()
            times.append((await clock.press("down", None, f"#{{want}} "))[1])
    print(json.dumps(times))

asyncio.run(main())
"""


def bare_j(presses: int) -> list[float]:
    import json

    done = subprocess.run([sys.executable, "-c", BARE_J.format(size=SIZE, presses=presses, frame_clock=FRAME_CLOCK)],
                          capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def pilot_run(db: Path, presses: int, scan_limit: float, root: Path = ROOT) -> dict:
    import json

    done = subprocess.run(
        [sys.executable, "-c", PILOT.format(root=str(root), db=str(db), size=SIZE, presses=presses, frame_clock=FRAME_CLOCK,
                                            scan_limit=scan_limit)],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "WORKBENCH_REVIEWER": "bench"})
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def launch_only(db: Path, runs: int, against: Path | None, cached_bytecode: bool) -> None:
    """Launch medians of this tree, the bare app and (with `against`) another tree, alternated.

    With `cached_bytecode`, every child reads and writes bytecode under one temporary
    PYTHONPYCACHEPREFIX (a first round, not counted, fills it): as an installed app, whose
    modules pip compiled, starts. Without it the children inherit PYTHONDONTWRITEBYTECODE if it
    is set, and then compile the workbench's modules from source at every start while Textual's
    come precompiled from site-packages."""
    trees = {"this tree": ROOT} | ({f"{against}": against} if against else {})
    times: dict[str, list[float]] = {name: [] for name in [*trees, "bare"]}
    env = {**os.environ, "WORKBENCH_REVIEWER": "bench"}
    if cached_bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="bench-ui-pyc-")
    warmup = 1 if cached_bytecode else 0
    load_before = os.getloadavg()
    for n in range(warmup + runs):
        for name, root in trees.items():
            took = launch(LAUNCH_WORKBENCH.format(root=str(root), db=str(db), size=SIZE), env)
            times[name] += [took] if n >= warmup else []
        took = launch(LAUNCH_BARE.format(size=SIZE), env)
        times["bare"] += [took] if n >= warmup else []
    load_after = os.getloadavg()
    bare = statistics.median(times["bare"])
    bytecode = ("bytecode cached" if cached_bytecode
                else "PYTHONDONTWRITEBYTECODE " + ("set" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "unset"))
    print(f"launch to the first screen, medians of {runs} rounds ({bytecode}); load average"
          f" {load_before[0]:.1f} before, {load_after[0]:.1f} after\n")
    print("| app | median | min | max | ratio to bare |\n| --- | --- | --- | --- | --- |")
    for name, got in times.items():
        print(f"| {name} | {statistics.median(got) * 1000:.0f} ms | {min(got) * 1000:.0f} ms"
              f" | {max(got) * 1000:.0f} ms | x{statistics.median(got) / bare:.2f} |")


def full_collections(result: dict, start: str, end: str, generations: tuple[int, ...] = (2,)) -> list[float]:
    """The durations (ms) of the collections of `generations` (the full ones unless told) between
    two of the child's marks."""
    since, until = result["marks"][start], result["marks"][end]
    return [took * 1000 for generation, at, took in result["gc"] if generation in generations and since <= at < until]


def pause_summary(result: dict) -> dict:
    """One child run's full collections: in the `j` presses, in the log pane, in its jump to the
    last line, and how many presses one started in."""
    return {
        "j": full_collections(result, "j", "j_end"),
        "young": full_collections(result, "j", "j_end", (0, 1)),
        "log": full_collections(result, "log", "log_done"),
        "end": full_collections(result, "log_end", "log_done"),
        "hit": sum(any(generation == 2 and start <= at < start + took for generation, at, _ in result["gc"])
                   for start, took in zip(result["j_starts"], result["j"])),
    }


def gc_rows(result: dict) -> str:
    """Table rows on the collector's pauses in one child run."""
    got = pause_summary(result)
    count, types = result["tracked_after_j"]
    return (
        f"| full (generation 2) collections during the {len(result['j'])} `j` presses: count, max |"
        f" {len(got['j'])}, {max(got['j'], default=0):.0f} ms ({got['hit']} presses waited on one) | |\n"
        f"| younger (generation 0 and 1) collections during the presses: count, max | {len(got['young'])},"
        f" {max(got['young'], default=0):.1f} ms | |\n"
        f"| the same from opening the attempt to the log's last line (scan, pane, jump): count, max |"
        f" {len(got['log'])}, {max(got['log'], default=0):.0f} ms ({len(got['end'])} in the jump) | |\n"
        f"| objects the collector tracks after the presses (most common types) | {count:,}"
        f" ({', '.join(f'{name} {n:,}' for name, n in types)}) | |")


def pauses_only(db: Path, runs: int, presses: int, scan_limit: float, against: Path | None) -> None:
    """The `j` and log pane child --runs times for this tree and (with `against`) the other,
    alternated; one line per run, then each tree's pooled `j` p95 and pauses."""
    trees = {"this tree": ROOT} | ({f"{against}": against} if against else {})
    results: dict[str, list[dict]] = {name: [] for name in trees}
    load_before = os.getloadavg()
    print("| tree | run | load | `j` p50 / p95 / max | full collections in the presses: count, max |"
          " presses that waited on one | younger collections in the presses: count, max | log pane: full"
          " collections, max / in the jump | jump to the last line | tracked objects after the presses |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in range(runs):
        for name, root in trees.items():
            result = pilot_run(db, presses, scan_limit, root)
            results[name].append(result)
            times = sorted(result["j"])
            got = pause_summary(result)
            print(f"| {name} | {n + 1} | {os.getloadavg()[0]:.1f} | {statistics.median(times) * 1000:.1f} /"
                  f" {times[int(0.95 * (len(times) - 1))] * 1000:.1f} / {times[-1] * 1000:.0f} ms"
                  f" | {len(got['j'])}, {max(got['j'], default=0):.0f} ms | {got['hit']}"
                  f" | {len(got['young'])}, {max(got['young'], default=0):.1f} ms"
                  f" | {len(got['log'])}, {max(got['log'], default=0):.0f} ms / {len(got['end'])}"
                  f" | {result['log_end_s'] * 1000:.0f} ms | {result['tracked_after_j'][0]:,} |", flush=True)
    load_after = os.getloadavg()
    print(f"\nload average {load_before[0]:.1f} before, {load_after[0]:.1f} after\n")
    print("| tree | `j` p95 (all runs' presses) | full collections in the presses: total, max |"
          " jumps to the last line: median, max | full collections in the log pane: total, max |")
    print("| --- | --- | --- | --- | --- |")
    for name, got in results.items():
        times = sorted(t for result in got for t in result["j"])
        j_pauses = [p for result in got for p in pause_summary(result)["j"]]
        log_pauses = [p for result in got for p in pause_summary(result)["log"]]
        ends = [result["log_end_s"] * 1000 for result in got]
        print(f"| {name} | {times[int(0.95 * (len(times) - 1))] * 1000:.1f} ms | {len(j_pauses)},"
              f" {max(j_pauses, default=0):.0f} ms | {statistics.median(ends):.0f}, {max(ends):.0f} ms"
              f" | {len(log_pauses)}, {max(log_pauses, default=0):.0f} ms |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log-mb", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--presses", type=int, default=200)
    parser.add_argument("--scan-limit", type=float, default=300.0,
                        help="Seconds to wait for the log pane's error/warning scan.")
    parser.add_argument("--keep", type=Path, help="Keep the study in this folder.")
    parser.add_argument("--launch-only", action="store_true", help="Measure the launch only.")
    parser.add_argument("--pauses", action="store_true",
                        help="Measure `j`, the log pane and the garbage collector's pauses only, --runs times.")
    parser.add_argument("--against", type=Path,
                        help="With --launch-only or --pauses: also run the app of this other checkout, alternated.")
    parser.add_argument("--cached-bytecode", action="store_true",
                        help="With --launch-only: the children start with their bytecode cached (as installed).")
    parser.add_argument("--write", action="store_true", help="rewrite this benchmark's rows of bench/RESULTS.md")
    args = parser.parse_args()

    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench-ui-"))
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "ui.db"
    load_before = os.getloadavg()
    if not db.exists():
        study_s, log_s = generate(db, args.log_mb)
        print(f"generated: study {study_s:.1f} s, {args.log_mb} MiB log {log_s:.1f} s,"
              f" file {db.stat().st_size / 2**20:.0f} MiB", file=sys.stderr)
    if args.launch_only:
        launch_only(db, args.runs, args.against and args.against.resolve(), args.cached_bytecode)
        return
    if args.pauses:
        pauses_only(db, args.runs, args.presses, args.scan_limit, args.against and args.against.resolve())
        return

    workbench = [launch(LAUNCH_WORKBENCH.format(root=str(ROOT), db=str(db), size=SIZE)) for _ in range(args.runs)]
    bare = [launch(LAUNCH_BARE.format(size=SIZE)) for _ in range(args.runs)]
    print(f"launch: workbench {sorted(workbench)}, bare {sorted(bare)}", file=sys.stderr)
    result = pilot_run(db, args.presses, args.scan_limit)
    bare_times = sorted(bare_j(args.presses))
    load_after = os.getloadavg()

    times = sorted(result["j"])
    p50 = statistics.median(times) * 1000
    p95 = times[int(0.95 * (len(times) - 1))] * 1000
    w, b = statistics.median(workbench), statistics.median(bare)
    scan = (f"within {result['scan_s']:.1f} s ({result['warnings']:,} warning lines)" if result["scan_s"] is not None
            else f"not done in {args.scan_limit:.0f} s")
    print(f"""
## Review app on a large study (`bench/ui.py`)

{MIGRATIONS} migrations, 15,150 attempts (a reference and 100 verified attempts each, bench/report.py's
generator), and a {args.log_mb:,} MiB synthetic training log ({result['log_lines']:,} lines) streamed into
the chunk store and attached to one attempt. {os.cpu_count()} cores ({cpu_model()}), Python
{platform.python_version()}, {datetime.date.today().isoformat()}; load average {load_before[0]:.1f} before,
{load_after[0]:.1f} after (the machine is shared). Launch times are medians of {args.runs} fresh
processes each; `j` over {len(times)} presses.

| measure | result | target |
| --- | --- | --- |
| launch to the first screen (study, first page shown) | {w * 1000:.0f} ms median | |
| bare Textual app showing one 100-row table | {b * 1000:.0f} ms median | |
| launch ratio, workbench / bare | x{w / b:.2f} | |
| `j` to the next attempt's detail shown, p50 | {p50:.1f} ms | |
| `j` to the next attempt's detail shown, p95 | {p95:.1f} ms | 16 ms |
| the same on a bare app (101-row table, a Static updated on highlight), p50 / p95 | {statistics.median(bare_times) * 1000:.1f} / {bare_times[int(0.95 * (len(bare_times) - 1))] * 1000:.1f} ms | |
| RSS, study screen | {result['rss_study'][0]:.0f} MiB | |
| RSS, {args.log_mb:,} MiB log open at its last line | {result['rss_log_open'][0]:.0f} MiB | under 200 MiB |
| RSS after the log's error/warning scan (done {scan} after opening the attempt; peak) | {result['rss_log_scanned'][0]:.0f} MiB (peak {result['rss_log_scanned'][1]:.0f} MiB) | under 200 MiB |
| open the log pane / jump to the last line | {result['log_open_s'] * 1000:.0f} ms / {result['log_end_s'] * 1000:.0f} ms | 100 ms / 50 ms |
{gc_rows(result)}
""")
    if args.write:
        write(args, w, b, times, bare_times, result)


def write(args, w: float, b: float, times: list[float], bare_times: list[float], result: dict) -> None:
    """This run's figures as their rows of bench/RESULTS.md (bench/results.py)."""
    from results import record

    command = f"bench/ui.py --log-mb {args.log_mb} --runs {args.runs} --presses {args.presses} --write"
    study = f"bench/ui.py's study: {MIGRATIONS} migrations, 15,150 attempts"
    record(f"app launch to the first screen ({study})", target="at most 1.5x the bare app",
           latest=f"{w * 1000:.0f} ms median of {args.runs}",
           baseline=f"a bare Textual app showing one 100-row table: {b * 1000:.0f} ms", ratio=f"x{w / b:.2f}",
           command=command)
    p95, bare_p95 = (xs[int(0.95 * (len(xs) - 1))] * 1000 for xs in (times, bare_times))
    record(f"`j` to the next attempt's detail shown (to the frame), p95 ({study})", target="16 ms",
           latest=f"p50 {statistics.median(times) * 1000:.1f} ms, p95 {p95:.1f} ms ({len(times)} presses)",
           baseline=f"the same on a bare app (101-row table, a Static updated on highlight): p50"
                    f" {statistics.median(bare_times) * 1000:.1f} ms, p95 {bare_p95:.1f} ms",
           ratio=f"x{p95 / bare_p95:.2f} (p95)", command=command)
    record(f"open the log pane / jump to its last line ({args.log_mb:,} MiB log)", target="100 ms / 50 ms",
           latest=f"{result['log_open_s'] * 1000:.0f} ms / {result['log_end_s'] * 1000:.0f} ms", baseline="none",
           ratio="", command=command)
    record(f"RSS with a {args.log_mb:,} MiB log open at its last line, after its error/warning scan",
           target="under 200 MiB",
           latest=f"{result['rss_log_open'][0]:.0f} MiB open, {result['rss_log_scanned'][0]:.0f} MiB after the scan"
                  f" (peak {result['rss_log_scanned'][1]:.0f} MiB)",
           baseline=f"the study screen: {result['rss_study'][0]:.0f} MiB", ratio="", command=command)


if __name__ == "__main__":
    main()
