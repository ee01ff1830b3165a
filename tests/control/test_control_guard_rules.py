"""Every header and value the control API's guard reads, each as behaviour (README
"Security": the token on every call, no cross-origin writes, no unexpected Host).

The guard is driven here as the ASGI middleware it is, one request at a time, with exactly
the headers a browser or a script would send (a client library would add its own, such as
``Host``), and with an app behind it that only records whether it was reached. The values
come from the Fetch Metadata standard (``Sec-Fetch-Site``: ``same-origin``, ``same-site``,
``cross-site``, ``none``), RFC 6454 (``Origin``, including the opaque ``null``) and RFC 9110
(``Host``; ``Authorization`` with a case-insensitive scheme, RFC 6750's ``Bearer``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from forewarn.defaults import HEALTH_PATH
from forewarn.server.control_guard import VALIDATION_PATH, ControlGuard
from forewarn.server.runner import accepted_hosts

TOKEN = "s3cret-token"
HOST = "127.0.0.1:16955"
BEARER = f"Bearer {TOKEN}"
NO_TOKEN_DETAIL = (
    "the control API needs its token: Authorization: Bearer <token>, "
    "FOREWARN_TOKEN, or the file forewarn serve wrote (see its start-up lines)"
)


@dataclass
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes
    reached: bool

    def header(self, name: bytes) -> bytes | None:
        return next((value for key, value in self.headers if key == name), None)

    @property
    def detail(self) -> str:
        detail: str = json.loads(self.body)["detail"]
        return detail


@dataclass
class Behind:
    """The app the guard protects: answers 200 and remembers each scope it was given."""

    scopes: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.scopes.append(scope)
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"reached"})
        else:  # the lifespan protocol: a message in, its answer out
            assert (await receive())["type"] == "http.request"
            await send({"type": "lifespan.startup.complete"})


def call(
    method: str,
    path: str = "/api/v1/vms",
    headers: Iterable[tuple[str, str]] = (),
    *,
    query: str | None = "",
    hosts: Iterable[str] | None = (HOST, "localhost:16955"),
    kind: str = "http",
    arm_paths: Iterable[str] = (),
) -> Answer:
    behind = Behind()
    guard = ControlGuard(behind, token=TOKEN, hosts=hosts, arm_paths=tuple(arm_paths))
    scope: dict[str, Any] = {
        "type": kind,
        "method": method,
        "path": path,
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
    }
    if query is not None:  # an ASGI server may leave out an empty query string
        scope["query_string"] = query.encode()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    asyncio.run(guard(scope, receive, send))
    if sent == [{"type": "lifespan.startup.complete"}]:
        return Answer(0, [], b"", bool(behind.scopes))
    start, body = sent
    assert body["type"] == "http.response.body"
    return Answer(start["status"], list(start["headers"]), body["body"], bool(behind.scopes))


def write(*headers: tuple[str, str], host: str = HOST, method: str = "POST") -> Answer:
    """A write carrying the token, ``Host`` and ``headers``."""
    return call(
        method, "/api/v1/vms/vm0/restart", [("Host", host), ("Authorization", BEARER), *headers]
    )


# -- Sec-Fetch-Site -------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["same-origin", "none", "Same-Origin", "NONE"])
def test_a_write_from_the_page_itself_or_typed_by_the_user_goes_through(value: str) -> None:
    """Fetch Metadata: ``same-origin`` is the dashboard's own page; ``none`` a request the
    user made (address bar, bookmark, a script). Compared without regard to case."""
    assert write(("Sec-Fetch-Site", value)).reached


@pytest.mark.parametrize("value", ["same-site", "cross-site", "Cross-Site", "SAME-SITE", "other"])
def test_a_write_from_another_origin_of_the_site_or_another_site_is_refused(value: str) -> None:
    """``same-site`` is another origin of the same site (another port of 127.0.0.1, a
    sibling subdomain): still a page that is not the control API's own, so refused like
    ``cross-site``; so is a value the standard does not define."""
    answer = write(("Sec-Fetch-Site", value))
    assert (answer.status, answer.reached) == (403, False)
    assert answer.detail == f"cross-site request ({value}) refused"


def test_a_write_without_fetch_metadata_goes_through() -> None:
    """A script (curl, the CLI) sends no ``Sec-Fetch-Site``; its token decides."""
    assert write().reached


@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS"])
def test_reads_are_not_refused_for_where_they_come_from(method: str) -> None:
    """Only a method that changes state is checked for its origin: a read changes nothing,
    and without the token (which only the page's own script holds) it gets 401."""
    headers = [("Host", HOST), ("Origin", "http://evil.example"), ("Sec-Fetch-Site", "cross-site")]
    assert call(method, headers=[*headers, ("Authorization", BEARER)]).reached
    refused = call(method, headers=[*headers, ("Content-Type", "text/plain")])
    assert refused.status == 401


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_every_method_that_changes_state_is_checked(method: str) -> None:
    answer = write(("Sec-Fetch-Site", "cross-site"), method=method)
    assert (answer.status, answer.reached) == (403, False)


# -- Origin ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("origin", "host"),
    [
        ("http://127.0.0.1:16955", HOST),
        ("https://127.0.0.1:16955", HOST),
        ("HTTP://127.0.0.1:16955", HOST),
        ("http://localhost:16955", "localhost:16955"),
    ],
)
def test_a_write_whose_origin_is_the_control_apis_own_goes_through(origin: str, host: str) -> None:
    """The origin is the address the request was sent to (its ``Host``), by either scheme."""
    assert write(("Origin", origin), host=host).reached


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "http://127.0.0.1:16956",  # another port: another origin (RFC 6454 section 4)
        "http://localhost:16955",  # another name than the Host the request was sent to
        "http://127.0.0.1",
        "null",  # an opaque origin: a sandboxed frame, a file, a redirect across sites
        "",
    ],
)
def test_a_write_from_any_other_origin_is_refused(origin: str) -> None:
    answer = write(("Origin", origin))
    assert (answer.status, answer.reached) == (403, False)
    assert answer.detail == f"cross-origin request from {origin} refused"


