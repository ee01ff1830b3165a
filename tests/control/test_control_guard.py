"""The control API only its owner can drive (docs/security.md): the token on every call,
no cross-origin writes, no unexpected Host. A form POST from any web page open in the
developer's browser (``Origin: http://evil.example``) used to restart a VM."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from forewarn.scenario import AsgiTransport
from forewarn.server.control import create_control_app
from forewarn.server.control_guard import ControlGuard
from forewarn.server.runner import accepted_hosts
from forewarn.service import ScheduledEventsService

TOKEN = "s3cret-token"
BASE = "http://127.0.0.1:16955"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def guarded(service: ScheduledEventsService) -> Iterator[httpx.Client]:
    app = ControlGuard(
        create_control_app(service), token=TOKEN, hosts=accepted_hosts("127.0.0.1", 16955)
    )
    with httpx.Client(transport=AsgiTransport(app), base_url=BASE) as client:
        yield client


def _restarts(service: ScheduledEventsService) -> int:
    return sum(1 for view in service.events() if view.event.event_type.value == "Reboot")


def test_every_call_needs_the_token(guarded: httpx.Client) -> None:
    for method, path in (
        ("GET", "/api/v1/vms"),
        ("GET", "/openapi.json"),
        ("POST", "/api/v1/clock/advance"),
    ):
        response = guarded.request(method, path)
        assert response.status_code == 401, path
        assert "token" in response.json()["detail"]
    wrong = guarded.get("/api/v1/vms", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert guarded.get("/api/v1/vms", headers=AUTH).status_code == 200


def test_a_cross_origin_form_post_restarts_nothing(
    guarded: httpx.Client, service: ScheduledEventsService
) -> None:
    vm = service.vms()[0].name
    before = _restarts(service)
    attacks = [
        {"Origin": "http://evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Content-Type": "application/x-www-form-urlencoded"},
    ]
    for headers in attacks:
        # Even with the token: the request itself is refused.
        response = guarded.post(
            f"/api/v1/vms/{vm}/restart", headers={**headers, **AUTH}, content=b"a=1"
        )
        assert response.status_code == 403, headers
    assert _restarts(service) == before
    same_origin = guarded.post(
        f"/api/v1/vms/{vm}/restart",
        headers={**AUTH, "Origin": BASE, "Sec-Fetch-Site": "same-origin"},
    )
    assert same_origin.status_code in (200, 201), same_origin.text
    assert _restarts(service) == before + 1


def test_an_unexpected_host_is_refused(guarded: httpx.Client) -> None:
    """DNS rebinding: a page on another name whose DNS later points at 127.0.0.1."""
    refused = guarded.get("/api/v1/vms", headers={**AUTH, "Host": "rebound.example:16955"})
    assert refused.status_code == 421
    for host in ("127.0.0.1:16955", "localhost:16955"):
        assert guarded.get("/api/v1/vms", headers={**AUTH, "Host": host}).status_code == 200


def test_the_page_needs_no_token_and_no_cookie_is_a_credential(guarded: httpx.Client) -> None:
    """The page and its assets are the same bytes for everyone: the page takes the token
    from the printed link itself (sessionStorage, this origin's alone). A browser sends a
    cookie to every port of a host, so no cookie is set, and none is taken as the token."""
    for path in ("/", f"/?token={TOKEN}", "/?token=wrong", "/dashboard/app.js"):
        page = guarded.get(path)
        assert page.status_code == 200, path
        assert "set-cookie" not in page.headers
    assert "sessionStorage" in guarded.get("/dashboard/app.js").text
    for cookie in (f"forewarn_token={TOKEN}", f"forewarn_token_16955={TOKEN}", TOKEN):
        assert guarded.get("/api/v1/vms", headers={"Cookie": cookie}).status_code == 401
        assert guarded.get("/api/v1/stream", headers={"Cookie": cookie}).status_code == 401
    assert guarded.post("/", headers={"Content-Type": "application/json"}).status_code == 401


def test_off_loopback_any_host_is_accepted_since_the_token_decides() -> None:
    assert accepted_hosts("0.0.0.0", 16955) is None
    assert accepted_hosts("10.1.2.3", 16955) is None
    hosts = accepted_hosts("127.0.0.1", 80)
    assert hosts is not None
    assert "localhost" in hosts
