"""A deleted VM's address over real sockets: no answer at all, the connection kept open
until the client gives up, as many per caller as a VM may hold connections (README
"Faithfulness", "Deleted VMs").

learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties": Preempt "The
Spot Virtual Machine is being deleted". A client whose VM is really gone is gone with it: nothing it
could be sent exists. One still running here (its harness has not stopped it yet) must not read an
answer no real VM gets (a 400, a document, a reset): its call simply never completes. The server
runs in this process (``forewarn.testing``'s socket mode) on a manual clock.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from http_wire_support import get

from forewarn.server.http import limits
from forewarn.testing import ForewarnPlatform

FLEET = """\
vms:
  - {name: spot0, address: 127.0.0.2, priority: Spot}
  - {name: other, address: 127.0.0.3}
"""
IMPACT = 7  # "Impact Duration: 7 seconds" (SPEC 4.1)
BOUND = 5  # the connections a caller may hold, lowered for the test (CONNECTIONS_PER_VM)


_OPENED: list[socket.socket] = []


@pytest.fixture
def platform(monkeypatch: pytest.MonkeyPatch) -> Iterator[ForewarnPlatform]:
    monkeypatch.setattr(limits, "IDLE_SWEEP", 0.1)  # so a client that left is seen soon
    monkeypatch.setattr(limits, "CONNECTIONS_PER_VM", BOUND)
    with ForewarnPlatform(fleet=FLEET, profile="fast", timing={"impact": IMPACT}) as served:
        served.serve()
        try:
            yield served
        finally:
            for sock in _OPENED:
                sock.close()
            _OPENED.clear()


#: Where each VM answers (a deleted one's address is no VM's any more).
ADDRESSES = {"spot0": "127.0.0.2", "other": "127.0.0.3"}


def connect(platform: ForewarnPlatform, vm: str) -> socket.socket:
    sock = socket.create_connection((ADDRESSES[vm], platform.port), timeout=10)
    _OPENED.append(sock)
    return sock


def open_and_silent(sock: socket.socket) -> bool:
    """Nothing has arrived and the connection is open."""
    sock.setblocking(False)
    try:
        sock.recv(1)  # b"" is a close, anything else an answer
    except BlockingIOError:
        return True
    finally:
        sock.setblocking(True)
    return False


def closed_unanswered(sock: socket.socket) -> bool:
    """Closed with no answer: an end of stream, or a reset (what the client sent reached a
    socket closed unread)."""
    try:
        return sock.recv(65536) == b""
    except ConnectionResetError:
        return True


def unanswered_requests(platform: ForewarnPlatform) -> int:
    return sum(1 for r in platform.requests(vm="spot0") if r.status == 0 and not r.response_body)


def evicted(platform: ForewarnPlatform) -> None:
    platform.evict("spot0")
    platform.advance(1)  # the fast profile's Preempt notice: Started, the impact begins


def test_a_call_held_through_the_impact_is_never_answered(platform: ForewarnPlatform) -> None:
    evicted(platform)
    held = connect(platform, "spot0")
    held.sendall(get())
    platform.wait_for_request(lambda r: r.vm == "spot0" and r.status == 0)
    platform.advance(IMPACT)  # the impact ends: spot0 is deleted
    # Released at the impact's end, it meets the deleted VM: recorded again, unanswered.
    platform.wait_for_request(lambda r: r.vm == "spot0" and r.status == 0, after=1)
    assert open_and_silent(held)
    assert platform.vm_names == ("other",)
    other = connect(platform, "other")
    other.sendall(get())
    assert other.recv(65536).startswith(b"HTTP/1.1 200 OK")
    assert open_and_silent(held)


def test_new_calls_are_kept_unanswered_to_the_connection_bound_and_leaving_makes_room(
    platform: ForewarnPlatform,
) -> None:
    evicted(platform)
    platform.advance(IMPACT)
    kept = []
    for index in range(BOUND):
        sock = connect(platform, "spot0")
        sock.sendall(get())
        platform.wait_for_request(lambda r: r.vm == "spot0", after=index)
        kept.append(sock)
    one_more = connect(platform, "spot0")
    one_more.sendall(get())
    assert closed_unanswered(one_more), "beyond the bound: closed, still with no answer"
    assert all(open_and_silent(sock) for sock in kept)
    kept[0].close()  # a client giving up (its timeout) and calling again
    retry = connect(platform, "spot0")
    retry.sendall(get())
    platform.wait_for_request(lambda r: r.vm == "spot0", after=BOUND)
    assert open_and_silent(retry), "room was made: kept, not closed"
    assert unanswered_requests(platform) == BOUND + 1


def test_a_client_that_gives_up_is_let_go(platform: ForewarnPlatform) -> None:
    """Its side closed, the server closes its own at the next idle sweep."""
    evicted(platform)
    platform.advance(IMPACT)
    sock = connect(platform, "spot0")
    sock.sendall(get())
    platform.wait_for_request(lambda r: r.vm == "spot0")
    sock.shutdown(socket.SHUT_WR)
    assert closed_unanswered(sock)
