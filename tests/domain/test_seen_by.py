"""Which api-versions' narrow views show a change to events of some types
(:func:`forewarn.domain.documents.seen_by`), for every set of types, by the views' own
definition: a view shows a change when it shows one of the changed types; None when
every view does."""

from __future__ import annotations

import itertools

import pytest

from forewarn.domain.documents import NARROW_VIEWS, seen_by
from forewarn.domain.events import EventType

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
