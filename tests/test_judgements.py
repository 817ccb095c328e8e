"""Judgements, queues, blind mode, agreement and adjudication (issue 17, docs/judgements.md).

Studies are real: a bundle imported into a real SQLite file, verified through the real writer;
the CLI runs as a subprocess; two reviewers' processes write to one file at once.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import BundleBuilder
from hypothesis import given, settings
from hypothesis import strategies as st

from domain.agreement import bootstrap, cohen_kappa, krippendorff_alpha
from domain.judgements import deal
from domain.models import Outcome
from storage.database import open_study
from workbench import judging
from workbench.blind import HIDDEN_FIELDS

P, F, U = Outcome.PASS, Outcome.FAIL, Outcome.UNKNOWN
ROOT = Path(__file__).resolve().parent.parent


def workbench(*args: str, reviewer: str = "ana") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "WORKBENCH_REVIEWER": reviewer, "PYTHONPATH": str(ROOT)})


def fails_cleanly(result: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for text in expected:
        assert text in lines[0], lines[0]


def _verify(db, attempt_id: int, outcomes: tuple[Outcome, ...]) -> None:
    from storage.records import record_verifications, verification_rows
    from workbench.verify.ladder import Judgement, LevelResult

    levels = [LevelResult(n, o, "test") for n, o in enumerate(outcomes, start=1)]
    judgement = Judgement(levels=levels, highest_level=0, cause=None, cause_evidence=[], cause_note="",
                          silent=False, over_claim=None, raised_error=False)
    [written] = record_verifications(db, [dict(
        attempt_id=attempt_id, reference_attempt_id=None, verifier="test", verifier_version="1", inputs_hash="h",
        inputs="{}", settings="{}", rows=verification_rows(judgement), reviewer="ana")])
    assert isinstance(written, int), written


VERIFIER_L1 = {1: P, 2: P, 3: F, 4: P}
"""The verifier's level 1 per attempt seq; levels 2 to 5 are unknown."""


@pytest.fixture
def study_path(bundle: BundleBuilder, tmp_path: Path) -> Path:
    """A reference run, four agent attempts (expected level 2), a re-run: verified, none judged."""
    from workbench.bundle import import_bundle

    folder, shas = bundle.add_migration("mlp-xla")
    records = [bundle.attempt(0, shas[0])] + [bundle.attempt(s, shas[s % 3]) for s in range(1, 5)]
    bundle.write_attempts(folder, records + [bundle.attempt(5, shas[2], source="rerun", rerun_of=2)])
    path = tmp_path / "study.db"
    study = open_study(path, create=True)
    try:
        assert import_bundle(study, bundle.root, "ana").problems == []
        for seq, first in VERIFIER_L1.items():
            attempt_id = study.db.execute("SELECT id FROM attempt WHERE seq = ?", [seq]).fetchone()[0]
            _verify(study.db, attempt_id, (first, U, U, U, U))
    finally:
        study.close()
    return path


# --------------------------------------------------------------------------- judgements


def test_a_judgement_is_recorded_superseded_with_history_and_audited(study_path: Path) -> None:
    first = workbench("judge", str(study_path), "mlp-xla", "1", "--levels", "pass,fail,unknown,unknown,unknown",
                      "--cause", "numerical_mismatch", "--note", "loss drifts")
    assert first.returncode == 0, first.stderr
    assert "judgement 1 recorded" in first.stdout and "differs" in first.stdout  # level 2: fail, the verifier unknown
    again = workbench("judge", str(study_path), "mlp-xla", "1", "--levels", "pass,pass,unknown,unknown,unknown")
    assert again.returncode == 0, again.stderr
    from storage.judgements import current_judgements, judgement_history

    study = open_study(study_path)
    try:
        db = study.db
        attempt_id = db.execute("SELECT id FROM attempt WHERE seq = 1").fetchone()[0]
        history = judgement_history(db, attempt_id)
        assert [j.id for j in history] == [1, 2] and history[1].supersedes == 1
        assert history[0].cause is not None and history[0].cause.value == "numerical_mismatch"
        assert history[0].note == "loss drifts" and history[0].levels == (P, F, U, U, U)
        assert [j.id for j in current_judgements(db)] == [2]
        actions = db.execute("SELECT action, entity_id FROM audit WHERE entity = 'judgement' ORDER BY id").fetchall()
        assert actions == [("insert", 1), ("insert", 2), ("supersede", 1)]
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            db.execute("UPDATE judgement SET level1 = 'fail' WHERE id = 1")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            db.execute("DELETE FROM judgement WHERE id = 1")
    finally:
        study.close()


