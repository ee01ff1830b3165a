"""EventIds named after the journal record that created them (``domain/ids.py``) [ours].

SPEC 1.4 (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event
properties": "EventId: Globally unique identifier for this event", a GUID); the
scheme is ours: front-ends sharing a journal must give one event one id.
"""

from __future__ import annotations

import random
import re
import uuid

import pytest

from forewarn.domain.ids import EventIdFactory, JournalEventIds, version4_guid

GUID = re.compile(r"^[0-9A-F]{8}-[0-9A-F]{4}-4[0-9A-F]{3}-[89AB][0-9A-F]{3}-[0-9A-F]{12}$")


def test_ids_are_upper_case_version_4_guids() -> None:
    ids = JournalEventIds(7)
    ids.at_record(1)
    made = [ids() for _ in range(50)]
    assert all(GUID.match(made_id) for made_id in made)
    assert all(uuid.UUID(made_id).version == 4 for made_id in made)


def test_the_same_record_and_index_give_the_same_id_whatever_came_before() -> None:
    first, second = JournalEventIds(7), JournalEventIds(7)
    first.at_record(3)
    first()  # an event another front-end never created
    first.at_record(9)
    second.at_record(9)
    assert [first(), first()] == [second(), second()]


def test_ids_differ_by_seed_record_and_index() -> None:
    made: set[str] = set()
    for seed in (1, 2):
        ids = JournalEventIds(seed)
        for position in range(1, 30):
            ids.at_record(position)
            made.update(ids() for _ in range(5))
    assert len(made) == 2 * 29 * 5


def test_the_scheme_is_fixed_because_journals_name_the_ids_it_made() -> None:
    """Approve and cancel records carry EventIds: a replay must derive the very same ids,
    so the derivation (seed, record position, index, in that order) never changes."""
    ids = JournalEventIds(7)
    ids.at_record(1)
    assert ids() == "CDC7A60A-6381-429F-AF00-E20CC5586448"
    assert ids() == "1D194EC3-855C-4DB0-A5B6-771984C6DF75"
    ids.at_record(2)
    assert ids() == "3FC78AD2-0CBD-4001-A806-BFFA18A64646"


@pytest.mark.parametrize("value", [0, 1, 2**64 - 1, 2**128 - 1, 0x0123456789ABCDEF0123456789ABCDEF])
def test_a_guid_is_the_one_uuid_writes_for_the_same_bits(value: int) -> None:
    """EventIds of existing journals were written by :class:`uuid.UUID`: the same bits must
    still make the same id, or a replay would show other EventIds."""
    assert version4_guid(value) == str(uuid.UUID(int=value, version=4)).upper()


def test_seeded_ids_are_those_of_a_uuid_from_the_seeded_generator() -> None:
    draws = random.Random(42)
    expected = [str(uuid.UUID(int=draws.getrandbits(128), version=4)).upper() for _ in range(50)]
    ids = EventIdFactory(42)
    assert [ids() for _ in range(50)] == expected
