"""Injected faults over real sockets: ``forewarn serve`` answers each one, the client SDK
retries through it, and the platform is not touched.

learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Errors and debugging": "410
Gone | Retry after some time for a max of 70 seconds", "429 Too Many Requests | API Rate Limits have
been exceeded", "500 Service Error | Retry after some time"; "Frequently asked questions": "Why am I
getting the error `500 Internal Server Error` or `410 Resource Gone`? Retry your request."
Timeouts, cut bodies and resets are what real networks add (SPEC 1: a client retries them).
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_support import (
    SCHEDULED_EVENTS,
    Exchange,
    ForewarnServer,
    StartServer,
    assert_cut_short,
    exchange,
    parse_responses,
    start_forewarn,
    stopped_at_exit,
    wait_for,
)

from forewarn.client import (
    NO_RETRY,
    Client,
    GoneError,
    ImdsConnectionError,
    ImdsTimeoutError,
    RetryPolicy,
    ServerError,
    TooManyRequestsError,
)

pytestmark = pytest.mark.e2e

#: Quick retries, enough of them for every fault below.
RETRY = RetryPolicy(attempts=6, initial_delay=0.05, max_delay=0.2, deadline=30.0)


@pytest.fixture(scope="module")
def faults_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForewarnServer]:
    workdir: Path = tmp_path_factory.mktemp("faults")
    with stopped_at_exit(start_forewarn(workdir, rate_limit=1000)) as started:
        yield started


@pytest.fixture
def server(faults_server: ForewarnServer) -> Iterator[ForewarnServer]:
    """One zero-configuration server (one VM, ``vm0``) for the tests that only set faults:
    none of them changes the fleet, so each starts from the same document (incarnation 1, no
    events) once the faults are cleared. A test that changes the fleet starts its own."""
    assert faults(faults_server) == []
    assert faults_server.events() == {}
    yield faults_server
    faults_server.process.assert_healthy()
    assert faults_server.control.delete("/faults").status_code == 200


def set_fault(server: ForewarnServer, **rule: Any) -> dict[str, Any]:
    response = server.control.post("/faults", json=rule)
    assert response.status_code == 201, response.text
    fault: dict[str, Any] = response.json()
    return fault


def faults(server: ForewarnServer) -> list[dict[str, Any]]:
    response = server.control.get("/faults")
    assert response.status_code == 200, response.text
    listed: list[dict[str, Any]] = response.json()["faults"]
    return listed


def client(server: ForewarnServer, **options: Any) -> Client:
    options.setdefault("retry", RETRY)
    # The first call's own longer timeout (documented delay of up to two minutes) is not
    # what these tests are about.
    options.setdefault("first_call_timeout", options.get("timeout"))
    return Client(server.base_url(), rng=random.Random(1), **options)


def raw_get(server: ForewarnServer, host: str | None = None) -> Exchange:
    request = (
        f"GET {SCHEDULED_EVENTS}?api-version=2020-07-01 HTTP/1.1\r\n"
        "Host: 169.254.169.254\r\nMetadata: true\r\nConnection: close\r\n\r\n"
    ).encode()
    return exchange(host or server.host, server.port, request)


@pytest.mark.parametrize(
    ("kind", "status", "message", "error"),
    [
        ("gone", 410, "Resource Gone", GoneError),
        ("error", 500, "Internal Server Error", ServerError),
        ("throttle", 429, "Too many requests", TooManyRequestsError),
        # IMDS error codes, "Error codes": 503 "Internal service unavailable. Retry later"
        ("unavailable", 503, "Internal service unavailable. Retry later", ServerError),
    ],
)
def test_error_faults_answer_as_imds_and_the_client_retries_through(
    server: ForewarnServer, kind: str, status: int, message: str, error: type[Exception]
) -> None:
    set_fault(server, kind=kind, count=1)
    (response,) = parse_responses(raw_get(server).data)
    assert response.status == status
    assert response.json() == {"error": message}
    assert response.header("content-type") == "application/json; charset=utf-8"
    assert "IMDS" in (response.header("server") or "")
    assert response.header("x-ms-request-id")

    set_fault(server, kind=kind, count=1)
    with client(server, retry=NO_RETRY) as once, pytest.raises(error):
        once.get()
    set_fault(server, kind=kind, count=3)
    with client(server) as patient:
        assert patient.get().events == ()
    assert faults(server) == []


def test_a_410_burst_is_retried_through_until_it_ends(server: ForewarnServer) -> None:
    """The client retries each 410 of a burst ("Retry after some time for a max of 70
    seconds") and, once the burst is over, gets the document as it is. The burst here ends
    when the test clears it, after the client met three of its 410s."""
    set_fault(server, kind="gone", seconds=60.0)
    met: list[int] = []

    def retry_if(error: Exception) -> bool:
        met.append(getattr(error, "status", 0))
        if len(met) == 3:
            assert server.control.delete("/faults").status_code == 200
        return isinstance(error, GoneError)

    policy = RetryPolicy(attempts=10, initial_delay=0.05, max_delay=0.1, retry_if=retry_if)
    with client(server, retry=policy) as patient:
        document = patient.get()
    assert (document.incarnation, document.events) == (1, ())
    assert met == [410, 410, 410]


def test_a_410_burst_for_a_duration_ends_by_itself(server: ForewarnServer) -> None:
    """A burst set ``--for`` a duration (docs/faults.md) is listed while it lasts, then gone,
    and the next request gets the document."""
    fault = set_fault(server, kind="gone", seconds=0.5)
    assert (fault["kind"], fault["seconds"]) == ("gone", 0.5)
    assert 0 < fault["expiresIn"] <= 0.5
    wait_for(lambda: faults(server) == [], what="the burst's end")
    (response,) = parse_responses(raw_get(server).data)
    assert (response.status, response.json()) == (200, {"DocumentIncarnation": 1, "Events": []})


def test_a_reset_is_a_connection_error_then_retried(server: ForewarnServer) -> None:
    set_fault(server, kind="reset", count=1)
    reply = raw_get(server)
    assert reply.reset
    assert reply.data == b""
    set_fault(server, kind="reset", count=1)
    with client(server, retry=NO_RETRY) as once, pytest.raises(ImdsConnectionError):
        once.get()
    set_fault(server, kind="reset", count=2)
    with client(server) as patient:
        patient.get()


def test_a_truncated_body_is_announced_whole_but_cut_short(server: ForewarnServer) -> None:
    whole = raw_get(server).data
    set_fault(server, kind="truncate", count=1)
    assert_cut_short(whole, raw_get(server))
    set_fault(server, kind="truncate", count=1)
    with client(server, retry=NO_RETRY) as once, pytest.raises(ImdsConnectionError):
        once.get()
    set_fault(server, kind="truncate", count=2)
    with client(server) as patient:
        patient.get()


def test_a_timeout_keeps_the_connection_silent_and_the_client_gives_up_then_retries(
    server: ForewarnServer,
) -> None:
    set_fault(server, kind="timeout", count=1)
    with client(server, retry=NO_RETRY, timeout=0.5) as once, pytest.raises(ImdsTimeoutError):
        once.get()
    set_fault(server, kind="timeout", count=1)
    with client(server, timeout=0.5) as patient:
        patient.get()


def test_latency_delays_the_real_answer(server: ForewarnServer) -> None:
    set_fault(server, kind="latency", delay=0.3, count=1)
    impatient = client(server, retry=NO_RETRY, timeout=0.1)
    with impatient, pytest.raises(ImdsTimeoutError):
        impatient.get()
    set_fault(server, kind="latency", delay=0.3, count=1)
    with client(server, retry=NO_RETRY, timeout=5.0) as c:
        assert c.get().events == ()


def test_faults_for_one_vm_leave_the_others_alone_and_clear_restores(
    pair: ForewarnServer,
) -> None:
    leader, partner = pair.vm_hosts[:2]
    vm = pair.control.get("/vms").json()["vms"][0]["name"]
    fault = set_fault(pair, kind="error", vm=vm)
    try:
        _one_vm_only(pair, leader, partner, fault)
    finally:
        pair.control.delete("/faults")  # the server is shared by other tests


def _one_vm_only(pair: ForewarnServer, leader: str, partner: str, fault: dict[str, Any]) -> None:
    statuses = [parse_responses(raw_get(pair, host).data)[0].status for host in (leader, partner)]
    assert sorted(statuses) == [200, 500]
    assert faults(pair)[0]["hits"] == 1
    assert pair.control.delete(f"/faults/{fault['id']}").status_code == 204
    assert pair.control.delete(f"/faults/{fault['id']}").status_code == 404
    assert faults(pair) == []


def test_an_approval_answered_by_a_fault_never_reaches_the_platform(
    start_server: StartServer,
) -> None:
    server = start_server(rate_limit=1000)
    vm = server.control.get("/vms").json()["vms"][0]["name"]
    event_id = server.create_event("Reboot", [vm])
    set_fault(server, kind="error", count=1)
    assert server.approve_raw([event_id]).status == 500
    assert server.events()[event_id]["EventStatus"] == "Scheduled"
    assert server.approve_raw([event_id]).status == 200


BAD_RULES: list[dict[str, Any]] = [
    {"kind": "latency"},  # a latency needs its delay
    {"kind": "gone", "probability": 0},
    {"kind": "nonsense"},
    {"kind": "gone", "count": 0},
    {"kind": "gone", "seconds": -1},
    {"kind": "gone", "extra": 1},
]


def test_bad_fault_rules_are_refused_with_422(server: ForewarnServer) -> None:
    for rule in BAD_RULES:
        response = server.control.post("/faults", json=rule)
        assert response.status_code == 422, (rule, response.text)
        assert "error" in response.json()
    assert faults(server) == []


def test_an_unknown_vm_is_a_404(server: ForewarnServer) -> None:
    response = server.control.post("/faults", json={"kind": "gone", "vm": "nobody"})
    assert response.status_code == 404
    assert json.loads(response.text)["error"]