@pytest.mark.parametrize(("args", "expected"), [
    (["--levels", "pass,pass"], "give 5 outcomes"),
    (["--levels", "pass,pass,maybe,pass,pass"], "'maybe' is not pass"),
    (["--levels", "pass,fail,unknown,unknown,unknown", "--cause", "gremlins"], "failure taxonomy"),
    (["--levels", "pass,pass,pass,pass,pass", "--cause", "crash"], "no level fails"),
    (["--levels", "pass,pass,pass,pass,pass", "--note", "  "], "--note is empty"),
])
def test_bad_judgement_input_is_one_line_and_exit_2(study_path: Path, args: list[str], expected: str) -> None:
    fails_cleanly(workbench("judge", str(study_path), "mlp-xla", "1", *args), expected)


def test_a_missing_attempt_is_one_line(study_path: Path) -> None:
    fails_cleanly(workbench("judge", str(study_path), "mlp-xla", "9", "--levels", "pass,pass,pass,pass,pass"),
                  "no attempt #9")


ROUNDS = 12
WRITER = textwrap.dedent("""
    import sys, time
    from storage.database import open_study
    from storage.judgements import queue
    from workbench.judging import record_judgement
    import pathlib
    reviewer, path, gate = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
    study = open_study(path)
    (gate / reviewer).touch()  # ready; both begin writing together when the test opens the gate
    while not (gate / "go").exists():
        time.sleep(0.01)
    print(time.time(), flush=True)  # when this writer began
    for round_ in range(ROUNDS):
        for seq in [item.seq for item in queue(study.db, reviewer)]:
            levels = "pass,pass,unknown,unknown," + ("pass" if round_ % 2 else "fail")
            record_judgement(study.db, "mlp-xla", seq, levels=levels, cause=None, note=f"{reviewer} {round_}",
                             reviewer=reviewer)
    print(time.time(), flush=True)  # when it wrote its last judgement
    study.close()
""").replace("ROUNDS", str(ROUNDS))


def test_two_reviewer_processes_working_their_queues_at_once_lose_no_judgement(study_path: Path) -> None:
    """Both are dealt all four attempts (overlap 1) and judge each 12 times, at the same time."""
    assert workbench("assign", str(study_path), "--reviewers", "ana,ben", "--overlap", "1").returncode == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    gate = study_path.parent / "gate"
    gate.mkdir()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, name, str(study_path), str(gate)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in ("ana", "ben")]
    deadline = time.monotonic() + 60
    while not all((gate / name).exists() for name in ("ana", "ben")) and time.monotonic() < deadline:
        time.sleep(0.01)
    (gate / "go").touch()
    spans = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        spans.append([float(t) for t in out.split()])
    # the two writers' spans overlap: they did write at the same time
    assert max(begin for begin, _ in spans) < min(end for _, end in spans), spans
    study = open_study(study_path)
    try:
        db = study.db
        assert db.execute("SELECT count(*) FROM judgement").fetchone()[0] == 2 * 4 * ROUNDS
        for name in ("ana", "ben"):
            notes = [r[0] for r in db.execute("SELECT note FROM judgement WHERE reviewer = ? ORDER BY id", [name])]
            assert sorted(notes) == sorted(f"{name} {r}" for r in range(ROUNDS) for _ in range(4))
        # every history is one unbroken chain: one current record per (attempt, reviewer)
        current = db.execute("SELECT attempt_id, reviewer, count(*) FROM judgement j WHERE NOT EXISTS"
                             " (SELECT 1 FROM judgement l WHERE l.supersedes = j.id) GROUP BY 1, 2").fetchall()
        assert len(current) == 8 and {c[2] for c in current} == {1}
        assert db.execute("SELECT count(*) FROM audit WHERE entity = 'judgement' AND action = 'insert'"
                          ).fetchone()[0] == 2 * 4 * ROUNDS
    finally:
        study.close()


