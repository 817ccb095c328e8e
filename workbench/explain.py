"""`workbench explain`: which factor a level-2 deviation follows, found by controlled re-runs.

Each run is a job (workbench.rerun.jobs) with its own record; its result is a verified re-run
attempt and level 2 of that result is the oracle. One factor changes per run, in this order: the
package versions (libraries: an environment with the reference's versions, workbench.explain_envs),
the device count (topology), the device itself (backend: plain torch where the program reads
`WORKBENCH_DEVICE`), then the commit (code, a bisection over `git rev-list --ancestry-path`). It
stops at the first factor that explains the deviation, or when the budget of runs or minutes is
spent. See docs/explain.md.
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

FACTORS = ("libraries", "topology", "backend", "code")
DEVICE_VAR = "WORKBENCH_DEVICE"
"""What a program reads to choose its device; the backend factor's run sets it to `REFERENCE_DEVICE`."""
REFERENCE_DEVICE = "cpu"
"""The reference's device on this machine: plain torch on the CPU (no GPU here)."""
ACCELERATOR_RUNTIMES = ("torch_xla", "torchax", "torch_tpu")


def sigmas(reason: str) -> float | None:
    """The largest deviation in the noise's units (σ of the reference's replicates) that a level-2
    reason states (the verifier's band, workbench.verify.ladder); None where it states none (no
    replicates: the noise was not measured)."""
    found = []
    for piece in (reason or "").split("σ")[:-1]:   # the number just before each σ: read backwards, no pattern
        tail = piece[-32:]
        start = len(tail)
        while start and (tail[start - 1].isdigit() or tail[start - 1] == "."):
            start -= 1
        number = "inf" if tail.endswith("inf") else tail[start:].strip(".")
        try:
            found.append(float(number))
        except ValueError:
            continue
    return max(found) if found else None


def off(run: dict[str, Any], where: str) -> str:
    """"6.1σ off on 4" where the run's deviation is in σ, else "fails on 4"."""
    s = run.get("sigmas")
    return f"{s:.1f}σ off {where}" if s is not None and run.get("level2") == "fail" else f"fails {where}"


def agrees(run: dict[str, Any], where: str) -> str:
    s = run.get("sigmas")
    return f"agrees {where}" + (f" ({s:.1f}σ)" if s is not None else "")


