"""What ``forewarn serve`` does with the garbage collector once its state is built
(``collector.py``): everything built so far is frozen, young collections come less often."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from forewarn.collector import YOUNG_COLLECTION_THRESHOLD, settle_heap


@pytest.fixture
def collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("collector")
def test_settling_freezes_what_exists_and_spaces_young_collections() -> None:
    built = [[index] for index in range(1000)]  # containers the collector tracks
    _, older, oldest = gc.get_threshold()
    settle_heap()
    assert gc.get_freeze_count() >= len(built)
    assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, older, oldest)


@pytest.mark.usefixtures("collector")
def test_cycles_made_after_settling_are_still_collected() -> None:
    settle_heap()

    class Node:
        partner: object = None

    first, second = Node(), Node()
    first.partner, second.partner = second, first
    del first, second
    assert gc.collect() > 0
