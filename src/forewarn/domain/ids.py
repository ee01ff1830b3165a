"""EventIds: upper-case version-4 GUIDs, made so that a run can be replayed exactly.

Two sources, one per kind of store:

- :class:`EventIdFactory` draws from a seeded generator, in the order events are created:
  one process writing its own journal replays them exactly (memory and SQLite stores, and
  PostgreSQL namespaces created before front-ends could share one).
- :class:`JournalEventIds` derives each id from where in the journal the event came from: the
  seed, the position of the record whose application created it, and its index among that
  record's events. Every front-end applying the same journal, and every replay of it, gives
  every event the same id, and no two events share one, whatever else each process did.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable

#: What a platform calls for each new event's id: either source below.
NewEventId = Callable[[], str]


#: The bits :class:`uuid.UUID` sets for ``version=4``: the RFC 4122 variant, then the version.
_VARIANT_MASK, _VARIANT = 0xC000 << 48, 0x8000 << 48
_VERSION_MASK, _VERSION_4 = 0xF000 << 64, 4 << 76
_KEPT, _SET = ~(_VARIANT_MASK | _VERSION_MASK), _VARIANT | _VERSION_4


def version4_guid(value: int) -> str:
    """``str(uuid.UUID(int=value, version=4)).upper()`` for a 128-bit ``value``, written out
    because building a :class:`uuid.UUID` costs more than the rest of scheduling an event
    (and its bytes' hex is cheaper than formatting the integer)."""
    digits = (value & _KEPT | _SET).to_bytes(16).hex().upper()
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


class EventIdFactory:
    """Makes globally unique, upper-case, version-4 GUIDs from a seedable generator."""

    def __init__(self, seed: int | None = None) -> None:
        self._random = random.Random(seed)

    def __call__(self) -> str:
        return version4_guid(self._random.getrandbits(128))


class JournalEventIds:
    """EventIds named after the journal record that created them.

    Whoever applies record ``n`` first says so with :meth:`at_record`; the events that
    applying it creates are then numbered 0, 1, 2... and each id is the first 128 bits of
    ``sha256(seed, n, index)`` with the version-4 and variant bits set, so nothing drawn
    before (a refused command, another front-end's history) can shift it. Every event is
    created by applying a record, so there is no id before the first :meth:`at_record`.
    """

    _position: int
    _index: int

    def __init__(self, seed: int) -> None:
        self._seed = seed

    def at_record(self, position: int) -> None:
        """The next events are created by applying journal record ``position``."""
        self._position = position
        self._index = 0

    def __call__(self) -> str:
        digest = hashlib.sha256(f"{self._seed}:{self._position}:{self._index}".encode()).digest()
        self._index += 1
        return version4_guid(int.from_bytes(digest[:16]))


__all__ = [
    "EventIdFactory",
    "JournalEventIds",
    "NewEventId",
    "version4_guid",
]
