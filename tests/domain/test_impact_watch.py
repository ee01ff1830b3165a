"""What impact hooks are told, worked out from looks at the platform (``ImpactWatch``).

docs/faithfulness.md, "Impact hooks": a command runs "when a VM's impact starts, when it ends, and when the
VM is deleted (after its impact's end ...)"; "A VM's hooks run in order". [ours] When the
watching stops (``forewarn serve`` shutting down), every impact still under way is told as
ending, so a harness resumes the VMs it paused (``ImpactWatch.ending``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from forewarn.domain.events import EventType
from forewarn.domain.impact import ImpactChange, ImpactWatch, Pause

NOW = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
FROZEN = Pause(NOW + timedelta(seconds=5), EventType.FREEZE, "E1")
REBOOTING = Pause(NOW + timedelta(seconds=7), EventType.REBOOT, "E2")


def test_starts_and_ends_are_told_once_each_in_order() -> None:
    watch = ImpactWatch()
    assert watch.changes({"a": FROZEN}, ()) == [ImpactChange("a", "start", EventType.FREEZE, "E1")]
    assert watch.changes({"a": FROZEN}, ()) == []  # the same impact: nothing new
    # a's impact over, b's begun: ends are told before starts
    assert watch.changes({"b": REBOOTING}, ()) == [
        ImpactChange("a", "end", EventType.FREEZE, "E1"),
        ImpactChange("b", "start", EventType.REBOOT, "E2"),
    ]
    # another impact at once on the same VM: the first ends, the second starts
    assert watch.changes({"b": FROZEN}, ()) == [
        ImpactChange("b", "end", EventType.REBOOT, "E2"),
        ImpactChange("b", "start", EventType.FREEZE, "E1"),
    ]


def test_ending_tells_the_end_of_every_impact_still_under_way_once() -> None:
    watch = ImpactWatch()
    watch.changes({"a": FROZEN, "b": REBOOTING}, ())
    assert watch.ending() == [
        ImpactChange("a", "end", EventType.FREEZE, "E1"),
        ImpactChange("b", "end", EventType.REBOOT, "E2"),
    ]
    assert watch.ending() == []  # told once
    # forgotten: the same impacts seen again are new starts, not carried over
    assert watch.changes({"a": FROZEN}, ()) == [ImpactChange("a", "start", EventType.FREEZE, "E1")]


def test_ending_with_nothing_under_way_tells_nothing() -> None:
    watch = ImpactWatch()
    assert watch.ending() == []
    watch.changes({"a": FROZEN}, ())
    watch.changes({}, ())
    assert watch.ending() == []
