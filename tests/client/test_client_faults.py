"""Faults the endpoint can produce, scripted with ``httpx.MockTransport``: statuses, timeouts,
broken bodies, and the retries, backoff and jitter that answer them (no real waiting)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterable
from typing import Any

import httpx
import pytest

from forewarn.client import (
    NO_RETRY,
    AsyncClient,
    BadRequestError,
    Client,
    GoneError,
    ImdsConnectionError,
    ImdsError,
    ImdsHttpError,
    ImdsTimeoutError,
    MalformedResponseError,
    MethodNotAllowedError,
    NotFoundError,
    RetryPolicy,
    ServerError,
    TooManyRequestsError,
)

EMPTY_DOCUMENT = {"DocumentIncarnation": 1, "Events": []}

Step = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


class Script:
    """Answers requests from a list, one step each; the last step repeats."""

    def __init__(self, steps: Iterable[Step]) -> None:
        self.steps = list(steps)
        self.requests: list[httpx.Request] = []
        self.now = 0.0
        self.sleeps: list[float] = []
        self.seconds_per_request = 0.0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        self.now += self.seconds_per_request
        step = self.steps[min(len(self.requests), len(self.steps)) - 1]
        if isinstance(step, Exception):
            raise step
        if isinstance(step, httpx.Response):
            return step
        return step(request)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def monotonic(self) -> float:
        return self.now

    def client(self, **options: Any) -> Client:
        options.setdefault("rng", random.Random(7))
        return Client(
            "http://169.254.169.254",
            transport=httpx.MockTransport(self),
            sleep=self.sleep,
            monotonic=self.monotonic,
            **options,
        )


def ok(payload: Any = None) -> httpx.Response:
    return httpx.Response(200, json=EMPTY_DOCUMENT if payload is None else payload)


def error(status: int, message: str = "", **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"error": message or f"status {status}"}, headers=headers)


@pytest.mark.parametrize(
    ("status", "kind"),
    [(410, GoneError), (429, TooManyRequestsError), (500, ServerError), (503, ServerError)],
)
def test_transient_statuses_are_retried(status: int, kind: type[ImdsHttpError]) -> None:
    """SPEC 1 (IMDS overview): "429 over the rate limit of 5 requests per second per
    VM, 410/500 are transient platform errors that clients retry"."""
    script = Script([error(status), error(status), ok()])
    with script.client() as client:
        document = client.get()
    assert document.incarnation == 1
    assert len(script.requests) == 3
    assert len(script.sleeps) == 2
    assert kind.transient


@pytest.mark.parametrize(
    "exc",
    [httpx.ReadTimeout("read timed out"), httpx.ConnectTimeout("connect timed out")],
)
def test_timeouts_are_retried(exc: Exception) -> None:
    script = Script([exc, ok()])
    with script.client() as client:
        assert client.get().incarnation == 1
    assert len(script.requests) == 2


def test_retries_are_bounded_and_the_last_error_says_how_many_tries() -> None:
    """Retries are bounded: the default policy makes 4 tries, then the error reaches the
    caller, who decides whether it is fatal."""
    script = Script([error(429, "Too many requests")])
    with script.client() as client, pytest.raises(TooManyRequestsError) as caught:
        client.get()
    assert caught.value.attempts == 4
    assert caught.value.status == 429
    assert caught.value.message == "Too many requests"
    assert len(script.requests) == 4
    assert len(script.sleeps) == 3


def test_timeouts_exhausted_raise_a_timeout_error() -> None:
    script = Script([httpx.ReadTimeout("slow")])
    with (
        script.client(retry=RetryPolicy(attempts=2)) as client,
        pytest.raises(ImdsTimeoutError) as caught,
    ):
        client.get()
    assert caught.value.attempts == 2
    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)


def test_backoff_grows_exponentially_within_its_jitter() -> None:
    """Each retry waits initial_delay * multiplier ** n, less up to ``jitter`` of it."""
    policy = RetryPolicy(attempts=6, initial_delay=0.5, multiplier=2.0, max_delay=4.0, jitter=0.5)
    script = Script([error(500)])
    with script.client(retry=policy, rng=random.Random(1)) as client, pytest.raises(ServerError):
        client.get()
    ceilings = [0.5, 1.0, 2.0, 4.0, 4.0]
    assert len(script.sleeps) == len(ceilings)
    for slept, ceiling in zip(script.sleeps, ceilings, strict=True):
        assert ceiling * 0.5 <= slept <= ceiling
    assert len(set(script.sleeps)) == len(script.sleeps), "jitter made each wait different"


def test_jitter_is_seedable() -> None:
    def sleeps(seed: int) -> list[float]:
        script = Script([error(500)])
        with script.client(rng=random.Random(seed)) as client, pytest.raises(ServerError):
            client.get()
        return script.sleeps

    assert sleeps(42) == sleeps(42)
    assert sleeps(42) != sleeps(43)


