"""What one attempt is judged on: its run (log facts, metric series, topology) loaded from the
study, the hashes of every input its verdict depends on, and level 2's checkpoint comparison.

Shared by the verify run (workbench/verify/__init__.py) and its batch workers (batch.py), below both.
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import Any

from domain.models import Attempt, Migration, Study
from storage import verify_inputs
from storage.logs import log_chunks
from storage.sqlite import Database

VERIFIER = "workbench.ladder"
VERSION = "1.9.0"
"""Bump on any change to what a level checks: stored verdicts of an older version are redone."""

def older_version(version: str, than: str) -> bool:
    """Whether a stored verifier version comes before `than` (`1.5.9` before `1.6.0`; a version
    that does not read as numbers counts as older)."""
    def parts(text: str) -> tuple[int, ...]:
        return tuple(int(p) if p.isdigit() else -1 for p in text.split("."))

    return parts(version) < parts(than)


EXTRACT_LIMIT = 64 << 20
"""Logs up to this size are scanned for metric lines even when series are stored, so verdicts
can cite the log line of a metric point; larger ones are scanned for errors and counters only."""


def load_run(db: Database, attempt: Attempt, settings: dict[str, Any], inputs: verify_inputs.AttemptInputs, *,
             cite: bool = True):
    """The attempt's evidence: the topology its log's head and command state, log facts from one
    streaming pass (over the untangled log when several processes wrote it), its metric series,
    and the probe reports a re-run stored with it (`inputs`, what its verdict's inputs hash).
    With `cite`, verdicts can cite the log line of a metric point (`Run.point_line`); the
    reference run's are never cited."""
    from workbench.verify import topology
    from workbench.verify.ladder import Run
    from workbench.verify.logscan import scan_chunks
    from workbench.verify.patterns import migration_patterns

    stored = inputs.metric_series()
    facts = topo = point_line = None
    log = inputs.log
    if attempt.log_id is not None and log is not None:
        head, chunks = topology.head_of(log_chunks(db, attempt.log_id))
        topo = topology.read(head, attempt.command.argv)
        patterns = migration_patterns(settings)
        untangler = topology.Untangler() if topo.multi_process else None
        if stored and untangler is None and log.size <= EXTRACT_LIMIT and CITE_WITHOUT_EXTRACTION:
            data, bounds = _joined(chunks)
            facts, point_line = _without_extraction(db, attempt.log_id, data, bounds, patterns, cite)
            chunks = _slices(data, bounds)
        if facts is None:
            facts = scan_chunks(untangler.chunks(chunks) if untangler else chunks, patterns=patterns,
                                extract_metrics=not stored or log.size <= EXTRACT_LIMIT,
                                standing=untangler.standing if untangler else None)
        if untangler is not None:
            facts = untangler.remap(facts)
    series = stored or (facts.series_view() if facts else {})
    return Run(attempt, facts, series, "stored" if stored else "log", inputs.probe_reports, topo, point_line)


CITE_WITHOUT_EXTRACTION = True
"""Stored series are not extracted again from their log: a scan of the step lines alone gives the
facts extraction would (steps, planned total) and `PointLines` the 2-4 lines a verdict cites.
Off, the log is extracted as before (tests compare the two)."""


COUNT_LINES_BELOW = 1 << 16
"""A cited line this near the log's start, or a line cited before, is numbered by counting the
newlines between (microseconds), not by asking the stored line index (a query)."""


def _joined(chunks: Iterable[bytes]) -> tuple[bytes, list[int]]:
    """The log in one piece (PointLines searches it) and where its chunks began and ended, so
    it is read again in the same chunks (the scan's pieces, and so its facts, follow them)."""
    parts = list(chunks)
    bounds = [0]
    for part in parts:
        bounds.append(bounds[-1] + len(part))
    return (parts[0] if len(parts) == 1 else b"".join(parts)), bounds


def _slices(data: bytes, bounds: list[int]) -> Iterator[bytes]:
    for start, end in zip(bounds, bounds[1:]):
        yield data[start:end]


def _without_extraction(db: Database, log_id: int, data: bytes, bounds: list[int], patterns: list[Any], cite: bool):
    """(facts, point_line) of a log whose series are stored, from a `steps_only` scan, or
    (None, None) when its patterns need a full extraction (`steps_only_suits`)."""
    from storage.logs import indexed_line_before
    from workbench.verify.logscan import LogScanner, scan_chunks, steps_only_suits
    from workbench.verify.steplines import PointLines

    if not steps_only_suits(patterns, data):
        return None, None
    scanner = LogScanner(patterns, steps_only=True)
    for chunk in _slices(data, bounds):
        scanner.feed(chunk)
    facts = scanner.finish()
    if not cite:
        return facts, None

    known_at, known_line = [0], [1]  # offsets numbered so far, ascending, and their lines' numbers

    def line_of(offset: int) -> int:
        """The number of the line holding `offset`, its newlines counted from the nearest offset
        numbered before (a verdict cites 2-4 lines, often neighbours), the log's start or the
        stored line index's entry before it."""
        k = bisect.bisect_right(known_at, offset)
        below = known_at[k - 1]
        above = known_at[k] if k < len(known_at) else None
        if above is not None and above - offset < min(offset - below, COUNT_LINES_BELOW):
            line = known_line[k] - data.count(b"\n", offset, above)
        elif offset - below < COUNT_LINES_BELOW:
            line = known_line[k - 1] + data.count(b"\n", below, offset)
        else:
            indexed, start = indexed_line_before(db, log_id, offset)
            line = indexed + data.count(b"\n", start, offset) + 1
        known_at.insert(k, offset)
        known_line.insert(k, line)
        return line

    def extract():
        return scan_chunks(_slices(data, bounds), patterns=patterns)

    return facts, PointLines(data, scanner.step_lines, patterns, line_of, extract).line


def _input_digest(inputs: verify_inputs.AttemptInputs) -> dict[str, Any]:
    probes = json.dumps(inputs.probe_reports, sort_keys=True, default=str)
    return {
        "record": hashlib.sha256(json.dumps(inputs.record, sort_keys=True, default=str).encode()).hexdigest(),
        "log_sha256": inputs.log.sha256 if inputs.log is not None else None,
        "metrics_sha256": inputs.metric_series_digest(),
        "probes_sha256": hashlib.sha256(probes.encode()).hexdigest(),
        "checkpoint_sha256": inputs.checkpoint["sha256"] if inputs.checkpoint else None,
    }


def inputs_for(migration: Migration, study: Study, attempt: Attempt, inputs: verify_inputs.AttemptInputs,
               settings: dict[str, Any], reference_digest: dict[str, Any] | None,
               siblings: tuple[Any, ...] = (), repeats: list[verify_inputs.AttemptInputs] | None = None) -> tuple[str, str]:
    """Hashes of every input a verdict depends on, as JSON text, and one hash over it. `attempt` carries
    its effective expected level (see `with_effective_expected`): a claim review changes it.
    When both runs saved a checkpoint, the torch version (None when absent) is an input too:
    installing torch redoes a comparison that was skipped for want of it. `reference_digest` is
    the reference's `_input_digest` (None without a reference), once per migration; `siblings`
    the migration's correct attempts' figures level 5 compares with (its own left out); `repeats`
    the inputs of the attempt's own replicates (`workbench rerun --repeat`), when it has any."""
    mine = _input_digest(inputs)
    if repeats:
        mine["repeats"] = [_input_digest(i) for i in repeats]
    theirs = reference_digest
    tensor_backend = None
    if mine["checkpoint_sha256"] and theirs and theirs["checkpoint_sha256"]:
        from workbench.verify.tensors import backend

        tensor_backend = backend() or "absent"
    hashed = {
        "verifier": VERIFIER,
        "version": VERSION,
        "settings": settings,
        "attempt": mine,
        "expected_level": attempt.expected_level,
        "reference": theirs,
        "tensor_backend": tensor_backend,
        "migration": {
            "goal": [migration.goal.metric, migration.goal.reference, migration.goal.direction.value,
                     migration.goal.tolerance],
            "target": [migration.target.accelerator, migration.target.chips],
        },
        "prices": study.prices,
        "siblings": [dataclasses.astuple(s) for s in siblings if s.attempt_id != attempt.id],
    }
    text = json.dumps(hashed, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest(), text


def compare_checkpoints(mine: dict[str, Any] | None, theirs: dict[str, Any] | None, settings: dict[str, Any],
                        cache: dict[str, dict[str, Any]] | None = None):
    """Level 2's checkpoint comparison (a `LevelResult`) when the attempt and the reference both
    have a stored checkpoint (`AttemptInputs.checkpoint`), else None."""
    if mine is None or theirs is None:
        return None
    from workbench.verify.tensors import compare_files

    return compare_files(mine["file"], theirs["file"], float(settings["tensor_rtol"]),
                         mine_name=mine["name"], reference_name=theirs["name"], cache=cache)


def with_effective_expected(db: Database, attempt: Attempt) -> Attempt:
    """The attempt with its effective expected level (`storage.queries.expected_level_of`: a
    reviewer's claim review, else the rule-based level), the level its over-claim flag compares."""
    from storage.queries import effective_expected_level

    level = effective_expected_level(db, attempt.id).level
    return attempt if level == attempt.expected_level else dataclasses.replace(attempt, expected_level=level)
