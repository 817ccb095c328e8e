"""The brief in the app: `b` on an attempt, the no-key message, ask on enter, the stored answer,
claim review keys, and model text shown literally. The API is the local stand-in of test_assist."""

from __future__ import annotations

from pathlib import Path

import pytest
from assist_helpers import USAGE_COST, brief_reply, claim_reply
from assist_helpers import assistant as make_assistant
from test_app import EVIL, EVIL_SHOWN, settle

from screens.app import WorkbenchApp
from screens.attempt import AttemptScreen
from screens.brief import BriefScreen
from storage import queries
from storage.database import open_study
from workbench import config
from workbench.assist import claims
from workbench.bundle import import_bundle
from workbench.verify import verify_study


@pytest.fixture
def demo_db(tmp_path: Path) -> Path:
    path = tmp_path / "demo.db"
    db = open_study(path, create=True)
    try:
        assert import_bundle(db, config.DEMO_BUNDLE, "ana").problems == []
        verify_study(db.db, "ana", slug="mlp-classifier")
    finally:
        db.close()
    return path


def body_text(app: WorkbenchApp, selector: str = "#brief-body") -> str:
    return app.screen.query_one(selector).render().plain


async def open_brief(pilot) -> BriefScreen:
    """mlp-classifier (second row), attempt #1 (after the pinned reference run), then `b`."""
    await settle(pilot)
    await pilot.press("j", "enter")
    await settle(pilot)
    await pilot.press("j", "enter")
    await settle(pilot)
    assert isinstance(pilot.app.screen, AttemptScreen)
    assert pilot.app.screen.summary.attempt.seq == 1
    await pilot.press("b")
    await settle(pilot)
    assert isinstance(pilot.app.screen, BriefScreen)
    return pilot.app.screen


def counts(path: Path) -> tuple:
    db = open_study(path)
    try:
        return (db.db.execute("SELECT count(*), group_concat(outcome) FROM verdict").fetchone(),
                db.db.execute("SELECT count(*) FROM failure").fetchone(),
                db.db.execute("SELECT count(*) FROM llm_call").fetchone())
    finally:
        db.close()


async def test_without_a_key_the_brief_says_so_and_sends_nothing(demo_db: Path, api, monkeypatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_brief(pilot)
        assert "ANTHROPIC_API_KEY is not set" in body_text(app)
        assert "Advisory" in body_text(app, "#brief-label")
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, AttemptScreen)
    assert api.requests == []


async def test_enter_asks_once_then_the_stored_brief_opens_at_no_cost(demo_db: Path, api, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)

    def reply(body):
        answer = brief_reply(body)
        answer.body["content"][0]["input"]["explanation"] = "A torch.cuda call survived. " + EVIL
        return answer

    api.default = reply
    before = counts(demo_db)
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_brief(pilot)
        assert "No brief for this attempt yet" in body_text(app) and api.requests == []
        await pilot.press("enter")
        await settle(pilot)
        shown = body_text(app)
        assert "A torch.cuda call survived." in shown and "Suspected cause: api_misuse" in shown
        assert "NVIDIA" in shown and f"${USAGE_COST:.4f}" in shown
        assert all(evil in shown for evil in EVIL_SHOWN)  # model text is never markup
        assert len(api.requests) == 1
        await pilot.press("escape", "b")
        await settle(pilot)
        assert "A torch.cuda call survived." in body_text(app) and "no new cost" in body_text(app)
        assert len(api.requests) == 1
    after = counts(demo_db)
    assert after[:2] == before[:2]  # advisory: no verdict or failure changed
    assert after[2][0] == before[2][0] + 1


async def test_an_api_error_is_one_plain_line(demo_db: Path, api, monkeypatch) -> None:
    from assist_helpers import api_error

    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
    monkeypatch.setenv("WORKBENCH_ASSIST_RETRIES", "0")
    api.default = lambda body: api_error(529, "overloaded_error", "Overloaded [/]")
    app = WorkbenchApp(demo_db)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_brief(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert "the API answered HTTP 529: Overloaded [/]" in body_text(app)


async def test_claim_keys_accept_and_correct_the_model_extraction(claims_study, api, monkeypatch) -> None:
    api.default = claim_reply
    list(claims.extract_all(claims_study.db, make_assistant(api)))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    migration = queries.get_migration(claims_study.db, "mlp-xla")
    attempt = next(s.attempt for s in queries.attempt_summaries(claims_study.db, migration.id) if s.attempt.seq == 3)
    app = WorkbenchApp(claims_study.path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await app.push_screen(BriefScreen(migration, attempt))
        await settle(pilot)
        claim = body_text(app, "#brief-claim")
        assert "Read by claude-sonnet-5-5: L3, success claimed" in claim
        assert "no level, as reports count it (neither the rules nor a model read it)" in claim
        await pilot.press("a")
        await settle(pilot)
        assert "L3, as reports count it (the model's reading, accepted)" in body_text(app, "#brief-claim")
        await pilot.press("1")
        await settle(pilot)
        assert "L1, as reports count it (your correction)" in body_text(app, "#brief-claim")
        await pilot.press("0")
        await settle(pilot)
        assert "no level, as reports count it (your correction)" in body_text(app, "#brief-claim")
    assert [r.action for r in queries.claim_reviews(claims_study.db, attempt.id)] == ["accept", "correct", "correct"]
