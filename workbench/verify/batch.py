"""Verify as a batch job: hash and judge attempts in a process pool, write verdicts in batches.

The scan of a log is CPU-bound pure Python, so threads would not help: workers are processes
that open the study file themselves (reads only; WAL lets the parent write meanwhile), load the
reference run once per migration, and send back judgements. The parent writes each batch in one
transaction and hands over new tasks only while few are in flight (`Judges.WINDOW`), so what it
holds is bounded by the pool, not by the study. A handful of attempts is judged in-process:
starting workers costs more. Workers are forked from a single-threaded process (the CLI); a
caller with threads (the app's verify worker) gets them from a fork server, since forking a
process with threads can copy a lock another thread holds.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from domain.models import Attempt, Migration, Study
from storage.records import VerificationRows
from storage.sqlite import Database

POOL_MIN = 24
"""Fewer attempts than this are judged in-process."""
BATCH = 32
"""Attempts per task at most, and so per write transaction. A worker loads the reference run of
each migration it gets a task of: a migration of up to BATCH attempts is one task."""


@dataclass(frozen=True)
class Task:
    """Attempts of one migration to verify, with what judging them needs."""

    migration: Migration
    study: Study
    settings: dict[str, Any]
    reference: Attempt | None
    attempts: tuple[Attempt, ...]
    force: bool = False
    """Judge even an attempt whose inputs hash is its current verification's."""
    siblings: tuple[Any, ...] = ()
    """The migration's correct attempts level 5 compares with (`timing.Sibling`), read once by
    the parent: an input of every verdict."""


@dataclass(frozen=True)
class Judged:
    """One attempt as a task gives it back: with its effective expected level and either its
    current verification (`verification_id`, when its inputs are unchanged) or a new judgement's
    rows (`storage.records.VerificationRows`) with the inputs it was hashed from (JSON text), for
    the parent to write."""

    attempt: Attempt
    verification_id: int = 0
    rows: VerificationRows | None = None
    digest: str = ""
    inputs: str = ""
    error: str = ""
    """Why the attempt could not be judged (its evidence broke the judging): named at the run's
    end, while the task's other attempts are judged and written."""


MAX_WORKERS = 8
"""Workers by default at most: the parent reads and writes about 0.4-0.6 ms of CPU an attempt and
a worker judges one in 2-2.5 ms, so past about four workers the parent is what waits, and a TPU
VM's hundreds of cores would each start a process (about 50 MiB) for nothing."""


def default_workers() -> int:
    """The cores this process may run on, at most MAX_WORKERS."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return min(cores, MAX_WORKERS)


def judge_task(db: Database, task: Task, cache: dict[Any, Any]) -> list[Judged]:
    """Each attempt of the task hashed and, unless its inputs are unchanged, judged: the workers
    do both, so the parent only reads attempts and writes verdicts. What a migration shares (the
    reference's input digest, the current hashes, the reference run loaded once it is needed, the
    checkpoints already read) is kept in `cache` for the current migration only: tasks come in
    migration order, and a study of 1,500 migrations would otherwise keep 1,500 reference runs in
    every worker."""
    from storage import verify_inputs
    from storage.records import verification_rows
    from workbench.verify.evidence import (
        _input_digest,
        compare_checkpoints,
        inputs_for,
        load_run,
        with_effective_expected,
    )
    from workbench.verify.judge import judge

    reference = task.reference
    # a second sweep (new siblings) reads the hashes its first sweep wrote
    key = ("migration", task.migration.id, reference.id if reference else None, task.siblings)
    if cache.get("key") != key:
        cache.clear()
        cache["key"] = key
        cache["reference_inputs"] = verify_inputs.attempt_inputs(db, reference) if reference else None
        replicates = verify_inputs.replicates(db, reference) if reference else []
        cache["replicates"] = [(a, verify_inputs.attempt_inputs(db, a)) for a in replicates]
        cache["digest"] = _input_digest(cache["reference_inputs"]) if reference else None
        if cache["replicates"]:  # their evidence is the reference's noise: an input of every verdict
            cache["digest"]["replicates"] = [_input_digest(i) for _, i in cache["replicates"]]
        cache["current"] = verify_inputs.current_hashes(db, task.migration.id)
        cache["checkpoints"] = {}
    reference_inputs = cache["reference_inputs"]
    out = []
    for row in task.attempts:
        attempt = with_effective_expected(db, row)
        read = verify_inputs.attempt_inputs(db, attempt)
        repeats = [(a, verify_inputs.attempt_inputs(db, a)) for a in verify_inputs.replicates(db, attempt)]
        digest, inputs = inputs_for(task.migration, task.study, attempt, read, task.settings, cache["digest"],
                                    task.siblings, [i for _, i in repeats])
        stored = cache["current"].get(attempt.id)
        if stored is not None and stored[1] == digest and not task.force:
            out.append(Judged(attempt, stored[0]))
            continue
        if "reference" not in cache:
            try:
                cache["reference"] = load_run(db, reference, task.settings, reference_inputs, cite=False) if reference else None
                if cache["reference"] is not None:
                    cache["reference"].replicates = [load_run(db, a, task.settings, i, cite=False)
                                                     for a, i in cache["replicates"]]
            except Exception as exc:  # noqa: BLE001 - read once, said for each attempt judged against it
                cache["reference"] = f"its reference run: {_why(exc)}"
        if isinstance(cache["reference"], str):
            out.append(Judged(attempt, error=cache["reference"]))
            continue
        try:
            run = load_run(db, attempt, task.settings, read)
            run.replicates = [load_run(db, a, task.settings, i, cite=False) for a, i in repeats]
            checkpoints = compare_checkpoints(read.checkpoint, reference_inputs.checkpoint if reference_inputs else None,
                                              task.settings, cache["checkpoints"])
            judgement = judge(run, cache["reference"], task.migration, task.study, task.settings, checkpoints,
                              task.siblings)
        except Exception as exc:  # noqa: BLE001 - one attempt's evidence never stops the others' verdicts
            out.append(Judged(attempt, error=_why(exc)))
            continue
        out.append(Judged(attempt, 0, verification_rows(judgement), digest, inputs))
    return out


def _why(exc: Exception) -> str:
    """What broke the judging, in a line; Python's refusal to read a huge number said plainly."""
    if isinstance(exc, ValueError) and "integer string conversion" in str(exc):
        import sys

        return f"a number in its log has more than {sys.get_int_max_str_digits()} digits"
    return f"{type(exc).__name__}: {exc}"


