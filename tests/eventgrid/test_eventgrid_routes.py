"""The control API's Event Grid routes, in process: what each hands to Event Grid and shows.

Source: docs/azure-side.md, "Event Grid": "``forewarn eventgrid list`` shows each
subscription's deliveries, failed attempts, dead-lettered events, failed dead-letter writes and
pending events [...] The routes are under ``/api/v1/eventgrid/subscriptions``"; the fault
"``POST /api/v1/eventgrid/subscriptions/{name}/faults``"; "Event Grid is not offered in process
(the pytest plugin, in-process scenarios): its routes answer 409 there". The subscription's
fields are the control API's (``SubscriptionOut``, the names ``forewarn eventgrid list``
reads). Event Grid itself (the handshake, deliveries) is tested in the other files here; a
stand-in keeps what each route asks of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, cast

import httpx
import pytest

from forewarn.config.fleet import default_fleet
from forewarn.domain.clock import ManualClock
from forewarn.domain.timing import DOCUMENTED
from forewarn.eventgrid.delivery import EventGrid, SubscriptionView
from forewarn.eventgrid.store import Subscription
from forewarn.scenario import in_process_client
from forewarn.scenario.inprocess import service_for_fleet
from forewarn.server.control import create_control_app

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
BASE = "/api/v1/eventgrid"
# Every count a value of its own, so that no field can show another's.
SHOWN = {
    "name": "ops",
    "endpoint": "https://hook.example/api/events",
    "schema": "cloudevents",
    "provisioningState": "Succeeded",
    "delivered": 11,
    "failed": 12,
    "deadLettered": 13,
    "deadLetterFailures": 14,
    "pending": 15,
    "duplicates": 16,
    "lastError": "NotFound",
}


def view(name: str = "ops", endpoint: str = "https://hook.example/api/events") -> SubscriptionView:
    subscription = Subscription(
        name, endpoint, "cloudevents", "Succeeded", "code", T0, 0,
        delivered=11, failed=12, dead_lettered=13, last_error="NotFound", duplicates=16,
        letter_failures=14,
    )  # fmt: skip
    return SubscriptionView(subscription, 15)


class Grid:
    """Stands for :class:`EventGrid`: keeps each call, answers :func:`view`."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    async def subscribe(self, name: str, endpoint: str, schema: str) -> SubscriptionView:
        self.calls.append(("subscribe", name, endpoint, schema))
        return view(name, endpoint)

    async def list(self) -> list[SubscriptionView]:
        self.calls.append(("list",))
        return [view("ops"), view("sre")]

    async def delete(self, name: str) -> None:
        self.calls.append(("delete", name))

    async def duplicate(self, name: str, count: int) -> SubscriptionView:
        self.calls.append(("duplicate", name, count))
        return view(name)

    async def validate(self, name: str, code: str) -> SubscriptionView:
        self.calls.append(("validate", name, code))
        return view(name)


@pytest.fixture
def grid() -> Grid:
    return Grid()


@pytest.fixture
def http(grid: Grid) -> Iterator[httpx.Client]:
    service = service_for_fleet(default_fleet(), ManualClock(T0), timing=DOCUMENTED)
    app = create_control_app(service, eventgrid=cast(EventGrid, grid))
    with in_process_client(app) as client:
        yield client


def test_a_subscription_shows_each_of_its_counts_under_its_own_name(
    http: httpx.Client, grid: Grid
) -> None:
    answer = http.post(
        f"{BASE}/subscriptions",
        json={
            "name": "ops",
            "endpoint": "https://hook.example/api/events",
            "schema": "cloudevents",
        },
    )
    assert (answer.status_code, answer.json()) == (201, SHOWN)
    assert grid.calls == [("subscribe", "ops", "https://hook.example/api/events", "cloudevents")]


