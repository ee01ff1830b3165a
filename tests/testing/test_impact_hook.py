"""``ForewarnPlatform(impact_hook=...)``: ``serve --impact-hook``'s equivalent in a test
(docs/testing.md, "Impacts and deleted VMs").

A harness running the application under test as real processes must stop a VM's software when
the VM is deleted ("Preempt: The Spot Virtual Machine is being deleted", "Terminate: The
virtual machine is scheduled to be deleted":
learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties"), since
nothing answers it any more; and may pause it during an impact. The hook is told each start, end and
deletion, in the test's thread, once the call that made it returns.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from forewarn.domain.events import EventType
from forewarn.testing import ForewarnPlatform, ImpactChange

FLEET = """\
vms:
  - {name: spot0, address: 127.0.0.2, priority: Spot}
scaleSets:
  - {name: web, capacity: 1, addressStart: 127.0.0.3,
     terminateNotification: {enabled: true, notBeforeTimeout: PT5M}}
"""


@pytest.mark.parametrize("served", [False, True], ids=["in-process", "sockets"])
def test_a_preempt_is_told_start_end_and_deleted_in_the_test_s_thread(served: bool) -> None:
    told: list[tuple[ImpactChange, threading.Thread]] = []
    with ForewarnPlatform(
        fleet=FLEET, impact_hook=lambda change: told.append((change, threading.current_thread()))
    ) as platform:
        if served:
            platform.serve()
        (event,) = platform.evict("spot0")
        platform.advance(30)  # "Preempt: 30 seconds" (SPEC 4.1)
        assert [c.phase for c, _ in told] == ["start"]
        platform.advance(7)  # the documented impact: then the VM is deleted
        changes = [change for change, _ in told]
        assert changes == [
            ImpactChange("spot0", phase, EventType.PREEMPT, event.event_id)
            for phase in ("start", "end", "deleted")
        ]
        assert {thread for _, thread in told} == {threading.current_thread()}
        assert platform.vm_names == ("web_0",)


def test_a_terminate_is_told_with_its_event_and_nothing_twice() -> None:
    told: list[ImpactChange] = []
    with ForewarnPlatform(fleet=FLEET, impact_hook=told.append) as platform:
        (event,) = platform.delete_instances("web", "0")
        platform.advance(5 * 60)  # the set's notBeforeTimeout
        platform.advance(60)
        deleted = [change for change in told if change.phase == "deleted"]
        assert deleted == [ImpactChange("web_0", "deleted", EventType.TERMINATE, event.event_id)]
        platform.advance(60)
        assert [change.phase for change in told] == ["start", "end", "deleted"]


def test_a_deletion_without_an_event_is_told_with_none() -> None:
    """A scale set without terminate notification deletes its instances at once."""
    told: list[ImpactChange] = []
    fleet = "scaleSets:\n  - {name: web, capacity: 1}\n"
    with ForewarnPlatform(fleet=fleet, impact_hook=told.append) as platform:
        assert platform.delete_instances("web", "0") == ()
        assert told == [ImpactChange("web_0", "deleted", None, None)]


TOLD_THROUGH_THE_MARKER: list[ImpactChange] = []


@pytest.mark.forewarn(
    fleet="vms:\n  - {name: spot0, priority: Spot}\n", impact_hook=TOLD_THROUGH_THE_MARKER.append
)
def test_the_marker_takes_it_too(forewarn_platform: ForewarnPlatform) -> None:
    TOLD_THROUGH_THE_MARKER.clear()
    forewarn_platform.evict("spot0")
    forewarn_platform.advance(30)
    forewarn_platform.advance(30)
    assert [c.phase for c in TOLD_THROUGH_THE_MARKER] == ["start", "end", "deleted"]


def test_an_impact_passed_over_in_one_move_of_the_clock_is_only_told_deleted() -> None:
    """Starts and ends are what one look finds against the last: an impact that began and
    ended within one call was over before anything could pause for it; a deletion is never
    missed."""
    told: list[ImpactChange] = []
    with ForewarnPlatform(fleet=FLEET, impact_hook=told.append) as platform:
        platform.evict("spot0")
        platform.advance(60)
        assert [(c.vm, c.phase) for c in told] == [("spot0", "deleted")]


def test_the_documented_harness_runs_as_written() -> None:
    """docs/testing.md, "Impacts and deleted VMs": its example, run as written."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    section = page[page.index("## Impacts and deleted VMs") :]
    start = section.index("```python\n") + len("```python\n")
    block = section[start : section.index("\n```", start)]
    namespace: dict[str, object] = {}
    exec(compile(block, "docs/testing.md", "exec"), namespace)
    assert namespace["workers"] == {}
