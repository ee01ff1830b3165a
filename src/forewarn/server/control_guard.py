"""The control API's guard: only its owner may drive the platform.

An ASGI middleware around the whole control app, so every route, present and future, is
covered. It refuses, in order:

- a ``Host`` that is not the address the server was asked to listen on (DNS rebinding: a
  page on another name whose DNS later points at 127.0.0.1);
- a cross-origin write: an ``Origin`` other than the control API's own, or ``Sec-Fetch-Site``
  naming another site, on any method that changes state; and a write whose body is not JSON
  (the form encodings a page may send without asking first);
- a call without the token, as ``Authorization: Bearer <token>`` or the ``forewarn_token``
  cookie (but the GET of an Event Grid subscription's validation URL, which carries a secret of
  its own). The Azure Resource Manager routes (Resource Graph, the Maintenance provider) take
  it as their bearer credential, where Azure takes a Microsoft Entra token. Opening
  ``/?token=<token>`` (the link ``serve`` prints) sets that cookie (HttpOnly,
  SameSite=Strict) for the browser and redirects to ``/``.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

__all__ = ["COOKIE", "VALIDATION_PATH", "ControlGuard"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "forewarn_token"
#: The one route reached without the token (it carries a secret of its own).
VALIDATION_PATH = "/api/v1/eventgrid/validate"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_SAME_SITE = frozenset({"same-origin", "none"})
_LANDING = (
    b"<!doctype html><meta charset=utf-8><title>forewarn</title>"
    b"<p>This is the control API of <code>forewarn serve</code>. Open the link it printed "
    b"when it started (<code>http://.../?token=...</code>) to use it from this browser.</p>"
)


class ControlGuard:
    """Wraps the control ``app``; ``hosts`` are the ``Host`` values accepted (None: any)."""

    def __init__(self, app: App, *, token: str, hosts: Iterable[str] | None) -> None:
        self.app = app
        self._token = token.encode()
        self._hosts = None if hosts is None else frozenset(h.lower() for h in hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "").lower()
        if self._hosts is not None and host not in self._hosts:
            await _json(send, 421, f"unexpected Host {host!r}: use the address serve printed")
            return
        method = scope["method"]
        if method not in _SAFE_METHODS:
            refusal = _cross_site_refusal(headers, host)
            if refusal is not None:
                await _json(send, 403, refusal)
                return
        if method == "GET" and scope["path"] == "/" and self._offered(scope):
            await _redirect_with_cookie(send, self._token.decode())
            return
        if method == "GET" and scope["path"] == VALIDATION_PATH:
            # An Event Grid subscription's validation URL: its own secret in its query, for a
            # receiver that holds no token (forewarn.server.azure.eventgrid).
            await self.app(scope, receive, send)
            return
        if not self._authorised(headers):
            if method == "GET" and scope["path"] == "/":
                await _respond(send, 401, _LANDING, b"text/html; charset=utf-8")
                return
            await _json(
                send,
                401,
                "the control API needs its token: Authorization: Bearer <token>, "
                "FOREWARN_TOKEN, or the file forewarn serve wrote (see its start-up lines)",
            )
            return
        await self.app(scope, receive, send)

    def _matches(self, offered: str) -> bool:
        return hmac.compare_digest(offered.encode(), self._token)

    def _offered(self, scope: Scope) -> bool:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        return any(self._matches(value) for value in query.get("token", []))

    def _authorised(self, headers: dict[str, str]) -> bool:
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and self._matches(credentials.strip()):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:  # a malformed Cookie header is no credential
            return False
        morsel = cookie.get(COOKIE)
        return morsel is not None and self._matches(morsel.value)


def _cross_site_refusal(headers: dict[str, str], host: str) -> str | None:
    origin = headers.get("origin")
    if origin is not None and origin.lower() not in (f"http://{host}", f"https://{host}"):
        return f"cross-origin request from {origin} refused"
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site.lower() not in _SAME_SITE:
        return f"cross-site request ({fetch_site}) refused"
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    empty = headers.get("content-length") == "0"
    if content_type and content_type != "application/json" and not empty:
        return f"the control API takes JSON bodies, not {content_type}"
    return None


async def _json(send: Send, status: int, detail: str) -> None:
    await _respond(send, status, json.dumps({"detail": detail}).encode(), b"application/json")


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", b"%d" % len(body))]
    await send(
        {"type": "http.response.start", "status": status, "headers": headers + (extra or [])}
    )
    await send({"type": "http.response.body", "body": body})


async def _redirect_with_cookie(send: Send, token: str) -> None:
    cookie = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/".encode()
    await _respond(send, 303, b"", b"text/plain", [(b"location", b"/"), (b"set-cookie", cookie)])
