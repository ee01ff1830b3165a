"""The process's file descriptors, which every connection, listener, store file and pipe
uses one of: the most it may hold (RLIMIT_NOFILE's soft limit), how many it holds now, and
raising that limit to the hard one, as ``forewarn serve`` does at start-up.

Past the limit, ``accept`` fails (EMFILE): uvloop then accepts and closes at once whatever
waits, on every listener of the loop, the control API's too, and the standard loop stops
accepting for a second. So the VM-facing connections are kept within a share of the limit
(:class:`~forewarn.server.http._idle_connections._Connections`), leaving
``limits.RESERVED_DESCRIPTORS`` to everything else.
"""

from __future__ import annotations

import contextlib
import os
import resource

#: Where Linux lists the process's open descriptors, one entry each.
_OPEN_DESCRIPTORS = "/proc/self/fd"
#: The most any process may hold on Linux (``fs.nr_open``): an unlimited hard limit means this.
_NR_OPEN = "/proc/sys/fs/nr_open"


def descriptor_limit() -> int:
    """How many descriptors the process may hold now (the soft limit)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return _system_most() if soft == resource.RLIM_INFINITY else soft


def open_descriptors() -> int | None:
    """How many descriptors the process holds now; None where the system does not say."""
    try:
        # The listing itself holds one while it reads.
        return len(os.listdir(_OPEN_DESCRIPTORS)) - 1
    except OSError:
        return None


def raise_descriptor_limit() -> tuple[int, int]:
    """Raise the soft limit to the hard one (every process may): a VM's kept connection is a
    descriptor, and distributions start services at 1,024, far below their hard limit. The
    limits before and after; unchanged where the system refuses."""
    before, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = _system_most() if hard == resource.RLIM_INFINITY else hard
    if before != resource.RLIM_INFINITY and before < wanted:
        # Refused, it stays as it was: the VMs' share is worked out from whatever holds.
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return _shown(before), descriptor_limit()


def _shown(limit: int) -> int:
    return _system_most() if limit == resource.RLIM_INFINITY else limit


def _system_most() -> int:
    try:
        with open(_NR_OPEN, encoding="ascii") as source:
            return int(source.read())
    except (OSError, ValueError):
        return 1 << 20  # Linux's default nr_open
