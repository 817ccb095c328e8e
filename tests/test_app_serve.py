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
    """`workbench serve` on a free port; a crash or a silent server fails the test (only a missing
    textual-serve skips it)."""
    pytest.importorskip("textual_serve", reason="textual-serve is not installed")
    db = build(small_bundle, tmp_path)
    port = free_port()
    log = tmp_path / "serve.log"
    env = {**os.environ, "WORKBENCH_REVIEWER": "ana", "XDG_CONFIG_HOME": str(tmp_path)}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cli", "serve", str(db), "--port", str(port)],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        page = None
        deadline = time.monotonic() + 30
        while page is None and time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"workbench serve exited with status {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
                    assert response.status == 200
                    page = response.read().decode()
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        if page is None:
            pytest.fail(f"workbench serve did not answer within 30 s: {log.read_text()[-2000:]}")
        yield port, page, log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_serve_answers_on_localhost_with_the_app_page(served) -> None:
    port, page, log = served
    assert "textual.js" in page
    assert f'data-session-websocket-url="ws://127.0.0.1:{port}/ws"' in page
    assert "127.0.0.1" in log.read_text()  # bound to this machine only, unless --host says otherwise


def test_the_served_app_shows_the_study(served) -> None:
    """The page's websocket runs `workbench open DB` and streams the study screen."""
    aiohttp = pytest.importorskip("aiohttp")
    port, _, _ = served

    async def screen_bytes() -> bytes:
        seen = b""
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(f"http://127.0.0.1:{port}/ws?width=100&height=30") as ws:
                deadline = asyncio.get_running_loop().time() + 30
                while b"mlp-xla" not in seen and asyncio.get_running_loop().time() < deadline:
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
                await ws.send_json(["stdin", "q"])
        return seen

    seen = asyncio.run(screen_bytes())
    assert b"mlp-xla" in seen and b"cnn-xla" in seen


def test_serve_refuses_a_missing_database(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "cli", "serve", str(tmp_path / "none.db")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "none.db" in done.stderr


# --------------------------------------------------------------------------- beyond this machine

URL = re.compile(r"(?:https?|wss?)://[^\s\"'<>)]+")


def test_the_page_loads_nothing_from_outside_the_machine(served) -> None:
    """textual-serve's template fetches a web font from the internet: the served page must not."""
    port, page, _ = served
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
