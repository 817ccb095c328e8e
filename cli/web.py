"""`workbench serve`'s web server: textual-serve with a token guard and a page that stays offline.

textual-serve's page fetches its font from fonts.googleapis.com (TPU VMs are often offline) and
anyone who reaches the port gets the app, which can launch re-runs that execute commands; on
loopback too, any web page open in the reviewer's browser can reach 127.0.0.1 (a cross-site
websocket, or a DNS name rebound to 127.0.0.1). Here the page is textual-serve's own template
without the web-font link (the font it ships is served from /static instead); every request must
name the served address in its Host header (a rebound name does not) and, when it carries an
Origin (a browser's websocket always does), come from that same address; and every page,
websocket and download needs the token made at each start: as `?token=` (which sets an HttpOnly,
SameSite=Strict cookie, so the page's websocket carries it) or typed into the page that asks.
textual-serve (and with it Rich) loads only when a server is made.
"""

from __future__ import annotations

import atexit
import hmac
import html
import ipaddress
import re
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

COOKIE = "workbench_token_{port}"
"""The cookie's name: cookies ignore ports, so two servers on one machine each keep their own."""
_WEB_FONT = re.compile(r"<link\b[^>]*https://fonts\.googleapis\.com[^>]*>")
_SVG_NS = ' xmlns="http://www.w3.org/2000/svg"'
_FONT_FACE = (
    '<style>@font-face { font-family: "Roboto Mono"; '
    'src: url("{{ config.static.url }}fonts/RobotoMono-VariableFont_wght.ttf"); }</style>\n  </head>'
)
_HOST = re.compile(r"(?:(?P<name>[A-Za-z0-9.\-]+)|\[(?P<address>[0-9A-Fa-f:.]+)\])(?::\d{1,5})?")
"""A Host header fit to build the page's URLs from (a name or address and a port)."""
ASK = """<!DOCTYPE html>
<html><head><title>workbench</title></head>
<body style="background:#0c181f;color:#eee;font-family:monospace">
<form method="get" action="/"><p>{message}</p>
<label>Token (printed by <code>workbench serve</code>): <input name="token" type="password" autofocus></label>
<button type="submit">Open</button></form></body></html>
"""


def is_loopback(host: str) -> bool:
    """True when every address HOST names is this machine's loopback (127.0.0.0/8, ::1)."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback for info in infos)


def served_names(host: str, remote: bool) -> frozenset[str]:
    """The host names a request's Host header may give, lower case: HOST as given, `localhost`
    and, when serving beyond loopback, this machine's own names. An IP address is always taken
    (a DNS-rebinding page reaches the server under a name it controls, never as an address)."""
    names = {host.lower().strip("[]"), "localhost"}
    if remote:
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(names)


def netloc(host: str, port: int) -> str:
    """HOST:PORT as a URL writes it (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _names_served(header: str, names: frozenset[str]) -> bool:
    """Whether a Host header names the served address: one of NAMES or an IP address."""
    found = _HOST.fullmatch(header)
    if found is None:
        return False
    name = (found["name"] or found["address"]).lower()
    if name in names:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def offline_templates() -> Path:
    """textual-serve's page template without the web-font link, in a fresh folder (absolute path)."""
    import textual_serve

    source = (Path(textual_serve.__file__).parent / "templates" / "app_index.html").read_text()
    page = _WEB_FONT.sub("", source).replace(_SVG_NS, "").replace("</head>", _FONT_FACE, 1)
    if re.search(r"https?://", page):  # a new textual-serve links something else: refuse, not leak
        from domain.errors import WorkbenchError

        raise WorkbenchError("textual-serve's page links outside this machine; this workbench cannot strip it")
    folder = Path(tempfile.mkdtemp(prefix="workbench-serve-"))
    atexit.register(shutil.rmtree, folder, True)
    (folder / "app_index.html").write_text(page)
    return folder


def make_server(command: str, host: str, port: int, title: str, token: str, names: frozenset[str]) -> Any:
    """A textual-serve Server for COMMAND whose page, websocket and downloads need TOKEN, reached
    under one of NAMES (served_names) or an IP address, from a page of that same address."""
    from aiohttp import web
    from textual_serve.server import Server

    class GuardedServer(Server):
        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(_guard(token, names, COOKIE.format(port=port)))
            return app

        async def handle_index(self, request: web.Request) -> Any:
            self.public_url = f"http://{request.host}"  # as the browser reached it (checked), not 0.0.0.0
            return await super().handle_index(request)

    return GuardedServer(command, host=host, port=port, title=title, templates_path=offline_templates())


def _guard(token: str, names: frozenset[str], cookie: str) -> Any:
    """aiohttp middleware: every request names the served address (Host) and, with an Origin, comes
    from it; the page, the websocket and downloads need the token, static files do not."""
    from aiohttp import web

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        host = request.headers.get("Host", "")
        if not _names_served(host, names):
            return web.Response(status=403, text="workbench: this server is not reached under that name (Host)\n")
        origin = request.headers.get("Origin")
        if origin is not None and origin.lower() not in (f"http://{host}".lower(), f"https://{host}".lower()):
            return web.Response(status=403, text="workbench: requests from other sites are refused (Origin)\n")
        if request.path.startswith("/static/"):
            return await handler(request)
        given = request.query.get("token") or request.cookies.get(cookie) or ""
        if not hmac.compare_digest(given.encode(), token.encode()):
            if request.path == "/":
                message = "Wrong token." if "token" in request.query else "This workbench asks for its token."
                return web.Response(status=401, text=ASK.format(message=html.escape(message)),
                                    content_type="text/html")
            return web.Response(status=403, text="workbench: token required\n")
        response = await handler(request)
        if "token" in request.query and not response.prepared:
            response.set_cookie(cookie, token, httponly=True, samesite="Strict")
        return response

    return guard