# --------------------------------------------------------------------------- queues and blind mode


def test_the_deal_is_even_reproducible_and_overlaps_by_the_fraction() -> None:
    attempts = list(range(100, 130))
    pairs = deal(attempts, ["ana", "ben", "chen"], 0.2, seed=7)
    assert pairs == deal(list(reversed(attempts)), ["ana", "ben", "chen"], 0.2, seed=7)
    assert pairs != deal(attempts, ["ana", "ben", "chen"], 0.2, seed=8)
    per_attempt: dict[int, list[str]] = {}
    for attempt, name in pairs:
        per_attempt.setdefault(attempt, []).append(name)
    assert sorted(per_attempt) == attempts
    assert sum(len(names) == 2 for names in per_attempt.values()) == 6  # round(0.2 * 30)
    assert all(len(set(names)) == len(names) for names in per_attempt.values())
    loads = [sum(name == r for _, name in pairs) for r in ("ana", "ben", "chen")]
    assert max(loads) - min(loads) <= 1 and sum(loads) == 36
    with pytest.raises(ValueError, match="two reviewers"):
        deal(attempts, ["ana"], 0.2, seed=7)


def test_assign_deals_agent_attempts_only_and_the_same_seed_gives_the_same_deal(study_path: Path,
                                                                               tmp_path: Path) -> None:
    twin = tmp_path / "twin.db"
    shutil.copy(study_path, twin)
    deals = []
    for path in (study_path, twin):
        result = workbench("assign", str(path), "--reviewers", "ana,ben,chen", "--overlap", "0.5", "--seed", "11")
        assert result.returncode == 0, result.stderr
        assert "batch 1: 4 attempts, 6 assignments" in result.stdout
        study = open_study(path)
        try:
            from storage.judgements import assignments

            deals.append(assignments(study.db, 1))
            seqs = {r[0] for r in study.db.execute(
                "SELECT a.seq FROM assignment s JOIN attempt a ON a.id = s.attempt_id")}
            assert seqs == {1, 2, 3, 4}  # no reference run (0), no re-run (5)
            assert study.db.execute("SELECT count(*) FROM audit WHERE entity = 'assignment'").fetchone()[0] == 6
        finally:
            study.close()
    assert deals[0] == deals[1]
    fails_cleanly(workbench("assign", str(study_path), "--reviewers", "ana,ben"), "nothing to deal")
    fails_cleanly(workbench("assign", str(twin), "--reviewers", "ana,ana"), "named twice")


def test_queue_counts_done_and_left(study_path: Path) -> None:
    assert workbench("assign", str(study_path), "--reviewers", "ana,ben", "--overlap", "0", "--seed", "1"
                     ).returncode == 0
    listed = json.loads(workbench("queue", str(study_path), "--json").stdout)
    assert listed["done"] == 0 and listed["left"] == 2
    first = listed["attempts"][0]
    assert workbench("judge", str(study_path), "mlp-xla", str(first["seq"]), "--levels",
                     "pass,pass,pass,pass,pass").returncode == 0
    after = json.loads(workbench("queue", str(study_path), "--json").stdout)
    assert (after["done"], after["left"]) == (1, 1) and after["attempts"][0]["done"]
    assert "ben: 0 done, 2 left" in workbench("queue", str(study_path), "--reviewer", "ben").stdout


def _attempt_json(path: Path, seq: int, reviewer: str) -> dict:
    listed = json.loads(workbench("attempts", str(path), "mlp-xla", "--json", reviewer=reviewer).stdout)
    return next(a for a in listed if a["seq"] == seq)


