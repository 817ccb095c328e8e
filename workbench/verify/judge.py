"""`judge`: the five levels of one run, its failure cause and its flags, from the ladder's levels
(ladder.py), the trace's findings (trace.py) and time and cost (timing.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from domain.ladder import highest_level, over_claim
from domain.models import AttemptStatus, Evidence, FailureCause, Hardware, Migration, Study
from workbench.verify import trace
from workbench.verify.ladder import (
    FAIL,
    PASS,
    UNKNOWN,
    Judgement,
    LevelResult,
    Run,
    crash_cause,
    errors_raised,
    level1,
    level2,
    level3,
    level4,
    with_findings,
)
from workbench.verify.timing import host_syncs, level5


def judge(
    run: Run,
    reference: Run | None,
    migration: Migration,
    study: Study,
    settings: dict[str, Any],
    tensors: LevelResult | None = None,
    siblings: Sequence[Any] = (),
) -> Judgement:
    """The five levels and the cause, taken from the lowest level that failed on its own evidence.
    `siblings` are the migration's correct attempts (`timing.Sibling`) level 5 compares with."""
    intended = run.attempt.intended_hardware or Hardware(migration.target.accelerator, migration.target.chips)
    errors = errors_raised(run)
    raised = bool(errors)
    l1 = level1(run, reference, migration.goal.metric, settings)
    l2 = level2(run, reference, migration.goal.metric, settings, tensors)
    hung = bool(l1.causes) and l1.causes[0][0] is FailureCause.HANG_AT_EXIT   # finished its work, then hung
    crashed = not hung and l1.outcome is FAIL and (raised or run.attempt.exit_code not in (0, None)
                                                   or run.attempt.status is AttemptStatus.INTERRUPTED)
    if l2.outcome is PASS and (crashed or l1.outcome is FAIL and run.attempt.status is AttemptStatus.NONZERO_EXIT):
        # what it printed before it failed agrees, but a run that failed has not shown its result
        l2 = LevelResult(2, UNKNOWN, f"the run failed (level 1), so agreement is unknown: {l2.reason}", l2.evidence)
    l3 = level3(run, intended, settings)
    traced = trace.findings(run.probes(), run.probe_reports, migration.target.runtime,
                            reference.probe_reports if reference is not None else None, intended.kind)
    said = {c for c, _ in l1.causes}
    l1 = with_findings(l1, [f for f in traced if f.level == 1 and f.cause not in said])   # the log's NaN said it
    if unseen := trace.no_step_seen(run.probes(), run.probe_reports):
        l1 = replace(l1, reason=f"{l1.reason}; {unseen}")
    if l1.outcome is PASS:   # a run that did not complete has not shown how it trained
        l2 = with_findings(l2, [f for f in traced if f.level == 2])
    l3 = with_findings(l3, [f for f in traced if f.level == 3])
    l4 = level4(run, migration)
    if l1.outcome is not PASS and l4.outcome is FAIL:
        l4 = LevelResult(4, UNKNOWN, f"the run did not complete: {l4.reason}", l4.evidence)
    l5, figures = level5(run, reference, study, intended, l1.outcome, settings, siblings,
                         [f for f in traced if f.level == 5])
    levels = [l1, l2, l3, l4, l5]
    highest = highest_level({r.level: r.outcome.value for r in levels})
    failed = [r for r in levels if r.outcome is FAIL]
    cause = None
    cause_ev: list[Evidence] = []
    note = ""
    _, notes = host_syncs(run, reference, settings)
    if failed:
        first = failed[0]
        if first.level == 1:
            if first.causes and first.causes[0][0] is FailureCause.HANG_AT_EXIT:  # finished, then hung
                (cause, cause_ev), note = first.causes[0], first.reason
            elif crashed:
                cause, cause_ev, note = crash_cause(run)
            elif first.causes:   # level 1's own finding: the trace's (an optimizer never stepped), a non-finite loss
                (cause, cause_ev), note = first.causes[0], first.reason
            else:
                cause, cause_ev, note = FailureCause.INCOMPLETE, first.evidence, first.reason
        elif first.level == 2 and l3.setup is not None:
            # a run on the wrong configuration (processes each alone, fewer devices) cannot match
            # the reference's numbers: the configuration is the cause, the mismatch its effect
            cause, cause_ev, why = l3.setup
            note = f"{why}; so {first.reason}"
        else:
            cause, cause_ev = first.causes[0] if first.causes else (FailureCause.OTHER, first.evidence)
            note = first.reason
    silent = bool(failed) and not raised and run.attempt.exit_code == 0
    over = over_claim(run.attempt.expected_level, {r.level: r.outcome.value for r in levels})
    return Judgement(
        levels=levels,
        highest_level=highest,
        cause=cause,
        cause_evidence=list(cause_ev),
        cause_note=note,
        silent=silent,
        over_claim=over,
        raised_error=raised,
        wall_seconds=figures["wall"],
        cost_dollars=figures["cost"],
        time_ratio=figures["time_ratio"],
        cost_ratio=figures["cost_ratio"],
        notes=notes,
    )
