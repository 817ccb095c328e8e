"""A long note typed without bracketed paste: each character its own key event, all read at once.

    .venv/bin/python bench/keys_typed.py [--kb 1,5,20,60] [--against TREE] [--runs 1]

Builds the demo study once, then for each size, in a fresh process per run: opens the judge form
on the demo's second attempt (headless, 80x24), focuses the note, posts that many kilobytes of
printable key events to the app as the terminal driver posts them (what a terminal, a
multiplexer or a script that does not bracket a paste sends), and times from the first key to
the note holding its final text with the app idle again. Prints seconds, the note's length and
the process's peak resident set size (ru_maxrss), for this tree and with `--against TREE` for
another checkout (for example `git worktree add /tmp/before main`), the two alternated.
Prints a Markdown table for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = "the loss went flat at step 300 (lr 3e-4), so the schedule was kept. "


async def _type_note(db: Path, chars: int) -> dict:
    from textual import events
    from textual.worker import WorkerCancelled

    from screens.app import WorkbenchApp

    app = WorkbenchApp(db)

    async def settle(pilot) -> None:
        for _ in range(2):
            for worker in list(app.workers):
                try:
                    await worker.wait()
                except WorkerCancelled:
                    pass
            await pilot.pause()

    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for keys in (["enter"], ["j", "enter"], ["J"]):
            await pilot.press(*keys)
            await settle(pilot)
        note = app.screen.query_one("#judge-note")
        note.focus()
        await settle(pilot)
        text = (WORDS * (chars // len(WORDS) + 1))[:chars]
        final = min(chars, note.max_length or chars)
        start = time.perf_counter()
        for ch in text:
            app.post_message(events.Key("space" if ch == " " else ch, ch))
        while len(note.value) < final:
            await asyncio.sleep(0.005)
        await pilot.pause()
        gate = getattr(getattr(app, "keys", None), "task", None)  # the key gate, where the tree has one
        if gate is not None:
            await asyncio.wait([gate])
        seconds = time.perf_counter() - start
        assert note.value == text[:final], "the note is not what was typed"
    import resource

    return {"seconds": seconds, "length": final, "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def child(db: str, chars: int) -> None:
    print(json.dumps(asyncio.run(_type_note(Path(db), chars))))


def run_child(tree: Path, db: Path, chars: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(db), str(chars)],
                         cwd=tree, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def build_demo(path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from storage.database import open_study
    from workbench import config
    from workbench.bundle import import_bundle
    from workbench.verify import verify_study

    study = open_study(path, create=True)
    try:
        assert not import_bundle(study, config.DEMO_BUNDLE, "bench").problems
        verify_study(study.db, "bench")
    finally:
        study.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kb", default="1,5,20,60", help="sizes in KB (1,000 characters), comma separated")
    parser.add_argument("--against", type=Path, help="another checkout to measure the same way")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]))
        return
    trees = [("this tree", ROOT)] + ([("against", args.against.resolve())] if args.against else [])
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "demo.db"
        build_demo(db)
        print("| tree | KB typed | seconds | note length | peak RSS MiB |\n| --- | --- | --- | --- | --- |")
        for kb in (int(k) for k in args.kb.split(",")):
            for _ in range(args.runs):
                for name, tree in trees:
                    copy = Path(tmp) / f"run-{kb}.db"
                    copy.write_bytes(db.read_bytes())
                    got = run_child(tree, copy, kb * 1000)
                    print(f"| {name} | {kb} | {got['seconds']:.2f} | {got['length']:,} | {got['max_rss_mib']:.0f} |",
                          flush=True)


if __name__ == "__main__":
    main()