def test_a_blind_reviewer_sees_no_claim_level_verdict_or_cause_until_judging(study_path: Path) -> None:
    assert workbench("assign", str(study_path), "--reviewers", "ana,ben", "--overlap", "1", "--blind",
                     "--seed", "2").returncode == 0
    hidden = _attempt_json(study_path, 1, "ana")
    assert {hidden[k] for k in HIDDEN_FIELDS} == {"hidden"}
    table = workbench("attempts", str(study_path), "mlp-xla", reviewer="ana").stdout
    assert "Runs on 4 chips" not in json.dumps(hidden) and "hidden" in table
    # someone not dealt the attempt blind sees it all
    seen = _attempt_json(study_path, 1, "dan")
    assert seen["claim"].startswith("Runs on 4 chips") and seen["expected_level"] == 2 and seen["ladder"]
    judged = workbench("judge", str(study_path), "mlp-xla", "1", "--levels", "fail,unknown,unknown,unknown,unknown",
                       "--cause", "crash")
    assert "(blind)" in judged.stdout and "differs" in judged.stdout
    revealed = _attempt_json(study_path, 1, "ana")
    assert revealed["claim"].startswith("Runs on 4 chips") and revealed["expected_level"] == 2
    assert _attempt_json(study_path, 2, "ana")["claim"] == "hidden"


def test_study_wide_blind_mode(study_path: Path) -> None:
    assert workbench("blind", str(study_path), "on").returncode == 0
    assert _attempt_json(study_path, 3, "dan")["expected_level"] == "hidden"
    assert workbench("blind", str(study_path), "off").returncode == 0
    assert _attempt_json(study_path, 3, "dan")["expected_level"] == 2


# --------------------------------------------------------------------------- agreement


def test_cohen_kappa_matches_the_textbook_example() -> None:
    """Two raters, 50 items: yes/yes 20, yes/no 5, no/yes 10, no/no 15. By hand: observed 0.70,
    chance 0.5 * 0.6 + 0.5 * 0.4 = 0.50, kappa = (0.70 - 0.50) / (1 - 0.50) = 0.40."""
    pairs = [("yes", "yes")] * 20 + [("yes", "no")] * 5 + [("no", "yes")] * 10 + [("no", "no")] * 15
    assert cohen_kappa(pairs) == pytest.approx(0.4)
    assert cohen_kappa([("pass", "pass")] * 4) is None  # one category: chance agreement is 1


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_cohen_kappa_agrees_with_statsmodels_on_random_tables() -> None:
    """The three-line formula against the well-kept implementation, on 200 random rating sets."""
    inter_rater = pytest.importorskip("statsmodels.stats.inter_rater", reason="statsmodels (the test extra)")
    rng = random.Random(17)
    for _ in range(200):
        categories = rng.sample(["pass", "fail", "unknown"], rng.randint(2, 3))
        pairs = [(rng.choice(categories), rng.choice(categories)) for _ in range(rng.randint(2, 40))]
        values = sorted({v for pair in pairs for v in pair})
        table = [[sum(p == (a, b) for p in pairs) for b in values] for a in values]
        expected = float(inter_rater.cohens_kappa(table, return_results=False))
        got = cohen_kappa(pairs)
        assert (got is None) == (math.isnan(expected) or len(values) < 2), pairs
        if got is not None:
            assert got == pytest.approx(expected, abs=1e-9), pairs


def test_krippendorff_alpha_matches_krippendorffs_published_example() -> None:
    """Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the 4-coder 12-unit
    nominal example with missing values: alpha = 0.743."""
    rows = {"A": "1 2 3 3 2 1 4 1 2 * * *", "B": "1 2 3 3 2 2 4 1 2 5 * 3",
            "C": "* 3 3 3 2 3 4 2 2 5 1 *", "D": "1 2 3 3 2 4 4 1 2 5 1 *"}
    units = [{coder: values.split()[u] for coder, values in rows.items() if values.split()[u] != "*"}
             for u in range(12)]
    assert krippendorff_alpha(units) == pytest.approx(0.743, abs=5e-4)


def test_the_bootstrap_is_seeded() -> None:
    pairs = [("pass", "pass")] * 6 + [("pass", "fail")] * 2 + [("fail", "fail")] * 5
    first = bootstrap(pairs, cohen_kappa, resamples=200, seed=3)
    assert first is not None and first[0] <= cohen_kappa(pairs) <= first[1]  # type: ignore[operator]
    assert bootstrap(pairs, cohen_kappa, resamples=200, seed=3) == first


JUDGED = {"ana": {1: "pass", 2: "pass", 3: "fail", 4: "fail"}, "ben": {1: "pass", 2: "fail", 3: "fail", 4: "fail"}}
"""Level 1 per reviewer and attempt seq (levels 2 to 5: unknown). ana judges blind, ben not."""