def test_origin_is_checked_before_fetch_metadata_and_content_type() -> None:
    answer = write(
        ("Origin", "http://evil.example"),
        ("Sec-Fetch-Site", "cross-site"),
        ("Content-Type", "text/plain"),
    )
    assert answer.detail == "cross-origin request from http://evil.example refused"
    answer = write(("Sec-Fetch-Site", "cross-site"), ("Content-Type", "text/plain"))
    assert answer.detail == "cross-site request (cross-site) refused"


# -- Content-Type ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        " application/json ;",
    ],
)
def test_a_json_write_goes_through(content_type: str) -> None:
    assert write(("Content-Type", content_type)).reached


@pytest.mark.parametrize(
    ("content_type", "named"),
    [
        ("text/plain", "text/plain"),
        ("application/x-www-form-urlencoded", "application/x-www-form-urlencoded"),
        ("multipart/form-data; boundary=x", "multipart/form-data"),
        ("Text/Plain;charset=UTF-8", "text/plain"),
    ],
)
def test_a_write_with_a_body_a_page_may_send_unasked_is_refused(
    content_type: str, named: str
) -> None:
    """The three encodings a cross-site form or ``fetch`` may send without a preflight."""
    answer = write(("Content-Type", content_type), ("Content-Length", "3"))
    assert (answer.status, answer.reached) == (403, False)
    assert answer.detail == f"the control API takes JSON bodies, not {named}"


def test_a_write_with_no_body_needs_no_json_type() -> None:
    assert write(("Content-Type", "text/plain"), ("Content-Length", "0")).reached
    assert write(("Content-Length", "0")).reached
    assert write().reached  # no Content-Type at all
    refused = write(("Content-Type", "text/plain"), ("Content-Length", "00"))
    assert refused.status == 403  # only the exact empty length


# -- Host -----------------------------------------------------------------------------------


@pytest.mark.parametrize("host", [HOST, "localhost:16955", "LOCALHOST:16955", "LocalHost:16955"])
def test_the_control_apis_own_names_are_accepted_in_any_case(host: str) -> None:
    """RFC 9110 section 4.2.3: the host is compared without regard to case."""
    assert call("GET", headers=[("Host", host), ("Authorization", BEARER)]).reached


