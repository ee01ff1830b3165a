"""Where ``forewarn serve`` listens for VMs: the bind address, then each VM's own address, or
one wildcard listener for all of them."""

from __future__ import annotations

import socket

import pytest

from forewarn.domain.vms import Vm
from forewarn.server.runner import ServeSettings, listen_addresses

VMS = [
    Vm(name=f"vm{n}", vm_id=f"00000000-0000-4000-8000-{n:012d}", address=f"127.0.1.{n}")
    for n in range(1, 4)
]


def test_each_vm_gets_a_listener_on_its_own_address_beside_the_bind_address() -> None:
    settings = ServeSettings(host="127.0.0.1", port=8080)
    assert listen_addresses(settings, VMS) == [
        ("127.0.0.1", 8080),
        ("127.0.1.1", 8080),
        ("127.0.1.2", 8080),
        ("127.0.1.3", 8080),
    ]


def test_a_vm_on_the_bind_address_is_not_listened_for_twice() -> None:
    settings = ServeSettings(host="127.0.1.2", port=80)
    assert listen_addresses(settings, VMS) == [
        ("127.0.1.2", 80),
        ("127.0.1.1", 80),
        ("127.0.1.3", 80),
    ]


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::"])
def test_a_wildcard_bind_is_the_one_listener_for_every_vm(wildcard: str) -> None:
    """Connections to any local address reach it; the VM is the address each arrived at."""
    assert listen_addresses(ServeSettings(host=wildcard, port=80), VMS) == [(wildcard, 80)]


def test_an_address_taken_between_bind_and_listen_is_the_same_one_line() -> None:
    """The control address is bound early and listened on later; ``SO_REUSEADDR`` lets
    another socket bind it meanwhile and listen first (another program picking a free port):
    then serve refuses in the one line a bind gives, naming the address and the option."""
    from forewarn.server import runner

    ours = runner._bound("127.0.0.1", 0, "the control API", "--control")
    port = ours.getsockname()[1]
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(("127.0.0.1", port))
        other.listen()
        with pytest.raises(OSError, match="cannot listen") as refused:
            runner._listen(ours, "the control API", "--control")
    assert str(refused.value) == (
        f"the control API cannot listen on 127.0.0.1:{port}: Address already in use; "
        "pass --control HOST:PORT"
    )
    assert ours.fileno() == -1  # closed
