"""POST /metadata/scheduledevents: approving events (SPEC 3).

A refused approval must leave no trace, so every refusal is checked against the documents of
every VM, byte for byte, before and after.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import orjson
import pytest

from forewarn.commands import HostOperation
from forewarn.domain.events import EventSource, EventType

if TYPE_CHECKING:
    from endpoint.conftest import Imds

UNKNOWN_ID = "F020BA2E-3BC0-4C40-A10B-86575A9EABD5"


def snapshot(imds: Imds) -> dict[str, bytes]:
    """Every VM's current document, as every version shows it."""
    return {
        f"{name} {version}": imds.get(name, version).body
        for name in imds.addresses
        for version in ("2017-03-01", "2020-07-01")
    }


def start_requests(*event_ids: str, **extra: Any) -> dict[str, Any]:
    return {"StartRequests": [{"EventId": event_id} for event_id in event_ids], **extra}


@pytest.fixture
def scheduled(pair: Imds) -> tuple[Imds, str, str]:
    """Two Scheduled events on the documentation's pair of VMs: a Reboot and a Redeploy."""
    reboot = pair.schedule(EventType.REBOOT, "WestNO_0", source=EventSource.USER)
    redeploy = pair.schedule(EventType.REDEPLOY, "WestNO_1", source=EventSource.USER)
    return pair, reboot.event_id, redeploy.event_id


def statuses(imds: Imds, vm: str = "WestNO_1") -> dict[str, str]:
    return {e["EventId"]: e["EventStatus"] for e in imds.document(vm)["Events"]}


def test_approval_answers_200_with_an_empty_body(scheduled: tuple[Imds, str, str]) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event": "The
    service always returns a 200 success code if it's passed a valid event ID"; the body is empty
    (SPEC 3 [ours])."""
    imds, reboot, _ = scheduled
    response = imds.approve("WestNO_1", reboot)
    assert (response.status, response.body, response.content_type) == (200, b"", None)
    assert statuses(imds)[reboot] == "Started"


def test_several_events_are_approved_at_once(scheduled: tuple[Imds, str, str]) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Python Sample": "You
    can confirm multiple events in a single request if needed"."""
    imds, reboot, redeploy = scheduled
    before = imds.document("WestNO_0")["DocumentIncarnation"]
    assert imds.approve("WestNO_0", reboot, redeploy).status == 200
    imds.advance(timedelta(seconds=7))  # the documented 7 s impact, then the VMs answer again
    assert statuses(imds, "WestNO_0") == {reboot: "Started", redeploy: "Started"}
    assert imds.document("WestNO_0")["DocumentIncarnation"] > before


def test_an_approval_lets_the_event_proceed_for_all_its_resources(pair: Imds) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event":
    "Acknowledging an event allows the event to proceed for all Resources in the event, not just the
    VM that acknowledges the event"; any VM of the set may approve, as the docs' leader election
    implies."""
    pair.add_vm("WestNO_2", availability_set="WestNO")
    event = pair.schedule(EventType.FREEZE, "WestNO_0", "WestNO_1", duration_seconds=5)
    assert pair.approve("WestNO_2", event.event_id).status == 200
    assert statuses(pair, "WestNO_2") == {event.event_id: "Started"}
    pair.advance(timedelta(seconds=5))
    assert statuses(pair, "WestNO_0") == statuses(pair, "WestNO_1") == statuses(pair, "WestNO_2")


@pytest.mark.parametrize(
    "incarnation",
    ["5", 5, "1", 0, "not-a-number", None],
    ids=["preview-curl-string", "powershell-number", "right-string", "zero", "text", "null"],
)
def test_document_incarnation_in_the_body_is_accepted_and_ignored(
    scheduled: tuple[Imds, str, str], incarnation: object
) -> None:
    """docs.microsoft.com/azure/virtual-machines/virtual-machines-scheduled-events (2017), "Starting
    an event (expedite)": the curl sample sends ``{"DocumentIncarnation":"5", "StartRequests":
    [...]}`` (a string, and not the current incarnation); its PowerShell sample sends the number it
    read. SPEC 3: accept and ignore."""
    imds, reboot, _ = scheduled
    body = orjson.dumps(start_requests(reboot, DocumentIncarnation=incarnation))
    assert imds.post("WestNO_1", body).status == 200
    assert statuses(imds)[reboot] == "Started"


@pytest.mark.parametrize(
    "headers",
    [
        {"Metadata": "true"},
        {"Metadata": "true", "Content-Type": "application/x-www-form-urlencoded"},
        {"Metadata": "true", "Content-Type": "application/json"},
        {"Metadata": "true", "Content-Type": "text/plain; charset=utf-8"},
    ],
    ids=["none", "curl-d-form", "json", "text"],
)
def test_no_content_type_is_required(
    scheduled: tuple[Imds, str, str], headers: dict[str, str]
) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event": ``curl
    -H Metadata:true -X POST -d '{"StartRequests": ...}'``; curl -d labels the body as form data
    (SPEC 3 [doc] [seen])."""
    imds, reboot, _ = scheduled
    assert imds.post("WestNO_1", start_requests(reboot), headers=headers).status == 200