@pytest.mark.parametrize(
    "host", ["rebound.example:16955", "127.0.0.1:16956", "127.0.0.1", "localhost", "", None]
)
def test_any_other_host_is_refused_before_anything_else(host: str | None) -> None:
    """DNS rebinding: a page on another name whose DNS now points at 127.0.0.1. A missing
    ``Host`` is refused as well. Refused before the token is looked at, and with a write's
    own refusals too."""
    headers = [] if host is None else [("Host", host)]
    answer = call("POST", headers=[*headers, ("Origin", "http://evil.example")])
    assert (answer.status, answer.reached) == (421, False)
    shown = (host or "").lower()
    assert answer.detail == f"unexpected Host {shown!r}: use the address serve printed"


def test_without_a_list_of_hosts_any_host_is_accepted() -> None:
    """Off loopback (``accepted_hosts`` gives None) the token alone decides."""
    assert accepted_hosts("0.0.0.0", 16955) is None
    for host in ("rebound.example", "10.1.2.3:16955", ""):
        answer = call("GET", headers=[("Host", host), ("Authorization", BEARER)], hosts=None)
        assert answer.reached
    assert call("GET", headers=[("Host", "x")], hosts=None).status == 401


def test_the_names_of_a_loopback_control_api_are_its_address_localhost_and_both_loopbacks() -> None:
    assert sorted(accepted_hosts("127.0.0.1", 16955) or []) == [
        "127.0.0.1:16955",
        "[::1]:16955",
        "localhost:16955",
    ]
    assert sorted(accepted_hosts("127.0.0.5", 80) or []) == [
        "127.0.0.1",
        "127.0.0.1:80",
        "127.0.0.5",
        "127.0.0.5:80",
        "[::1]",
        "[::1]:80",
        "localhost",
        "localhost:80",
    ]


# -- the token: Authorization; no cookie -----------------------------------------------------


@pytest.mark.parametrize(
    "authorization", [BEARER, f"bearer {TOKEN}", f"BEARER {TOKEN}", f"Bearer  {TOKEN} "]
)
def test_the_bearer_token_opens_every_route(authorization: str) -> None:
    """RFC 9110 section 11.1: the scheme is case-insensitive."""
    for path in ("/api/v1/vms", "/openapi.json", "/", "/anything"):
        answer = call("GET", path, [("Host", HOST), ("Authorization", authorization)])
        assert answer.reached, (authorization, path)


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer wrong",
        f"Bearer {TOKEN[:-1]}",
        f"Bearer {TOKEN}x",
        f"Basic {TOKEN}",
        TOKEN,
        "Bearer",
        f"Bearer{TOKEN}",
        "",
    ],
)
def test_anything_but_the_exact_bearer_token_is_refused(authorization: str) -> None:
    answer = call("GET", headers=[("Host", HOST), ("Authorization", authorization)])
    assert (answer.status, answer.reached) == (401, False)
    assert answer.detail == NO_TOKEN_DETAIL
    assert answer.header(b"content-type") == b"application/json"
    assert answer.header(b"content-length") == str(len(answer.body)).encode()


@pytest.mark.parametrize(
    "cookie",
    [
        f"forewarn_token={TOKEN}",
        f"forewarn_token_16955={TOKEN}",
        f"theme=dark; forewarn_token={TOKEN}",
        TOKEN,
    ],
)
def test_no_cookie_is_a_credential(cookie: str) -> None:
    """docs/security.md: no cookie carries the token (a browser sends a cookie for
    127.0.0.1 to every port there), so none opens a route, whatever its name."""
    answer = call("GET", headers=[("Host", HOST), ("Cookie", cookie)])
    assert (answer.status, answer.reached) == (401, False)
    assert answer.detail == NO_TOKEN_DETAIL
    refused = write(("Cookie", cookie), ("Sec-Fetch-Site", "same-origin"))
    assert refused.reached  # the write's own bearer token, not the cookie, let it through
    cookie_only = call("POST", "/api/v1/vms/vm0/restart", [("Host", HOST), ("Cookie", cookie)])
    assert (cookie_only.status, cookie_only.reached) == (401, False)


# -- what needs no token: the page, /healthz, the validation URL ----------------------------


