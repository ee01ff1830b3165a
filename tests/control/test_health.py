"""``GET /healthz`` (docs/control.md, "Health"): liveness and readiness for probes that carry
no token, through the control guard's Host check, and never a word about the fleet.

Azure's documentation has no such route (it is forewarn's own, for containers and
Kubernetes); the statuses follow the probes that read them: any 2xx is healthy, anything
else is not (Kubernetes' HTTP probe, Docker's HEALTHCHECK exit status).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterator

import httpx
import pytest

from forewarn.scenario import AsgiTransport
from forewarn.server.control import create_control_app
from forewarn.server.control_guard import ControlGuard
from forewarn.server.health import Health, Readiness
from forewarn.server.runner import accepted_hosts
from forewarn.service import ScheduledEventsService
from forewarn.storage import CorruptStoreError, StoreFullError, StoreUnavailableError

TOKEN = "s3cret-token"
BASE = "http://127.0.0.1:16955"
#: What a PostgreSQL store's error names, which an unauthenticated caller must not read.
WHERE = "PostgreSQL journal 'default' in public at db.internal:5432/forewarn"


def _guarded(service: ScheduledEventsService, health: Health | None = None) -> httpx.Client:
    app = ControlGuard(
        create_control_app(service, health=health),
        token=TOKEN,
        hosts=accepted_hosts("127.0.0.1", 16955),
    )
    return httpx.Client(transport=AsgiTransport(app), base_url=BASE)


@pytest.fixture
def guarded(service: ScheduledEventsService) -> Iterator[httpx.Client]:
    with _guarded(service) as client:
        yield client


def test_healthz_answers_without_the_token_and_names_nothing_of_the_fleet(
    guarded: httpx.Client, service: ScheduledEventsService
) -> None:
    response = guarded.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready"}
    assert response.headers["cache-control"] == "no-store"
    names = [vm.name for vm in service.vms()]
    assert names
    assert not any(name in response.text for name in names)
    # The token changes nothing: the same answer.
    authorised = guarded.get("/healthz", headers={"Authorization": f"Bearer {TOKEN}"})
    assert authorised.json() == response.json()


def test_healthz_is_still_under_the_host_check(guarded: httpx.Client) -> None:
    """A page rebound to 127.0.0.1 learns nothing either (docs/security.md: DNS rebinding)."""
    refused = guarded.get("/healthz", headers={"Host": "rebound.example:16955"})
    assert refused.status_code == 421
    assert guarded.get("/healthz", headers={"Host": "localhost:16955"}).status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/healthz"),
        ("HEAD", "/healthz"),
        ("GET", "/healthz/"),
        ("GET", "/api/v1/healthz"),
        ("GET", "/healthz/../api/v1/vms"),
    ],
)
def test_nothing_but_get_healthz_passes_without_the_token(
    guarded: httpx.Client, method: str, path: str
) -> None:
    assert guarded.request(method, path).status_code == 401


def _ready(health: Health) -> Readiness:
    return asyncio.run(health.readiness())


def test_a_store_that_cannot_be_reached_is_503_with_a_short_reason_and_its_detail_logged(
    service: ScheduledEventsService, caplog: pytest.LogCaptureFixture
) -> None:
    def unreachable() -> None:
        raise StoreUnavailableError(f"cannot reach {WHERE}: connection refused")

    caplog.set_level(logging.INFO, logger="forewarn.health")
    with _guarded(service, Health(unreachable, fresh_for=0)) as client:
        response = client.get("/healthz")
        assert response.status_code == 503
        assert response.json() == {"status": "unready", "reason": "the store cannot be reached"}
        assert "db.internal" not in response.text
        client.get("/healthz")  # still down: logged once, not at every probe
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "db.internal:5432" in warnings[0].__dict__["fields"]["detail"]


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (CorruptStoreError("lost its tables"), "the store cannot be used"),
        (RuntimeError("a bug"), "the store check failed (RuntimeError)"),
    ],
)
def test_other_store_failures_are_503_too(error: Exception, reason: str) -> None:
    def failing() -> None:
        raise error

    assert _ready(Health(failing)) == Readiness(False, reason)


def test_shutting_down_or_a_listener_down_is_503_without_asking_the_store() -> None:
    asked: list[int] = []

    def store() -> None:
        asked.append(1)

    assert _ready(Health(store, stopping=lambda: True)) == Readiness(False, "shutting down")
    assert _ready(Health(store, listening=lambda: False)) == Readiness(
        False, "the VM-facing endpoint is not listening"
    )
    assert asked == []
    assert _ready(Health(store)) == Readiness(True)
    assert asked == [1]


def test_a_store_that_hangs_is_503_within_the_bound_and_is_never_asked_twice_at_once() -> None:
    """A server that stops answering (not refusing) would hold a check for minutes; each
    probe must still answer in time, and probes must not pile up threads on it."""
    release = threading.Event()
    calls: list[int] = []

    def hanging() -> None:
        calls.append(1)
        release.wait(30)

    health = Health(hanging, store_timeout=0.05, fresh_for=0)

    async def probes() -> tuple[Readiness, Readiness, Readiness]:
        first = await health.readiness()
        second = await health.readiness()  # the first check is still running
        release.set()
        third = Readiness(False, "never asked again")
        for _ in range(200):  # the hung check ends in its thread; then a probe asks again
            third = await health.readiness()
            if len(calls) == 2:
                break
        return first, second, third

    first, second, third = asyncio.run(probes())
    assert first == second == Readiness(False, "the store does not answer")
    assert third == Readiness(True)
    assert len(calls) == 2


def test_a_result_is_reused_for_a_second_so_a_flood_costs_the_store_one_check_a_second() -> None:
    now = [100.0]
    calls: list[float] = []

    def store() -> None:
        calls.append(now[0])

    def clock() -> float:
        return now[0]

    health = Health(store, fresh_for=1.0, clock=clock)

    async def probes() -> None:
        for moment in (100.0, 100.5, 100.99, 101.0, 101.2, 102.5):
            now[0] = moment
            assert await health.readiness() == Readiness(True)

    asyncio.run(probes())
    assert calls == [100.0, 101.0, 102.5]


def test_livez_is_200_while_the_process_serves_whatever_readiness_says(
    service: ScheduledEventsService,
) -> None:
    """docs/control.md, "Health": liveness and readiness are distinct, as Kubernetes' probes
    use them: a liveness probe restarts what fails it, and a restart mends no store, so
    ``/livez`` answers 200 while ``/readyz`` (and ``/healthz``, its first name) says 503 with
    the reason; both without the token."""

    def unreachable() -> None:
        raise StoreUnavailableError(f"cannot reach {WHERE}: connection refused")

    with _guarded(service, Health(unreachable, stopping=lambda: False)) as client:
        alive = client.get("/livez")
        assert (alive.status_code, alive.json()) == (200, {"status": "alive"})
        assert alive.headers["cache-control"] == "no-store"
        for path in ("/readyz", "/healthz"):
            unready = client.get(path)
            assert unready.status_code == 503
            assert unready.json() == {"status": "unready", "reason": "the store cannot be reached"}
        assert client.get("/livez", headers={"Host": "rebound.example:16955"}).status_code == 421
        assert client.post("/livez").status_code == 401
        assert client.post("/readyz").status_code == 401
    with _guarded(service, Health(lambda: None, stopping=lambda: True)) as client:
        assert client.get("/livez").status_code == 200  # draining is still alive
        assert client.get("/readyz").json() == {"status": "unready", "reason": "shutting down"}


def test_changes_refused_a_moment_ago_make_readiness_503_with_that_reason() -> None:
    """docs/control.md, "Health": a store that answers its check but refused the last change
    (a full disk, a write PostgreSQL did not answer in time) is not ready: new work sent here
    would be refused too."""
    refused: list[str | None] = ["the store refused a change a moment ago"]
    health = Health(lambda: None, writes=lambda: refused[0], fresh_for=0)
    assert _ready(health) == Readiness(False, "the store refused a change a moment ago")
    refused[0] = None
    assert _ready(health) == Readiness(True)


def test_a_full_file_system_is_its_own_reason() -> None:
    def full() -> None:
        raise StoreFullError("forewarn.sqlite3: its file system has 0 bytes left")

    assert _ready(Health(full)) == Readiness(False, "the store's file system is full")
