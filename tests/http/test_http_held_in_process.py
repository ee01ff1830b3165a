"""Requests held during an impact, many VMs at once: each answered when the impact ends, and
what one VM can have held is bounded.

docs/faithfulness.md: a request made during an impact is held "and answered once the impact
is over (on the manual clock: once the clock is moved past its end)". The rate limit counts
requests as they come: "Requests are limited to 5 requests per second (on a per VM basis).
Requests exceeding this threshold will be rejected with 429 responses"
(learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Rate limiting"). A VM
that calls within its rate while held has every call held and answered when the impact ends,
however many; one that calls faster is refused at once. What one VM can have held is bounded
by the connections it may hold (``CONNECTIONS_PER_VM``), and a connection keeps at most
``MAX_WAITING_BEHIND`` pipelined requests behind its held one.

The server runs in this process (``forewarn.testing``'s socket mode), one loopback address
per VM, on a manual clock; the rate limit's clock moves with it.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from datetime import timedelta
from email.utils import format_datetime
from typing import ClassVar

import pytest
from e2e_support import RawResponse, parse_responses
from http_wire_support import get

from forewarn.server.http import limits
from forewarn.server.http.limits import MAX_WAITING_BEHIND
from forewarn.testing import ForewarnPlatform

VMS = 1000
IMPACT_SECONDS = 10
RATE_LIMIT = 5
TOO_MANY = {"error": "Too many requests"}


class Seconds:
    """The rate limit's clock, moved by the test with the platform's."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def seconds() -> Seconds:
    return Seconds()


@pytest.fixture
def platform(seconds: Seconds) -> Iterator[ForewarnPlatform]:
    names = [f"vm{index:04d}" for index in range(VMS)]
    with ForewarnPlatform(vms=names, rate_limit=RATE_LIMIT, monotonic=seconds, seed=3) as served:
        served.serve()
        try:
            yield served
        finally:
            for sock in Caller.opened:
                sock.close()
            Caller.opened.clear()
            Caller.deadline = None


#: How long a test waits for every answer it expects, all callers together, before it fails
#: naming the first caller left unanswered: a bound on a hang, not on speed (a thousand answers
#: come in well under a second).
ANSWERED_WITHIN = 30.0


class Caller:
    """One connection to a VM's own address, closed when the test ends. Every wait for an
    answer ends by one deadline shared by the test's callers (:data:`ANSWERED_WITHIN` from
    the first connection), so callers left unanswered fail the test once, not each after a
    timeout of its own."""

    opened: ClassVar[list[socket.socket]] = []
    deadline: ClassVar[float | None] = None

    def __init__(self, platform: ForewarnPlatform, vm: str) -> None:
        if Caller.deadline is None:
            Caller.deadline = time.monotonic() + ANSWERED_WITHIN
        host = platform.url_for(vm).removeprefix("http://").rpartition(":")[0]
        self.vm = vm
        self.sock = socket.create_connection((host, platform.port), timeout=ANSWERED_WITHIN)
        self.opened.append(self.sock)
        self.data = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def nothing_yet(self) -> bool:
        """Nothing has arrived, and the connection is open."""
        kept = self.sock.gettimeout()
        self.sock.settimeout(0.0)
        try:
            return not self.sock.recv(1)  # b"" would be a close
        except BlockingIOError:
            return True
        finally:
            self.sock.settimeout(kept)  # setblocking(True) would leave it waiting for ever

    def _receive(self) -> bytes:
        """What arrives next, by the shared deadline at the latest."""
        assert Caller.deadline is not None
        left = Caller.deadline - time.monotonic()
        if left > 0:
            self.sock.settimeout(left)
            with contextlib.suppress(TimeoutError):
                return self.sock.recv(65536)
        raise AssertionError(
            f"{self.vm}: no answer within {ANSWERED_WITHIN:g} s of the first call "
            f"({len(self._parsed())} answered on this connection)"
        )

    def answers(self, count: int) -> list[int]:
        """The statuses of the first ``count`` answers, waiting for them (or the close)."""
        while len(self._parsed()) < count:
            chunk = self._receive()
            if not chunk:
                break
            self.data += chunk
        return [r.status for r in self._parsed()]

    def ends(self) -> bool:
        while chunk := self._receive():
            self.data += chunk
        return True

    def _parsed(self) -> list[RawResponse]:
        try:
            return list(parse_responses(self.data))
        except AssertionError:  # a response still arriving
            return list(parse_responses(self.data[: self.data.rfind(b"HTTP/1.1 ")]))


def _freeze(platform: ForewarnPlatform, seconds: Seconds, vms: list[str]) -> None:
    """Each VM's Freeze started now
    (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events: the VM is paused for the
    impact's duration); the rate limit's clock moves on a second, so every VM has its whole burst
    again."""
    for vm in vms:
        platform.schedule("Freeze", vm, duration_seconds=IMPACT_SECONDS, started=True)
    seconds.now += 1


def _advance(platform: ForewarnPlatform, seconds: Seconds, by: float) -> None:
    platform.advance(by)
    seconds.now += by