@pytest.mark.parametrize("path", ["/", "/dashboard/app.js", "/dashboard/style.css"])
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_the_page_and_its_assets_are_served_without_the_token(path: str, method: str) -> None:
    """They hold no data; the page asks for the token itself before it calls anything."""
    assert call(method, path, [("Host", HOST)]).reached


def test_the_printed_link_serves_the_page_and_sets_nothing() -> None:
    """The link's token is read by the page's script into the tab's sessionStorage: the
    guard answers no redirect and sets no cookie."""
    answer = call("GET", "/", [("Host", HOST)], query=f"token={TOKEN}")
    assert (answer.status, answer.reached) == (200, True)
    assert answer.header(b"set-cookie") is None
    assert call("GET", "/", [("Host", HOST)], query="token=wrong").reached


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/"),
        ("PUT", "/dashboard/app.js"),
        ("GET", "/dashboards"),
        ("GET", "/api/v1/stream"),
        ("GET", "/api/v1/vms"),
        ("POST", HEALTH_PATH),
        ("HEAD", HEALTH_PATH),
        ("GET", HEALTH_PATH + "/"),
        ("GET", "/api/v1" + HEALTH_PATH),
        ("POST", VALIDATION_PATH),
        ("GET", VALIDATION_PATH + "/x"),
    ],
)
def test_everything_else_needs_the_token(method: str, path: str) -> None:
    headers = [("Host", HOST), ("Sec-Fetch-Site", "same-origin")]
    answer = call(method, path, headers)
    assert (answer.status, answer.reached) == (401, False), (method, path)
    assert call(method, path, [*headers, ("Authorization", BEARER)]).reached


def test_healthz_and_the_validation_url_need_no_token_but_still_the_host() -> None:
    """docs/control.md "Health": probes carry no token; an Event Grid validation URL carries
    a secret of its own, which its route checks. Neither skips the Host check."""
    for path in (HEALTH_PATH, VALIDATION_PATH):
        assert call("GET", path, [("Host", HOST)]).reached, path
        rebound = call("GET", path, [("Host", "rebound.example:16955")])
        assert (rebound.status, rebound.reached) == (421, False), path


def test_the_page_from_another_host_is_refused() -> None:
    answer = call("GET", "/", [("Host", "rebound.example:16955")], query=f"token={TOKEN}")
    assert (answer.status, answer.reached) == (421, False)


def test_what_is_not_an_http_request_passes_through_untouched() -> None:
    """The server's lifespan messages (start-up, shutdown) carry no headers to check."""
    answer = call("GET", headers=[("Host", "rebound.example")], kind="lifespan")
    assert answer.reached
    assert answer.status == 0


# -- ARM's routes -----------------------------------------------------------------------------

ARM = ("/providers/Microsoft.ResourceGraph/resources",)


@pytest.mark.parametrize(
    ("headers", "status", "code"),
    [
        ([("Host", HOST)], 401, "AuthenticationFailed"),
        ([("Host", HOST), ("Authorization", "Bearer wrong")], 401, "AuthenticationFailed"),
        ([("Host", "evil.example"), ("Authorization", BEARER)], 421, "MisdirectedRequest"),
        (
            [("Host", HOST), ("Authorization", BEARER), ("Origin", "http://evil.example")],
            403,
            "Forbidden",
        ),
    ],
)
def test_an_arm_route_is_refused_in_arms_envelope_in_any_case(
    headers: list[tuple[str, str]], status: int, code: str
) -> None:
    """ARM answers a refusal as ``{"error": {"code", "message"}}`` (the ErrorResponse of every
    management-plane REST specification), ``AuthenticationFailed`` for a missing or wrong
    bearer token; its paths are read without regard to case (docs/azure-side.md)."""
    for path in (ARM[0], ARM[0].upper()):
        answer = call("POST", path, headers, arm_paths=ARM)
        assert (answer.status, answer.reached) == (status, False)
        error = json.loads(answer.body)["error"]
        assert error["code"] == code
        assert error["message"]
    elsewhere = call("POST", "/api/v1/vms/vm0/restart", headers, arm_paths=ARM)
    assert elsewhere.status == status
    assert elsewhere.detail
