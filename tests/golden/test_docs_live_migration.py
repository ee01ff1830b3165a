"""The documentation's own live-migration example, replayed through the endpoint.

learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses": "The
following events are an example that was seen by two VMs that were live migrated to another node.
The DocumentIncarnation is changing every time there's new information in Events. An approval of the
event would allow the freeze to proceed for both WestNO_0 and WestNO_1."

The platform clock starts 15 minutes (the Freeze minimum notice,
learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Scheduling") before the
example's NotBefore, so every field but the EventId, which is drawn from the seeded generator, must
equal the documented one.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from forewarn.commands import HostOperation
from forewarn.domain.vms import Vm
from forewarn.server.imds import ImdsRequest, ImdsResponse
from forewarn.testing import ForewarnPlatform

#: The four documents exactly as learn.microsoft.com/azure/virtual-machines/windows/scheduled-events
#: prints them.
DOCUMENTED_RESPONSES = """\
{
    "DocumentIncarnation":  1,
    "Events":  [
               ]
}

{
    "DocumentIncarnation":  2,
    "Events":  [
                   {
                       "EventId":  "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
                       "EventStatus":  "Scheduled",
                       "EventType":  "Freeze",
                       "ResourceType":  "VirtualMachine",
                       "Resources":  [
                                         "WestNO_0",
                                         "WestNO_1"
                                     ],
                       "NotBefore":  "Mon, 11 Apr 2022 22:26:58 GMT",
                       "Description":  "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
                       "EventSource":  "Platform",
                       "DurationInSeconds":  5
                   }
               ]
}

{
    "DocumentIncarnation":  3,
    "Events":  [
                   {
                       "EventId":  "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
                       "EventStatus":  "Started",
                       "EventType":  "Freeze",
                       "ResourceType":  "VirtualMachine",
                       "Resources":  [
                                         "WestNO_0",
                                         "WestNO_1"
                                     ],
                       "NotBefore":  "",
                       "Description":  "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
                       "EventSource":  "Platform",
                       "DurationInSeconds":  5
                   }
               ]
}

{
    "DocumentIncarnation":  4,
    "Events":  [
               ]
}
"""

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
ADDRESSES = {"WestNO_0": "127.0.0.2", "WestNO_1": "127.0.0.3"}
GUID = re.compile(r"^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$")


class Pair:
    """The example's two VMs: one availability set, fault domains 0 and 1, one host."""

    def __init__(self) -> None:
        self._tick = 0.0
        # one live migration of node-1 names both: one host, so one fault domain
        vms = [
            Vm(
                name=name,
                vm_id=f"00000000-0000-4000-8000-00000000000{index}",
                availability_set="WestNO",
                platform_fault_domain=0,
                host="node-1",
                address=address,
            )
            for index, (name, address) in enumerate(ADDRESSES.items())
        ]
        self.harness = ForewarnPlatform(vms=vms, seed=2022, start=START, monotonic=self._monotonic)
        self.clock = self.harness.clock
        self.service = self.harness.service
        self.endpoint = self.harness.endpoint

    def _monotonic(self) -> float:
        self._tick += 1.0
        return self._tick

    def request(self, vm: str, method: str = "GET", body: bytes = b"") -> ImdsResponse:
        return self.endpoint.handle(
            ImdsRequest(
                method=method,
                path="/metadata/scheduledevents",
                query="api-version=2020-07-01",
                headers={"metadata": "true"},
                body=body,
                local_address=ADDRESSES[vm],
                peer_address="127.0.0.1",
            )
        )

    def read_both(self) -> dict[str, Any]:
        """What each VM reads; the example was "seen by two VMs", so both must agree."""
        first, second = (self.request(vm) for vm in ADDRESSES)
        assert first.status == second.status == 200
        assert first.body == second.body
        document: dict[str, Any] = json.loads(first.body)
        return document


def without_event_ids(document: dict[str, Any]) -> dict[str, Any]:
    events = [{k: v for k, v in event.items() if k != "EventId"} for event in document["Events"]]
    return {**document, "Events": events}


def test_the_documented_live_migration_example() -> None:
    documented = [json.loads(block) for block in DOCUMENTED_RESPONSES.split("\n\n")]
    assert [d["DocumentIncarnation"] for d in documented] == [1, 2, 3, 4]
    pair = Pair()
    seen = [pair.read_both()]

    pair.service.execute(HostOperation("node-1", "live-migrate"))
    seen.append(pair.read_both())
    (event,) = seen[1]["Events"]
    assert GUID.match(event["EventId"])

    # "elect a leader ... as simple as the first machine in the Resources field"
    leader = event["Resources"][0]
    approval = json.dumps({"StartRequests": [{"EventId": event["EventId"]}]}).encode()
    assert pair.request(leader, "POST", approval).status == 200
    pair.service.advance_clock(timedelta(seconds=event["DurationInSeconds"]))
    seen.append(pair.read_both())
    assert seen[2]["Events"][0]["EventId"] == event["EventId"]

    pair.service.advance_clock(timedelta(minutes=10))
    seen.append(pair.read_both())

    assert [without_event_ids(d) for d in seen] == [without_event_ids(d) for d in documented]
    for ours, theirs in zip(seen, documented, strict=True):
        for our_event, their_event in zip(ours["Events"], theirs["Events"], strict=True):
            assert list(our_event) == list(their_event)  # field by field, in the same order
            for key in their_event:
                if key != "EventId":
                    assert our_event[key] == their_event[key], key