def test_a_thousand_vms_held_are_all_answered_when_the_impact_ends(
    platform: ForewarnPlatform, seconds: Seconds
) -> None:
    """A thousand VMs each call during their Freeze: no answer while the clock is short of
    the impact's end, by even a second; every one answered 200 once it reaches it, dated the
    second the impact ended (the Date header is the platform's time)."""
    vms = list(platform.vm_names)
    callers = [Caller(platform, vm) for vm in vms]
    _freeze(platform, seconds, vms)
    ends = platform.now.replace(microsecond=0) + timedelta(seconds=IMPACT_SECONDS)
    for caller in callers:
        caller.send(get())
    _advance(platform, seconds, IMPACT_SECONDS - 1)
    assert all(caller.nothing_yet() for caller in callers[:: VMS // 20])
    _advance(platform, seconds, 1)
    dates = set()
    for caller in callers:
        assert caller.answers(1) == [200]
        (answer,) = parse_responses(caller.data)
        dates.add(answer.header("Date"))
    assert dates == {format_datetime(ends, usegmt=True)}


def test_a_vm_calling_within_its_rate_while_held_has_every_call_answered(
    platform: ForewarnPlatform, seconds: Seconds
) -> None:
    """A VM calls during its impact at its full rate for three seconds, a new connection for
    each call: fifteen calls, three times the rate's burst, all held and all answered 200
    when the impact ends (none was over the rate when it came, so none is refused because
    they are answered together)."""
    vm = platform.vm_names[0]
    _freeze(platform, seconds, [vm])
    held = []
    for _ in range(3):
        for _ in range(RATE_LIMIT):
            caller = Caller(platform, vm)
            caller.send(get())
            held.append(caller)
        platform.wait_for_request(after=len(held) - 1)
        seconds.now += 1
    assert all(caller.nothing_yet() for caller in held)
    _advance(platform, seconds, IMPACT_SECONDS)
    assert [caller.answers(1) for caller in held] == [[200]] * 3 * RATE_LIMIT


def test_a_vm_calling_over_its_rate_while_held_is_refused_at_once(
    platform: ForewarnPlatform, seconds: Seconds
) -> None:
    """Within one second a held VM makes more calls than the rate allows: those beyond it get
    IMDS's 429 at once, the others are held and answered 200 at the end."""
    vm = platform.vm_names[0]
    _freeze(platform, seconds, [vm])
    held = [Caller(platform, vm) for _ in range(RATE_LIMIT)]
    for caller in held:
        caller.send(get())
    extra = [Caller(platform, vm) for _ in range(3)]
    for caller in extra:
        caller.send(get())
        assert caller.answers(1) == [429]
        assert parse_responses(caller.data)[0].json() == TOO_MANY
    assert all(caller.nothing_yet() for caller in held)
    _advance(platform, seconds, IMPACT_SECONDS)
    assert [caller.answers(1) for caller in held] == [[200]] * RATE_LIMIT
    # Another VM's own rate was never touched.
    other = Caller(platform, platform.vm_names[1])
    other.send(get())
    assert other.answers(1) == [200]


def test_a_held_call_whose_client_left_makes_room_for_its_retry(
    platform: ForewarnPlatform, seconds: Seconds, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A VM holds as many connections as it may, each with a held call: one more connection
    is closed unread. A client whose call timed out closes it and calls again: the abandoned
    call's connection is the one closed to make room, so the retry is held (not refused) and
    answered at the end."""
    monkeypatch.setattr(limits, "CONNECTIONS_PER_VM", 3)
    vm = platform.vm_names[0]
    _freeze(platform, seconds, [vm])
    held = [Caller(platform, vm) for _ in range(3)]
    for caller in held:
        caller.send(get())
    platform.wait_for_request(after=2)  # every one of them held
    refused = Caller(platform, vm)
    assert refused.ends()
    assert refused.data == b"", "over the bound: closed, unanswered"
    held[0].sock.close()
    retry = Caller(platform, vm)
    retry.send(get())
    platform.wait_for_request(after=3)
    assert retry.nothing_yet()
    _advance(platform, seconds, IMPACT_SECONDS)
    assert [caller.answers(1) for caller in [*held[1:], retry]] == [[200]] * 3


def test_what_is_pipelined_behind_a_held_request_is_bounded(
    platform: ForewarnPlatform, seconds: Seconds
) -> None:
    """RFC 9112 section 9.3.2: a client that pipelines retries what a closed connection left
    unanswered. Behind a held request, ``MAX_WAITING_BEHIND`` more are kept; when the impact
    ends they are answered in order, the last saying ``Connection: close``, and the rest of
    what was sent is never read."""
    vm = platform.vm_names[0]
    _freeze(platform, seconds, [vm])
    caller = Caller(platform, vm)
    caller.send(get() + get(b"/metadata/unknown") * (MAX_WAITING_BEHIND + 40))
    platform.wait_for_request()
    assert caller.nothing_yet()
    _advance(platform, seconds, IMPACT_SECONDS)
    assert caller.ends()
    answers = parse_responses(caller.data)
    assert [a.status for a in answers] == [200] + [404] * MAX_WAITING_BEHIND
    assert answers[-1].header("Connection") == "close"
    assert all(a.header("Connection") is None for a in answers[:-1])