_WORKER: dict[str, Any] = {}


def _in_worker(path: str, task: Task) -> list[Judged]:
    """A pool worker's entry: its own connection and cache, kept for the pool's life."""
    if "db" not in _WORKER:
        from storage.database import open_study

        _WORKER["db"] = open_study(path).db
        _WORKER["cache"] = {}
    return judge_task(_WORKER["db"], task, _WORKER["cache"])


class Judges:
    """Judges tasks as they are handed over and gives them back as they finish, with at most
    `WINDOW` tasks per worker in flight: a study of 150,000 attempts never has more than a few
    migrations' attempts in memory. Tasks wait here until `pool_min` attempts have come: then a
    process pool starts, else (few attempts, one worker, or no file) they are judged here, in
    order."""

    WINDOW = 4

    def __init__(self, db: Database, workers: int, path: str | None, pool_min: int = POOL_MIN) -> None:
        self.db, self.workers, self.path, self.pool_min = db, workers, path, pool_min
        self.here = workers <= 1 or path is None
        self.waiting: list[Task] = []
        self.cache: dict[Any, Any] = {}
        self.pool: Any = None
        self.start_method: str | None = None
        """How the pool's workers start ("fork", "forkserver"); None while tasks are judged here."""
        self.futures: dict[Any, Task] = {}

    def submit(self, task: Task) -> Iterator[tuple[Task, list[Judged]]]:
        """Hand over a task; gives back the tasks finished meanwhile (waiting for one while the
        window is full)."""
        if self.here:
            yield task, judge_task(self.db, task, self.cache)
            return
        self.waiting.append(task)
        if self.pool is None and sum(len(t.attempts) for t in self.waiting) < self.pool_min:
            return
        if self.pool is None:
            import multiprocessing
            import threading
            from concurrent.futures import ProcessPoolExecutor

            # the fork server imports the main module as spawn does: cli/__main__.py is guarded
            self.start_method = "fork" if threading.active_count() == 1 else "forkserver"
            if self.start_method == "forkserver":
                _start_resource_tracker()
            self.pool = ProcessPoolExecutor(max_workers=self.workers,
                                            mp_context=multiprocessing.get_context(self.start_method))
        for waiting in self.waiting:
            self.futures[self.pool.submit(_in_worker, self.path, waiting)] = waiting
        self.waiting.clear()
        while len(self.futures) >= self.WINDOW * self.workers:
            yield from self._finished()

    def drain(self) -> Iterator[tuple[Task, list[Judged]]]:
        """The tasks still out, as they finish (judged here when too few came for a pool)."""
        for task in self.waiting:
            yield task, judge_task(self.db, task, self.cache)
        self.waiting.clear()
        while self.futures:
            yield from self._finished()

    def _finished(self) -> Iterator[tuple[Task, list[Judged]]]:
        from concurrent.futures import FIRST_COMPLETED, wait

        done, _ = wait(self.futures, return_when=FIRST_COMPLETED)
        for future in done:
            yield self.futures.pop(future), future.result()  # popped: a done task's judgements go once written

    def __enter__(self) -> Judges:
        return self

    def __exit__(self, *exc: object) -> None:
        """A failed task or write drops the tasks not started yet."""
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)


def _start_resource_tracker() -> None:
    """Start the process that a fork server's pool needs (it cleans up the pool's semaphores)
    with the real standard error: it is handed `sys.stderr`'s descriptor, and in the app
    Textual's capture of `sys.stderr` has none."""
    import sys
    from multiprocessing import resource_tracker

    captured = sys.stderr
    if sys.__stderr__ is not None:
        sys.stderr = sys.__stderr__
    try:
        resource_tracker.ensure_running()
    finally:
        sys.stderr = captured


def tasks_of(migration: Migration, study: Study, settings: dict[str, Any], reference: Attempt | None,
             attempts: list[Attempt], force: bool = False, siblings: tuple[Any, ...] = ()) -> list[Task]:
    """The migration's attempts cut into as few tasks as `BATCH` allows, of even size."""
    n = -(-len(attempts) // BATCH)
    return [Task(migration, study, settings, reference, tuple(attempts[len(attempts) * i // n:len(attempts) * (i + 1) // n]),
                 force, siblings) for i in range(n)]