def default_find_links() -> list[str]:
    """Where the libraries factor looks for wheels when none are given: `WORKBENCH_FIND_LINKS`,
    folders separated as in PATH."""
    import os

    return [d for d in os.environ.get("WORKBENCH_FIND_LINKS", "").split(os.pathsep) if d]


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
    find_links: list[str] = field(default_factory=list)
    intended: dict[str, Any] | None = None
    """The run on the intended N at the attempt's commit, once topology made (or found) one."""

    @property
    def options(self) -> dict[str, Any]:
        return {"venv": self.venv} if self.venv else {}

    def spec(self, chips: int, commit: str | None = None, why: str = "", *, venv: str | None = None,
             env: dict[str, str] | None = None, explain: dict[str, Any] | None = None) -> Any:
        """The attempt's own command at `chips` devices (and `commit`, in `venv`, with `env` set on
        top), with every recorded variable that pins the device count set to the backend's value
        for `chips`; each change recorded on the job (`options.env_changes`), and what explain
        changed in `options.explain`."""
        from workbench.rerun import jobs

        options = {**self.options, **({"commit": commit} if commit else {}), **({"venv": venv} if venv else {})}
        spec = jobs.spec_for(self.study.db, self.attempt, self.backend, chips=chips, options=options)
        recorded = self.attempt.command.env
        _, differ = jobs.environment(recorded, self.backend, chips, options)
        run_env = {**spec.env, **{d.name: d.default for d in differ}}
        whys = {d.name: d.why for d in differ}
        changes = [{**c, "why": f"{why}: the {self.backend} backend's value ({whys.get(c['name'], c['why'])})"}
                   for c in jobs.env_changes(recorded, run_env, differ)]
        for name, value in (env or {}).items():
            run_env[name] = value
            changes = [c for c in changes if c["name"] != name]
            changes.append({"name": name, "recorded": recorded.get(name, "(unset)"), "used": value, "why": why})
        options = {**options, **({"env_changes": changes} if changes else {}),
                   "explain": explain or {"why": why}}   # marks explain's runs: no count reads them
        return jobs.with_changes(spec, env=run_env, options=options)

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
        cancelled = job.active
        if cancelled:
            self.echo(f"job {job.id}: the budget of {self.budget.minutes:g} minutes ended: cancelling it")
            jobs.cancel(job)
            job = jobs.wait(self.study.db, job.id, timeout=30)
        run: dict[str, Any] = {"job": job.id, "seq": None, "attempt_id": job.result_attempt_id,
                               "chips": spec.chips, "commit": spec.options.get("commit") or self.attempt.commit,
                               "state": job.state.value, "level2": "unknown",
                               "reason": job.error or "the job left no result"}
        if job.result_attempt_id:
            run["seq"] = explanations.attempt_seq(self.study.db, job.result_attempt_id)
            run["level2"], run["reason"] = level2(self.study.db, job.result_attempt_id)
        if cancelled:
            run["reason"] = f"cancelled when the budget of {self.budget.minutes:g} minutes ended"
        run["sigmas"] = sigmas(run["reason"]) if run["level2"] != "unknown" else None
        self.echo(f"job {job.id}: attempt {run['seq']}, level 2 {run['level2']}")
        return run

    def own(self) -> dict[str, Any]:
        """The attempt itself as a run (it is a re-run already)."""
        out, reason = level2(self.study.db, self.attempt.id)
        ext = explanations.attempt_external_id(self.study.db, self.attempt.id)
        job = int(ext.rsplit("-", 1)[1]) if ext.startswith("rerun:job-") else None
        return {"job": job, "seq": self.attempt.seq, "attempt_id": self.attempt.id,
                "chips": self.attempt.intended_hardware.count if self.attempt.intended_hardware else None,
                "commit": self.attempt.commit, "state": "recorded", "level2": out, "reason": reason,
                "sigmas": sigmas(reason)}

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
        self.intended = many
        if many["level2"] == "fail":
            said = f"{agrees(one, 'on 1 device')}, {off(many, f'on {n}')}"
            return {**f, "explains": True, "reason": said, "sentence": f"follows the device count: {said}"}
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

    def backend_factor(self, n: int) -> dict[str, Any]:
        """The same commit on the reference's device: plain torch, chosen through `DEVICE_VAR`, only
        where the program at this commit reads it; the run's probe must show no accelerator runtime."""
        f: dict[str, Any] = {"factor": "backend", "tried": False, "explains": False, "runs": []}
        repo, commit = Path(self.migration.repo), self.attempt.commit
        if not commit:
            return {**f, "reason": "the attempt names no commit to read the program from"}
        found = subprocess.run(["git", "-C", str(repo), "grep", "-l", "-F", DEVICE_VAR, commit],
                               capture_output=True, text=True)
        if found.returncode != 0:
            return {**f, "reason": f"the program at {commit[:12]} does not read {DEVICE_VAR}: it does not let its "
                                   "environment choose the device, so it cannot run on the reference's device unchanged"}
        if (spent := self.budget.spent()):
            return {**f, "reason": spent}
        run = self.run(self.spec(n, why=f"explain's backend run on the reference's device ({DEVICE_VAR}="
                                        f"{REFERENCE_DEVICE}, plain torch)", env={DEVICE_VAR: REFERENCE_DEVICE},
                                 explain={"factor": "backend", "env": {DEVICE_VAR: REFERENCE_DEVICE}}))
        run["runtime"] = self._runtime(run)
        f.update(tried=True, runs=[run])
        if run["runtime"] is None:
            return {**f, "reason": "the run recorded no runtime: whether it ran without torch_xla cannot be told"}
        if run["runtime"] in ACCELERATOR_RUNTIMES:
            return {**f, "reason": f"the run imported {run['runtime']} with {DEVICE_VAR}={REFERENCE_DEVICE}: "
                                   "it did not run on plain torch"}
        if run["level2"] != "pass":
            return {**f, "reason": f"level 2 is {run['level2']} on plain torch ({run['reason']}): "
                                   "the deviation does not follow the backend"}
        intended = self.intended or self.own()
        if intended["level2"] != "fail":
            return {**f, "reason": f"agrees on plain torch and level 2 is {intended['level2']} on the intended "
                                   "backend: the deviation did not reproduce"}
        said = f"{agrees(run, 'on plain torch (' + REFERENCE_DEVICE + ')')}, {off(intended, 'on the intended backend')}"
        return {**f, "explains": True, "reason": said, "sentence": f"follows the backend: {said}"}

    def _runtime(self, run: dict[str, Any]) -> str | None:
        """The runtime the run's processes imported, from every probe report (idle ones too: a
        program without an optimizer step): an accelerator runtime if any process imported one,
        else `torch`, else `python` (torch never imported); None without reports."""
        from storage.queries import probe_reports

        if not run.get("attempt_id"):
            return None
        reports = probe_reports(self.study.db, run["attempt_id"])
        names = {r["runtime"].get("name") for r in reports if isinstance(r.get("runtime"), dict)}
        found = next((n for n in ACCELERATOR_RUNTIMES if n in names), None)
        if found or "torch" in names:
            return found or "torch"
        imported = {n for r in reports for n in ((r.get("ran_with") or {}).get("imported") or [])}
        return "python" if reports and "torch" not in imported else None

    def _own_venv(self) -> str | None:
        """The environment the attempt itself ran in, when it is a local re-run whose venv is still
        there: the libraries factor changes the packages over that one, nothing else."""
        from storage.jobs import get_job

        job_id = self.own()["job"]
        if job_id is None:
            return None
        try:
            job = get_job(self.study.db, job_id)
        except WorkbenchError:  # the job's record is gone: --venv, then
            return None
        venv = job.spec.options.get("venv") if job.spec.backend == "local" else None
        return str(venv) if venv and Path(str(venv), "bin", "python").is_file() else None

    def libraries(self, n: int) -> dict[str, Any]:
        """The same commit in an environment with the reference's versions of the packages that
        differ (the imported ones, where any differ; else all), made or found in the cache."""
        from workbench import explain_envs
        from workbench.ranwith import compare

        f: dict[str, Any] = {"factor": "libraries", "tried": False, "explains": False, "runs": []}
        comparison = compare(self.study.db, self.attempt)
        if comparison is None or comparison.reference is None:
            return {**f, "reason": "the attempt's or the reference's run recorded no environment to compare "
                                   "(an imported attempt, or a reference given as files)"}
        if not comparison.changes:
            return {**f, "reason": "the attempt ran with the reference's package versions: nothing to vary"}
        imported = [c for c in comparison.changes if c.imported]
        varied = imported or comparison.changes
        pins = {c.name: c.reference for c in varied if c.reference is not None}
        f["changes"] = [c.describe() for c in varied[:12]]
        added = [c.describe() for c in varied if c.reference is None]
        if not pins:
            return {**f, "reason": f"only packages the reference did not have differ ({', '.join(added)}): "
                                   "removing them from an environment is not built"}
        over = self._own_venv() or self.venv
        if not over:
            return {**f, "reason": "no target environment to put the reference's versions over "
                                   "(--venv or WORKBENCH_TARGET_VENV)"}
        env = explain_envs.layered(over, pins, self.find_links)   # no run yet: the budget is of runs
        f["environment"] = {"pins": pins, "over": over, "path": str(env.path) if env.path else None, "cached": env.cached,
                            "seconds": env.seconds, **({"not_varied": added} if added else {})}
        if env.path is None:
            return {**f, "reason": env.reason}
        if (spent := self.budget.spent()):
            return {**f, "reason": spent}
        self.echo(f"environment {env.path} ({'cached' if env.cached else f'built in {env.seconds:g} s'})")
        wanted = ", ".join(f"{k} {v}" for k, v in sorted(pins.items()))
        run = self.run(self.spec(n, why=f"explain's libraries run with the reference's {wanted}", venv=str(env.path),
                                 explain={"factor": "libraries", "pins": pins, "env": str(env.path),
                                          "env_cached": env.cached}))
        f.update(tried=True, runs=[run])
        if run["level2"] != "pass":
            return {**f, "reason": f"level 2 is {run['level2']} with the reference's {wanted} ({run['reason']}): "
                                   "the deviation does not follow these packages"}
        versions = {c.name: c.run for c in varied if c.reference is not None}
        if len(pins) > 1:   # which one: each package alone, first to agree names it
            found = self._narrow(over, pins, n, f)
            run, pins = (found, {found["package"]: pins[found["package"]]}) if found else (run, pins)
        wanted = ", ".join(f"{k} {v}" for k, v in sorted(pins.items()))
        ran = ", ".join(f"{k} {versions[k]}" for k in sorted(pins))
        said = f"{agrees(run, 'with the reference' + chr(39) + 's ' + wanted)}, {off(self.own(), 'with ' + ran)}"
        return {**f, "explains": True, "reason": said, "sentence": f"follows the libraries: {said}"}

    def _narrow(self, over: str, pins: dict[str, str], n: int, f: dict[str, Any]) -> dict[str, Any] | None:
        """With several packages pinned and the set agreeing: one environment per package, each
        its own run, until one agrees alone (its run, `package` set, and `f["package"]`); None when
        none does, a wheel is missing or the budget ends (said in `f["narrowing"]`)."""
        from workbench import explain_envs

        for name in sorted(pins):
            if (spent := self.budget.spent()):
                f["narrowing"] = f"stopped before {name} alone: {spent}"
                return None
            env = explain_envs.layered(over, {name: pins[name]}, self.find_links)
            if env.path is None:
                f["narrowing"] = f"{name} alone: {env.reason}"
                return None
            run = self.run(self.spec(n, why=f"explain's libraries run with the reference's {name} {pins[name]} alone",
                                     venv=str(env.path), explain={"factor": "libraries", "pins": {name: pins[name]},
                                                                  "env": str(env.path), "env_cached": env.cached}))
            f["runs"].append(run)
            if run["level2"] == "pass":
                f["package"] = name
                f["narrowing"] = f"{name} alone agrees"
                return {**run, "package": name}
        f["narrowing"] = "no package agrees alone: the deviation follows them together"
        return None


def _ancestor(repo: Path, a: str, b: str) -> bool:
    return subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", a, b],
                          capture_output=True).returncode == 0


def _short(commits: list[str], i: int, good: str) -> str:
    return (commits[i] if i >= 0 else good)[:12]


def explain(study: StudyDatabase, slug: str, seq: int, reviewer: str, *, backend: str = "local",
            venv: str | None = None, max_runs: int = 6, minutes: float = 30.0, find_links: list[str] | None = None,
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
        ex = _Explainer(study, migration, attempt, backend, venv, reviewer, budget, echo, list(find_links or []))
        hw = attempt.intended_hardware
        n = (hw.count if hw else None) or migration_target(study.db, migration.id)[0] or 1
        for factor in (lambda: ex.libraries(n), lambda: ex.topology(n), lambda: ex.backend_factor(n),
                       lambda: ex.code(n)):
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
