"""How far reviewers agree (docs/judgements.md): with each other and with the automated verdicts,
per level, with bootstrap intervals; the blind figures and the disagreements left to adjudicate.

Krippendorff's alpha is the `krippendorff` package's `alpha`, loaded inside the function that
uses it. Cohen's kappa is Cohen's (1960) three-line formula on the contingency table: the library
that has it (statsmodels) brings pandas, which sqlite-utils then imports at every start (300 ms);
tests/test_judgements.py checks this function against statsmodels' `cohens_kappa` on random
tables and against a published example.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from domain.judgements import LEVELS, HumanJudgement
from domain.models import Outcome

RESAMPLES = 1000
"""Bootstrap resamples per interval (docs/judgements.md, "Intervals")."""
SEED = 17
"""The default bootstrap seed: the same judgements give the same intervals."""

T = TypeVar("T")


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Cohen's kappa of (first rating, second rating) pairs: (observed - chance agreement) /
    (1 - chance agreement); None when it is undefined (no pairs, or chance agreement is 1)."""
    n = len(pairs)
    if not n:
        return None
    firsts = Counter(first for first, _ in pairs)
    seconds = Counter(second for _, second in pairs)
    chance = sum(firsts[v] * seconds[v] for v in firsts) / (n * n)
    if chance >= 1.0:
        return None
    observed = sum(first == second for first, second in pairs) / n
    return (observed - chance) / (1.0 - chance)


def krippendorff_alpha(units: Sequence[Mapping[str, str]]) -> float | None:
    """Nominal Krippendorff's alpha, by the `krippendorff` package. Each unit maps a coder to
    its value; a coder missing from a unit did not judge it. None when undefined (no unit with
    two values, or one category only)."""
    pairable = [u for u in units if len(u) >= 2]
    categories = sorted({v for u in pairable for v in u.values()})
    if len(categories) < 2:
        return None
    import krippendorff

    coders = sorted({c for u in pairable for c in u})
    code = {v: float(i) for i, v in enumerate(categories)}
    data = [[code[u[c]] if c in u else math.nan for u in pairable] for c in coders]
    value = float(krippendorff.alpha(reliability_data=data, level_of_measurement="nominal"))
    return None if math.isnan(value) else value


def bootstrap(items: Sequence[T], statistic: Callable[[Sequence[T]], float | None], *,
              resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float] | None:
    """The 2.5th and 97.5th percentiles of the statistic over `resamples` resamples of the items
    with replacement, drawn by `random.Random(seed)`. A resample where the statistic is undefined
    (one category only) is left out; None when fewer than half are defined."""
    if not items:
        return None
    rng = random.Random(seed)
    values = []
    for _ in range(resamples):
        value = statistic(rng.choices(items, k=len(items)))
        if value is not None:
            values.append(value)
    if len(values) < max(2, resamples // 2):
        return None
    cuts = statistics.quantiles(values, n=40, method="inclusive")
    return cuts[0], cuts[-1]


@dataclass(frozen=True, slots=True)
class Statistic:
    """One agreement figure with its interval, its number of items and the judgements behind it."""

    name: str
    value: float | None
    interval: tuple[float, float] | None
    n: int
    judgement_ids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class LevelAgreement:
    level: int
    human_kappa: Statistic
    """Cohen's kappa on attempts judged twice (the first two reviewers by name)."""
    human_alpha: Statistic
    """Krippendorff's alpha on attempts judged by two or more reviewers."""
    verifier_kappa: Statistic
    """Cohen's kappa of each judgement against the automated verdict."""
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)
    """Verifier outcome -> human outcome -> count, over the same pairs as `verifier_kappa`."""


