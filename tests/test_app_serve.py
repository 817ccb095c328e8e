"""`workbench serve`: the app in a browser through textual-serve, started in a subprocess."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import NamedTuple

import pytest
from conftest import BundleBuilder
from test_app import build

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(small_bundle: BundleBuilder, tmp_path: Path):
    """`workbench serve` on a free port, and its page fetched with the token URL it printed; a crash
    or a silent server fails the test (only a missing textual-serve skips it)."""
    pytest.importorskip("textual_serve", reason="textual-serve is not installed")
    db = build(small_bundle, tmp_path)
    port = free_port()
    log = tmp_path / "serve.log"
    env = {**os.environ, "WORKBENCH_REVIEWER": "ana", "XDG_CONFIG_HOME": str(tmp_path)}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cli", "serve", str(db), "--port", str(port)],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while "token=" not in log.read_text() and time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"workbench serve exited with status {proc.returncode}: {log.read_text()[-2000:]}")
            time.sleep(0.1)
        printed = re.search(r"http://127\.0\.0\.1:\d+/\?token=([A-Za-z0-9_-]+)", log.read_text())
        if printed is None:
            pytest.fail(f"workbench serve printed no token URL within 30 s: {log.read_text()[-2000:]}")
        status, page = _get(printed.group(0), deadline)
        assert status == 200, page
        yield Served(port, page, log, printed.group(1))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Served(NamedTuple):
    port: int
    page: str
    log: Path
    token: str


def test_serve_answers_on_localhost_with_the_app_page(served) -> None:
    port, page, log, _ = served
    assert "textual.js" in page
    assert f'data-session-websocket-url="ws://127.0.0.1:{port}/ws"' in page
    assert "127.0.0.1" in log.read_text()  # bound to this machine only, unless --host says otherwise


def test_the_served_app_shows_the_study(served) -> None:
    """The page's websocket runs `workbench open DB` and streams the study screen."""
    seen = asyncio.run(_screen_bytes(served, until=b"mlp-xla"))
    assert b"mlp-xla" in seen and b"cnn-xla" in seen


async def _screen_bytes(served: Served, until: bytes, keys: tuple[object, ...] = (), then: bytes = b"") -> bytes:
    """What the served app streams to a browser that opened the token URL (its cookie carries
    the websocket), until UNTIL shows; then each of KEYS is sent (a string as typed, a list as a
    message of textual.js) and the bytes read until THEN shows."""
    aiohttp = pytest.importorskip("aiohttp")
    base = f"http://127.0.0.1:{served.port}"
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        async with session.get(f"{base}/?token={served.token}") as response:
            assert response.status == 200
        async with session.ws_connect(f"{base}/ws?width=100&height=30", origin=base) as ws:
            seen = await _read_until(ws, until)
            if keys:
                for key in keys:
                    await ws.send_json(["stdin", key] if isinstance(key, str) else key)
                seen = await _read_until(ws, then)
            await ws.send_json(["stdin", "q"])
    return seen


async def _read_until(ws, marker: bytes) -> bytes:
    aiohttp = pytest.importorskip("aiohttp")
    seen = b""
    deadline = asyncio.get_running_loop().time() + 30
    while marker not in seen and asyncio.get_running_loop().time() < deadline:
        try:
            message = await ws.receive(timeout=5)
        except asyncio.TimeoutError:
            continue
        if message.type == aiohttp.WSMsgType.BINARY:
            seen += message.data
        elif message.type == aiohttp.WSMsgType.TEXT:
            seen += message.data.encode()
        elif message.type in (aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.ERROR):
            break
    return seen


def test_the_served_app_starts_with_the_first_list_focused(served) -> None:
    """textual's web driver starts the app blurred (the browser's terminal has no focus yet), which
    used to leave nothing focused once the browser gave focus back: Enter opened nothing until
    Tab. The browser's focus message, then Enter, opens the first migration."""
    seen = asyncio.run(_screen_bytes(served, until=b"cnn-xla", keys=(["focus"], "\r"), then=b"Next failure"))
    assert b"Next failure" in seen  # the migration screen's footer


def test_serve_refuses_a_missing_database(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "cli", "serve", str(tmp_path / "none.db")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "none.db" in done.stderr


# --------------------------------------------------------------------------- beyond this machine

URL = re.compile(r"(?:https?|wss?)://[^\s\"'<>)]+")


def test_the_page_loads_nothing_from_outside_the_machine(served) -> None:
    """textual-serve's template fetches a web font from the internet: the served page must not."""
    port, page, _, _ = served
    assert "googleapis" not in page and "RobotoMono" in page  # the font it ships, from /static
    outside = [u for u in URL.findall(page) if not u.startswith((f"http://127.0.0.1:{port}/", f"ws://127.0.0.1:{port}/"))]
    assert outside == []
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/static/fonts/RobotoMono-VariableFont_wght.ttf",
                                timeout=5) as font:
        assert font.status == 200