def _judge_all(path: Path) -> None:
    """The judgements of JUDGED, through the service the CLI calls (in process: faster)."""
    from storage.judgements import set_study_blind

    study = open_study(path)
    try:
        for name, by_seq in JUDGED.items():
            set_study_blind(study.db, name == "ana", "lead")
            for seq, first in by_seq.items():
                judging.record_judgement(study.db, "mlp-xla", seq, levels=f"{first},unknown,unknown,unknown,unknown",
                                         cause=None, note=None, reviewer=name)
    finally:
        study.close()


def test_agreement_matches_hand_computed_values(study_path: Path) -> None:
    """Level 1, by hand. Reviewers (ana, ben): pairs pp, pf, ff, ff: observed 3/4, chance
    2/4 * 1/4 + 2/4 * 3/4 = 1/2, kappa = 1/2. Alpha: values p 3, f 5 (n = 8); one disagreeing
    unit gives observed disagreement 2/8, expected 2 * 3 * 5 / (8 * 7) = 30/56, alpha = 1 -
    (2/8) / (30/56) = 16/30. Verifier (p p f p) against the 8 judgements: agreeing 5/8, verifier
    p 6 f 2, reviewers p 3 f 5, chance (6 * 3 + 2 * 5) / 64 = 28/64, kappa = (40 - 28) / (64 - 28) = 1/3;
    verifier pass / reviewer fail 3 (ben on 2, both on 4), the reverse 0."""
    _judge_all(study_path)
    result = workbench("agreement", str(study_path), "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    level1 = out["levels"][0]
    hh, hv = level1["human_human"], level1["human_verifier"]
    assert hh["cohen_kappa"]["value"] == pytest.approx(0.5) and hh["cohen_kappa"]["n"] == 4
    assert hh["krippendorff_alpha"]["value"] == pytest.approx(16 / 30) and hh["krippendorff_alpha"]["n"] == 4
    assert hv["cohen_kappa"]["value"] == pytest.approx(1 / 3) and hv["cohen_kappa"]["n"] == 8
    assert sorted(hv["cohen_kappa"]["judgement_ids"]) == list(range(1, 9))
    assert sorted(hh["cohen_kappa"]["judgement_ids"]) == list(range(1, 9))
    assert (hv["verifier_pass_human_fail"], hv["verifier_fail_human_pass"]) == (3, 0)
    for stat in (hh["cohen_kappa"], hh["krippendorff_alpha"], hv["cohen_kappa"]):
        assert stat["interval"] is None or stat["interval"][0] <= stat["value"] <= stat["interval"][1]
    # levels 2 to 5: everyone says "can't tell", as the verifier does: agreement is undefined
    assert out["levels"][1]["human_verifier"]["cohen_kappa"]["value"] is None
    assert [(d["seq"], d["level"]) for d in out["disagreements"]] == [(2, 1), (4, 1)]
    # blind (ana) and not blind (ben): against the verifier, ana agrees on 3 of 4 level-1 verdicts
    # and on all 16 unknowns; ben on 2 + 16. Against the claim (level 2 expected: levels 1-2 pass),
    # ana passes level 1 twice of 8 claimed levels, ben once.
    blind, seen = out["blind"]
    assert blind["blind"] and (blind["agree_with_verifier"]["agree"], blind["agree_with_verifier"]["n"]) == (19, 20)
    assert (seen["agree_with_verifier"]["agree"], seen["agree_with_verifier"]["n"]) == (18, 20)
    assert (blind["agree_with_claim"]["agree"], blind["agree_with_claim"]["n"]) == (2, 8)
    assert (seen["agree_with_claim"]["agree"], seen["agree_with_claim"]["n"]) == (1, 8)
    text = workbench("agreement", str(study_path)).stdout
    assert "2 disagreements to adjudicate" in text and "0.500" in text


def test_adjudication_is_recorded_and_counts_as_an_override(study_path: Path) -> None:
    _judge_all(study_path)
    result = workbench("adjudicate", str(study_path), "mlp-xla", "4", "--level", "1", "--outcome", "fail",
                       "--reason", "the loss diverges at step 3", reviewer="chen")
    assert result.returncode == 0, result.stderr
    study = open_study(study_path)
    try:
        from storage.queries import verdicts

        db = study.db
        attempt_id = db.execute("SELECT id FROM attempt WHERE seq = 4").fetchone()[0]
        level1 = verdicts(db, attempt_id)[0]
        assert level1.effective is F and level1.overrides[-1].reviewer == "chen"
        row = db.execute("SELECT reviewer, outcome, reason, override_id FROM adjudication").fetchone()
        assert row == ("chen", "fail", "the loss diverges at step 3", level1.overrides[-1].id)
        assert db.execute("SELECT count(*) FROM audit WHERE entity IN ('adjudication', 'verdict_override')"
                          ).fetchone()[0] == 2
        report = judging.agreement(db, resamples=50)
        assert [(d.seq, d.level) for d in report.disagreements] == [(2, 1)]
    finally:
        study.close()
    fails_cleanly(workbench("adjudicate", str(study_path), "mlp-xla", "4", "--level", "9", "--outcome", "pass",
                            "--reason", "x"), "--level")
    fails_cleanly(workbench("adjudicate", str(study_path), "mlp-xla", "4", "--level", "1", "--outcome", "pass",
                            "--reason", " "), "--reason is empty")
    fails_cleanly(workbench("adjudicate", str(study_path), "mlp-xla", "5", "--level", "1", "--outcome", "pass",
                            "--reason", "x"), "no current verdict")


# --------------------------------------------------------------------------- the report section


def test_every_report_format_carries_the_agreement_section(study_path: Path) -> None:
    import io
    import zipfile

    from workbench.report import build_report, render

    study = open_study(study_path)
    try:
        bare = build_report(study.db)
        assert bare.agreement is None and "Reviewer agreement" not in render(bare, "md").decode()
        assert json.loads(render(bare, "json"))["agreement"] is None
    finally:
        study.close()
    _judge_all(study_path)
    study = open_study(study_path)
    try:
        report = build_report(study.db)
        hidden = build_report(study.db, pseudonymise=True)
    finally:
        study.close()
    md = render(report, "md").decode()
    assert "## Reviewer agreement" in md and "0.500" in md and "## Disagreements to adjudicate" in md
    assert "ben: fail (#6)" in md and "## Blind and not blind judgements" in md
    assert 'id="table-agreement"' in render(report, "html").decode()
    assert "Reviewer agreement" in render(report, "latex").decode()
    with zipfile.ZipFile(io.BytesIO(render(report, "csv"))) as archive:
        rows = archive.read("agreement.csv").decode().splitlines()
        assert rows[0].startswith("level,kappa_(reviewers)") and rows[1].startswith("1,0.5,")
        assert "agreement_blind.csv" in archive.namelist()
    out = json.loads(render(report, "json"))["agreement"]
    assert out["levels"][0]["human_human"]["cohen_kappa"]["value"] == pytest.approx(0.5)
    hidden_md = render(hidden, "md").decode()
    assert "ben:" not in hidden_md and "Reviewer 2: fail (#6)" in hidden_md


def test_a_reference_run_is_not_judged(study_path: Path) -> None:
    fails_cleanly(workbench("judge", str(study_path), "mlp-xla", "0", "--levels", "pass,pass,pass,pass,pass"),
                  "reference run")


@settings(max_examples=60, deadline=None)
@given(attempts=st.sets(st.integers(1, 10_000), max_size=60), reviewers=st.integers(2, 6),
       overlap=st.floats(0, 1), seed=st.integers(0, 2**32))
def test_any_deal_is_even_and_overlaps_as_asked(attempts: set[int], reviewers: int, overlap: float,
                                                seed: int) -> None:
    names = [f"r{i}" for i in range(reviewers)]
    pairs = deal(sorted(attempts), names, overlap, seed)
    assert pairs == deal(sorted(attempts, reverse=True), names, overlap, seed)
    per: dict[int, set[str]] = {}
    for attempt, name in pairs:
        per.setdefault(attempt, set()).add(name)
    assert set(per) == attempts and len(pairs) == len(attempts) + round(overlap * len(attempts))
    assert sum(len(names_) for names_ in per.values()) == len(pairs)  # two different reviewers
    loads = [sum(name == r for _, name in pairs) for r in names]
    assert max(loads) - min(loads) <= 1