def agreement_for_level(level: int, judged: Sequence[HumanJudgement], verdicts: Mapping[tuple[int, int], str],
                        *, resamples: int = RESAMPLES, seed: int = SEED) -> LevelAgreement:
    """A level's three figures from the current judgements and the automated verdicts
    ((attempt id, level) -> outcome)."""
    by_attempt: dict[int, list[HumanJudgement]] = {}
    for j in sorted(judged, key=lambda j: (j.attempt_id, j.reviewer)):
        by_attempt.setdefault(j.attempt_id, []).append(j)
    shared = [js for js in by_attempt.values() if len(js) >= 2]
    units = [{j.reviewer: j.outcome(level).value for j in js} for js in shared]
    pairs = [(js[0].outcome(level).value, js[1].outcome(level).value) for js in shared]
    ids = tuple(sorted(j.id for js in shared for j in js))
    against = [(verdicts[(j.attempt_id, level)], j.outcome(level).value, j.id)
               for j in judged if (j.attempt_id, level) in verdicts]
    confusion = {o.value: dict.fromkeys((p.value for p in Outcome), 0) for o in Outcome}
    for machine, human, _ in against:
        confusion[machine][human] += 1
    verifier_pairs = [(m, h) for m, h, _ in against]
    kw = {"resamples": resamples, "seed": seed}
    return LevelAgreement(
        level=level,
        human_kappa=Statistic("cohen_kappa", cohen_kappa(pairs), bootstrap(pairs, cohen_kappa, **kw),
                              len(pairs), tuple(sorted(j.id for js in shared for j in js[:2]))),
        human_alpha=Statistic("krippendorff_alpha", krippendorff_alpha(units),
                              bootstrap(units, krippendorff_alpha, **kw), len(units), ids),
        verifier_kappa=Statistic("cohen_kappa", cohen_kappa(verifier_pairs),
                                 bootstrap(verifier_pairs, cohen_kappa, **kw), len(verifier_pairs),
                                 tuple(sorted(i for _, _, i in against))),
        confusion=confusion,
    )


@dataclass(frozen=True, slots=True)
class BlindFigure:
    """How often judgements given blind (or not) agree with the verifier and with the claim."""

    blind: bool
    judgements: int
    verifier_agree: int
    verifier_n: int
    """(judgement, level) pairs with an automated verdict; agreeing ones have the same outcome."""
    claim_agree: int
    claim_n: int
    """(judgement, level) pairs at or below the attempt's expected level; agreeing ones pass."""
    verifier_interval: tuple[float, float] | None = None
    claim_interval: tuple[float, float] | None = None


def blind_counts(judged: Sequence[HumanJudgement], verdicts: Mapping[tuple[int, int], str],
                 expected: Mapping[int, int | None], blind: bool) -> BlindFigure:
    """Counts for the judgements with this blind flag (intervals are added by the caller)."""
    mine = [j for j in judged if j.blind is blind]
    pairs = [(j.outcome(level).value, verdicts[(j.attempt_id, level)])
             for j in mine for level in LEVELS if (j.attempt_id, level) in verdicts]
    claimed = [j.outcome(level) for j in mine for level in LEVELS if level <= (expected.get(j.attempt_id) or 0)]
    return BlindFigure(blind, len(mine), sum(h == m for h, m in pairs), len(pairs),
                       sum(o is Outcome.PASS for o in claimed), len(claimed))


@dataclass(frozen=True, slots=True)
class Disagreement:
    """A level where reviewers decided differently from each other or from the verifier, not
    adjudicated yet."""

    attempt_id: int
    migration: str
    seq: int
    level: int
    verifier: str | None
    judgements: tuple[tuple[int, str, str], ...]
    """(judgement id, reviewer, outcome)."""


def disagreements(judged: Sequence[HumanJudgement], verdicts: Mapping[tuple[int, int], str],
                  names: Mapping[int, tuple[str, int]], adjudicated: set[tuple[int, int]]) -> list[Disagreement]:
    """Levels to adjudicate: two decided (pass/fail) judgements differ, or a decided judgement
    differs from a decided automated verdict. "Can't tell" disagrees with nobody."""
    by_attempt: dict[int, list[HumanJudgement]] = {}
    for j in judged:
        by_attempt.setdefault(j.attempt_id, []).append(j)
    out = []
    for attempt_id, js in sorted(by_attempt.items(), key=lambda kv: names.get(kv[0], ("", 0))):
        for level in LEVELS:
            if (attempt_id, level) in adjudicated:
                continue
            machine = verdicts.get((attempt_id, level))
            decided = {j.outcome(level).value for j in js} - {Outcome.UNKNOWN.value}
            if machine in (Outcome.PASS.value, Outcome.FAIL.value):
                decided.add(machine)
            if len(decided) > 1:
                migration, seq = names.get(attempt_id, ("", 0))
                out.append(Disagreement(attempt_id, migration, seq, level, machine, tuple(
                    (j.id, j.reviewer, j.outcome(level).value) for j in sorted(js, key=lambda j: j.reviewer))))
    return out


@dataclass(frozen=True, slots=True)
class AgreementReport:
    levels: list[LevelAgreement]
    blind: list[BlindFigure]
    disagreements: list[Disagreement]
    judgements: int
    seed: int = SEED
    resamples: int = RESAMPLES