def test_the_documented_request_bodies_are_understood(scheduled: tuple[Imds, str, str]) -> None:
    """The bodies exactly as the documentation writes them, whitespace and tabs included:
    learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event" and
    docs.microsoft.com/azure/virtual-machines/virtual-machines-scheduled-events (2017), "PowerShell
    Sample" (ConvertTo-Json output, pretty-printed)."""
    imds, reboot, redeploy = scheduled
    windows = b'{\n\t"StartRequests" : [\n\t\t{\n\t\t\t"EventId": "%s"\n\t\t}\n\t]\n}' % (
        reboot.encode()
    )
    assert imds.post("WestNO_1", windows).status == 200
    powershell = (
        b'{\r\n    "DocumentIncarnation":  2,\r\n    "StartRequests":  [\r\n'
        b'                          {\r\n                              "EventId":  "%s"\r\n'
        b"                          }\r\n                      ]\r\n}" % redeploy.encode()
    )
    assert imds.post("WestNO_1", powershell).status == 200
    imds.advance(timedelta(seconds=7))
    assert set(statuses(imds, "WestNO_0").values()) == {"Started"}


def test_approving_again_is_still_200_and_changes_nothing(
    scheduled: tuple[Imds, str, str],
) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event": 200
    "even if another VM already approved the event"; a Started event approved again stays as it
    is."""
    imds, reboot, _ = scheduled
    assert imds.approve("WestNO_1", reboot).status == 200
    imds.advance(timedelta(seconds=7))
    settled = snapshot(imds)
    for vm in ("WestNO_0", "WestNO_1"):
        assert imds.approve(vm, reboot).status == 200
    assert snapshot(imds) == settled


def test_approval_by_one_tenant_waits_for_the_other_and_repeats_are_200(imds: Imds) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview":
    "If the VM is on shared infrastructure, the system will then wait for all other tenants on the
    same hardware to also approve the job or timeout"; "Start an event": 200 "even if another VM
    already approved the event"."""
    imds.add_vm("a0", host="shared", subscription_id="11111111-1111-1111-1111-111111111111")
    imds.add_vm("a1", host="shared", subscription_id="11111111-1111-1111-1111-111111111111")
    imds.add_vm("b0", host="shared", subscription_id="22222222-2222-2222-2222-222222222222")
    imds.service.execute(HostOperation("shared", "maintain"))
    ids = {vm: imds.document(vm)["Events"][0]["EventId"] for vm in ("a0", "a1", "b0")}
    assert len(set(ids.values())) == 3  # one event per standalone VM, one job
    assert imds.approve("a0", ids["a0"]).status == 200
    assert imds.approve("a1", ids["a1"]).status == 200
    waiting = snapshot(imds)
    assert all(statuses(imds, vm) == {ids[vm]: "Scheduled"} for vm in ids)
    assert imds.approve("a0", ids["a0"]).status == 200  # already approved: still 200
    assert snapshot(imds) == waiting
    assert imds.approve("b0", ids["b0"]).status == 200
    imds.advance(timedelta(seconds=7))
    assert all(statuses(imds, vm) == {ids[vm]: "Started"} for vm in ids)


