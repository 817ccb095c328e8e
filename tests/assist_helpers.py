"""The local stand-in for Anthropic's Messages API and the scripted answers the assist tests use.

`MessagesAPI` is an HTTP server on 127.0.0.1 that answers POST /v1/messages as Anthropic's API
does (JSON messages with tool_use blocks and usage; error bodies; retry-after headers), scripted
per test. The `api` and `claims_study` fixtures that use it live in conftest.py.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from workbench.assist.client import Assistant, Settings

MODEL = "claude-sonnet-5-5"
USAGE = {"input_tokens": 1200, "output_tokens": 80, "cache_creation_input_tokens": 900,
         "cache_read_input_tokens": 0}
USAGE_COST = (1200 * 2.0 + 80 * 10.0 + 900 * 2.5) / 1e6
SECRET = "sk-ant-api03-" + "Zq9Xw8Vu7Ts6Rp5On4Ml" * 3
HF = "hf_" + "a1B2c3D4e5F6g7H8i9J0" * 2


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    """A dict (sent as JSON) or bytes (sent as they are)."""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def tool_answer(body: dict[str, Any], data: Any, usage: dict[str, int] | None = None,
                content: list[dict[str, Any]] | None = None) -> Reply:
    name = body["tool_choice"]["name"]
    return Reply(body={
        "id": "msg_test", "type": "message", "role": "assistant", "model": body["model"],
        "content": content if content is not None else [
            {"type": "tool_use", "id": "toolu_1", "name": name, "input": data}],
        "stop_reason": "tool_use", "stop_sequence": None, "usage": usage or USAGE,
    })


def api_error(status: int, kind: str, message: str, **headers: str) -> Reply:
    return Reply(status, {"type": "error", "error": {"type": kind, "message": message}}, headers)


class MessagesAPI:
    """A local stand-in for the Messages API: records every request, answers from a script."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.script: deque[Reply] = deque()
        self.default: Callable[[dict[str, Any]], Reply] = lambda body: api_error(500, "api_error", "no script")
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length))
                api.requests.append(body)
                api.headers.append({k.lower(): v for k, v in self.headers.items()})
                if self.path != "/v1/messages":
                    reply = api_error(404, "not_found_error", self.path)
                else:
                    reply = api.script.popleft() if api.script else api.default(body)
                if reply.delay:
                    time.sleep(reply.delay)
                data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.send_header("request-id", "req_test")
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def assistant(api: MessagesAPI, *, key: str | None = "test-key", retries: int = 2, timeout: float = 5.0,
              model: str = MODEL) -> Assistant:
    return Assistant(Settings(model=model, base_url=api.url, timeout_s=timeout, max_retries=retries),
                     api_key=key, reviewer="ana")


CLAIMS = {
    1: "All done. The XLA port is complete and I think we are good. My key was ANTHROPIC_API_KEY="
       + SECRET + " by the way.",
    2: "Hmm, let me look at the logs again before I say anything.",
    3: "**Training finished** on the TPU pod with loss 0.31, which lines up with the GPU run.",
}


def claim_reply(body: dict[str, Any]) -> Reply:
    message = body["messages"][0]["content"]
    if "All done" in message:
        return tool_answer(body, {"expected_level": 1, "success_claimed": True,
                                  "sentence": "The XLA port is complete and I think we are good."})
    if "Training finished" in message:
        return tool_answer(body, {"expected_level": 3, "success_claimed": True,
                                  "sentence": "Training finished on the TPU pod with loss 0.31, which lines up"
                                              " with the GPU run."})
    return tool_answer(body, {"expected_level": None, "success_claimed": False, "sentence": None})


def brief_reply(body: dict[str, Any]) -> Reply:
    text = body["messages"][0]["content"]
    numbered = [line.split("|", 1) for line in text.splitlines() if "|" in line]
    cited = [int(n) for n, rest in numbered if n.strip().isdigit() and "NVIDIA" in rest][:2]
    return tool_answer(body, {
        "explanation": "The port moved the model to the XLA device but a torch.cuda call survived.",
        "suspected_cause": "api_misuse",
        "cause_lines": cited + [999999],
        "next_step": "Replace torch.cuda.synchronize() with torch_xla.sync().",
    })