def test_no_jitter_gives_the_plain_backoff() -> None:
    policy = RetryPolicy(attempts=4, initial_delay=0.25, jitter=0.0)
    script = Script([error(410)])
    with script.client(retry=policy) as client, pytest.raises(GoneError):
        client.get()
    assert script.sleeps == [0.25, 0.5, 1.0]


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    policy = RetryPolicy(attempts=3, initial_delay=0.1, max_delay=5.0, jitter=0.0)
    script = Script([error(429, **{"Retry-After": "2"}), error(503, **{"Retry-After": "60"}), ok()])
    with script.client(retry=policy) as client:
        client.get()
    assert script.sleeps == [2.0, 5.0]


def test_the_deadline_stops_retrying() -> None:
    """Bounded in time as well as in count: no retry starts past ``deadline``."""
    script = Script([httpx.ReadTimeout("slow")])
    script.seconds_per_request = 10.0  # each try times out after 10 s
    policy = RetryPolicy(attempts=100, initial_delay=1.0, jitter=0.0, deadline=30.0)
    with script.client(retry=policy) as client, pytest.raises(ImdsTimeoutError) as caught:
        client.get()
    assert caught.value.attempts == 3
    assert script.now <= 30.0 + 10.0


def test_the_caller_decides_what_is_retried() -> None:
    only_rate_limits = RetryPolicy(retry_if=lambda e: isinstance(e, TooManyRequestsError))
    script = Script([error(500)])
    with script.client(retry=only_rate_limits) as client, pytest.raises(ServerError) as caught:
        client.get()
    assert caught.value.attempts == 1
    # ...and may retry what is not transient by default, such as a broken body.
    also_broken = RetryPolicy(
        retry_if=lambda e: e.transient or isinstance(e, MalformedResponseError)
    )
    script = Script([httpx.Response(200, content=b'{"DocumentIncar'), ok()])
    with script.client(retry=also_broken) as client:
        assert client.get().incarnation == 1


def test_no_retry_raises_at_once() -> None:
    script = Script([error(500)])
    with script.client(retry=NO_RETRY) as client, pytest.raises(ServerError):
        client.get()
    assert script.sleeps == []


@pytest.mark.parametrize(
    "body",
    [
        b'{"DocumentIncarnation": 1, "Events": [',
        b"<html>busy</html>",
        b"",
        b'"a string"',
        b"[" * 200_000,  # was a RecursionError: nesting is bounded (forewarn.nesting)
    ],
)
def test_malformed_json_is_not_retried(body: bytes) -> None:
    """A 200 whose body is not a document is a MalformedResponseError; nothing in the IMDS
    documentation calls it transient, so it is not retried by default [ours]."""
    script = Script([httpx.Response(200, content=body)])
    with script.client() as client, pytest.raises(MalformedResponseError) as caught:
        client.get()
    assert len(script.requests) == 1
    assert isinstance(caught.value, ImdsError)


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, BadRequestError), (404, NotFoundError), (405, MethodNotAllowedError)],
)
def test_client_errors_are_raised_at_once(status: int, kind: type[ImdsHttpError]) -> None:
    """SPEC 1: 400 for a refused request, 404 unknown path, 405 other methods;
    none of them improves by asking again."""
    script = Script([error(status, "Bad request. Required metadata header not specified")])
    with script.client() as client, pytest.raises(kind) as caught:
        client.get()
    assert caught.value.status == status
    assert caught.value.message == "Bad request. Required metadata header not specified"
    assert len(script.requests) == 1


def test_non_json_error_body_is_kept_as_text() -> None:
    script = Script([httpx.Response(502, content=b"Bad Gateway")])
    with script.client(retry=NO_RETRY) as client, pytest.raises(ServerError) as caught:
        client.get()
    assert caught.value.message == "Bad Gateway"
    assert caught.value.body == b"Bad Gateway"


def test_unlisted_status_is_a_plain_http_error() -> None:
    script = Script([httpx.Response(418, content=b"")])
    with script.client() as client, pytest.raises(ImdsHttpError) as caught:
        client.get()
    assert type(caught.value) is ImdsHttpError
    assert not caught.value.transient


def test_a_dropped_connection_is_transient() -> None:
    """forewarn closes the connection unanswered while a VM is frozen or rebooting (SPEC 4.3
    [ours]); the client treats it like a timeout."""
    script = Script([httpx.RemoteProtocolError("Server disconnected"), ok()])
    with script.client() as client:
        assert client.get().incarnation == 1
    script = Script([httpx.ConnectError("refused")])
    with script.client(retry=NO_RETRY) as client, pytest.raises(ImdsConnectionError):
        client.get()


# -- timeouts ------------------------------------------------------------------------------


