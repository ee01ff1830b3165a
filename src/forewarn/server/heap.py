"""How the serving process treats the Python garbage collector once its state is built.

A fleet is millions of objects that live as long as the process, and a maintenance campaign
adds records (events, jobs, documents, encoded answers) that live for the event's minutes or
days. CPython's collector walks every tracked object it has not been told to leave alone:
full collections over the fleet stall every poll for a quarter of a second at 10k VMs, and
young collections every 700 allocations examine each campaign record again and again before
it is old enough to be left. :func:`settle_heap` is what ``forewarn serve`` does once its
platform and listeners are up; the in-process benchmarks call it at the same point, so they
measure the process users run.
"""

from __future__ import annotations

import gc

#: Allocations (less deallocations) between young collections; CPython's default is 700.
#: Records made per request mostly die at once or live as long as an event, so collecting
#: them fourteen times less often saves examining each survivor again and again: about a
#: tenth of a 100k-VM campaign's CPU (``python -m bench --only scale``). The price is in
#: pauses while many records survive (a campaign under way): a young collection then takes
#: about a millisecond, and every tenth one, which examines the survivors of the last ten,
#: about 15 ms at 100k VMs, where the default's are fourteen times shorter and more frequent.
#: An idle fleet's polls leave few survivors, so its collections stay short either way.
YOUNG_COLLECTION_THRESHOLD = 10_000


def settle_heap() -> None:
    """Leave everything built so far out of the collector's sight, and collect young objects
    less often (:data:`YOUNG_COLLECTION_THRESHOLD`).

    Everything allocated so far (the fleet, the platform, the listeners) lives as long as the
    process: frozen, it is never walked again, so full collections stay proportional to what
    requests allocate. Cycles among objects made later are still collected.
    """
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, older, oldest)


__all__ = ["YOUNG_COLLECTION_THRESHOLD", "settle_heap"]
