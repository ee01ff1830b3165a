"""A repeated poll is a request like any other, on a kept connection or a new one.

Every kept-alive VM sends its poll's very bytes again every second; a VM running the
documentation's ``requests.get`` sample sends them on a new connection each time. The socket
server answers such a repeat with the last answer (of the connection, or of the address the
connection arrived at) while the platform has not changed since
(:meth:`~forewarn.server.imds.ImdsEndpoint.respond_again`), and still counts it, rate-limits
it, checks it against the faults in force and records it. Each test here polls with a real
client (``http.client``, which repeats its request byte for byte as ``requests`` does), on
one connection or a new one per poll, until the repeats take that path, then does one thing
a repeat must meet.
"""

from __future__ import annotations

import asyncio
import http.client
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, cast

import pytest

from forewarn.domain.events import EventType
from forewarn.server import http as socket_server
from forewarn.server._activity import Activity, ActivityEndpoint
from forewarn.server.http import _idle_connections, _shared
from forewarn.testing import ForewarnPlatform

TARGET = "/metadata/scheduledevents?api-version=2020-07-01"


MODES = ("kept", "new-connection")


class Poller:
    """One VM polling on one kept connection, or on a new connection each time, as the
    documentation's samples do."""

    def __init__(self, platform: ForewarnPlatform, vm: str, mode: str = "kept") -> None:
        host, port = platform.url_for(vm).removeprefix("http://").rsplit(":", 1)
        self.address = (host, int(port))
        self.kept = mode == "kept"
        self.connection = http.client.HTTPConnection(host, int(port), timeout=10)
        self.sockets: set[tuple[str, int]] = set()
        self.polls = 0

    def poll(self) -> tuple[int, bytes]:
        if not self.kept:  # as requests.get does: a session of its own, closed after
            self.connection.close()
            self.connection = http.client.HTTPConnection(*self.address, timeout=10)
        self.connection.request("GET", TARGET, headers={"Metadata": "true"})
        response = self.connection.getresponse()
        body = response.read()
        assert self.connection.sock is not None
        self.sockets.add(self.connection.sock.getsockname())  # a connection's own port
        self.polls += 1
        return response.status, body

    def polled_alike(self, times: int = 3) -> bytes:
        """The body of ``times`` polls answered alike: the repeats met what the first found."""
        answers = {self.poll() for _ in range(times)}
        assert len(answers) == 1, answers
        ((status, body),) = answers
        assert status == 200
        return body

    def close(self) -> None:
        if self.kept:
            assert len(self.sockets) == 1, "the connection was kept throughout"
        self.connection.close()


@pytest.fixture
def platform() -> Iterator[ForewarnPlatform]:
    # Two VMs: each on its own address, where a VM's requests are known by that address.
    with ForewarnPlatform(vms=["vm0", "vm1"], rate_limit=10_000, seed=7) as made:
        yield made


@pytest.fixture(params=MODES)
def poller(platform: ForewarnPlatform, request: pytest.FixtureRequest) -> Iterator[Poller]:
    made = Poller(platform, "vm0", request.param)
    yield made
    made.close()


