"""The dashboard's snapshot shows what the control API answers, read at one instant."""

from __future__ import annotations

import httpx

from forewarn.server._activity import Activity
from forewarn.server.dashboard import snapshot
from forewarn.service import ScheduledEventsService

from .control_support import ok


def test_the_snapshot_agrees_with_the_control_api(
    http: httpx.Client, service: ScheduledEventsService
) -> None:
    ok(http.post("/api/v1/vms/app0/restart"))
    ok(http.post("/api/v1/campaigns", json={"vms": ["WestNO_0", "WestNO_1"]}), 201)
    ok(http.post("/api/v1/faults", json={"kind": "gone", "vm": "app0", "count": 2}), 201)
    ok(http.post("/api/v1/clock/advance", json={"seconds": 60}))
    shown = snapshot(service, Activity())
    assert shown["clock"] == ok(http.get("/api/v1/clock"))
    assert shown["clock"]["kind"] == "ManualClock"
    assert shown["events"] == ok(http.get("/api/v1/events"))["events"]
    assert len(shown["events"]) == 2  # the restart, and the campaign's one for the set
    assert shown["campaigns"] == ok(http.get("/api/v1/campaigns"))["campaigns"]
    vms = ok(http.get("/api/v1/vms"))["vms"]
    assert shown["vmCount"] == len(vms)
    by_name = {vm["name"]: vm for vm in shown["vms"]}
    for vm in vms:
        del vm["compute"]
        assert {k: v for k, v in by_name[vm["name"]].items() if k in vm} == vm
    assert by_name["app0"]["incarnation"] == service.document("app0").incarnation == 2
    assert by_name["app0"]["requests"] == 0
    (fault,) = shown["faults"]
    assert (fault["kind"], fault["vm"], fault["remaining"]) == ("gone", "app0", 2)
