"""Event Grid's own store failing under a real ``forewarn serve``: a full disk (a 2 MB tmpfs).

[ours] (docs/azure-side.md, "Durability"): a delivery is at least once ("Event Grid message
delivery and retry": "It delivers each message at least once for each subscription"), so a
store that cannot record stops nothing for good: what changed meanwhile waits, the failure is
said once with its reason, deliveries go on once the disk has room, and SIGTERM still stops
``serve`` cleanly (exit 0, no traceback).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from azure_support import FLEET
from e2e_support import ForewarnServer, start_forewarn, wait_for
from eventgrid_support import receiver, subscribe, subscription
from fault_tier import SmallDisk, small_disk_at

pytestmark = pytest.mark.e2e

VM_HOSTS = ("127.0.60.1", "127.0.60.2", "127.0.60.3", "127.0.60.4", "127.0.61.1", "127.0.61.2")
WAITING = "Event Grid's deliveries wait for their store"


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[SmallDisk]:
    with small_disk_at(tmp_path / "disk") as mounted:
        yield mounted


def test_a_full_disk_while_recording_stops_no_delivery_for_good(
    tmp_path: Path, disk: SmallDisk
) -> None:
    """The Scheduled change is delivered and recorded; the disk fills; the event goes on by
    itself (a scaled clock: Started, then Completed) while Event Grid cannot record anything;
    once the disk has room both arrive, and ``serve`` stops with status 0."""
    server: ForewarnServer = start_forewarn(
        tmp_path,
        fleet=FLEET,
        vm_hosts=VM_HOSTS,
        clock="scaled",
        extra=("--scale", "120", "--eventgrid-timeout", "1", "--data-dir", str(disk.root / "d")),
    )
    try:
        with receiver(tmp_path, "eventgrid") as sink:
            subscribe(server.control, "survives", sink.url)
            answer = server.control.post("/vms/db1/restart")
            assert answer.status_code == 200, answer.text
            event_id = answer.json()["events"][0]["EventId"]
            wait_for(
                lambda: subscription(server.control, "survives")["delivered"] == 1,
                what="Scheduled delivered and recorded",
                server=server.process,
            )
            disk.fill()
            # 15 minutes of platform time later (7.5 s) the event starts: that change cannot be
            # recorded, and is said
            wait_for(
                lambda: WAITING in server.process.output(),
                what="the store's failure said",
                server=server.process,
                timeout=60,
            )
            assert "disk is full" in server.process.output()
            assert sink.statuses(event_id) == ["Scheduled"]
            disk.free()
            wait_for(
                lambda: sink.statuses(event_id) == ["Scheduled", "Started", "Completed"],
                what="Started and Completed delivered after the disk has room",
                server=server.process,
                timeout=90,
            )
            wait_for(
                lambda: subscription(server.control, "survives")["delivered"] == 3,
                what="the deliveries recorded",
                server=server.process,
            )
    finally:
        status = server.stop()
    assert status == 0, server.process.output()
    server.process.assert_healthy()
    output = server.process.output()
    assert output.count(WAITING) == 1, output  # said once, not once per round
    assert "Event Grid's store works again" in output
