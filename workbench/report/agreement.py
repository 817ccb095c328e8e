"""The report's agreement section (docs/judgements.md): per level, reviewer with reviewer and
reviewer with verifier; judgements given blind against not blind; the levels left to adjudicate.

Reports are for after review: they show claims, verdicts and every judgement to whoever reads
them, so a study in blind mode reports once its reviewers are done. A study without judgements
gets no agreement tables (and `"agreement": null` in JSON).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from domain.agreement import AgreementReport, Statistic
from storage.sqlite import Database
from workbench.report.cells import Table, V, interval, n, num, pct, s


def agreement_of(db: Database, migration_ids: list[int]) -> AgreementReport | None:
    """The agreement of the migrations' current judgements; None when there are none."""
    from workbench.judging import agreement

    found = agreement(db, migration_ids)
    return found if found.judgements else None


def reviewers_of(found: AgreementReport | None) -> list[str]:
    """Reviewers named in the section, in order of first appearance (for pseudonyms)."""
    names: dict[str, None] = {}
    for d in found.disagreements if found else ():
        names.update(dict.fromkeys(r for _, r, _ in d.judgements))
    return list(names)


def scrubbed(found: AgreementReport | None, scrub: Any) -> AgreementReport | None:
    """Migration slugs redacted and reviewer names pseudonymised, as everywhere in a report."""
    if found is None:
        return None
    return dataclasses.replace(found, disagreements=[
        dataclasses.replace(d, migration=scrub.text(d.migration),
                            judgements=tuple((i, scrub.reviewer(r), o) for i, r, o in d.judgements))
        for d in found.disagreements])


def _stat(st: Statistic) -> list[V]:
    return [num(st.value, 3), interval(st.interval, 2), n(st.n)]


def _rate(k: int, total: int) -> V:
    return pct(100.0 * k / total if total else None)


def agreement_tables(found: AgreementReport | None) -> list[Table]:
    """Three tables: figures per level, blind against not blind, disagreements."""
    if found is None:
        return []
    levels = Table("agreement", "Reviewer agreement",
                   ["Level", "Kappa (reviewers)", "95% CI", "n", "Alpha (reviewers)", "95% CI", "n",
                    "Kappa (verifier)", "95% CI", "n", "Verifier pass, reviewer fail", "Verifier fail, reviewer pass"],
                   [[n(la.level), *_stat(la.human_kappa), *_stat(la.human_alpha), *_stat(la.verifier_kappa),
                     n(la.confusion["pass"]["fail"]), n(la.confusion["fail"]["pass"])] for la in found.levels],
                   numeric=(0, 1, 3, 4, 6, 7, 9, 10, 11),
                   note=f"Cohen's kappa on attempts judged twice and Krippendorff's alpha (nominal) on attempts"
                        f" judged by two or more reviewers; kappa of each judgement against the automated verdict."
                        f" Seeded bootstrap intervals ({found.resamples} resamples). docs/judgements.md.")
    blind = Table("agreement_blind", "Blind and not blind judgements",
                  ["Judged", "Judgements", "Agree with verifier", "95% CI", "n", "Agree with claim", "95% CI", "n"],
                  [[s("blind" if b.blind else "not blind"), n(b.judgements),
                    _rate(b.verifier_agree, b.verifier_n), interval(_hundred(b.verifier_interval), 1, "%"),
                    n(b.verifier_n), _rate(b.claim_agree, b.claim_n), interval(_hundred(b.claim_interval), 1, "%"),
                    n(b.claim_n)] for b in found.blind],
                  numeric=(1, 2, 4, 5, 7),
                  note="Per (judgement, level): the same outcome as the automated verdict; a pass at or below"
                       " the agent's expected level. Wilson intervals.")
    rows = [[s(d.migration), n(d.seq), n(d.level), s(d.verifier or "–"),
             s(", ".join(f"{r or '?'}: {o} (#{i})" for i, r, o in d.judgements))] for d in found.disagreements]
    left = Table("agreement_disagreements", "Disagreements to adjudicate",
                 ["Migration", "Attempt", "Level", "Verifier", "Judgements"], rows, numeric=(1, 2), wrap=(4,))
    return [levels, blind, left]


def _hundred(ci: tuple[float, float] | None) -> tuple[float, float] | None:
    return None if ci is None else (100 * ci[0], 100 * ci[1])


def agreement_json(found: AgreementReport | None) -> dict[str, Any] | None:
    from workbench.judging import agreement_dict

    return None if found is None else agreement_dict(found)
