"""One VM, one worker: which of the ``SO_REUSEPORT`` listeners of an address a connection
reaches, chosen by its two addresses.

Left to itself, the kernel picks among the listeners sharing an address by a hash of the
whole connection, its source port included, so a VM that opens a connection for each poll,
as the documentation's samples do, meets a different worker each time. Its rate limit ("5
requests per second (on a per VM basis)": IMDS overview, "Rate limiting"), its held requests
and its turns after a ``429`` would then be counted by each worker apart: N times the limit
in all, which a handler that breaks on Azure would never meet here. A classic BPF program
attached to the listeners' group (``SO_ATTACH_REUSEPORT_CBPF``) picks the listener from the
address the VM called and the address it came from alone (the endpoint tells VMs apart by
those), so every connection of one VM reaches the same worker while the VMs are spread over
all of them. The program answers ``(source XOR destination) mod N`` on the last 32 bits of
each address; an index past the listeners there are (a worker being started again) makes the
kernel fall back to its own hash for that connection.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct

__all__ = ["SO_ATTACH_REUSEPORT_CBPF", "steer_by_addresses", "steering_program"]

#: ``SO_ATTACH_REUSEPORT_CBPF`` from ``<asm-generic/socket.h>`` (Linux 4.5), which Python's
#: socket module does not name.
SO_ATTACH_REUSEPORT_CBPF = 51

# Classic BPF (``<linux/filter.h>``): the instruction classes and modes used below.
_LD_B_ABS = 0x00 | 0x10 | 0x20  # BPF_LD | BPF_B | BPF_ABS: A = byte at k
_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS: A = 32-bit word at k
_RSH_K = 0x04 | 0x70 | 0x00  # BPF_ALU | BPF_RSH | BPF_K: A >>= k
_XOR_X = 0x04 | 0xA0 | 0x08  # BPF_ALU | BPF_XOR | BPF_X: A ^= X
_MOD_K = 0x04 | 0x90 | 0x00  # BPF_ALU | BPF_MOD | BPF_K: A %= k
_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
_TAX = 0x07 | 0x00  # BPF_MISC | BPF_TAX: X = A
_RET_A = 0x06 | 0x10  # BPF_RET | BPF_A
#: ``SKF_NET_OFF``: offsets from the network (IP) header rather than from where the program's
#: data starts (past the TCP header, for a listener).
_NET = -0x100000 & 0xFFFFFFFF

# Where the last 32 bits of each address sit in the IP header.
_IPV4_SOURCE, _IPV4_DESTINATION = 12, 16
_IPV6_SOURCE, _IPV6_DESTINATION = 20, 36


def steering_program(listeners: int) -> bytes:
    """The program's instructions (``struct sock_filter[]``) for ``listeners`` listeners."""
    if not 1 <= listeners <= 0xFFFF:
        raise ValueError(f"listeners must be from 1 to 65535, not {listeners}")

    def pick(source: int, destination: int) -> list[tuple[int, int, int, int]]:
        return [
            (_LD_W_ABS, 0, 0, _NET + source),
            (_TAX, 0, 0, 0),
            (_LD_W_ABS, 0, 0, _NET + destination),
            (_XOR_X, 0, 0, 0),
            (_MOD_K, 0, 0, listeners),
            (_RET_A, 0, 0, 0),
        ]

    ipv4 = pick(_IPV4_SOURCE, _IPV4_DESTINATION)
    version = [(_LD_B_ABS, 0, 0, _NET), (_RSH_K, 0, 0, 4), (_JEQ_K, len(ipv4), 0, 6)]
    instructions = version + ipv4 + pick(_IPV6_SOURCE, _IPV6_DESTINATION)
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in instructions)


class _Program(ctypes.Structure):
    """``struct sock_fprog``: the count of instructions and where they are."""

    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def steer_by_addresses(listener: socket.socket, listeners: int) -> None:
    """Attach the program to the ``SO_REUSEPORT`` group ``listener`` (listening) belongs to;
    the group keeps it while any of its listeners lives, and attaching again replaces it."""
    instructions = steering_program(listeners)
    buffer = ctypes.create_string_buffer(instructions, len(instructions))
    program = _Program(len(instructions) // 8, ctypes.addressof(buffer))
    # A duplicate of the descriptor: the option is the socket's, whatever names it, and the
    # event loop's own socket object is left alone.
    with socket.socket(fileno=os.dup(listener.fileno())) as same:
        same.setsockopt(socket.SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, bytes(program))
