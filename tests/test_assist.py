"""AI assist against the real anthropic SDK, its base_url pointed at a local Messages API.

`MessagesAPI` is an HTTP server on 127.0.0.1 that answers POST /v1/messages as Anthropic's API
does (JSON messages with tool_use blocks and usage; error bodies; retry-after headers), scripted
per test: rate limits, overload, timeouts, malformed answers. Nothing leaves the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from assist_helpers import (
    HF,
    MODEL,
    SECRET,
    USAGE_COST,
    Reply,
    api_error,
    assistant,
    brief_reply,
    claim_reply,
    tool_answer,
)

from domain.errors import WorkbenchError
from domain.models import FailureCause
from storage import queries, records
from storage.database import open_study
from workbench.assist import brief as briefs
from workbench.assist import claims
from workbench.assist.client import Assistant, AssistError, AssistUnavailable, Settings
from workbench.assist.prices import PRICES, Price, cost, load_prices, price_for
from workbench.bundle import import_bundle
from workbench.config import DEMO_BUNDLE
from workbench.verify import verify_study


def attempt_id(db, slug: str, seq: int) -> int:
    m = queries.get_migration(db, slug)
    return db.execute("SELECT id FROM attempt WHERE migration_id = ? AND seq = ?", [m.id, seq]).fetchone()[0]


# --- prices -------------------------------------------------------------------------------------

def test_cost_prices_each_kind_of_token() -> None:
    price = Price(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30)
    assert cost(price, input_tokens=1_000_000, output_tokens=0) == pytest.approx(3.0)
    assert cost(price, input_tokens=100, output_tokens=200, cache_write_tokens=1000, cache_read_tokens=5000) == \
        pytest.approx((100 * 3 + 200 * 15 + 1000 * 3.75 + 5000 * 0.3) / 1e6)
    assert cost(None, input_tokens=5, output_tokens=5) is None
    assert price_for("claude-haiku-4-5-20251001", PRICES) == PRICES["claude-haiku-4-5"]
    assert price_for("no-such-model", PRICES) is None


def test_price_table_is_configurable(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "prices.toml"
    path.write_text('[models."my-model"]\ninput = 1\noutput = 2\ncache_write = 1.25\ncache_read = 0.1\n'
                    '[models."claude-haiku-4-5"]\ninput = 9\noutput = 9\ncache_write = 9\ncache_read = 9\n')
    monkeypatch.setenv("WORKBENCH_ASSIST_PRICES", str(path))
    table = load_prices()
    assert table["my-model"] == Price(1.0, 2.0, 1.25, 0.1)
    assert table["claude-haiku-4-5"].input == 9.0 and table[MODEL] == PRICES[MODEL]
    path.write_text('[models."bad"]\ninput = 1\n')
    with pytest.raises(WorkbenchError, match="models.bad needs"):
        load_prices()


def test_the_brief_taxonomy_names_every_failure_cause() -> None:
    assert set(briefs.CAUSES) == {c.value for c in FailureCause}


# --- claims -------------------------------------------------------------------------------------

def test_claims_are_extracted_redacted_recorded_and_priced(api, claims_study) -> None:
    api.default = claim_reply
    db = claims_study.db
    results = list(claims.extract_all(db, assistant(api)))
    assert [(r.attempt.seq, r.error) for r in results] == [(1, None), (2, None), (3, None)]
    assert len(api.requests) == 3
    sent = json.dumps(api.requests)
    assert SECRET not in sent and "[REDACTED:" in sent
    sent_key = api.headers[0].get("x-api-key") or api.headers[0].get("authorization", "").removeprefix("Bearer ")
    assert sent_key == "test-key"
    first = api.requests[0]
    assert first["model"] == MODEL and first["tool_choice"] == {"type": "tool", "name": "record_claim"}
    assert first["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert first["tools"][0]["input_schema"]["required"] == ["expected_level", "success_claimed", "sentence"]

    one = queries.claim_extractions(db, attempt_id(db, "mlp-xla", 1))[0]
    assert (one.expected_level, one.success_claimed, one.quote_found, one.model) == (1, True, True, MODEL)
    three = queries.claim_extractions(db, attempt_id(db, "mlp-xla", 3))[0]
    assert three.expected_level == 3 and three.quote_found  # markdown asterisks aside, it is the claim's sentence
    calls = queries.llm_calls(db)
    assert [c.purpose for c in calls] == ["claim"] * 3
    assert calls[0].input_tokens == 1200 and calls[0].cache_write_tokens == 900
    assert calls[0].cost_usd == pytest.approx(USAGE_COST)
    total = queries.llm_cost(db)
    assert total.calls == 3 and total.cost_usd == pytest.approx(3 * USAGE_COST)
    assert total.by_purpose == {"claim": pytest.approx(3 * USAGE_COST)}

    # Nothing is pending any more; the same request again comes from the cache at no cost.
    assert claims.pending(db) == []
    migration = queries.get_migration(db, "mlp-xla")
    from storage.converters import attempt_from_row

    row = list(db.query("SELECT * FROM attempt WHERE id = ?", [attempt_id(db, "mlp-xla", 1)]))[0]
    again = claims.extract(db, assistant(api), migration, attempt_from_row(row))
    assert again.answer.cached and again.answer.call_id == calls[0].id
    assert len(api.requests) == 3 and queries.llm_cost(db).calls == 3


def test_model_extractions_count_only_once_a_reviewer_accepts_or_corrects(api, claims_study) -> None:
    api.default = claim_reply
    db = claims_study.db
    list(claims.extract_all(db, assistant(api)))
    one = attempt_id(db, "mlp-xla", 1)
    three = attempt_id(db, "mlp-xla", 3)
    reference = attempt_id(db, "mlp-xla", 0)
    assert queries.effective_expected_level(db, one).level is None  # extracted, not accepted
    extraction = queries.claim_extractions(db, one)[0]
    records.add_claim_review(db, attempt_id=one, action="accept", extraction_id=extraction.id, reviewer="ana")
    level = queries.effective_expected_level(db, one)
    assert (level.level, level.source) == (1, "model")
    records.add_claim_review(db, attempt_id=three, action="correct", expected_level=2, reviewer="ana",
                             note="the TPU part is a plan, not a result")
    level = queries.effective_expected_level(db, three)
    assert (level.level, level.source) == (2, "reviewer")
    records.add_claim_review(db, attempt_id=one, action="correct", expected_level=None, reviewer="ana")
    level = queries.effective_expected_level(db, one)
    assert (level.level, level.source) == (None, "reviewer")
    db.execute("UPDATE attempt SET expected_level = 2 WHERE id = ?", [reference])
    level = queries.effective_expected_level(db, reference)
    assert (level.level, level.source) == (2, "rule")
    with pytest.raises(ValueError):
        records.add_claim_review(db, attempt_id=three, action="accept", extraction_id=extraction.id, reviewer="ana")
    with pytest.raises(ValueError):
        records.add_claim_review(db, attempt_id=three, action="correct", expected_level=7, reviewer="ana")


def test_assist_records_are_append_only(api, claims_study) -> None:
    import sqlite3

    api.default = claim_reply
    db = claims_study.db
    list(claims.extract_all(db, assistant(api)))
    for sql in ("UPDATE llm_call SET cost_usd = 0", "DELETE FROM llm_call",
                "UPDATE claim_extraction SET expected_level = 5", "DELETE FROM claim_extraction"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            db.execute(sql)
    assert db.execute("SELECT count(*) FROM audit WHERE entity = 'llm_call'").fetchone()[0] == 3


@pytest.mark.parametrize("reply, expected", [
    (lambda b: tool_answer(b, {"expected_level": 9, "success_claimed": True, "sentence": "x"}), "not a ladder level"),
    (lambda b: tool_answer(b, {"expected_level": 2, "success_claimed": "yes", "sentence": "x"}), "not true or false"),
    (lambda b: tool_answer(b, {"expected_level": 2}), "missing success_claimed, sentence"),
    (lambda b: tool_answer(b, None, content=[{"type": "text", "text": "Level 3, I think."}]), "no record_claim call"),
    (lambda b: tool_answer(b, None, content=[]), "no record_claim call"),
    (lambda b: tool_answer(b, "a string, not an object"), "not an object"),
])
def test_malformed_answers_are_recorded_errors_not_crashes(api, claims_study, reply, expected) -> None:
    api.default = reply
    db = claims_study.db
    results = list(claims.extract_all(db, assistant(api)))
    assert all(r.answer is None and expected in r.error for r in results), [r.error for r in results]
    calls = queries.llm_calls(db)
    assert len(calls) == 3 and all(c.error and "malformed output" in c.error for c in calls)
    assert calls[0].cost_usd == pytest.approx(USAGE_COST)  # billed all the same
    assert db.execute("SELECT count(*) FROM claim_extraction").fetchone()[0] == 0
    # an error is never served from the cache: asking again asks again
    api.default = claim_reply
    assert [r.error for r in claims.extract_all(db, assistant(api))] == [None, None, None]
    assert len(api.requests) == 6


def test_a_body_that_is_not_json_is_a_recorded_error(api, claims_study) -> None:
    api.default = lambda body: Reply(200, b"<html>proxy error</html>")
    results = list(claims.extract_all(claims_study.db, assistant(api, retries=0)))
    assert all(r.error for r in results)
    assert all(c.error for c in queries.llm_calls(claims_study.db))


def test_rate_limits_and_overload_are_retried_then_answered(api, claims_study) -> None:
    api.script.extend([
        api_error(429, "rate_limit_error", "slow down", **{"retry-after": "0"}),
        api_error(529, "overloaded_error", "Overloaded", **{"retry-after-ms": "10"}),
    ])
    api.default = claim_reply
    result = claims.extract_all(claims_study.db, assistant(api, retries=2))
    first = next(result)
    assert first.error is None and first.answer.data["expected_level"] == 1
    assert len(api.requests) == 3
    assert api.requests[0] == api.requests[2]
    assert [c.error for c in queries.llm_calls(claims_study.db)] == [None]


def test_rate_limited_past_the_retries_is_a_plain_recorded_error(api, claims_study) -> None:
    api.default = lambda body: api_error(429, "rate_limit_error", "Number of requests has exceeded your rate limit",
                                         **{"retry-after": "0"})
    results = list(claims.extract_all(claims_study.db, assistant(api, retries=1)))
    assert len(api.requests) == 6  # two tries per attempt
    assert all(r.error.startswith("rate limited after 1 retries: Number of requests") for r in results)
    calls = queries.llm_calls(claims_study.db)
    assert len(calls) == 3 and all(c.cost_usd is None and c.input_tokens == 0 for c in calls)


def test_a_bad_request_is_not_retried(api, claims_study) -> None:
    api.default = lambda body: api_error(400, "invalid_request_error", "max_tokens: too large")
    results = list(claims.extract_all(claims_study.db, assistant(api, retries=3)))
    assert len(api.requests) == 3
    assert results[0].error == "the API answered HTTP 400: max_tokens: too large"


def test_a_timeout_is_recorded(api, claims_study) -> None:
    api.default = lambda body: Reply(delay=1.5, body={})
    started = time.monotonic()
    results = list(claims.extract_all(claims_study.db, assistant(api, retries=0, timeout=0.3)))
    assert time.monotonic() - started < 4.5
    assert all(r.error == "no answer within 0.3 s (0 retries)" for r in results)


def test_a_rejected_key_turns_assist_off(api, claims_study) -> None:
    api.default = lambda body: api_error(401, "authentication_error", "invalid x-api-key")
    with pytest.raises(AssistUnavailable, match="invalid x-api-key"):
        list(claims.extract_all(claims_study.db, assistant(api)))
    assert len(api.requests) == 1 and queries.llm_calls(claims_study.db)[0].error


def test_without_a_key_nothing_is_sent_and_it_says_so(api, claims_study) -> None:
    api.default = claim_reply
    with pytest.raises(AssistUnavailable, match="ANTHROPIC_API_KEY is not set"):
        list(claims.extract_all(claims_study.db, assistant(api, key=None)))
    assert api.requests == [] and queries.llm_calls(claims_study.db) == []


def test_without_a_network_it_says_so(claims_study) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    helper = Assistant(Settings(model=MODEL, base_url=f"http://127.0.0.1:{port}", timeout_s=1, max_retries=0),
                       api_key="k", reviewer="ana")
    with pytest.raises(AssistUnavailable, match="cannot reach the Anthropic API"):
        list(claims.extract_all(claims_study.db, helper))


def test_an_unpriced_model_records_tokens_and_no_dollars(api, claims_study) -> None:
    api.default = claim_reply
    list(claims.extract_all(claims_study.db, assistant(api, model="claude-unknown-9")))
    total = queries.llm_cost(claims_study.db)
    assert total.unpriced_calls == 3 and total.cost_usd == 0 and total.input_tokens == 3600


def test_prompt_cache_reads_are_priced_as_reads(api, claims_study) -> None:
    api.default = lambda body: tool_answer(body, {"expected_level": None, "success_claimed": False, "sentence": None},
                                           usage={"input_tokens": 300, "output_tokens": 20,
                                                  "cache_read_input_tokens": 900, "cache_creation_input_tokens": 0})
    list(claims.extract_all(claims_study.db, assistant(api)))
    call = queries.llm_calls(claims_study.db)[0]
    assert call.cache_read_tokens == 900
    assert call.cost_usd == pytest.approx((300 * 2.0 + 20 * 10.0 + 900 * 0.1) / 1e6)


# --- briefs on the demo study: a real repository, real logs, real verdicts ------------------------

@pytest.fixture
def demo(tmp_path: Path):
    db = open_study(tmp_path / "demo.db", create=True)
    assert not import_bundle(db, DEMO_BUNDLE, "ana").problems
    verify_study(db.db, "ana", slug="mlp-classifier")
    yield db
    db.close()


def test_brief_sends_diff_log_and_verdicts_and_stays_advisory(api, demo, monkeypatch) -> None:
    db = demo.db
    migration, attempt = briefs.find_attempt(db, "mlp-classifier", 1, "tester")
    inputs = briefs.gather(db, migration, attempt)
    assert "<diff>" in inputs.user and "diff --git" in inputs.user
    assert "Verdicts:" in inputs.user and "L1 runs: fail" in inputs.user
    assert "Verifier's cause: api_misuse" in inputs.user
    assert any("NVIDIA driver" in t for t in inputs.log_lines.values())

    before = (db.execute("SELECT count(*), group_concat(outcome) FROM verdict").fetchone(),
              db.execute("SELECT count(*) FROM failure").fetchone(),
              queries.attempt_summaries(db, migration.id))
    api.default = brief_reply
    result = briefs.ask(db, assistant(api), migration, attempt)
    assert result.suspected_cause == "api_misuse" and not result.cached
    assert result.cause_lines and all("NVIDIA" in text for _, text in result.cause_lines)
    assert result.ignored_lines == (999999,)
    assert result.cost_usd == pytest.approx(USAGE_COST)
    text = briefs.render_text(result)
    assert text.startswith("ADVISORY") and "changes no verdict" in text
    after = (db.execute("SELECT count(*), group_concat(outcome) FROM verdict").fetchone(),
             db.execute("SELECT count(*) FROM failure").fetchone(),
             queries.attempt_summaries(db, migration.id))
    assert before == after

    again = briefs.ask(db, assistant(api), migration, attempt)
    assert again.cached and again.explanation == result.explanation and len(api.requests) == 1
    assert queries.llm_cost(db).calls == 1
    assert queries.latest_llm_call(db, attempt.id, "brief").id == result.call_id


def test_brief_redacts_secrets_in_diff_and_log(api, demo) -> None:
    db = demo.db
    migration, attempt = briefs.find_attempt(db, "mlp-classifier", 1, "tester")
    repo = Path(migration.repo)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    clone = repo.parent / "secret-clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True, env=env)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", attempt.commit], check=True, env=env)
    (clone / "config.py").write_text(f'HF_TOKEN = "{HF}"\nBEARER = "Bearer {SECRET}"\n')
    subprocess.run(["git", "-C", str(clone), "add", "config.py"], check=True, env=env)
    subprocess.run(["git", "-C", str(clone), "commit", "-q", "-m", "secret"], check=True, env=env)
    new = subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], check=True, env=env,
                         capture_output=True, text=True).stdout.strip()
    from dataclasses import replace

    log = f"step 1\nexport ANTHROPIC_API_KEY={SECRET}\nTraceback (most recent call last):\nRuntimeError: boom\n"
    from storage.logs import store_log_bytes

    with db.atomic():
        log_id = store_log_bytes(db, log.encode())
    patched = replace(migration, repo=str(clone))
    secret_attempt = replace(attempt, commit=new, log_id=log_id, claim=f"Done, token {HF}")
    inputs = briefs.gather(db, patched, secret_attempt)
    assert "config.py" in inputs.user
    for secret in (SECRET, HF):
        assert secret not in inputs.user and all(secret not in t for t in inputs.log_lines.values())
    request = briefs.brief_request(assistant(api), inputs)
    assert SECRET not in request.dry_run() and HF not in request.dry_run()
    api.default = brief_reply
    briefs.ask(db, assistant(api), patched, secret_attempt, inputs)
    sent = json.dumps(api.requests[0])
    assert SECRET not in sent and HF not in sent and "[REDACTED:" in sent


def test_a_long_diff_is_trimmed_with_a_note(tmp_path: Path) -> None:
    from conftest import make_repo

    shas = make_repo(tmp_path / "r", [{"a.py": "x = 1\n"}, {"a.py": "x = 2\n" + "y = 3\n" * 5000, "b.py": "z\n"}])
    diff, note = briefs.git_diff(str(tmp_path / "r"), shas[0], shas[1], limit=2000)
    assert len(diff) <= 2100 and "more characters of this file cut" in diff
    assert "2 file(s) changed" in note and "left out for length: a/b.py b/b.py" in note
    assert briefs.git_diff(str(tmp_path / "r"), shas[1], shas[1]) == ("", "same commit as before: no code change")
    assert "diff unavailable" in briefs.git_diff(str(tmp_path / "nope"), shas[0], shas[1])[1]


@pytest.mark.parametrize("data, expected", [
    ({"explanation": "x", "suspected_cause": "gremlins", "cause_lines": [], "next_step": "y"}, "not in the failure taxonomy"),
    ({"explanation": "x", "suspected_cause": "none", "cause_lines": ["3"], "next_step": "y"}, "not a line number"),
    ({"explanation": "", "suspected_cause": "none", "cause_lines": [], "next_step": "y"}, "empty"),
    ({"explanation": "x", "suspected_cause": "none", "cause_lines": []}, "missing next_step"),
])
def test_malformed_briefs_are_recorded_errors(api, demo, data, expected) -> None:
    db = demo.db
    migration, attempt = briefs.find_attempt(db, "mlp-classifier", 2, "tester")
    api.default = lambda body: tool_answer(body, data)
    with pytest.raises(AssistError, match=expected):
        briefs.ask(db, assistant(api), migration, attempt)
    call = queries.llm_calls(db)[-1]
    assert call.purpose == "brief" and expected in call.error and call.response["raw"]["content"]


# --- the command line ----------------------------------------------------------------------------

def workbench(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True, text=True,
                          env={**base, "WORKBENCH_REVIEWER": "ana", **env}, timeout=120)


def test_cli_claims_dry_run_prints_exactly_what_is_sent(api, claims_study) -> None:
    path = str(claims_study.path)
    env = {"ANTHROPIC_BASE_URL": api.url}
    dry = workbench("assist", "claims", path, "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    bodies = [json.loads(line) for line in dry.stdout.splitlines()]
    assert len(bodies) == 3 and "# mlp-xla #1" in dry.stderr and "nothing sent" in dry.stderr
    assert SECRET not in dry.stdout and api.requests == []
    api.default = claim_reply
    real = workbench("assist", "claims", path, env={**env, "ANTHROPIC_API_KEY": "k"})
    assert real.returncode == 0, real.stderr
    assert api.requests == bodies
    assert "mlp-xla #1: L1, success claimed" in real.stdout and "mlp-xla #2: no level" in real.stdout
    assert f"${3 * USAGE_COST:.4f} spent" in real.stdout


def test_cli_without_a_key_says_so_in_one_line(api, claims_study) -> None:
    result = workbench("assist", "claims", str(claims_study.path), env={"ANTHROPIC_BASE_URL": api.url})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "workbench: AI assist is off: ANTHROPIC_API_KEY is not set (the key is read from the environment"
        " only and never stored). Everything else in the workbench works without it; --dry-run shows what"
        " would be sent."
    ]
    assert api.requests == []
    listed = workbench("attempts", str(claims_study.path), "mlp-xla", env={})
    assert listed.returncode == 0


def test_cli_brief_dry_run_then_ask_then_cached(api, demo) -> None:
    path = str(demo.path)
    env = {"ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "k"}
    dry = workbench("assist", "brief", path, "mlp-classifier", "1", "--dry-run", env=env)
    assert dry.returncode == 0, dry.stderr
    body = json.loads(dry.stdout)
    assert api.requests == []
    api.default = brief_reply
    first = workbench("assist", "brief", path, "mlp-classifier", "1", env=env)
    assert first.returncode == 0, first.stderr
    assert api.requests == [body]
    assert first.stdout.startswith("ADVISORY") and "Suspected cause: api_misuse" in first.stdout
    assert f"${USAGE_COST:.4f}" in first.stdout
    second = workbench("assist", "brief", path, "mlp-classifier", "1", "--json", env=env)
    data = json.loads(second.stdout)
    assert data["cached"] and data["advisory"] and len(api.requests) == 1
    again = workbench("assist", "brief", path, "mlp-classifier", "1", "--dry-run", env=env)
    assert "cached: this request would not be sent" in again.stderr
    cost = json.loads(workbench("assist", "cost", path, "--json", env=env).stdout)
    assert cost["calls"] == 1 and cost["cost_usd"] == pytest.approx(USAGE_COST)


def test_cli_review_accepts_and_corrects(api, claims_study) -> None:
    api.default = claim_reply
    path = str(claims_study.path)
    env = {"ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "k"}
    assert workbench("assist", "claims", path, env=env).returncode == 0
    accepted = workbench("assist", "review", path, "mlp-xla", "3", "--accept", env=env)
    assert accepted.stdout.strip() == "mlp-xla #3: expected level L3 (from the model)"
    corrected = workbench("assist", "review", path, "mlp-xla", "3", "--level", "1", "--note", "no TPU yet", env=env)
    assert corrected.stdout.strip() == "mlp-xla #3: expected level L1 (from the reviewer)"
    both = workbench("assist", "review", path, "mlp-xla", "3", "--accept", "--level", "2", env=env)
    assert both.returncode == 2 and "give one of" in both.stderr


def test_every_assist_command_has_help() -> None:
    for args in (["assist"], ["assist", "claims"], ["assist", "brief"], ["assist", "review"], ["assist", "cost"]):
        result = workbench(*args, "--help", env={})
        assert result.returncode == 0 and "Usage:" in result.stdout, args
