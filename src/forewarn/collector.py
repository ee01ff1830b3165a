"""How forewarn treats Python's garbage collector: held off while a large structure is
built (:func:`paused`), and, once the serving process's state is built, that state left out
of its sight (:func:`settle_heap`).

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

__all__ = ["YOUNG_COLLECTION_THRESHOLD", "paused", "settle_heap"]

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


#: Allocations (less deallocations) between young collections once serving; CPython's default
#: is 700. Records made per request mostly die at once or live as long as an event, so
#: collecting them fourteen times less often saves examining each survivor again and again:
#: about a tenth of a 100k-VM campaign's CPU (``python -m bench --only scale``). The price is
#: in pauses while many records survive (a campaign under way): a young collection then takes
#: about a millisecond, and every tenth one, which examines the survivors of the last ten,
#: about 15 ms at 100k VMs, where the default's are fourteen times shorter and more frequent.
#: An idle fleet's polls leave few survivors, so its collections stay short either way.
YOUNG_COLLECTION_THRESHOLD = 10_000


def settle_heap() -> None:
    """Leave everything built so far out of the collector's sight, and collect young objects
    less often (:data:`YOUNG_COLLECTION_THRESHOLD`): what ``forewarn serve`` does once its
    platform and listeners are up (the in-process benchmarks call it at the same point, so
    they measure the process users run).

    A fleet is millions of objects that live as long as the process: full collections over
    it stalled every poll for a quarter of a second at 10k VMs. Frozen, it is never walked
    again, so full collections stay proportional to what requests allocate; cycles among
    objects made later are still collected.
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, older, oldest)
