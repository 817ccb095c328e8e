"""Every call to the Anthropic API goes through `Assistant.call`.

One call: look the exact request up in the study's `llm_call` table by its SHA-256 (a stored
answer is returned at no cost and nothing new is recorded); otherwise send it with the official
SDK (the key from `ANTHROPIC_API_KEY` only, never stored; retries with backoff on rate limits,
overload and connection errors; a timeout), read the forced tool call's input, validate it, and
record the call with its tokens and dollars, answered or failed, before returning.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from domain.errors import WorkbenchError
from storage.sqlite import Database
from workbench.assist.prices import Price, cost, load_prices, price_for

DEFAULT_MODEL = "claude-sonnet-5-5"
"""Override with `--model` or `WORKBENCH_ASSIST_MODEL`."""
KEY_VARIABLE = "ANTHROPIC_API_KEY"


class AssistError(WorkbenchError):
    """A call that produced no usable answer; it has been recorded in `llm_call`."""


class AssistUnavailable(AssistError):
    """No key (or no network): the assist features are off; everything else works."""


class MalformedOutput(ValueError):
    """The model answered, but not in the shape asked for."""


NO_KEY = (
    f"AI assist is off: {KEY_VARIABLE} is not set (the key is read from the environment only and"
    " never stored). Everything else in the workbench works without it; --dry-run shows what"
    " would be sent."
)


@dataclass(frozen=True, slots=True)
class Settings:
    model: str = DEFAULT_MODEL
    base_url: str | None = None
    """None: the SDK's default (or `ANTHROPIC_BASE_URL`)."""
    timeout_s: float = 60.0
    """Per request; a timed-out request is retried like a connection error."""
    max_retries: int = 3
    """On 408, 409, 429, 5xx and connection errors, with exponential backoff and `retry-after`."""
    max_tokens: int = 1024
    prices: dict[str, Price] = field(default_factory=load_prices)

    @classmethod
    def from_env(cls, model: str | None = None) -> Settings:
        """`WORKBENCH_ASSIST_MODEL`, `_TIMEOUT`, `_RETRIES`, `_PRICES`; `ANTHROPIC_BASE_URL`."""
        env = os.environ
        try:
            return cls(
                model=model or env.get("WORKBENCH_ASSIST_MODEL") or DEFAULT_MODEL,
                base_url=env.get("ANTHROPIC_BASE_URL") or None,
                timeout_s=float(env.get("WORKBENCH_ASSIST_TIMEOUT", 60.0)),
                max_retries=int(env.get("WORKBENCH_ASSIST_RETRIES", 3)),
                prices=load_prices(),
            )
        except ValueError as exc:
            raise WorkbenchError(f"assist settings: {exc}") from None

    @property
    def price(self) -> Price | None:
        return price_for(self.model, self.prices)


