"""`workbench explain` on real runs: the demo's clip-per-replica attempt on 4 XLA:CPU devices
(topology), three commits of a stdlib script where the middle one deviates (code), and a correct
attempt (never explained). Every run is a real job with its runner process and a verified attempt."""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from cli.main import main
from storage.explanations import latest_explanation
from storage.jobs import list_jobs
from tests.conftest import BundleBuilder, make_repo
from tests.rerun_helpers import attempt
from tests.test_rerun_xla import xla_venv
from workbench import config
from workbench.explain import explain, level2


def _verified_demo(path):
    from storage.database import open_study
    from workbench.bundle import import_bundle

    study = open_study(path, create=True)
    assert not import_bundle(study, config.DEMO_BUNDLE, "tester").problems
    study.close()
    result = CliRunner().invoke(main, ["verify", str(path)])
    assert result.exit_code == 0, result.output
    return open_study(path)


def test_a_correct_attempt_is_never_explained_and_runs_nothing(tmp_path):
    study = _verified_demo(tmp_path / "demo.db")
    try:
        target = attempt(study, "mlp-classifier", 4)
        assert level2(study.db, target.id)[0] == "pass"
        result = explain(study, "mlp-classifier", 4, "tester", max_runs=3)
        assert result["explained_by"] is None and result["factors"] == [] and result["budget"]["runs"] == 0
        assert "level 2 passes" in result["sentence"]
        assert list_jobs(study.db) == []
        assert latest_explanation(study.db, target.id) == {k: v for k, v in result.items() if k != "id"}
    finally:
        study.close()


def test_clipping_per_replica_follows_the_device_count(tmp_path, monkeypatch):
    venv = xla_venv()
    if venv is None:
        pytest.skip("no torch_xla environment: run `make xla-env` or set WORKBENCH_XLA_PYTHON")
    path = tmp_path / "demo.db"
    _verified_demo(path).close()
    monkeypatch.setenv("WORKBENCH_TARGET_VENV", str(venv))
    out = CliRunner().invoke(main, ["explain", str(path), "mlp-classifier", "3", "--max-runs", "3", "--json"])
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)
    assert result["explained_by"] == "topology", result
    assert result["sentence"] == "follows the device count: agrees on 1 device, fails on 4"
    libraries, topology = result["factors"]
    assert not libraries["tried"] and "recorded no environment" in libraries["reason"]
    assert [(r["chips"], r["level2"]) for r in topology["runs"]] == [(1, "pass"), (4, "fail")]
    from storage.database import open_study

    study = open_study(path)
    try:
        jobs = {j.id: j for j in list_jobs(study.db)}
        assert sorted(jobs) == [r["job"] for r in topology["runs"]]
        one = jobs[topology["runs"][0]["job"]]
        # the recorded CPU_NUM_DEVICES=4 would win over the backend's default: overridden, and said so
        assert one.spec.env["CPU_NUM_DEVICES"] == "1"
        assert [c["name"] for c in one.spec.options["env_changes"]] == ["CPU_NUM_DEVICES"]
        for r in topology["runs"]:
            assert attempt(study, "mlp-classifier", r["seq"]).id == jobs[r["job"]].result_attempt_id
        stored = latest_explanation(study.db, attempt(study, "mlp-classifier", 3).id)
        assert stored["explained_by"] == "topology" and stored["factors"] == result["factors"]
    finally:
        study.close()


SCRIPT = """\
import sys
scale = {scale}
for i in range(1, 11):
    print(f"step {{i}}/10 loss {{scale / i:.6f}}", flush=True)
print(f"eval_accuracy {{0.95 / scale:.4f}}", flush=True)
"""


def _log(scale: float) -> str:
    return "".join(f"step {i}/10 loss {scale / i:.6f}\n" for i in range(1, 11)) + f"eval_accuracy {0.95 / scale:.4f}\n"


