"""Re-runs: an attempt's commit run again, on this machine or a TPU VM, with the probe inside.

A job is stored before it starts (`jobs.create_job`), then a detached runner process
(`python -m workbench.rerun.runner DB JOB`) checks the commit out into a fresh git worktree,
runs the confirmed command through a backend (`backends`), streams its output into the job's
log file, and at the end stores the run as a new attempt (source `rerun`) with its log, metric
series and probe reports, and verifies it. The runner outlives the app; `jobs.recover` marks
jobs whose runner is gone as interrupted. docs/rerun.md describes it all.
"""

from __future__ import annotations

from domain.jobs import Job, JobSpec, JobState

__all__ = ["Job", "JobSpec", "JobState"]
