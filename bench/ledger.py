"""The ledger screen's reads on a long history: how long a page, a filtered page, the live refresh
and the counts take (storage/ledger.py), for one migration and for the whole study.

    .venv/bin/python bench/ledger.py [--records 20000] [--runs 5]

Builds a study from the demo bundle, then records --records interventions on one migration
through storage.records (audited, one transaction each, as the app and `workbench intervene`
write them; a fifth of them on an attempt, one in a hundred corrected), with 20 decisions, 20
budget changes and an override. Each read is timed --runs times; medians. Prints a Markdown
section for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def build(path: Path, records_wanted: int) -> None:
    from domain.models import DecisionKind, Outcome
    from storage import queries, records
    from storage.database import open_study
    from workbench import config
    from workbench.bundle import import_bundle
    from workbench.verify import verify_study

    study = open_study(path, create=True)
    try:
        db = study.db
        import_bundle(study, config.DEMO_BUNDLE, "ana")
        verify_study(db, "ana")
        m = queries.get_migration(db, "mlp-classifier")
        assert m is not None
        attempt = queries.attempt_id_by_seq(db, m.id, 3)
        for n in range(records_wanted):
            new = records.record_intervention(
                db, migration_id=m.id, kind="hint", minutes=3, reviewer="ana" if n % 3 else "ben",
                note=f"note {n}: " + "what was done and why " * 8, attempt_id=attempt if n % 5 == 0 else None)
            if n % 100 == 99:
                records.record_intervention(db, migration_id=m.id, kind="hint", minutes=4, note="corrected",
                                            reviewer="ana", corrects=new)
        for n in range(20):
            records.record_decision(db, migration_id=m.id, kind=DecisionKind.CONTINUE, reason=f"go on {n}",
                                    reviewer="ana")
            records.add_budget_change(db, migration_id=m.id, compute_dollars=10 + n, staff_hours=8, attempts=20,
                                      calendar_days=None, acceptance_level=4, reason=f"more {n}", reviewer="ana")
        verdict = queries.verdicts(db, attempt)[1]
        records.add_verdict_override(db, verdict_id=verdict.id, outcome=Outcome.PASS, justification="seen",
                                     reviewer="ben")
    finally:
        study.close()


def timed(runs: int, read) -> tuple[float, int]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        found = read()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, len(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="rewrite this benchmark's row of bench/RESULTS.md")
    args = parser.parse_args()

    from storage import ledger, queries
    from storage.database import open_study

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ledger.db"
        start = time.perf_counter()
        build(path, args.records)
        built = time.perf_counter() - start
        study = open_study(path)
        try:
            db = study.db
            mlp = queries.get_migration(db, "mlp-classifier")
            assert mlp is not None
            rows = []
            found: dict[tuple[str, str], tuple[float, int]] = {}
            for scope, label in ((mlp.id, "one migration"), (None, "the study")):
                first = ledger.ledger_page(db, scope)
                oldest_shown = ledger.ledger_page(db, scope, limit=500)[-1].key
                cases = [
                    ("first page (100)", lambda s=scope: ledger.ledger_page(db, s)),
                    ("next page", lambda s=scope, k=first[-1].key: ledger.ledger_page(db, s, before=k)),
                    ("filtered: kind:decision", lambda s=scope: ledger.ledger_page(
                        db, s, ledger.parse_ledger_filter("kind:decision"))),
                    ("filtered: words, reviewer", lambda s=scope: ledger.ledger_page(
                        db, s, ledger.parse_ledger_filter("note 1999 reviewer:ana"))),
                    ("refresh of 500 loaded", lambda s=scope, k=oldest_shown:
                        ledger.ledger_page(db, s, down_to=k, limit=None)),
                    ("everything", lambda s=scope: ledger.ledger_page(db, s, limit=None)),
                    ("counts", lambda s=scope: list(ledger.ledger_counts(db, s))),
                ]
                for name, read in cases:
                    ms, n = timed(args.runs, read)
                    rows.append(f"| {label} | {name} | {n:,} | {ms:.1f} ms |")
                    found[label, name] = (ms, n)
        finally:
            study.close()
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M")
    print(f"## Ledger reads on a long history (`bench/ledger.py`), {when} UTC\n")
    print(f"{args.records:,} interventions (+1% corrections), 20 decisions, 20 budget changes, an override on "
          f"the demo study's mlp-classifier, written through storage.records in {built:.0f} s; "
          f"medians of {args.runs}; {platform.machine()}, Python {platform.python_version()}.\n")
    print("| scope | read | rows | time |\n| --- | --- | --- | --- |")
    print("\n".join(rows))
    if args.write:
        from results import record

        first, everything = found["one migration", "first page (100)"], found["one migration", "everything"]
        record(f"ledger: first page (100) of one migration with {everything[1]:,} records (bench/ledger.py)",
               target="none stated", latest=f"{first[0]:.1f} ms (median of {args.runs}); everything"
               f" {everything[0]:.1f} ms", baseline="none", ratio="",
               command=f"bench/ledger.py --records {args.records} --runs {args.runs} --write")


if __name__ == "__main__":
    main()