def test_a_repeated_poll_meets_each_new_document(
    platform: ForewarnPlatform, poller: Poller
) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Polling frequency": a VM
    polling once a second sees an event as soon as it is scheduled, and sees it go when it is
    cancelled."""
    empty = poller.polled_alike()
    assert b'"Events":[]' in empty
    event = platform.schedule(EventType.FREEZE, "vm0")
    shown = poller.polled_alike()
    assert event.event_id.encode() in shown
    platform.schedule(EventType.FREEZE, "vm1")  # another VM's change: vm0 sees the same
    assert poller.polled_alike() == shown
    platform.cancel(event)
    gone = poller.polled_alike()
    assert event.event_id.encode() not in gone
    assert b'"Events":[]' in gone


def test_a_repeated_poll_meets_the_clock(platform: ForewarnPlatform, poller: Poller) -> None:
    """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties":
    NotBefore passed, the platform starts the event by itself; a VM polling all along is shown it
    Started."""
    event = platform.schedule(EventType.FREEZE, "vm0")
    assert b'"EventStatus":"Scheduled"' in poller.polled_alike()
    platform.advance(timedelta(minutes=16))  # past the 15 minutes of notice a Freeze has
    status, body = poller.poll()
    assert event.event_id.encode() in body
    assert (status, b'"EventStatus":"Started"' in body) == (200, True)


def test_another_request_on_the_connection_is_answered_for_itself(
    platform: ForewarnPlatform, poller: Poller
) -> None:
    """A client asking other things on its kept connection between polls (the instance
    metadata; an older api-version, whose events have fewer fields: SPEC 2.2
    and 9) gets each one's own answer, and its poll's again after."""
    platform.schedule(EventType.FREEZE, "vm0")
    document = poller.polled_alike()
    for target in (
        "/metadata/instance?api-version=2021-02-01",
        TARGET.replace("2020-07-01", "2017-11-01"),
    ):
        poller.connection.request("GET", target, headers={"Metadata": "true"})
        response = poller.connection.getresponse()
        assert (response.status, response.read() == document) == (200, False), target
        assert poller.polled_alike() == document


def test_every_repeated_poll_is_recorded(platform: ForewarnPlatform, poller: Poller) -> None:
    """docs/testing.md, "What the application did": ``requests(vm)`` is every
    ``RecordedRequest``, kept-alive repeats included."""
    poller.polled_alike(times=7)
    assert [(r.method, r.status) for r in platform.requests("vm0")] == [("GET", 200)] * 7


@pytest.mark.parametrize("mode", MODES)
def test_every_repeated_poll_is_rate_limited(mode: str) -> None:
    """SPEC 1, learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Rate
    limiting": over the limit, a VM's requests are answered 429, repeats like the rest."""
    now = [0.0]
    with ForewarnPlatform(vms=["vm0", "vm1"], rate_limit=3, monotonic=lambda: now[0]) as made:
        poller = Poller(made, "vm0", mode)
        statuses = [poller.poll()[0] for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        now[0] += 1.0  # a second later: three more
        assert [poller.poll()[0] for _ in range(4)] == [200, 200, 200, 429]
        poller.close()


def test_a_fault_set_meanwhile_meets_the_next_repeat(
    platform: ForewarnPlatform, poller: Poller
) -> None:
    """docs/faults.md, "Rules": a rule lasts "for the next ``count`` requests it hits",
    whatever connection they come on; 500 is a transient error clients retry (SPEC 1)."""
    poller.polled_alike()
    platform.fault("error", vm="vm0", count=1)
    assert poller.poll()[0] == 500
    poller.polled_alike()


@pytest.mark.parametrize("mode", MODES)
def test_the_dashboard_counts_every_repeated_poll(mode: str) -> None:
    """The dashboard's record of each VM (``forewarn serve``'s ActivityEndpoint) counts
    every request, however it was answered: on a kept connection or a new one each time,
    through the socket server's protocol and a stand-in transport."""
    with ForewarnPlatform(vms=["vm0", "vm1"], seed=7) as made:
        activity = Activity()
        endpoint = ActivityEndpoint(made.service, activity, rate_limit=10_000)
        loop = asyncio.new_event_loop()
        try:
            written: list[bytes] = []
            shared = _shared._Shared(endpoint, loop)
            connections = _idle_connections._Connections(loop)
            poll = b"GET %s HTTP/1.1\r\nHost: x\r\nMetadata: true\r\n\r\n" % TARGET.encode()
            protocol = None
            for _ in range(5):
                if protocol is None or mode == "new-connection":
                    protocol = socket_server.ImdsProtocol(endpoint, shared, loop, connections)
                    protocol.connection_made(cast(asyncio.Transport, _Transport(made, written)))
                protocol.data_received(poll)
        finally:
            loop.close()
    assert [answer.split(b"\r\n", 1)[0] for answer in written] == [b"HTTP/1.1 200 OK"] * 5
    assert activity.requests("vm0") == 5
    assert activity.requests("vm1") == 0


class _Transport:
    """What the protocol asks of an asyncio transport, at vm0's address."""

    def __init__(self, platform: ForewarnPlatform, written: list[bytes]) -> None:
        self.address = platform.url_for("vm0").removeprefix("http://").rsplit(":", 1)[0]
        self.written = written

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": (self.address, 80), "peername": ("127.0.0.1", 40000)}.get(name, default)

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        raise AssertionError("a poll answered at once never pauses reading")

    def resume_reading(self) -> None:
        raise AssertionError("a poll answered at once never pauses reading")


def test_a_vm_polling_on_new_connections_is_answered_from_its_address_last_answer(
    platform: ForewarnPlatform, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documentation's ``requests.get`` sample opens a new connection for every poll,
    so no connection has a last answer: its address does. The fleet's first poll teaches the
    server the poll's bytes (every VM's are the same but for the Host); from then on a VM's
    first poll is answered in full and the next ones as repeats, each VM's from its own
    address, and another request at the same address is answered in full for itself."""
    endpoint = platform.endpoint
    calls: list[str] = []
    respond, respond_again = endpoint.respond, endpoint.respond_again

    def counted(request: Any) -> Any:
        calls.append(f"in full at {request.local_address}")
        return respond(request)

    def counted_again(request: Any, *rest: Any) -> Any:
        calls.append(f"again at {request.local_address}")
        return respond_again(request, *rest)

    monkeypatch.setattr(endpoint, "respond", counted)
    monkeypatch.setattr(endpoint, "respond_again", counted_again)
    event = platform.schedule(EventType.FREEZE, "vm1")
    vm0, vm1 = Poller(platform, "vm0", "new-connection"), Poller(platform, "vm1", "new-connection")
    at0, at1 = vm0.address[0], vm1.address[0]
    empty = vm0.polled_alike(times=4)
    assert calls == [f"in full at {at0}"] * 2 + [f"again at {at0}"] * 2
    calls.clear()
    shown = vm1.polled_alike(times=3)  # its own document, not vm0's
    assert event.event_id.encode() in shown
    assert event.event_id.encode() not in empty
    assert calls == [f"in full at {at1}"] + [f"again at {at1}"] * 2
    calls.clear()
    older = vm0.connection  # another request at vm0's address is answered for itself
    older.request("GET", "/metadata/instance?api-version=2021-02-01", headers={"Metadata": "true"})
    assert b'"compute"' in older.getresponse().read()
    assert vm0.polled_alike(times=2) == empty  # still the poll the address answered last
    assert calls == [f"in full at {at0}"] + [f"again at {at0}"] * 2
    assert len(vm0.sockets) == vm0.polls == 6  # each poll on a connection of its own
    vm0.close()
    vm1.close()


def test_at_a_polling_address_another_form_of_the_poll_is_answered_for_itself(
    platform: ForewarnPlatform,
) -> None:
    """RFC 9110 section 13.1.2 and
    learn.microsoft.com/azure/virtual-machines/linux/scheduled-events's sample (If-None-Match with
    the last ETag: 304 while nothing changed), RFC 9112 section 9.6 (``Connection: close``: the
    answer says so and the connection ends): at an address whose poll is answered as a repeat, the
    same poll with either header, on a new connection, gets its own answer."""
    host, port = platform.url_for("vm0").removeprefix("http://").rsplit(":", 1)
    poller = Poller(platform, "vm0", "new-connection")
    polled = poller.polled_alike(times=3)  # the address now answers its repeats
    asked = http.client.HTTPConnection(host, int(port), timeout=10)
    asked.request("GET", TARGET, headers={"Metadata": "true"})
    first = asked.getresponse()
    first.read()
    tag = first.getheader("ETag")
    assert tag is not None
    asked.close()
    conditional = http.client.HTTPConnection(host, int(port), timeout=10)
    conditional.request("GET", TARGET, headers={"Metadata": "true", "If-None-Match": tag})
    answer = conditional.getresponse()
    assert (answer.status, answer.read()) == (304, b"")
    conditional.close()
    closing = http.client.HTTPConnection(host, int(port), timeout=10)
    closing.request("GET", TARGET, headers={"Metadata": "true", "Connection": "close"})
    answer = closing.getresponse()
    assert (answer.status, answer.getheader("Connection")) == (200, "close")
    assert answer.read() == polled
    closing.close()
    assert poller.polled_alike(times=2) == polled  # and the poll is answered as before
    poller.close()