def test_event_ids_are_matched_without_regard_to_case(scheduled: tuple[Imds, str, str]) -> None:
    """EventIds are GUIDs, "case insensitive on input" (RFC 4122, section 3); the documented
    approvals carry lower-case ids
    (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event":
    "f020ba2e-3bc0-4c40-a10b-86575a9eabd5") while documents show them in upper case."""
    imds, reboot, redeploy = scheduled
    assert imds.approve("WestNO_1", reboot.lower(), redeploy.title()).status == 200
    imds.advance(timedelta(seconds=7))
    assert statuses(imds) == {reboot: "Started", redeploy: "Started"}


@pytest.mark.parametrize(
    "event_ids",
    [
        [UNKNOWN_ID],
        ["f020ba2e-3bc0-4c40-a10b-86575a9eabd5"],
        ["KNOWN", UNKNOWN_ID],
        [UNKNOWN_ID, "KNOWN"],
        ["OTHER-SET"],
    ],
    ids=["unknown", "docs-sample-id", "known-then-unknown", "unknown-then-known", "not-visible"],
)
def test_an_id_this_vm_cannot_see_is_400_and_changes_nothing(
    scheduled: tuple[Imds, str, str], event_ids: list[str]
) -> None:
    """SPEC 3 [ours]: "An id that is not an event this VM can see: 400 and no state change",
    even when the same request also names a valid event."""
    imds, reboot, _ = scheduled
    imds.add_vm("Other_0", availability_set="Other")
    other = imds.schedule(EventType.REBOOT, "Other_0").event_id
    names = {"KNOWN": reboot, "OTHER-SET": other}
    before = snapshot(imds)
    response = imds.approve("WestNO_1", *(names.get(event_id, event_id) for event_id in event_ids))
    assert response.status == 400
    assert imds.error_of(response).startswith("Bad request. ")
    assert snapshot(imds) == before
    assert imds.approve("WestNO_1", reboot).status == 200  # and the real one still can be


