"""What one change to a followed session costs (`workbench watch`), before and after reading only
the appended bytes.

    .venv/bin/python bench/watch.py [--attempts 50 200 800] [--changes 15]

For each size, a session of that many workload attempts (with reads, edits and claims between
them, as tests/import_helpers.Transcript writes them) is read once; then `--changes` times one
more Bash call and its result are appended and read:

- whole:  the earlier watcher: the whole session imported again (`ClaudeCodeImporter.run`);
- follow: workbench/importers/follow.py: only the bytes appended since the last look.

Medians of wall and CPU time per change, the import only (verification, the same in both, left
out). Prints a Markdown table for bench/RESULTS.md. Small scale only on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def session(attempts: int):
    from tests.import_helpers import Transcript

    t = Transcript()
    for n in range(attempts):
        t.read("train.py", "import torch\n" * 40)
        t.edit("train.py", f"lr = {n}", f"lr = {n + 1}")
        t.bash(f"python train.py --run {n}", "".join(f"step {s} loss 0.{s}\n" for s in range(50)))
        t.say("The loss goes down; next I try a larger learning rate.")
    return t


def study(folder: Path, name: str):
    from storage.database import open_study
    from tests.conftest import BundleBuilder
    from workbench.bundle import import_bundle

    bundle = BundleBuilder(folder / f"bundle-{name}")
    bundle.write_study()
    migration, shas = bundle.add_migration("mlp-xla")
    bundle.write_attempts(migration, [bundle.attempt(0, shas[0])])
    db = open_study(folder / f"{name}.db", create=True)
    assert not import_bundle(db, bundle.root, "bench").problems
    return db


def measure(attempts: int, changes: int, folder: Path) -> dict[str, tuple[float, float]]:
    from workbench.importers.claude_code import ClaudeCodeImporter
    from workbench.importers.follow import Follower
    from workbench.importers.rules import WorkloadRule

    out = {}
    for how in ("whole", "follow"):
        db = study(folder, f"{how}-{attempts}")
        t = session(attempts)
        path = folder / f"{how}-{attempts}.jsonl"
        t.dump(path)

        def importer() -> ClaudeCodeImporter:
            return ClaudeCodeImporter(db, "mlp-xla", "bench", rule=WorkloadRule())

        follower = Follower(importer())
        if how == "whole":
            importer().run([path])
        else:
            follower.read([path])
        walls, cpus = [], []
        for n in range(changes):
            start = len(t.lines)
            t.bash(f"python train.py --more {n}", "step 1 loss 0.1\n")
            with path.open("a") as fh:
                fh.write("".join(json.dumps(line) + "\n" for line in t.lines[start:]))
            wall, cpu = time.perf_counter(), time.process_time()
            if how == "whole":
                importer().run([path])
            else:
                follower.read([path])
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        count = db.db.execute("SELECT COUNT(*) FROM attempt WHERE external_id IS NOT NULL").fetchone()[0]
        assert count == attempts + changes, (how, count)
        db.close()
        out[how] = (statistics.median(walls), statistics.median(cpus))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, nargs="+", default=[50, 200, 800])
    parser.add_argument("--changes", type=int, default=15)
    parser.add_argument("--write", action="store_true", help="rewrite this benchmark's row of bench/RESULTS.md")
    args = parser.parse_args()
    print("| attempts in the session | whole re-import, wall / CPU | follow, wall / CPU | whole per attempt (CPU) |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for attempts in args.attempts:
            got = measure(attempts, args.changes, Path(tmp))
            (ww, wc), (fw, fc) = got["whole"], got["follow"]
            print(f"| {attempts} | {ww * 1000:.1f} / {wc * 1000:.1f} ms | {fw * 1000:.2f} / {fc * 1000:.2f} ms"
                  f" | {wc * 1000 / attempts:.2f} ms |", flush=True)
    if args.write:  # the longest session's row
        from results import record

        record(f"one change to a followed session of {attempts} attempts (bench/watch.py), the import only",
               target="none stated", latest=f"{fw * 1000:.2f} ms wall / {fc * 1000:.2f} ms CPU (median of {args.changes}"
               " changes)", baseline=f"the whole re-import it replaced: {ww * 1000:.1f} ms", ratio=f"x{fw / ww:.3f}",
               command="bench/watch.py --attempts " + " ".join(map(str, args.attempts)) + f" --changes {args.changes}"
               " --write")


if __name__ == "__main__":
    main()