def test_first_call_waits_longer_than_later_ones() -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Enabling and disabling
    Scheduled Events": "You should expect a delayed response in your first call of up to two
    minutes"; after the first successful call the normal timeout applies again."""
    script = Script([ok()])
    with script.client(timeout=3.0) as client:
        client.get()
        client.get()
    first, second = (r.extensions["timeout"] for r in script.requests)
    assert first["read"] == 130.0
    assert first["connect"] == 3.0
    assert second == {"connect": 3.0, "read": 3.0, "write": 3.0, "pool": 3.0}


def test_first_call_timeout_can_be_turned_off_and_timeouts_set() -> None:
    script = Script([ok()])
    with script.client(timeout=httpx.Timeout(1.5, connect=0.5), first_call_timeout=None) as client:
        client.get()
    (request,) = script.requests
    assert request.extensions["timeout"] == {"connect": 0.5, "read": 1.5, "write": 1.5, "pool": 1.5}


# -- a lease address that is not the Metadata Service ---------------------------------------


def lease_client(tmp_path: Any, script: Script) -> Client:
    lease = tmp_path / "dhclient.eth0.leases"
    lease.write_text("lease {\n  option unknown-245 a8:3f:81:10;\n  expire never;\n}\n")
    return Client(
        transport=httpx.MockTransport(script),
        environ={},
        lease_paths=[str(lease)],
        sleep=script.sleep,
        monotonic=script.monotonic,
    )


def by_host(answers: dict[str, Step]) -> Callable[[httpx.Request], httpx.Response]:
    def answer(request: httpx.Request) -> httpx.Response:
        step = answers[request.url.host]
        if isinstance(step, Exception):
            raise step
        if isinstance(step, httpx.Response):
            return step
        return step(request)

    return answer


@pytest.mark.parametrize(
    "wireserver",
    [httpx.ConnectError("unreachable"), httpx.Response(404, content=b"<Error/>")],
    ids=["unreachable", "not-found"],
)
def test_lease_address_falls_back_to_169_254_169_254(tmp_path: Any, wireserver: Step) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Endpoint discovery":
    VNet VMs reach the Metadata Service at 169.254.169.254 even though their leases carry option 245
    too; a lease address that does not answer like IMDS is left for it at once, without a retry
    [ours]."""
    script = Script([by_host({"168.63.129.16": wireserver, "169.254.169.254": ok()})])
    with lease_client(tmp_path, script) as client:
        assert client.endpoint.source == "dhcp"
        assert client.get().incarnation == 1
        assert client.endpoint.source == "default"
        client.get()
    assert [r.url.host for r in script.requests] == [
        "168.63.129.16",
        "169.254.169.254",
        "169.254.169.254",
    ]
    assert script.sleeps == []


def test_lease_address_that_answers_like_imds_is_kept(tmp_path: Any) -> None:
    """A classic VM's Metadata Service at the option-245 address (SPEC 8) stays in
    use, even when it later fails: its errors are retried there, never elsewhere."""
    script = Script([ok(), error(500), ok()])
    with lease_client(tmp_path, script) as client:
        client.get()
        client.get()
        assert client.endpoint.base_url == "http://168.63.129.16"
    assert {r.url.host for r in script.requests} == {"168.63.129.16"}


def test_async_client_shares_the_fault_rules() -> None:
    """The async client retries the same way, on its awaitable sleep."""
    sleeps: list[float] = []
    calls: list[httpx.Request] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    def answer(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return error(429) if len(calls) < 3 else httpx.Response(200, content=b"not json")

    async def scenario() -> None:
        async with AsyncClient(
            "http://169.254.169.254",
            transport=httpx.MockTransport(answer),
            sleep=sleep,
            rng=random.Random(3),
        ) as client:
            with pytest.raises(MalformedResponseError):
                await client.get()

    asyncio.run(scenario())
    assert len(calls) == 3
    assert len(sleeps) == 2


def test_retry_policy_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        RetryPolicy(attempts=0)
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter=1.5)
    with pytest.raises(ValueError, match="negative"):
        RetryPolicy(initial_delay=-1)


def test_a_body_larger_than_any_document_is_refused_unread() -> None:
    """A 40 MB answer once took a reader to 378 MB: past a MiB (real documents are a few KiB)
    the body is malformed, whether its length is declared or only streamed."""
    huge = b'{"DocumentIncarnation": 1, "Events": [' + b" " * (2 * 1024 * 1024) + b"]}"

    def streamed() -> Iterable[bytes]:
        for start in range(0, len(huge), 65536):
            yield huge[start : start + 65536]

    for response in (
        httpx.Response(200, content=huge),
        httpx.Response(200, content=streamed()),
    ):
        script = Script([response])
        with script.client() as client, pytest.raises(MalformedResponseError, match="larger"):
            client.get()


def test_a_negative_document_incarnation_is_malformed() -> None:
    """SPEC 2: DocumentIncarnation increases from where a VM's documents start; a negative one
    is no document of the service's."""
    script = Script([httpx.Response(200, json={"DocumentIncarnation": -1, "Events": []})])
    with script.client() as client, pytest.raises(MalformedResponseError, match="negative"):
        client.get()
