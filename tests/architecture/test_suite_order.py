"""The order the suite starts its tests in (``tests/support/suite_order.py``): the longest first,
the tests sharing a module-wide fixture kept together."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
from suite_order import RECORDED_COSTS, longest_first, recorded, recorded_costs, workers_for


def _item(node_id: str, *scopes: str) -> pytest.Item:
    fixtures = {f"f{i}": [SimpleNamespace(scope=scope)] for i, scope in enumerate(scopes)}
    info = SimpleNamespace(name2fixturedefs=fixtures)
    return cast(pytest.Item, SimpleNamespace(nodeid=node_id, _fixtureinfo=info))


def _ids(items: list[Any]) -> list[str]:
    return [item.nodeid for item in items]


def test_the_longest_start_first_and_the_others_keep_their_order() -> None:
    items = [
        _item("a.py::one"),
        _item("a.py::two"),
        _item("b.py::short"),
        _item("b.py::long"),
        _item("c.py::three"),
    ]
    costs = {"b.py::long": 30.0, "a.py::two": 5.0}
    assert _ids(longest_first(items, costs)) == [
        "b.py::long",
        "a.py::two",
        "a.py::one",
        "b.py::short",
        "c.py::three",
    ]


def test_tests_sharing_a_module_fixture_stay_in_their_order() -> None:
    items = [
        _item("a.py::first", "function", "module"),
        _item("a.py::long", "session"),
        _item("b.py::other"),
    ]
    ordered = longest_first(items, {"a.py::long": 30.0, "b.py::other": 1.0})
    assert _ids(ordered) == ["a.py::first", "a.py::long", "b.py::other"]


def test_each_workers_share_begins_with_long_tests() -> None:
    """worksteal hands worker k the k-th of equal contiguous shares: each starts long."""
    items = [_item(f"s.py::short{i}") for i in range(6)]
    items += [_item(f"{name}.py::t") for name in ("l1", "l2", "l3", "l4")]
    costs = {"l1.py::t": 40.0, "l2.py::t": 30.0, "l3.py::t": 20.0, "l4.py::t": 15.0}
    ordered = _ids(longest_first(items, costs, workers=2))
    first, second = ordered[:5], ordered[5:]
    assert first == ["l1.py::t", "l4.py::t", "s.py::short0", "s.py::short1", "s.py::short2"]
    assert second == ["l2.py::t", "l3.py::t", "s.py::short3", "s.py::short4", "s.py::short5"]
    assert sorted(ordered) == sorted(_ids(items))


def test_the_recorded_costs_name_tests_with_their_seconds() -> None:
    costs = recorded_costs()
    assert RECORDED_COSTS.exists()
    assert len(costs) >= 10
    assert all(node_id.startswith("tests/") and "::" in node_id for node_id in costs)
    assert all(seconds > 0 for seconds in costs.values())


def test_auto_runs_two_workers_a_core_and_at_most_four_more_than_the_cores() -> None:
    assert [workers_for(cores) for cores in (1, 2, 4, 8, 64)] == [2, 4, 8, 12, 68]


def test_a_durations_listing_becomes_the_recorded_costs() -> None:
    listing = """
============================= slowest durations =============================
20.00s call     tests/a.py::test_long
2.50s setup    tests/b.py::test_set_up_long[one two]
1.00s call     tests/b.py::test_set_up_long[one two]
2.00s call     tests/c.py::test_short
0.50s teardown tests/b.py::test_set_up_long[one two]
"""
    lines = [line for line in recorded(listing).splitlines() if not line.startswith("#")]
    assert lines == ["20.0 tests/a.py::test_long", "4.0 tests/b.py::test_set_up_long[one two]"]
