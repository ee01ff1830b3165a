"""The control API's guard: only its owner may drive the platform.

An ASGI middleware around the whole control app, so every route, present and future, is
covered. It refuses, in order:

- a ``Host`` that is not the address the server was asked to listen on (DNS rebinding: a
  page on another name whose DNS later points at 127.0.0.1);
- a cross-origin write: an ``Origin`` other than the control API's own, or ``Sec-Fetch-Site``
  naming another site, on any method that changes state; and a write whose body is not JSON
  (the form encodings a page may send without asking first);
- a call without the token, as ``Authorization: Bearer <token>``; only the dashboard's page
  and its assets (``GET /``, ``GET /dashboard/...``: no data, no secret) are served without it,
  ``GET /healthz`` (probes carry no token; it tells only whether the server is ready), which
  still needs the Host, and the GET of an Event Grid subscription's validation URL, which
  carries a secret of its own. The Azure Resource Manager routes (Resource Graph, the
  Maintenance provider) take the token as their bearer credential, where Azure takes a
  Microsoft Entra token, and are refused in ARM's error envelope (code ``AuthenticationFailed``
  for a missing or wrong token, as ARM names it), so a management SDK reads the refusal's code.

No cookie carries the token: a browser sends a cookie for ``127.0.0.1`` to every server on
``127.0.0.1``, whatever its port (cookies ignore ports), so the token would reach any other
local server the browser visits, and two ``serve``s on two ports would overwrite each other's.
The page takes the token from the link ``serve`` prints (``/?token=<token>``) into the tab's
``sessionStorage``, which belongs to this origin alone (scheme, host and port), drops it from
the address bar, and sends it as ``Authorization: Bearer`` on every call.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping, Sequence
from typing import Any

from forewarn.defaults import HEALTH_PATHS
from forewarn.server.azure._arm import arm_body, arm_code, is_arm_path

__all__ = ["VALIDATION_PATH", "ControlGuard"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The one route reached without the token (it carries a secret of its own).
VALIDATION_PATH = "/api/v1/eventgrid/validate"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_SAME_SITE = frozenset({"same-origin", "none"})
#: The dashboard's page and its assets: the same bytes for everyone, and the page asks for
#: the token itself (from the printed link) before it calls anything.
_PAGE_PATHS = ("/", "/dashboard/")


class ControlGuard:
    """Wraps the control ``app``; ``hosts`` are the ``Host`` values accepted (None: any);
    paths beginning with one of ``arm_paths`` (in any case) are refused in ARM's envelope."""

    def __init__(
        self,
        app: App,
        *,
        token: str,
        hosts: Iterable[str] | None,
        arm_paths: Sequence[str] = (),
    ) -> None:
        self.app = app
        self._token = token.encode()
        self._hosts = None if hosts is None else frozenset(h.lower() for h in hosts)
        self._arm_paths = tuple(arm_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "").lower()
        if self._hosts is not None and host not in self._hosts:
            await self._refuse(
                scope, send, 421, f"unexpected Host {host!r}: use the address serve printed"
            )
            return
        method = scope["method"]
        if method not in _SAFE_METHODS:
            refusal = _cross_site_refusal(headers, host)
            if refusal is not None:
                await self._refuse(scope, send, 403, refusal)
                return
        if method == "GET" and scope["path"] in HEALTH_PATHS:
            await self.app(scope, receive, send)
            return
        if method in ("GET", "HEAD") and _is_page(scope["path"]):
            await self.app(scope, receive, send)
            return
        if method == "GET" and scope["path"] == VALIDATION_PATH:
            # An Event Grid subscription's validation URL: its own secret in its query, for a
            # receiver that holds no token (forewarn.server.azure.eventgrid).
            await self.app(scope, receive, send)
            return
        if not self._authorised(headers):
            await self._refuse(
                scope,
                send,
                401,
                "the control API needs its token: Authorization: Bearer <token>, "
                "FOREWARN_TOKEN, or the file forewarn serve wrote (see its start-up lines)",
            )
            return
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Scope, send: Send, status: int, detail: str) -> None:
        if is_arm_path(scope["path"], self._arm_paths):
            code = "AuthenticationFailed" if status == 401 else arm_code(status)
            body = arm_body(code, detail)
        else:
            body = {"detail": detail}
        await _respond(send, status, json.dumps(body).encode(), b"application/json")

    def _matches(self, offered: str) -> bool:
        return hmac.compare_digest(offered.encode(), self._token)

    def _authorised(self, headers: dict[str, str]) -> bool:
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and self._matches(credentials.strip())


def _is_page(path: str) -> bool:
    return path == _PAGE_PATHS[0] or path.startswith(_PAGE_PATHS[1])


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


async def _respond(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
