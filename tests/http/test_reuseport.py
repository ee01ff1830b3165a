"""Which ``SO_REUSEPORT`` listener a connection reaches under ``serve --workers``: chosen by
its two addresses (:mod:`forewarn.server.http._reuseport`), so each VM's connections reach one
worker, whose rate limit then counts all of them: "5 requests per second (on a per VM basis)"
(learn.microsoft.com/azure/virtual-machines/instance-metadata-service, "Rate limiting").

Real sockets in one process: the listeners join one group in the order they listen, which is
the index the program answers."""

from __future__ import annotations

import contextlib
import ipaddress
import select
import socket
from collections.abc import Iterator

import pytest

from forewarn.server.http._reuseport import steer_by_addresses, steering_program

DESTINATION = "127.0.0.1"
SOURCES = [f"127.0.0.{n}" for n in range(2, 10)]


@contextlib.contextmanager
def _listeners(count: int) -> Iterator[list[socket.socket]]:
    listeners: list[socket.socket] = []
    try:
        port = 0
        for _ in range(count):
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listeners.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            listener.bind((DESTINATION, port))
            port = listener.getsockname()[1]
            listener.listen(16)
            listener.setblocking(False)
        yield listeners
    finally:
        for listener in listeners:
            listener.close()


def _accepted_by(listeners: list[socket.socket], source: str) -> int:
    """Connect from ``source`` (a new source port each time) and say which listener has it."""
    with socket.create_connection(
        listeners[0].getsockname(), timeout=10, source_address=(source, 0)
    ):
        ready, _, _ = select.select(listeners, [], [], 10)
        assert len(ready) == 1, "exactly one listener has the connection"
        accepted, _ = ready[0].accept()
        accepted.close()
        return listeners.index(ready[0])


def _expected(source: str, count: int) -> int:
    return (int(ipaddress.IPv4Address(source)) ^ int(ipaddress.IPv4Address(DESTINATION))) % count


@pytest.mark.parametrize("count", [2, 3])
def test_each_pair_of_addresses_reaches_the_same_listener_every_time(count: int) -> None:
    with _listeners(count) as listeners:
        steer_by_addresses(listeners[0], count)
        for source in SOURCES:
            picked = {_accepted_by(listeners, source) for _ in range(4)}
            assert picked == {_expected(source, count)}, source


def test_the_addresses_spread_over_every_listener() -> None:
    with _listeners(3) as listeners:
        steer_by_addresses(listeners[-1], 3)  # any listener of the group attaches it
        assert {_accepted_by(listeners, source) for source in SOURCES} == {0, 1, 2}


def test_attaching_again_replaces_the_program() -> None:
    """A worker started again attaches the same program: the group keeps one."""
    with _listeners(2) as listeners:
        steer_by_addresses(listeners[0], 3)  # index 2 is past the listeners: the kernel's hash
        steer_by_addresses(listeners[1], 2)
        for source in SOURCES:
            assert _accepted_by(listeners, source) == _expected(source, 2)


def test_the_program_is_classic_bpf_instructions_for_a_listener_count() -> None:
    assert len(steering_program(2)) % 8 == 0  # struct sock_filter is 8 bytes
    assert steering_program(2) != steering_program(3)
    for wrong in (0, 65536):
        with pytest.raises(ValueError, match="listeners must be from 1 to 65535"):
            steering_program(wrong)
