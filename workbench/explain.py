"""`workbench explain`: which factor a level-2 deviation follows, found by controlled re-runs.

Each run is a job (workbench.rerun.jobs) with its own record; its result is a verified re-run
attempt and level 2 of that result is the oracle. One factor changes per run: the device count
(topology), then the commit (code, a bisection over `git rev-list --ancestry-path`). Backend and
libraries are reported as not tried, saying what they would need. It stops at the first factor
that explains the deviation, or when the budget of runs or minutes is spent. See docs/explain.md.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from domain.errors import WorkbenchError
from domain.models import Attempt, AttemptSource, Migration
from storage import explanations, queries
from storage.database import StudyDatabase
from workbench.rerun import worktree

FACTORS = ("topology", "backend", "libraries", "code")


def level2(db: Any, attempt_id: int) -> tuple[str, str]:
    """(outcome, reason) of the attempt's current level-2 verdict, overrides included; 'unknown'
    when it has none."""
    for v in queries.verdicts(db, attempt_id):
        if v.level == 2:
            return v.effective.value, v.reason
    return "unknown", "no level-2 verdict"


@dataclass
class _Budget:
    max_runs: int
    minutes: float
    started: float = field(default_factory=time.monotonic)
    runs: int = 0

    def left_s(self) -> float:
        return self.minutes * 60 - (time.monotonic() - self.started)

    def spent(self) -> str | None:
        if self.runs >= self.max_runs:
            return f"the budget of {self.max_runs} runs is spent"
        if self.left_s() <= 0:
            return f"the budget of {self.minutes:g} minutes is spent"
        return None


@dataclass
class _Explainer:
    study: StudyDatabase
    migration: Migration
    attempt: Attempt
    backend: str
    venv: str | None
    reviewer: str
    budget: _Budget
    echo: Callable[[str], None]

    @property
    def options(self) -> dict[str, Any]:
        return {"venv": self.venv} if self.venv else {}

    def spec(self, chips: int, commit: str | None = None, why: str = "") -> Any:
        """The attempt's own command at `chips` devices (and `commit`), with every recorded variable
        that pins the device count set to the backend's value for `chips`, recorded on the job."""
        from workbench.rerun import jobs

        options = {**self.options, **({"commit": commit} if commit else {})}
        spec = jobs.spec_for(self.study.db, self.attempt, self.backend, chips=chips, options=options)
        recorded = self.attempt.command.env
        _, differ = jobs.environment(recorded, self.backend, chips, options)
        env = {**spec.env, **{d.name: d.default for d in differ}}
        whys = {d.name: d.why for d in differ}
        changes = [{**c, "why": f"{why}: the {self.backend} backend's value ({whys.get(c['name'], c['why'])})"}
                   for c in jobs.env_changes(recorded, env, differ)]
        return jobs.with_changes(spec, env=env, options={**options, **({"env_changes": changes} if changes else {})})

    def run(self, spec: Any) -> dict[str, Any]:
        """Launch one job, wait for it within the minutes left, and read level 2 of its result."""
        from workbench.rerun import jobs

        self.budget.runs += 1
        try:
            job = jobs.launch(self.study, spec, self.reviewer)
        except WorkbenchError as exc:  # the pre-flight refused it (no target environment, ...): said, stored
            self.echo(f"not started: {exc}")
            return {"job": None, "seq": None, "attempt_id": None, "chips": spec.chips,
                    "commit": spec.options.get("commit") or self.attempt.commit, "state": "not started",
                    "level2": "unknown", "reason": f"not started: {exc}"}
        self.echo(f"job {job.id}: {spec.chips} device(s)"
                  + (f" at {spec.options['commit'][:12]}" if spec.options.get("commit") else "") + " ...")
        job = jobs.wait(self.study.db, job.id, timeout=max(self.budget.left_s(), 1.0))
        if job.active:
            jobs.cancel(job)
            job = jobs.wait(self.study.db, job.id, timeout=30)
        run: dict[str, Any] = {"job": job.id, "seq": None, "attempt_id": job.result_attempt_id,
                               "chips": spec.chips, "commit": spec.options.get("commit") or self.attempt.commit,
                               "state": job.state.value, "level2": "unknown",
                               "reason": job.error or "the job left no result"}
        if job.result_attempt_id:
            run["seq"] = explanations.attempt_seq(self.study.db, job.result_attempt_id)
            run["level2"], run["reason"] = level2(self.study.db, job.result_attempt_id)
        self.echo(f"job {job.id}: attempt {run['seq']}, level 2 {run['level2']}")
        return run

    def own(self) -> dict[str, Any]:
        """The attempt itself as a run (it is a re-run already)."""
        out, reason = level2(self.study.db, self.attempt.id)
        ext = explanations.attempt_external_id(self.study.db, self.attempt.id)
        job = int(ext.rsplit("-", 1)[1]) if ext.startswith("rerun:job-") else None
        return {"job": job, "seq": self.attempt.seq, "attempt_id": self.attempt.id,
                "chips": self.attempt.intended_hardware.count if self.attempt.intended_hardware else None,
                "commit": self.attempt.commit, "state": "recorded", "level2": out, "reason": reason}

    # ----------------------------------------------------------------------- factors

    def topology(self, n: int) -> dict[str, Any]:
        f: dict[str, Any] = {"factor": "topology", "tried": False, "explains": False, "runs": []}
        if n <= 1:
            return {**f, "reason": "the attempt ran on 1 device: there is no device count to vary"}
        if (spent := self.budget.spent()):
            return {**f, "reason": spent}
        one = self.run(self.spec(1, why="explain's topology run on 1 device"))
        f.update(tried=True, runs=[one])
        if one["level2"] == "fail":
            return {**f, "reason": "level 2 fails on 1 device too: the deviation does not follow the device count"}
        if one["level2"] != "pass":
            return {**f, "reason": f"level 2 is {one['level2']} on 1 device ({one['reason']}): topology cannot tell"}
        hw = self.attempt.intended_hardware
        if self.attempt.source is AttemptSource.RERUN and hw is not None and hw.count == n:
            many = self.own()
        elif (spent := self.budget.spent()):
            return {**f, "reason": f"agrees on 1 device; no run on {n}: {spent}"}
        else:
            many = self.run(self.spec(n, why=f"explain's topology run on {n} devices"))
        f["runs"].append(many)
        if many["level2"] == "fail":
            return {**f, "explains": True, "reason": f"agrees on 1 device, fails on {n}",
                    "sentence": f"follows the device count: agrees on 1 device, fails on {n}"}
        return {**f, "reason": f"agrees on 1 device and level 2 is {many['level2']} on {n}: "
                               "the deviation did not reproduce"}

    def code(self, n: int) -> dict[str, Any]:
        f: dict[str, Any] = {"factor": "code", "tried": False, "explains": False, "runs": []}
        repo = Path(self.migration.repo)
        bad = self.attempt.commit
        good, good_what = self._agreeing(repo, bad)
        if good is None:
            return {**f, "reason": good_what}
        f["good"] = {"commit": good, "what": good_what}
        commits = worktree.git(repo, "rev-list", "--reverse", "--ancestry-path", f"{good}..{bad}").split()
        if not commits:
            return {**f, "reason": f"{good_what} ran the same commit: the code did not change"}
        if len(commits) == 1:
            return {**f, "explains": True, "commit": bad, "reason": f"the one commit after {good_what}",
                    "sentence": self._code_sentence(repo, bad, good_what)}
        f["tried"] = True
        lo, hi = -1, len(commits) - 1   # commits[lo] agrees (lo -1: the good commit), commits[hi] deviates
        while hi - lo > 1:
            if (spent := self.budget.spent()):
                return {**f, "reason": f"bisection stopped between {_short(commits, lo, good)} and "
                                       f"{commits[hi][:12]}: {spent}"}
            mid = (lo + hi) // 2
            run = self.run(self.spec(n, commit=commits[mid], why=f"explain's bisection step at {commits[mid][:12]}"))
            f["runs"].append(run)
            if run["level2"] == "pass":
                lo = mid
            elif run["level2"] == "fail":
                hi = mid
            else:
                return {**f, "reason": f"level 2 is {run['level2']} at {commits[mid][:12]} "
                                       f"({run['reason']}): the bisection cannot go on"}
        return {**f, "explains": True, "commit": commits[hi],
                "reason": f"bisection over {len(commits)} commits after {good_what}",
                "sentence": self._code_sentence(repo, commits[hi], good_what)}

    def _agreeing(self, repo: Path, bad: str) -> tuple[str | None, str]:
        """The latest earlier attempt whose level 2 passes and whose commit is an ancestor of this
        one's; else the migration's base commit (the reference's, which level 2 compares against)."""
        for attempt_id, seq, sha in explanations.earlier_commits(self.study.db, self.migration.id, self.attempt.seq):
            if level2(self.study.db, attempt_id)[0] == "pass" and _ancestor(repo, sha, bad):
                return sha, f"attempt {seq}"
        base = self.migration.base_commit
        if base and _ancestor(repo, base, bad):
            return base, "the base commit"
        return None, "no earlier attempt passes level 2 at an ancestor commit, and the base commit is not one"

    def _code_sentence(self, repo: Path, sha: str, good_what: str) -> str:
        subject = worktree.git(repo, "log", "-1", "--format=%s", sha).strip()
        return f"follows the code: the deviation starts at commit {sha[:12]} ({subject}); {good_what} agrees"

    def backend_factor(self) -> dict[str, Any]:
        return {"factor": "backend", "tried": False, "explains": False, "runs": [],
                "reason": "not built: needs a run of the same commit on the reference's device (plain torch "
                          "without torch_xla here), which the program must allow (a device chosen from the environment)"}

    def libraries(self) -> dict[str, Any]:
        from workbench.ranwith import compare

        f = {"factor": "libraries", "tried": False, "explains": False, "runs": []}
        comparison = compare(self.study.db, self.attempt)
        if comparison is None or comparison.reference is None:
            return {**f, "reason": "not built; and the attempt's or the reference's run recorded no environment to compare"}
        if not comparison.changes:
            return {**f, "reason": "the attempt ran with the reference's package versions: nothing to vary"}
        changed = ", ".join(f"{c.name} {c.reference or '-'} -> {c.run or '-'}" + (" (imported)" if c.imported else "")
                            for c in comparison.changes[:8])
        return {**f, "reason": f"not built: needs one environment per variant with the reference's versions of {changed}"}


