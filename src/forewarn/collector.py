"""The garbage collector held off while a large structure is built, and let go after.

Building a fleet (its YAML nodes, its values, the validated specs, the VMs and the platform)
allocates a million long-lived objects in one go. CPython's collector starts a young
collection every 700 allocations and, as the survivors pile up, full collections walking all
of them again: about four fifths of the time a 100,000-VM fleet file took to compose, for
nothing, since none of it is garbage. :func:`paused` keeps the collector off for such a step
and restores it after, however the step ends; reference cycles made meanwhile are collected
by the first collection after it.

Nested and concurrent pauses (a scenario upload read on a worker thread while another is
read) count: the collector is switched back on by the last pause to end, and only if it was
on when the first began, so no pause can leave it off for good nor switch on one a caller
turned off.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused"]

_lock = threading.Lock()
#: Pauses under way, and whether the collector was on when the first of them began.
_pauses = 0
_was_enabled = False


@contextmanager
def paused() -> Iterator[None]:
    """The collector off while the ``with`` block runs (see the module's docstring)."""
    global _pauses, _was_enabled
    with _lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _lock:
            _pauses -= 1
            if _pauses == 0 and _was_enabled:
                gc.enable()