def _three_commits(tmp_path, chips: int = 1, versions: list[dict[str, str]] | None = None,
                   scales: tuple[float, float, float] = (1.0, 1.0, 1.5), env: dict[str, str] | None = None,
                   argv: tuple[str, ...] = ("python3", "train.py"), replicate: float | None = None):
    """Commits v0, v1 (the loss 1.5x: the deviation), v2 (a README); attempts 0 (reference) and 1
    at v0, 2 at v2, on `chips` devices; with `replicate`, a second reference run (seed 2, its loss
    `replicate` x the first's: the noise) as attempt 3; verified. Returns (path, shas)."""
    from storage.database import open_study
    from workbench.bundle import import_bundle

    builder = BundleBuilder(tmp_path / "bundle")
    builder.write_study()
    folder = builder.root / "migrations" / "toy"
    folder.mkdir(parents=True)
    shas = make_repo(folder / "repo", versions or [{"train.py": SCRIPT.format(scale=1.0)},
                                                   {"train.py": SCRIPT.format(scale=1.5)},
                                                   {"README": "notes\n"}])
    (folder / "migration.toml").write_text(
        f'title = "toy"\nrepo = "repo"\nbase_commit = "{shas[0]}"\n'
        f'[target]\naccelerator = "cpu"\nchips = {chips}\nruntime = "torch_xla"\n'
        '[goal]\nmetric = "eval_accuracy"\nreference = 0.95\ndirection = "max"\ntolerance = 0.01\n'
        "[budgets]\nattempts = 10\n")
    (folder / "logs").mkdir()
    command = {"argv": list(argv), "cwd": ".", "env": env or {}}
    records = [builder.attempt(seq, sha, command=command, metrics=None, intended_hardware={"kind": "cpu", "count": chips})
               for seq, sha in ((0, shas[0]), (1, shas[0]), (2, shas[-1]))]
    for r, scale in zip(records, scales, strict=True):
        (folder / r["log"]).write_text(_log(scale))
    if replicate is not None:
        seeded = {"argv": list(argv), "cwd": ".", "env": {**(env or {}), "WORKBENCH_SEED": "1"}}
        records[0]["command"] = seeded
        records.append(builder.attempt(3, shas[0], source="reference", metrics=None, intended_hardware=None,
                                       command={**seeded, "env": {**seeded["env"], "WORKBENCH_SEED": "2"}}))
        (folder / records[-1]["log"]).write_text(_log(replicate))
    builder.write_attempts(folder, records)
    path = tmp_path / "study.db"
    study = open_study(path, create=True)
    assert not import_bundle(study, builder.root, "tester").problems
    study.close()
    assert CliRunner().invoke(main, ["verify", str(path)]).exit_code == 0
    return path, shas


def test_the_commit_that_brings_the_deviation_is_named(tmp_path):
    from storage.database import open_study

    path, shas = _three_commits(tmp_path)
    study = open_study(path)
    try:
        assert [level2(study.db, attempt(study, "toy", s).id)[0] for s in (1, 2)] == ["pass", "fail"]
        result = explain(study, "toy", 2, "tester", max_runs=3)
        assert result["explained_by"] == "code", result
        assert result["commit"] == shas[1]
        assert result["sentence"].startswith(f"follows the code: the deviation starts at commit {shas[1][:12]} (version 1)")
        libraries, topology, backend, code = result["factors"]
        assert not topology["tried"] and not backend["tried"] and not libraries["tried"]
        assert "does not read WORKBENCH_DEVICE" in backend["reason"]
        assert code["good"] == {"commit": shas[0], "what": "attempt 1"}
        (run,) = code["runs"]   # commits after the agreeing one: version 1, version 2; one step
        assert run["commit"] == shas[1] and run["level2"] == "fail"
        (job,) = list_jobs(study.db)
        assert job.spec.options["commit"] == shas[1]
        made = attempt(study, "toy", run["seq"])
        assert made.commit == shas[1] and made.id == job.result_attempt_id
        assert latest_explanation(study.db, attempt(study, "toy", 2).id)["commit"] == shas[1]
    finally:
        study.close()


