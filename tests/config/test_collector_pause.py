"""The collector is held off while a fleet is read and built, and left as it was after
(forewarn.collector): on when it was on, off when a caller had turned it off, whatever the
step's outcome, however pauses nest or overlap across threads."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from forewarn import collector
from forewarn.config.fleet import FleetFileError, parse_fleet
from forewarn.yaml_files import YamlInputError, load_yaml


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    enabled = gc.isenabled()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        else:
            gc.disable()


def test_off_inside_and_back_on_after() -> None:
    gc.enable()
    with collector.paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_turned_off_by_the_caller_stays_off() -> None:
    gc.disable()
    with collector.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_nested_pauses_switch_it_on_only_at_the_last_end() -> None:
    gc.enable()
    with collector.paused():
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_back_on_after_a_failure() -> None:
    gc.enable()
    with pytest.raises(ValueError, match="broken"), collector.paused():
        raise ValueError("broken")
    assert gc.isenabled()


def test_overlapping_pauses_on_two_threads_leave_it_on() -> None:
    """The first pause ends while the second (begun meanwhile) runs: still off; on once the
    second ends, though the second found it off when it began."""
    gc.enable()
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[bool] = []

    def second() -> None:
        first_in.wait()
        with collector.paused():
            second_in.set()
            first_out.wait()
            seen.append(gc.isenabled())

    thread = threading.Thread(target=second)
    thread.start()
    with collector.paused():
        first_in.set()
        second_in.wait()
    first_out.set()
    thread.join()
    assert seen == [False]
    assert gc.isenabled()


def test_reading_yaml_and_fleets_leaves_the_collector_as_it_was() -> None:
    gc.enable()
    assert load_yaml("a: [1, 2]") == {"a": [1, 2]}
    with pytest.raises(YamlInputError):
        load_yaml("a: 1\na: 2\n")
    assert parse_fleet("vms: [{name: a, address: 127.0.0.2}]").vms[0].name == "a"
    with pytest.raises(FleetFileError):
        parse_fleet("vms: [{name: a, address: nowhere}]")
    assert gc.isenabled()
    gc.disable()
    parse_fleet("vms: [{name: a, address: 127.0.0.2}]")
    assert not gc.isenabled()
