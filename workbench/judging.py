"""Judging services (docs/judgements.md): record a judgement, deal a review queue, measure
agreement, adjudicate. The CLI and the app call these; the SQL is in storage/judgements.py.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from domain.agreement import (
    RESAMPLES,
    SEED,
    AgreementReport,
    BlindFigure,
    agreement_for_level,
    blind_counts,
    disagreements,
)
from domain.errors import WorkbenchError
from domain.judgements import LEVELS, check_cause, deal, parse_levels
from domain.models import AttemptSource, Outcome

if TYPE_CHECKING:
    from sqlite_utils import Database


def _checked(call: Any, *args: Any, **kwargs: Any) -> Any:
    """Run a validating call; its ValueError (one line naming the field) becomes a WorkbenchError."""
    try:
        return call(*args, **kwargs)
    except ValueError as exc:
        raise WorkbenchError(f"--{exc}") from None


def record_judgement(db: Database, slug: str, seq: int, *, levels: str, cause: str | None, note: str | None,
                     reviewer: str, active_seconds: float = 0.0) -> tuple[int, bool, list[tuple[int, str, str]]]:
    """Store a reviewer's judgement of attempt SEQ of SLUG. Returns its id, whether it was given
    blind, and (level, judgement, automated verdict) for the reveal that follows."""
    from storage.judgements import add_judgement, hidden_for
    from storage.queries import find_attempt, verdicts

    outcomes = _checked(parse_levels, levels)
    found = _checked(check_cause, outcomes, cause)
    if note is not None and not note.strip():
        raise WorkbenchError("--note is empty: write the note, or leave --note out")
    _, attempt = find_attempt(db, slug, seq)
    if attempt.source is AttemptSource.REFERENCE:
        raise WorkbenchError(f"{slug}: #{seq} is the reference run, the yardstick; judge the agent's attempts")
    blind = hidden_for(db, reviewer, attempt.id)
    new_id = _checked(add_judgement, db, attempt_id=attempt.id, reviewer=reviewer, levels=outcomes, cause=found,
                      note=(note or "").strip(), blind=blind, active_seconds=active_seconds)
    machine = {v.level: v.outcome.value for v in verdicts(db, attempt.id)}
    return new_id, blind, [(level, outcomes[level - 1].value, machine.get(level, "-")) for level in LEVELS]


def assign(db: Database, reviewers: list[str], *, overlap: float, migration_id: int | None, blind: bool, seed: int,
           assigned_by: str) -> tuple[int, list[tuple[int, str]]]:
    """Deal the unjudged, undealt agent attempts (storage.judgements.dealable_attempts) to the
    reviewers and store the deal. Returns (batch, [(attempt id, reviewer)])."""
    from storage.judgements import add_assignments, dealable_attempts

    attempts = dealable_attempts(db, migration_id)
    pairs = _checked(deal, attempts, reviewers, overlap, seed)
    if not pairs:
        raise WorkbenchError("nothing to deal: every agent attempt is judged or dealt already")
    batch = add_assignments(db, pairs, blind=blind, seed=seed, overlap=overlap, assigned_by=assigned_by)
    return batch, pairs


def agreement(db: Database, migration_ids: list[int] | None = None, *, seed: int = SEED,
              resamples: int = RESAMPLES) -> AgreementReport:
    """Per level, human-human and human-verifier agreement on the current judgements; the blind
    and not-blind figures; the disagreements left to adjudicate (docs/judgements.md)."""
    from storage.judgements import agreement_inputs, current_judgements
    from workbench.report.stats import wilson

    judged = current_judgements(db, migration_ids)
    inputs = agreement_inputs(db, migration_ids)
    verdicts, attempts = inputs["verdicts"], inputs["attempts"]
    levels = [agreement_for_level(level, judged, verdicts, resamples=resamples, seed=seed) for level in LEVELS]
    blind = []
    for flag in (True, False):
        counts = blind_counts(judged, verdicts, {a: v[2] for a, v in attempts.items()}, flag)
        blind.append(dataclasses.replace(counts, verifier_interval=wilson(counts.verifier_agree, counts.verifier_n),
                                         claim_interval=wilson(counts.claim_agree, counts.claim_n)))
    names = {a: (v[0], v[1]) for a, v in attempts.items()}
    return AgreementReport(levels, blind, disagreements(judged, verdicts, names, inputs["adjudicated"]),
                           len(judged), seed, resamples)


def _statistic(s: Any) -> dict[str, Any]:
    return {"value": s.value, "interval": list(s.interval) if s.interval else None, "n": s.n,
            "judgement_ids": list(s.judgement_ids)}


def _blind(b: BlindFigure) -> dict[str, Any]:
    return {
        "blind": b.blind, "judgements": b.judgements,
        "agree_with_verifier": {"agree": b.verifier_agree, "n": b.verifier_n,
                                "rate": b.verifier_agree / b.verifier_n if b.verifier_n else None,
                                "interval": list(b.verifier_interval) if b.verifier_interval else None},
        "agree_with_claim": {"agree": b.claim_agree, "n": b.claim_n,
                             "rate": b.claim_agree / b.claim_n if b.claim_n else None,
                             "interval": list(b.claim_interval) if b.claim_interval else None},
    }


def agreement_dict(report: AgreementReport) -> dict[str, Any]:
    """The JSON of `workbench agreement --json`: per level each statistic with its interval, its
    number of items and the ids of the judgements behind it."""
    return {
        "judgements": report.judgements, "seed": report.seed, "resamples": report.resamples,
        "levels": [{
            "level": la.level,
            "human_human": {"cohen_kappa": _statistic(la.human_kappa),
                            "krippendorff_alpha": _statistic(la.human_alpha)},
            "human_verifier": {"cohen_kappa": _statistic(la.verifier_kappa), "confusion": la.confusion,
                               "verifier_pass_human_fail": la.confusion["pass"]["fail"],
                               "verifier_fail_human_pass": la.confusion["fail"]["pass"]},
        } for la in report.levels],
        "blind": [_blind(b) for b in report.blind],
        "disagreements": [{"attempt_id": d.attempt_id, "migration": d.migration, "seq": d.seq, "level": d.level,
                           "verifier": d.verifier,
                           "judgements": [{"id": i, "reviewer": r, "outcome": o} for i, r, o in d.judgements]}
                          for d in report.disagreements],
    }


def adjudicate(db: Database, slug: str, seq: int, *, level: int, outcome: str, reason: str,
               reviewer: str) -> tuple[int, int]:
    """Record the final verdict of a level; it counts as an override. Returns (adjudication id,
    override id)."""
    from storage.judgements import add_adjudication
    from storage.queries import find_attempt

    if level not in LEVELS:
        raise WorkbenchError("--level: a level from 1 to 5")
    _, attempt = find_attempt(db, slug, seq)
    return _checked(add_adjudication, db, attempt_id=attempt.id, level=level, outcome=Outcome(outcome),
                    reason=reason.strip(), reviewer=reviewer)
