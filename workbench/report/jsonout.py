"""JSON: every count with the ids of the records behind it."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, fields
from operator import attrgetter
from typing import Any

import orjson

from workbench.report.agreement import agreement_json
from workbench.report.model import AttemptFacts, MigrationReport, Rate, StudyReport

DEFINITIONS = {
    "attempt": "a row of `attempt` whose source is `agent`; re-runs (source `rerun`) are evidence about"
               " the attempt they re-ran, counted apart (reruns, reruns_confirming, reruns_changing)",
    "verified": "an attempt with a current (not superseded) verification",
    "failed": "a verified attempt with at least one current verdict whose effective outcome is fail",
    "silent": "a failed attempt that raised no error (exit 0, no traceback or fatal line)",
    "over_claim": "a verified attempt whose effective expected level (a reviewer's claim review, else the"
                  " rule-based expected_level) is above its highest verified level",
    "intervention": "an intervention record that no later record corrects",
    "goal_met": "the highest verified level of any attempt is 4 or more",
    "final_run": "the attempt named by the migration's latest accept decision; none for a stopped or"
                 " in-progress migration or when that attempt is a smoke run (it did not reach the"
                 " reference run's last step); with --final last-passing, the last verified attempt whose"
                 " effective level-1 verdict passes",
    "see": "docs/report.md",
}


def _migration(m: MigrationReport) -> dict[str, Any]:
    return {
        "id": m.id,
        "slug": m.slug,
        "title": m.title,
        "status": m.status,
        "target": m.target,
        "goal_metric": m.goal_metric,
        "goal": None if m.goal is None else m.goal.json(),
        "reference_attempt_id": m.reference_attempt_id,
        "attempts": m.attempts.json(),
        "verified": m.verified.json(),
        "failed": m.failed.json(),
        "failed_verifier": m.failed_automated.json(),
        "silent": m.silent.json(),
        "silent_verifier": m.silent_automated.json(),
        "over_claims": m.over_claims.json(),
        "over_claims_verifier": m.over_claims_automated.json(),
        "stated_expectation": m.stated_expectation.json(),
        "judged_expectation": m.judged_expectation.json(),
        "highest_level": m.highest_level,
        "highest_level_verifier": m.highest_level_automated,
        "highest_level_attempt_id": m.highest_attempt_id,
        "goal_met": m.goal_met,
        "goal_met_verifier": m.goal_met_automated,
        "interventions": {**m.interventions.json(), "minutes": m.intervention_minutes,
                          "by_kind": {k.kind: {**k.interventions.json(), "minutes": k.minutes}
                                      for k in m.by_kind}},
        "review": {**m.review.json(), "seconds": m.review_seconds},
        "decisions": [asdict(d) for d in m.decisions],
        "budget_changes": [asdict(b) for b in m.budget_changes],
        "compute": {"wall_hours": m.wall_hours, "chip_hours": m.chip_hours, "cost_dollars": m.compute.dollars,
                    **m.compute.sources.json(), "untimed": m.untimed.json(), "unpriced": m.unpriced.json()},
        "llm": {"cost_dollars": m.llm.dollars, **m.llm.sources.json()},
        "staff": {"hours": m.staff_hours, "cost_dollars": m.staff_cost,
                  "intervention_ids": list(m.interventions.ids), "review_session_ids": list(m.review.ids)},
        "total_cost_dollars": m.total_cost,
        "final_run": {"attempt_id": m.final_attempt_id, "seq": m.final_seq, "time_ratio": m.time_ratio,
                      "cost_ratio": m.cost_ratio, "faster": m.faster, "cheaper": m.cheaper,
                      "why_none": m.final_why_none},
        "explanations": m.explained,
    }


_ATTEMPT_FIELDS = tuple(f.name for f in fields(AttemptFacts))
_ATTEMPT_VALUES = attrgetter(*_ATTEMPT_FIELDS)


def _attempt(a: AttemptFacts) -> dict[str, Any]:
    """`asdict` for the flat AttemptFacts, without its recursive copying (15,000 attempts: ~10x
    faster), its values read in one C call."""
    return dict(zip(_ATTEMPT_FIELDS, _ATTEMPT_VALUES(a)))


def _sources(report: StudyReport) -> dict[str, dict[str, list[int]]]:
    """The records behind each total that is a sum rather than a count."""
    t = report.totals
    interventions = list(t.interventions.ids)
    sessions = [i for m in report.migrations for i in m.review.ids]
    calls, compute = list(t.llm.sources.ids), list(t.compute.sources.ids)
    staff = {"intervention_ids": interventions, "review_session_ids": sessions}
    return {
        "interventions_per_migration": {"intervention_ids": interventions, "migration_ids": list(t.migrations.ids)},
        "intervention_minutes": {"intervention_ids": interventions},
        "review_seconds": {"review_session_ids": sessions},
        "staff_hours": staff,
        "staff_cost_dollars": staff,
        "wall_hours": {"attempt_ids": [i for m in report.migrations for i in m.timed.ids]},
        "chip_hours": {"attempt_ids": [i for m in report.migrations for i in m.chip_timed.ids]},
        "compute_cost_dollars": {"attempt_ids": compute},
        "llm_cost_dollars": {"llm_call_ids": calls},
        "total_cost_dollars": {"attempt_ids": compute, "llm_call_ids": calls, **staff},
    }


def report_dict(report: StudyReport, *, facts: bool = False) -> dict[str, Any]:
    """The report as JSON values; `facts` True leaves `attempts` the AttemptFacts themselves, which
    orjson writes as `_attempt`'s dicts read (a dataclass: its fields in order) without making one."""
    t = report.totals
    return {
        "format": "workbench-report",
        "version": 1,
        "study": {"slug": report.slug, "title": report.title, "staff_hourly_rate": report.staff_hourly_rate,
                  "prices": report.prices},
        "selected_migrations": list(report.selected),
        "pseudonymised": report.pseudonymised,
        "final_rule": report.final_rule,
        "llm_cost_source": report.llm_source,
        "definitions": DEFINITIONS,
        "totals": {
            "migrations": t.migrations.json(),
            "goal_met": t.goal_met.json(),
            "goal_met_verifier": t.goal_met_automated.json(),
            "interventions": t.interventions.json(),
            "interventions_per_migration": t.interventions_per_migration,
            "attempts": t.attempts.json(),
            "verified": t.verified.json(),
            "failed": t.failed.json(),
            "failed_verifier": t.failed_automated.json(),
            "silent": t.silent.json(),
            "silent_verifier": t.silent_automated.json(),
            "stated_expectation": t.stated_expectation.json(),
            "over_claims": t.over_claims.json(),
            "over_claims_verifier": t.over_claims_automated.json(),
            "final_runs": t.with_final_run.json(),
            "without_final_run": {why: c.json() for why, c in t.without_final_run.items()},
            "time_ratio": t.time_ratios.json(),
            "cost_ratio": t.cost_ratios.json(),
            "faster": t.faster.json(),
            "cheaper": t.cheaper.json(),
            "faster_and_cheaper": t.faster_and_cheaper.json(),
            "intervention_minutes": t.intervention_minutes,
            "review_seconds": t.review_seconds,
            "staff_hours": t.staff_hours,
            "staff_cost_dollars": t.staff_cost,
            "wall_hours": t.wall_hours,
            "chip_hours": t.chip_hours,
            "compute_cost_dollars": t.compute.dollars,
            "runs": t.runs.json(),
            "untimed": t.untimed.json(),
            "unpriced": t.unpriced.json(),
            "reruns": t.reruns.json(),
            "reruns_confirming": Rate(t.reruns_confirming, t.reruns).json(),
            "reruns_changing": Rate(t.reruns_changing, t.reruns).json(),
            "decided_by_reruns": Rate(t.decided_by_reruns, t.verified).json(),
            "llm_cost_dollars": t.llm.dollars,
            "total_cost_dollars": t.total_cost,
            "sources": _sources(report),
        },
        "migrations": [_migration(m) for m in report.migrations],
        "attempts": ([a for m in report.migrations for a in m.attempt_facts] if facts
                     else [_attempt(a) for m in report.migrations for a in m.attempt_facts]),
        "interventions": [{**asdict(i), "counts": i.current} for i in report.interventions],
        "overrides": [asdict(o) for o in report.overrides],
        "review_sessions": [asdict(r) for r in report.review_sessions],
        "llm_calls": [{"id": i, "migration_id": m, "cost_usd": c} for i, m, c in report.llm_calls],
        "agreement": agreement_json(report.agreement),
    }


