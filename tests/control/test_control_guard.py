"""The control API only its owner can drive (README "Security"): the token on every call,
no cross-origin writes, no unexpected Host. A form POST from any web page open in the
developer's browser (``Origin: http://evil.example``) used to restart a VM."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from forewarn.scenario.client import AsgiTransport
from forewarn.server.control import create_control_app
from forewarn.server.control_guard import COOKIE, ControlGuard
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
        # Even with the cookie a browser would attach: the request itself is refused.
        response = guarded.post(
            f"/api/v1/vms/{vm}/restart",
            headers={**headers, "Cookie": f"{COOKIE}={TOKEN}"},
            content=b"a=1",
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


def test_the_banner_link_sets_a_strict_http_only_cookie(guarded: httpx.Client) -> None:
    landing = guarded.get("/")
    assert landing.status_code == 401
    assert "?token=" in landing.text
    assert guarded.get("/?token=wrong").status_code == 401
    visit = guarded.get(f"/?token={TOKEN}")
    assert visit.status_code == 303
    assert visit.headers["location"] == "/"
    cookie = visit.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}={TOKEN};")
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    by_cookie = guarded.get("/api/v1/vms", headers={"Cookie": f"{COOKIE}={TOKEN}"})
    assert by_cookie.status_code == 200


def test_off_loopback_any_host_is_accepted_since_the_token_decides() -> None:
    assert accepted_hosts("0.0.0.0", 16955) is None
    assert accepted_hosts("10.1.2.3", 16955) is None
    hosts = accepted_hosts("127.0.0.1", 80)
    assert hosts is not None
    assert "localhost" in hosts
