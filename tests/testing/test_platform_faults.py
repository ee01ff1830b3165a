"""Faults from the pytest plugin (``forewarn_platform.fault``), in-process and on sockets.

learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Errors and debugging": "410
Gone | Retry after some time for a max of 70 seconds", "500 Service Error | Retry after some time",
"429 Too Many Requests"; the in-process transport raises for the others what httpx raises from a
socket.
"""

from __future__ import annotations

import random

import httpx
import pytest

from forewarn.client import NO_RETRY, Client, GoneError, RetryPolicy
from forewarn.errors import InvalidInputError
from forewarn.testing import ForewarnPlatform

AZURE = "http://169.254.169.254"
PATH = "/metadata/scheduledevents?api-version=2020-07-01"
HEADERS = {"Metadata": "true"}


def get(platform: ForewarnPlatform, vm: str | None = None) -> httpx.Response:
    with httpx.Client(transport=platform.transport(vm), base_url=AZURE) as client:
        return client.get(PATH, headers=HEADERS)


@pytest.mark.parametrize(
    ("kind", "status", "message"),
    [("gone", 410, "Resource Gone"), ("error", 500, "Internal Server Error"),
     ("throttle", 429, "Too many requests"),
     ("unavailable", 503, "Internal service unavailable. Retry later")],
)  # fmt: skip
def test_error_faults_in_process(kind: str, status: int, message: str) -> None:
    with ForewarnPlatform() as platform:
        platform.fault(kind, count=1)
        response = get(platform)
        assert (response.status_code, response.json()) == (status, {"error": message})
        assert "IMDS" in response.headers["server"]
        assert get(platform).status_code == 200


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("reset", httpx.ReadError),
        ("timeout", httpx.ReadTimeout),
        ("truncate", httpx.RemoteProtocolError),
    ],
)
def test_transport_faults_raise_what_httpx_raises_on_a_socket(
    kind: str, error: type[Exception]
) -> None:
    with ForewarnPlatform() as platform:
        platform.fault(kind, count=1)
        with pytest.raises(error):
            get(platform)
        assert get(platform).status_code == 200


def test_latency_in_process_answers_the_real_document() -> None:
    with ForewarnPlatform() as platform:
        platform.fault("latency", delay=0.01, count=1)
        assert get(platform).json()["Events"] == []


def test_the_sdk_retries_through_a_burst_and_only_the_named_vm_is_hit() -> None:
    with ForewarnPlatform(vms=["a", "b"]) as platform:
        platform.fault("gone", vm="a", count=3)
        assert get(platform, "b").status_code == 200
        once = platform.client("a", retry=NO_RETRY)
        with once, pytest.raises(GoneError):
            once.get()
        retrying = Client(
            transport=platform.transport("a"),
            endpoint=AZURE,
            retry=RetryPolicy(attempts=5, initial_delay=0.0, jitter=0.0),
            rng=random.Random(0),
            sleep=lambda seconds: None,
        )
        with retrying:
            assert retrying.get().events == ()
        assert platform.faults() == ()
        assert platform.requests("a")  # the last try reached the endpoint


def test_faults_are_listed_and_cleared_and_never_touch_the_platform() -> None:
    with ForewarnPlatform(vms=["a", "b"]) as platform:
        (event,) = platform.restart("a")
        first = platform.fault("error", vm="a", probability=0.5, seed=3)
        platform.fault("reset", vm="b")
        platform.fault("gone")
        assert [f.rule.kind.value for f in platform.faults()] == ["error", "reset", "gone"]
        assert first.seed == 3
        assert platform.clear_faults(first) == 1
        assert platform.clear_faults(vm="b") == 1
        assert platform.clear_faults() == 1
        assert platform.faults() == ()
        assert [view.event.event_id for view in platform.events()] == [event.event_id]


def test_bad_faults_are_refused() -> None:
    with ForewarnPlatform() as platform:
        with pytest.raises(ValueError, match="unknown fault"):
            platform.fault("bogus")
        with pytest.raises(InvalidInputError, match="delay"):
            platform.fault("latency")
        with pytest.raises(Exception, match="nobody"):
            platform.fault("gone", vm="nobody")


def test_faults_over_sockets_from_the_plugin() -> None:
    with ForewarnPlatform() as platform:
        platform.serve()
        platform.fault("throttle", count=1)
        with httpx.Client(base_url=platform.url_for()) as client:
            assert client.get(PATH, headers=HEADERS).status_code == 429
            assert client.get(PATH, headers=HEADERS).status_code == 200


def test_requests_a_fault_answers_over_sockets_are_listed_apart_with_their_fault() -> None:
    """docs/faults.md: requests a fault answers are not in ``platform.requests()``; over
    sockets ``platform.faulted_requests()`` lists them with the fault and its status, a cut
    answer with the whole body the endpoint made."""
    with ForewarnPlatform() as platform:
        platform.serve()
        platform.fault("error", count=1)
        with httpx.Client(base_url=platform.url_for()) as client:
            assert client.get(PATH, headers=HEADERS).status_code == 500
            platform.fault("truncate", count=1)
            with pytest.raises(httpx.RemoteProtocolError):
                client.get(PATH, headers=HEADERS)
        with httpx.Client(base_url=platform.url_for()) as client:
            assert client.get(PATH, headers=HEADERS).status_code == 200
        faulted = platform.faulted_requests()
        assert [(r.method, r.path, r.status, r.fault) for r in faulted] == [
            ("GET", "/metadata/scheduledevents", 500, "error"),
            ("GET", "/metadata/scheduledevents", 200, "truncate"),
        ]
        assert b'"Events"' in faulted[1].response_body
        assert [(r.status, r.fault) for r in platform.requests()] == [(200, "")]