def test_a_subscription_without_a_name_gets_one_and_the_event_grid_schema(
    http: httpx.Client, grid: Grid
) -> None:
    """``forewarn eventgrid subscribe --endpoint URL [--schema eventgrid|cloudevents] [--name
    NAME]``: both optional; a name of 3 to 64 letters, digits or hyphens is made."""
    first = http.post(f"{BASE}/subscriptions", json={"endpoint": "http://127.0.0.1:9/"})
    second = http.post(f"{BASE}/subscriptions", json={"endpoint": "http://127.0.0.1:9/"})
    assert first.status_code == second.status_code == 201
    ((_, made, endpoint, schema), (_, other, _, _)) = grid.calls
    assert re.fullmatch(r"forewarn-[0-9a-f]{8}", made), made
    assert made != other
    assert (first.json()["name"], endpoint, schema) == (made, "http://127.0.0.1:9/", "eventgrid")


def test_the_list_shows_every_subscription(http: httpx.Client, grid: Grid) -> None:
    answer = http.get(f"{BASE}/subscriptions")
    assert (answer.status_code, answer.json()) == (
        200,
        {"subscriptions": [SHOWN, {**SHOWN, "name": "sre"}]},
    )


def test_delete_and_the_duplicate_fault_name_their_subscription(
    http: httpx.Client, grid: Grid
) -> None:
    deleted = http.delete(f"{BASE}/subscriptions/ops")
    assert (deleted.status_code, deleted.content) == (204, b"")
    faulted = http.post(
        f"{BASE}/subscriptions/sre/faults", json={"kind": "eventgrid-duplicate", "count": 3}
    )
    assert (faulted.status_code, faulted.json()) == (200, {**SHOWN, "name": "sre"})
    once = http.post(f"{BASE}/subscriptions/sre/faults", json={"kind": "eventgrid-duplicate"})
    assert once.status_code == 200
    assert grid.calls == [("delete", "ops"), ("duplicate", "sre", 3), ("duplicate", "sre", 1)]


def test_the_validation_url_answers_as_event_grids_does(http: httpx.Client, grid: Grid) -> None:
    """learn.microsoft.com/azure/event-grid/webhook-event-delivery, "Endpoint validation with
    Event Grid events": a GET of ``validationUrl`` validates the subscription; Event Grid's
    answers it in plain text."""
    answer = http.get(f"{BASE}/validate", params={"subscription": "ops", "code": "c0de"})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    assert answer.text == "Webhook successfully validated as a subscription endpoint."
    assert grid.calls == [("validate", "ops", "c0de")]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/subscriptions", None),
        ("POST", "/subscriptions", {"endpoint": "http://127.0.0.1:9/"}),
        ("DELETE", "/subscriptions/ops", None),
        ("POST", "/subscriptions/ops/faults", {"kind": "eventgrid-duplicate"}),
        ("GET", "/validate?subscription=ops&code=c", None),
    ],
)
def test_in_process_every_route_is_a_409_saying_why(
    method: str, path: str, body: dict[str, Any] | None
) -> None:
    service = service_for_fleet(default_fleet(), ManualClock(T0), timing=DOCUMENTED)
    with in_process_client(create_control_app(service)) as http:
        answer = http.request(method, f"{BASE}{path}", json=body)
    assert (answer.status_code, answer.json()) == (
        409,
        {"error": "Event Grid runs under forewarn serve, not in process"},
    )


def test_the_openapi_description_groups_the_routes_under_event_grid(http: httpx.Client) -> None:
    """docs/control.md: "FastAPI serves the OpenAPI description at ``/openapi.json``"; the
    routes are grouped by the OpenAPI Specification's operation ``tags`` ("A list of tags for
    API documentation control", spec.openapis.org/oas/v3.1.0, "Operation Object"), these under
    ``event grid``; the validation URL, a receiver's and not an operator's, is left out."""
    paths = http.get("/openapi.json").json()["paths"]
    operations = {
        (path, method): operation["tags"]
        for path, item in paths.items()
        if "/eventgrid/" in path
        for method, operation in item.items()
    }
    assert operations == {
        (f"{BASE}/subscriptions", "get"): ["event grid"],
        (f"{BASE}/subscriptions", "post"): ["event grid"],
        (f"{BASE}/subscriptions/{{name}}", "delete"): ["event grid"],
        (f"{BASE}/subscriptions/{{name}}/faults", "post"): ["event grid"],
    }