def test_a_remote_bind_without_allow_remote_is_refused(small_bundle: BundleBuilder, tmp_path: Path) -> None:
    pytest.importorskip("textual_serve", reason="textual-serve is not installed")
    db = build(small_bundle, tmp_path)
    done = subprocess.run([sys.executable, "-m", "cli", "serve", str(db), "--host", "0.0.0.0",
                           "--port", str(free_port())], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "--allow-remote" in done.stderr


def test_a_remote_bind_needs_the_token_for_the_page_and_the_websocket(small_bundle: BundleBuilder,
                                                                       tmp_path: Path) -> None:
    pytest.importorskip("textual_serve", reason="textual-serve is not installed")
    db = build(small_bundle, tmp_path)
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cli", "serve", str(db), "--host", "0.0.0.0",
                                 "--port", str(port), "--allow-remote"], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while "token=" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.1)
        token = re.search(r"\?token=([A-Za-z0-9_-]+)", log.read_text()).group(1)
        base = f"http://127.0.0.1:{port}"
        status, page = _get(f"{base}/", deadline)
        assert status == 401 and 'name="token"' in page and "textual.js" not in page  # the page asks
        assert _get(f"{base}/?token=wrong", deadline)[0] == 401
        assert _get(f"{base}/ws", deadline)[0] == 403
        status, page = _get(f"{base}/?token={token}", deadline)
        assert status == 200 and "textual.js" in page and "googleapis" not in page
        assert f'data-session-websocket-url="ws://127.0.0.1:{port}/ws"' in page  # as reached, not 0.0.0.0
        assert asyncio.run(_websocket_opens(base, token))  # the cookie the page set lets its websocket in
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def _websocket_opens(base: str, token: str) -> bool:
    aiohttp = pytest.importorskip("aiohttp")
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        async with session.get(f"{base}/?token={token}") as response:
            assert response.status == 200
        async with session.ws_connect(f"{base}/ws?width=80&height=24") as ws:
            await ws.send_json(["stdin", "q"])
            return not ws.closed


def _get(url: str, deadline: float) -> tuple[int, str]:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# --------------------------------------------------------------------------- other web pages, on loopback

def _request(port: int, path: str, headers: dict[str, str], cookie: str | None = None) -> int:
    """The status a raw request to the server gets, its headers sent as given (Host included)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        sent = dict(headers)
        if cookie is not None:
            sent["Cookie"] = f"workbench_token_{port}={cookie}"
        conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
        for name, value in sent.items():
            conn.putheader(name, value)
        conn.endheaders()
        return conn.getresponse().status
    finally:
        conn.close()


UPGRADE = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
           "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}


def test_loopback_needs_the_token_printed_at_start(served) -> None:
    """Any page in the browser can reach 127.0.0.1: without the token, no page and no websocket."""
    port, _, _, token = served
    here = {"Host": f"127.0.0.1:{port}"}
    assert _request(port, "/", here) == 401  # the page that asks for the token
    assert _request(port, "/?token=wrong", here) == 401
    assert _request(port, "/ws", {**here, **UPGRADE, "Origin": f"http://127.0.0.1:{port}"}) == 403
    assert _request(port, "/ws", {**here, **UPGRADE, "Origin": f"http://127.0.0.1:{port}"}, cookie="x" + token) == 403
    assert _request(port, "/ws", {**here, **UPGRADE, "Origin": f"http://127.0.0.1:{port}"}, cookie=token) == 101


def test_a_websocket_from_another_site_is_refused(served) -> None:
    """A page of another site opens a websocket to 127.0.0.1 (its browser sends the page's Origin);
    even with the cookie, it is refused; another port on this machine is another site too."""
    port, _, _, token = served
    here = {"Host": f"127.0.0.1:{port}", **UPGRADE}
    for origin in ("https://evil.example", "null", f"http://127.0.0.1:{port + 1}", f"http://localhost:{port}"):
        assert _request(port, "/ws", {**here, "Origin": origin}, cookie=token) == 403, origin
        assert _request(port, f"/ws?token={token}", {**here, "Origin": origin}) == 403, origin


def test_a_rebound_host_name_is_refused(served) -> None:
    """DNS rebinding: a page at evil.example whose name now resolves to 127.0.0.1 is same-origin
    with it for the browser; its requests say `Host: evil.example`, and get nothing."""
    port, _, _, token = served
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}", ""):
        assert _request(port, "/", {"Host": host}) == 403, host
        assert _request(port, f"/?token={token}", {"Host": host}) == 403, host
        assert _request(port, "/static/fonts/RobotoMono-VariableFont_wght.ttf", {"Host": host}) == 403, host
        assert _request(port, "/ws", {"Host": host, "Origin": f"http://{host}", **UPGRADE}, cookie=token) == 403
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):  # the names this server answers to
        assert _request(port, f"/?token={token}", {"Host": host}) == 200, host
        assert _request(port, "/ws", {"Host": host, "Origin": f"http://{host}", **UPGRADE}, cookie=token) == 101


def test_the_token_url_sets_a_strict_http_only_cookie(served) -> None:
    import http.client

    port, _, _, token = served
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", f"/?token={token}")
        response = conn.getresponse()
        cookie = response.getheader("Set-Cookie") or ""
    finally:
        conn.close()
    assert cookie.startswith(f"workbench_token_{port}={token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