async def test_e_on_the_attempt_screen_asks_first_then_stores_and_shows_the_explanation(tmp_path):
    from screens.app import WorkbenchApp
    from screens.attempt import AttemptScreen
    from screens.explain import ExplainConfirm
    from storage.database import open_study
    from tests.test_app import settle

    path = tmp_path / "demo.db"
    _verified_demo(path).close()
    app = WorkbenchApp(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("j", "enter")
        await settle(pilot)
        await pilot.press("j", "enter")   # mlp-classifier #1: level 2 unknown, a correct-or-unknown attempt
        await settle(pilot)
        assert isinstance(app.screen, AttemptScreen) and app.screen.summary.attempt.seq == 1
        await pilot.press("E")
        await settle(pilot)
        assert isinstance(app.screen, ExplainConfirm)
        await pilot.press("escape")   # cancelled: nothing runs, nothing is stored
        await settle(pilot)
        assert isinstance(app.screen, AttemptScreen)
        study = open_study(path)
        attempt_id = attempt(study, "mlp-classifier", 1).id
        assert latest_explanation(study.db, attempt_id) is None
        study.close()
        await pilot.press("E")
        await settle(pilot)
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await settle(pilot)
        await pilot.press("4")
        await settle(pilot)
        shown = app.screen.query_one("#verdict-list").get_option("explanation").prompt.plain
        assert shown.startswith("Not explained: level 2 is unknown")
    study = open_study(path)
    try:
        assert latest_explanation(study.db, attempt_id)["explained_by"] is None
        assert list_jobs(study.db) == []
    finally:
        study.close()


def test_on_2_devices_topology_is_tried_first_and_does_not_explain_then_code_does(tmp_path):
    from storage.database import open_study

    path, shas = _three_commits(tmp_path, chips=2)
    study = open_study(path)
    try:
        result = explain(study, "toy", 2, "tester", max_runs=3)
        assert (result["explained_by"], result["commit"]) == ("code", shas[1]), result
        topology = result["factors"][1]
        assert topology["tried"] and not topology["explains"] and "on 1 device too" in topology["reason"]
        assert [(r["chips"], r["level2"]) for r in topology["runs"]] == [(1, "fail")]  # no run on 2: it cannot help
        assert [(r["chips"], r["commit"]) for r in result["factors"][-1]["runs"]] == [(2, shas[1])]
        assert result["budget"]["runs"] == 2 and len(list_jobs(study.db)) == 2
    finally:
        study.close()


def test_the_budget_of_runs_stops_the_bisection_and_says_so(tmp_path):
    from storage.database import open_study

    path, _ = _three_commits(tmp_path)
    study = open_study(path)
    try:
        result = explain(study, "toy", 2, "tester", max_runs=0)
        assert result["explained_by"] is None and result["budget"]["runs"] == 0
        assert "the budget of 0 runs is spent" in result["factors"][-1]["reason"]
        assert result["sentence"].startswith("not explained: libraries: the attempt's or the reference's run recorded")
        assert "; topology: the attempt ran on 1 device" in result["sentence"]
        assert list_jobs(study.db) == []
    finally:
        study.close()


def test_a_device_count_fault_follows_topology_and_a_rerun_on_n_stands_for_its_own_n_run(tmp_path):
    """A stdlib program whose loss is off on more than one device (as clipping per replica is),
    with CPU_NUM_DEVICES=2 recorded: the 1-device run must override it to agree."""
    from storage.database import open_study

    faulty = "import os\n" + SCRIPT.format(scale="1.5 if int(os.environ.get('CPU_NUM_DEVICES', '1')) > 1 else 1.0")
    path, _ = _three_commits(tmp_path, chips=2, versions=[{"train.py": faulty}], scales=(1.0, 1.0, 1.5),
                             env={"CPU_NUM_DEVICES": "2"})
    study = open_study(path)
    try:
        assert level2(study.db, attempt(study, "toy", 2).id)[0] == "fail"
        first = explain(study, "toy", 2, "tester", max_runs=3)
        assert first["explained_by"] == "topology", first
        assert first["sentence"] == "follows the device count: agrees on 1 device, fails on 2"
        one, many = first["factors"][1]["runs"]
        assert (one["chips"], one["level2"], many["chips"], many["level2"]) == (1, "pass", 2, "fail")
        # the re-run on 2 fails level 2 itself: explaining it needs only the 1-device run
        again = explain(study, "toy", many["seq"], "tester", max_runs=3)
        assert again["explained_by"] == "topology" and again["budget"]["runs"] == 1
        assert again["factors"][1]["runs"][1] == {**many, "state": "recorded"}
        assert len(list_jobs(study.db)) == 3
        # explain's runs are experiments, not runs of the attempt: no count reads them (the 1-device
        # run passes level 2, and would have turned the attempt's counted level 2 into a pass)
        from storage import queries
        from storage.runs import attempt_runs, counted_ladders, run_counts

        mine = attempt(study, "toy", 2)
        assert [r.counted for r in attempt_runs(study.db, mine.id)] == [True, False, False, False]
        assert mine.id not in run_counts(study.db, mine.migration_id)
        counted = counted_ladders(study.db, [mine.migration_id])[mine.id]   # its own run alone
        assert counted["runs"] == 1 and counted["effective"][1] == "fail"
        assert {v.level: v.outcome.value for v in queries.verdicts(study.db, mine.id)}[2] == "fail"
    finally:
        study.close()


def test_the_reports_and_the_brief_cite_the_explanation(tmp_path):
    from storage.database import open_study
    from workbench.report.build import build_report
    from workbench.report.markdown import render_markdown

    path, shas = _three_commits(tmp_path)
    study = open_study(path)
    from storage.queries import find_attempt
    from workbench.assist.brief import gather
    from workbench.report.html import render_html
    from workbench.report.jsonout import render_json
    from workbench.report.latex import render_latex

    try:
        before = build_report(study.db)
        html_before, latex_before, js_before = render_html(before), render_latex(before), render_json(before)
        explain(study, "toy", 2, "tester", max_runs=3)
        report = build_report(study.db)
        md, html, latex, js = render_markdown(report), render_html(report), render_latex(report), render_json(report)
        brief = gather(study.db, *find_attempt(study.db, "toy", 2)).user
    finally:
        study.close()
    section = md.split("## Migrations", 1)[1]
    assert f"  - attempt 2 explained: follows the code: the deviation starts at commit {shas[1][:12]}" in section
    assert f"<li>attempt 2 explained: follows the code: the deviation starts at commit {shas[1][:12]}" in html
    assert rf"\item toy, attempt 2: follows the code: the deviation starts at commit {shas[1][:12]}" in latex
    (explained,) = json.loads(js)["migrations"][0]["explanations"]
    assert (explained["seq"], explained["explained_by"], explained["commit"]) == (2, "code", shas[1])
    assert explained["sentence"].startswith("follows the code")
    assert "explained:" not in html_before and "itemize" not in latex_before and "\"explanations\":[]" in js_before
    # the brief cites it beside the verdicts, never in their place
    assert "Verdicts:" in brief and "  L2 " in brief
    assert ("Controlled re-runs (workbench explain, one factor changed per run; beside the verdicts, not a "
            f"verdict): follows the code: the deviation starts at commit {shas[1][:12]}") in brief
    assert "  code: explains — " in brief


def test_a_run_the_preflight_refuses_is_stored_as_not_started_with_why(tmp_path):
    from storage.database import open_study

    path, _ = _three_commits(tmp_path, chips=2, argv=("no-such-program-here", "train.py"))
    study = open_study(path)
    try:
        result = explain(study, "toy", 2, "tester", max_runs=3)
        (run,) = result["factors"][1]["runs"]
        assert run["state"] == "not started" and run["job"] is None and "no-such-program-here" in run["reason"]
        assert result["explained_by"] is None and list_jobs(study.db) == []
        assert latest_explanation(study.db, attempt(study, "toy", 2).id)["factors"][1]["runs"] == [run]
    finally:
        study.close()


def device_choice(off: float, reads: bool = True) -> str:
    """A program that chooses its device from WORKBENCH_DEVICE (`reads`): on 'cpu' it runs on plain
    torch, never importing torch_xla, and agrees; otherwise it imports torch_xla and is `off` times
    off. Not `reads`: it imports torch_xla whatever the variable says."""
    test = "os.environ.get('WORKBENCH_DEVICE') != 'cpu'" if reads else "True"
    head = ("import os\n"
            "import torch  # noqa: F401\n"
            f"if {test}:\n"
            "    import torch_xla  # noqa: F401\n"
            f"factor = 1.0 if os.environ.get('WORKBENCH_DEVICE') == 'cpu' else {off}\n")
    return head + SCRIPT.format(scale="factor").replace("import sys\nscale = factor\n", "scale = factor\n")


def test_a_deviation_on_the_accelerator_runtime_follows_the_backend_on_plain_torch(tmp_path):
    """On 'cpu' the run is plain torch (the probe records the runtime) and agrees: the backend."""
    from storage.database import open_study
    from storage.queries import probe_reports

    venv = xla_venv()
    if venv is None:
        pytest.skip("no torch_xla environment: run `make xla-env` or set WORKBENCH_XLA_PYTHON")
    path, _ = _three_commits(tmp_path, versions=[{"train.py": device_choice(1.5)}], env={"PJRT_DEVICE": "CPU"})
    study = open_study(path)
    try:
        result = explain(study, "toy", 2, "tester", max_runs=3, venv=str(venv))
        assert result["explained_by"] == "backend", result
        assert result["sentence"] == "follows the backend: agrees on plain torch (cpu), fails on the intended backend"
        libraries, topology, backend = result["factors"]
        (run,) = backend["runs"]
        assert (run["level2"], run["runtime"]) == ("pass", "torch")
        (job,) = list_jobs(study.db)
        assert job.spec.env["WORKBENCH_DEVICE"] == "cpu" and job.spec.options["venv"] == str(venv)
        assert job.spec.options["explain"] == {"factor": "backend", "env": {"WORKBENCH_DEVICE": "cpu"}}
        assert [c["name"] for c in job.spec.options["env_changes"]] == ["WORKBENCH_DEVICE"]
        (report,) = probe_reports(study.db, run["attempt_id"])   # idle (no optimizer step) but stored
        assert report["runtime"]["name"] == "torch" and "torch-xla" not in report["ran_with"]["imported"]
    finally:
        study.close()


def test_a_program_that_imports_torch_xla_whatever_the_variable_is_not_explained_by_the_backend(tmp_path):
    from storage.database import open_study

    venv = xla_venv()
    if venv is None:
        pytest.skip("no torch_xla environment: run `make xla-env` or set WORKBENCH_XLA_PYTHON")
    path, _ = _three_commits(tmp_path, versions=[{"train.py": device_choice(1.5, reads=False)}],
                             env={"PJRT_DEVICE": "CPU"})
    study = open_study(path)
    try:
        result = explain(study, "toy", 2, "tester", max_runs=1, venv=str(venv))
        backend = result["factors"][2]
        (run,) = backend["runs"]
        assert backend["tried"] and not backend["explains"] and run["runtime"] == "torch_xla", backend
        assert "imported torch_xla with WORKBENCH_DEVICE=cpu: it did not run on plain torch" in backend["reason"]
        assert result["explained_by"] is None
    finally:
        study.close()


def test_the_minutes_budget_cancels_a_run_still_going_and_stops(tmp_path):
    from domain.jobs import JobState
    from storage.database import open_study

    path, _ = _three_commits(tmp_path, chips=2, versions=[{"train.py": "import time\ntime.sleep(120)\n"}])
    study = open_study(path)
    try:
        started = time.monotonic()
        result = explain(study, "toy", 2, "tester", max_runs=3, minutes=0.05)
        took = time.monotonic() - started
        topology = result["factors"][1]
        (run,) = topology["runs"]
        assert run["state"] == "cancelled" and run["reason"] == "cancelled when the budget of 0.05 minutes ended"
        assert "level 2 is unknown on 1 device (cancelled when the budget" in topology["reason"]
        (job,) = list_jobs(study.db)
        assert job.state is JobState.CANCELLED and not job.active
        assert result["explained_by"] is None and result["budget"]["runs"] == 1 and took < 60
    finally:
        study.close()


def test_with_reference_replicates_the_deviation_is_said_in_sigmas(tmp_path):
    """Two reference runs 0.1% apart measure the noise: the 1-device run agrees within it and the
    2-device run is many σ off; the table and the sentence say so."""
    from storage.database import open_study

    faulty = "import os\n" + SCRIPT.format(scale="1.5 if int(os.environ.get('CPU_NUM_DEVICES', '1')) > 1 else 1.0")
    path, _ = _three_commits(tmp_path, chips=2, versions=[{"train.py": faulty}], env={"CPU_NUM_DEVICES": "2"},
                             replicate=1.001)
    study = open_study(path)
    try:
        own = level2(study.db, attempt(study, "toy", 2).id)
        assert own[0] == "fail" and "σ" in own[1], own
        result = explain(study, "toy", 2, "tester", max_runs=3)
    finally:
        study.close()
    assert result["explained_by"] == "topology", result
    one, many = result["factors"][1]["runs"]
    assert one["level2"] == "pass" and one["sigmas"] is not None and one["sigmas"] < 2, one
    assert many["level2"] == "fail" and many["sigmas"] > 100, many
    assert result["sentence"] == (f"follows the device count: agrees on 1 device ({one['sigmas']:.1f}σ), "
                                  f"{many['sigmas']:.1f}σ off on 2")