def _ancestor(repo: Path, a: str, b: str) -> bool:
    return subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", a, b],
                          capture_output=True).returncode == 0


def _short(commits: list[str], i: int, good: str) -> str:
    return (commits[i] if i >= 0 else good)[:12]


def explain(study: StudyDatabase, slug: str, seq: int, reviewer: str, *, backend: str = "local",
            venv: str | None = None, max_runs: int = 6, minutes: float = 30.0,
            echo: Callable[[str], None] = lambda _: None, store: bool = True) -> dict[str, Any]:
    """Explain attempt `seq` of migration `slug`; the result (the `--json` object) is stored with
    the attempt unless `store` is False."""
    from storage.explanations import store_explanation
    from storage.jobs import migration_target

    migration, attempt = queries.find_attempt(study.db, slug, seq)
    outcome, reason = level2(study.db, attempt.id)
    budget = _Budget(max_runs, minutes)
    result: dict[str, Any] = {"migration": slug, "seq": seq, "attempt_id": attempt.id,
                              "level2": {"outcome": outcome, "reason": reason}, "explained_by": None,
                              "commit": None, "factors": []}
    if outcome != "fail":
        result["sentence"] = (f"not explained: level 2 {'passes' if outcome == 'pass' else 'is ' + outcome}, "
                              "there is no deviation to explain")
    else:
        ex = _Explainer(study, migration, attempt, backend, venv, reviewer, budget, echo)
        hw = attempt.intended_hardware
        n = (hw.count if hw else None) or migration_target(study.db, migration.id)[0] or 1
        for factor in (lambda: ex.topology(n), ex.backend_factor, ex.libraries, lambda: ex.code(n)):
            f = factor()
            result["factors"].append(f)
            if f["explains"]:
                result["explained_by"], result["commit"] = f["factor"], f.get("commit")
                result["sentence"] = f.pop("sentence")
                break
        else:
            result["sentence"] = "not explained: " + "; ".join(f"{f['factor']}: {f['reason']}" for f in result["factors"])
    result["budget"] = {"max_runs": max_runs, "minutes": minutes, "runs": budget.runs,
                        "seconds": round(time.monotonic() - budget.started, 1)}
    if store:
        result["id"] = store_explanation(study.db, attempt.id, result, reviewer)
    return result
