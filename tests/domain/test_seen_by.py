"""Which api-versions' narrow views show a change to events of some types
(:func:`forewarn.domain.documents.seen_by`), for every set of types, by the views' own
definition: a view shows a change when it shows one of the changed types; None when
every view does."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from forewarn.domain.api_versions import find_version
from forewarn.domain.documents import NARROW_VIEWS, seen_by, seen_by_type
from forewarn.domain.events import EventSource, EventType
from forewarn.domain.ids import EventIdFactory
from forewarn.domain.platform import Platform
from forewarn.domain.timing import DOCUMENTED
from forewarn.domain.vms import Priority, Vm

SETS = [
    types for size in range(len(EventType) + 1) for types in itertools.combinations(EventType, size)
]


@pytest.mark.parametrize(
    "types", SETS, ids=lambda types: "+".join(t.value for t in types) or "none"
)
def test_each_view_shows_a_change_of_a_type_it_shows(types: tuple[EventType, ...]) -> None:
    shown = tuple(any(t in view for t in types) for view in NARROW_VIEWS)
    expected = None if all(shown) else shown
    assert seen_by(types) == expected
    assert seen_by(list(types) * 2) == expected  # any iterable, repeats or not
    assert seen_by(set(types)) == expected


def test_some_view_leaves_out_a_type() -> None:
    """Otherwise every answer above would be None and the test could not fail."""
    assert any(seen_by((t,)) is not None for t in EventType)


@pytest.mark.parametrize("event_type", list(EventType), ids=lambda t: t.value)
def test_a_change_of_one_type_is_seen_as_that_types_set(event_type: EventType) -> None:
    assert seen_by_type(event_type) == seen_by((event_type,))


@pytest.mark.parametrize(
    ("types", "incarnation_2017_08_01"),
    [
        ((EventType.PREEMPT, EventType.REBOOT), 2),  # the Reboot is new information to it
        ((EventType.PREEMPT, EventType.PREEMPT), 1),  # nothing it shows changed
    ],
    ids=["preempt+reboot", "preempt+preempt"],
)
def test_events_shown_at_once_move_a_narrow_incarnation_by_all_their_types(
    types: tuple[EventType, EventType], incarnation_2017_08_01: int
) -> None:
    """A VM turned on is shown every live event of its scope at once
    (:mod:`forewarn.domain._enablement`). 2017-08-01 shows no Preempt (it arrived with
    2017-11-01, SPEC 2), so its incarnation moves when, and only when, something it shows
    is among them: "Documents with the same incarnation contain the same event information"
    (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Event
    properties")."""
    start = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
    platform = Platform(start, timing=DOCUMENTED, new_event_id=EventIdFactory(3))
    for name in ("spot0", "spot1"):
        platform.add_vm(Vm(name=name, vm_id=name, priority=Priority.SPOT, availability_set="s"))
    platform.add_vm(Vm(name="late", vm_id="late", availability_set="s"), receiving=False)
    for event_type, name in zip(types, ("spot0", "spot1"), strict=True):
        platform.schedule(
            event_type, (name,), source=EventSource.PLATFORM, notice=timedelta(hours=1)
        )
    platform.touch("late")
    platform.advance_to(start + DOCUMENTED.first_call_delay)
    document = platform.document("late")
    assert [event.event_type for event in document.events] == list(types)
    old, current = find_version("2017-08-01"), find_version("2020-07-01")
    assert old is not None
    assert current is not None
    assert document.incarnation_for(current.event_types) == 2
    assert document.incarnation_for(old.event_types) == incarnation_2017_08_01
