"""The two records only front-ends sharing a journal write: ``tick`` and ``seen`` [ours].

SPEC 7 (the idle rule: Scheduled Events switched off after 24 h without a request) is judged
from ``seen`` records there; ``tick`` carries time alone.
"""

from __future__ import annotations

from datetime import timedelta

from forewarn.commands import Seen, Tick, from_record
from forewarn.config.fleet import parse_fleet
from forewarn.domain.clock import DEFAULT_START
from forewarn.domain.platform import Platform
from forewarn.domain.timing import DOCUMENTED
from forewarn.service import platform_for_fleet

FLEET = "vms:\n  - {name: a, address: 127.0.0.2}\n  - {name: b, address: 127.0.0.3}\n"


def _platform() -> Platform:
    return platform_for_fleet(parse_fleet(FLEET, "fleet"), DEFAULT_START, timing=DOCUMENTED)


def test_records_read_back_as_the_commands_written() -> None:
    at = _platform().now
    assert from_record(Tick().to_record(at)) == (at, Tick())
    assert from_record(Seen(("a", "b")).to_record(at)) == (at, Seen(("a", "b")))


def test_seen_keeps_a_vm_from_going_idle_and_passes_over_a_deleted_one() -> None:
    platform = _platform()
    platform.advance_to(platform.now + timedelta(hours=23))
    platform.delete_vm("b")
    Seen(("a", "b")).apply(platform)  # b is gone: no error, nothing for it
    platform.advance_to(platform.now + timedelta(hours=2))
    assert platform.receiving("a")  # asked 2 h ago, not 25 h ago


def test_without_seen_a_vm_goes_idle_after_the_idle_period() -> None:
    platform = _platform()
    Tick().apply(platform)
    platform.advance_to(platform.now + timedelta(hours=24))
    assert not platform.receiving("a")