def render_json(report: StudyReport) -> str:
    return json_bytes(report).decode()


def json_bytes(report: StudyReport) -> bytes:
    """The report as JSON text, UTF-8. orjson writes the same values as `json.dumps` (no indent,
    not ASCII-escaped) ten times faster: a study of 150,000 attempts took 3.4 s of CPU in json's C
    encoder, 0.3 s in orjson's (issue 39). Its floats may read differently (`1e-05` is `0.00001`),
    never their values. It writes NaN and infinities as null where json writes `NaN` and
    `Infinity`, and refuses what json takes (integers beyond 64 bits, lone surrogates): such a
    report is written by json, as before. orjson writes each attempt from its AttemptFacts (a dict
    an attempt was ~0.4 s of CPU at 150,000 attempts); json from `_attempt`'s dicts."""
    data = report_dict(report, facts=True)
    if _finite(data["attempts"], data):
        try:
            return orjson.dumps(data, option=orjson.OPT_APPEND_NEWLINE)  # not `+ b"\n"`: a copy of it all
        except orjson.JSONEncodeError:
            pass
    data["attempts"] = [_attempt(a) for a in data["attempts"]]
    return (json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


_ATTEMPT_FLOATS = tuple(f.name for f in fields(AttemptFacts) if "float" in str(f.type))


def _finite(attempts: list[AttemptFacts], data: Any) -> bool:
    """No float in the report is NaN or infinite: the attempts' float fields a column at a time,
    everything else (the attempts left out) by `_finite_value`."""
    for name in _ATTEMPT_FLOATS:
        if not _finite_value([v for v in map(attrgetter(name), attempts) if v is not None]):
            return False
    return all(_finite_value(v) for k, v in data.items() if k != "attempts")


def _finite_value(value: Any) -> bool:
    """A sum of numbers is NaN or infinite when a term is; one that overflows is read term by term."""
    kind = type(value)
    if kind is float:
        return math.isfinite(value)
    if kind is dict:  # a list of ids (`attempt_ids`...) holds record ids, integers: never NaN (~0.1 s)
        return all(_finite_value(v) for k, v in value.items() if not (type(k) is str and k.endswith("_ids")))
    if kind is list or kind is tuple:
        try:  # a list of numbers (the ids behind every count: millions) in one C loop
            return math.isfinite(math.fsum(value))
        except (TypeError, OverflowError):
            return all(_finite_value(v) for v in value)
    return True