@dataclass(frozen=True, slots=True)
class Request:
    """One Messages API request with a forced tool call, exactly as it will be sent."""

    purpose: str
    model: str
    system: str
    """The fixed instructions: marked for prompt caching."""
    tool: dict[str, Any]
    """name, description, input_schema."""
    user: str
    """The attempt's material, already redacted."""
    max_tokens: int = 1024

    def body(self) -> dict[str, Any]:
        """The keyword arguments of `messages.create`, which the SDK sends as the JSON body."""
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": [{"type": "text", "text": self.system, "cache_control": {"type": "ephemeral"}}],
            "tools": [self.tool],
            "tool_choice": {"type": "tool", "name": self.tool["name"]},
            "messages": [{"role": "user", "content": self.user}],
        }

    def input_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.body(), sort_keys=True).encode()).hexdigest()

    def dry_run(self) -> str:
        """What would be sent, as the JSON body of the request."""
        return json.dumps(self.body(), indent=2, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Answer:
    data: dict[str, Any]
    """The validated tool input."""
    call_id: int
    model: str
    cached: bool
    """True when it came from the database: nothing was sent and nothing was spent."""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = 0.0


def _usage(message: Any) -> dict[str, int]:
    usage = getattr(message, "usage", None)
    get = (lambda name: getattr(usage, name, None) or 0) if usage is not None else (lambda name: 0)
    return {
        "input_tokens": int(get("input_tokens")),
        "output_tokens": int(get("output_tokens")),
        "cache_read_tokens": int(get("cache_read_input_tokens")),
        "cache_write_tokens": int(get("cache_creation_input_tokens")),
    }


def tool_input(message: Any, tool_name: str) -> dict[str, Any]:
    """The input of the forced tool call, or MalformedOutput saying what came back instead."""
    blocks = list(getattr(message, "content", None) or [])
    for block in blocks:
        if getattr(block, "type", None) == "tool_use" and getattr(block, "name", None) == tool_name:
            data = getattr(block, "input", None)
            if not isinstance(data, dict):
                raise MalformedOutput(f"the {tool_name} call's input is not an object")
            return data
    kinds = ", ".join(str(getattr(b, "type", "?")) for b in blocks) or "nothing"
    stop = getattr(message, "stop_reason", None)
    raise MalformedOutput(f"no {tool_name} call in the answer (got {kinds}; stop reason {stop})")


class Assistant:
    """Sends requests, caches and records them. One per command or worker thread."""

    def __init__(self, settings: Settings, *, api_key: str | None = None, reviewer: str = "unknown") -> None:
        self.settings = settings
        self.api_key = api_key if api_key is not None else os.environ.get(KEY_VARIABLE) or None
        self.reviewer = reviewer
        self._client: Any = None

    @property
    def available(self) -> bool:
        return bool(self.api_key)

    def request(self, purpose: str, system: str, tool: dict[str, Any], user: str) -> Request:
        return Request(purpose, self.settings.model, system, tool, user, self.settings.max_tokens)

    def _sdk(self) -> Any:
        if self._client is None:
            import anthropic

            # api_key is passed explicitly, so the SDK reads no other credential source.
            self._client = anthropic.Anthropic(
                api_key=self.api_key,
                base_url=self.settings.base_url,
                timeout=self.settings.timeout_s,
                max_retries=self.settings.max_retries,
            )
        return self._client

    def cached(self, db: Database, request: Request) -> Answer | None:
        from storage import queries

        hit = queries.cached_llm_call(db, request.input_hash())
        if hit is None:
            return None
        return Answer(hit.response or {}, hit.id, hit.model, True)

    def call(
        self,
        db: Database,
        request: Request,
        validate: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        migration_id: int | None = None,
        attempt_id: int | None = None,
    ) -> Answer:
        """The validated answer to `request`, from the cache or the API; AssistError if none."""
        from storage import records

        if (hit := self.cached(db, request)) is not None:
            return hit
        if not self.available:
            raise AssistUnavailable(NO_KEY)
        import anthropic

        body = request.body()
        record = dict(purpose=request.purpose, model=request.model, input_hash=request.input_hash(),
                      request=body, reviewer=self.reviewer, migration_id=migration_id,
                      attempt_id=attempt_id)
        started = time.monotonic()
        try:
            message = self._sdk().messages.create(**body)
        except anthropic.APIStatusError as exc:
            error = f"the API answered HTTP {exc.status_code}: {_api_message(exc)}"
            if exc.status_code == 429:
                error = f"rate limited after {self.settings.max_retries} retries: {_api_message(exc)}"
            records.record_llm_call(db, **record, error=error, duration_s=time.monotonic() - started)
            if exc.status_code in (401, 403):
                raise AssistUnavailable(f"AI assist is off: {error} (check {KEY_VARIABLE})") from None
            raise AssistError(error) from None
        except anthropic.APITimeoutError:
            error = (f"no answer within {self.settings.timeout_s:g} s"
                     f" ({self.settings.max_retries} retries)")
            records.record_llm_call(db, **record, error=error, duration_s=time.monotonic() - started)
            raise AssistError(error) from None
        except anthropic.APIConnectionError as exc:
            error = f"cannot reach the Anthropic API ({exc.__cause__ or exc}); AI assist needs a network"
            records.record_llm_call(db, **record, error=error, duration_s=time.monotonic() - started)
            raise AssistUnavailable(error) from None
        except anthropic.AnthropicError as exc:
            error = f"the API call failed: {type(exc).__name__}: {exc}"
            records.record_llm_call(db, **record, error=error, duration_s=time.monotonic() - started)
            raise AssistError(error) from None
        except ValueError as exc:  # a 200 whose body is not JSON: the SDK's decoder gives up
            error = f"malformed output: the answer is not a Messages API response ({type(exc).__name__}: {exc})"
            records.record_llm_call(db, **record, error=error, duration_s=time.monotonic() - started)
            raise AssistError(error) from None
        duration = time.monotonic() - started
        usage = _usage(message)
        dollars = cost(self.settings.price, **usage)
        try:
            data = validate(tool_input(message, request.tool["name"]))
        except MalformedOutput as exc:
            raw = _dump(message)
            records.record_llm_call(db, **record, **usage, cost_usd=dollars, response={"raw": raw},
                                    error=f"malformed output: {exc}", duration_s=duration)
            raise AssistError(f"the model's answer was malformed: {exc}") from None
        call_id = records.record_llm_call(db, **record, **usage, cost_usd=dollars, response=data,
                                          duration_s=duration)
        return Answer(data, call_id, request.model, False, cost_usd=dollars, **usage)


def _api_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return str(getattr(exc, "message", "") or exc)


def _dump(message: Any) -> Any:
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return json.loads(message.model_dump_json())
    except Exception:  # noqa: BLE001 - a record of what came back, best effort
        return repr(message)