MALFORMED: dict[str, bytes] = {
    "empty": b"",
    "not-json": b"StartRequests=F020BA2E",
    "truncated": b'{"StartRequests": [{"EventId": "KNOWN"}',
    "array": b'[{"EventId": "KNOWN"}]',
    "string": b'"KNOWN"',
    "number": b"5",
    "null": b"null",
    "empty-object": b"{}",
    "lower-case-key": b'{"startrequests": [{"EventId": "KNOWN"}]}',
    "empty-start-requests": b'{"StartRequests": []}',
    "start-requests-object": b'{"StartRequests": {"EventId": "KNOWN"}}',
    "start-requests-null": b'{"StartRequests": null}',
    "bare-id-in-array": b'{"StartRequests": ["KNOWN"]}',
    "missing-event-id": b'{"StartRequests": [{}]}',
    "numeric-event-id": b'{"StartRequests": [{"EventId": 5}]}',
    "null-event-id": b'{"StartRequests": [{"EventId": null}]}',
    "empty-event-id": b'{"StartRequests": [{"EventId": ""}]}',
    "list-event-id": b'{"StartRequests": [{"EventId": ["KNOWN"]}]}',
    "one-good-one-bad": b'{"StartRequests": [{"EventId": "KNOWN"}, {"EventId": 1}]}',
    "incarnation-list": b'{"DocumentIncarnation": [2], "StartRequests": [{"EventId": "KNOWN"}]}',
    "incarnation-object": b'{"DocumentIncarnation": {}, "StartRequests": [{"EventId": "KNOWN"}]}',
    "not-utf-8": b'{"StartRequests": [{"EventId": "\xff\xfe"}]}',
    "long-event-id": b'{"StartRequests": [{"EventId": "%s"}]}' % (b"A" * 65),
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_body_is_400_and_changes_nothing(
    scheduled: tuple[Imds, str, str], name: str
) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Start an event": "A 400
    error code indicates that the request header or payload was malformed."""
    imds, reboot, _ = scheduled
    body = MALFORMED[name].replace(b"KNOWN", reboot.encode())
    before = snapshot(imds)
    response = imds.post("WestNO_1", body)
    assert response.status == 400, response
    assert imds.error_of(response).startswith("Bad request. ")
    assert snapshot(imds) == before


def test_too_many_start_requests_is_400_and_changes_nothing(
    scheduled: tuple[Imds, str, str],
) -> None:
    """SPEC 1 [doc: IMDS family]: bounded input; an approval names live events, so a hundred
    and one of them in one request is refused whole (wire/approvals.py MAX_START_REQUESTS)."""
    imds, reboot, _ = scheduled
    before = snapshot(imds)
    response = imds.approve("WestNO_1", *([reboot] * 101))
    assert response.status == 400
    assert snapshot(imds) == before
    assert imds.approve("WestNO_1", *([reboot] * 100)).status == 200  # repeats count as one


def test_a_huge_body_is_400_and_changes_nothing(scheduled: tuple[Imds, str, str]) -> None:
    """SPEC 1 [doc: IMDS family]: "Request limits: bounded body ... rejected with 400"; a body
    exactly at the limit is still read."""
    imds, reboot, _ = scheduled
    limit = imds.endpoint.limits.max_body
    valid = orjson.dumps(start_requests(reboot))
    at_limit = valid[:-1] + b" " * (limit - len(valid)) + b"}"
    over = valid[:-1] + b" " * (limit + 1 - len(valid)) + b"}"
    assert (len(at_limit), len(over)) == (limit, limit + 1)
    before = snapshot(imds)
    response = imds.post("WestNO_1", over)
    assert response.status == 400
    assert imds.error_of(response) == f"Request body is larger than MaxBodyLength: {limit}"
    assert snapshot(imds) == before
    assert imds.post("WestNO_1", at_limit).status == 200


def test_post_needs_the_metadata_header_from_2017_08_01(scheduled: tuple[Imds, str, str]) -> None:
    """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Headers": "The
    Metadata:true header is required for all scheduled events requests"; release note of 2017-08-01:
    "Metadata header requirement enforced for all requests"
    (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Version and Region
    Availability")."""
    imds, reboot, _ = scheduled
    before = snapshot(imds)
    for version in ("2017-08-01", "2017-11-01", "2019-01-01", "2020-07-01"):
        for headers in ({}, {"Metadata": "false"}, {"Metadata": ""}):
            response = imds.post("WestNO_1", start_requests(reboot), version, headers=headers)
            assert response.status == 400
            assert imds.error_of(response) == (
                "Bad request. Required metadata header not specified"
            )
    assert snapshot(imds) == before
    ok = imds.post("WestNO_1", start_requests(reboot), headers={"Metadata": "TRUE"})
    assert ok.status == 200


def test_the_2017_03_01_preview_approved_without_the_header(
    scheduled: tuple[Imds, str, str],
) -> None:
    """docs.microsoft.com/azure/virtual-machines/virtual-machines-scheduled-events (2017), "C#
    Sample": ``ApproveScheduledEvents`` posts with only ``Content-Type: application/json`` (no
    Metadata header) to api-version=2017-03-01, and the 2017-08-01 note "Metadata header requirement
    enforced for all requests" says the preview did not enforce it. GET always needed it ("Using
    Headers")."""
    imds, reboot, _ = scheduled
    preview_approval = orjson.dumps({"DocumentIncarnation": "2", **start_requests(reboot)})
    response = imds.post(
        "WestNO_1",
        preview_approval,
        "2017-03-01",
        headers={"Content-Type": "application/json"},
    )
    assert response.status == 200
    assert statuses(imds)[reboot] == "Started"
    assert imds.get("WestNO_1", "2017-03-01", headers={}).status == 400


def test_an_approval_written_with_others_is_answered_once_written(imds: Imds) -> None:
    """A front-end grouping its writes (``group_writes``) answers an approval once it is
    written, as ``later(reply)``: the same empty 200 as an approval answered at once, given
    once the event has started."""
    imds.add_vm("vm")
    event = imds.schedule(EventType.REBOOT, "vm")
    imds.endpoint.group_writes = True
    held = imds.approve("vm", event.event_id)
    assert held.status == 0
    assert held.later is not None
    replies: list[object] = []
    held.later(replies.append)
    (reply,) = replies
    assert isinstance(reply, type(held))
    assert (reply.status, reply.body, reply.content_type) == (200, b"", None)
    status = imds.service.event(event.event_id).event.status
    assert status.value == "Started"
