"""The endpoint's answers beyond the JSON: ETag and 304, what a VM under an impact gets, and
the request id, checked without sockets (the socket tier runs the same through real clients).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from forewarn.domain.events import EventType
from forewarn.server.imds import JSON, ImdsResponse, RequestIds

from .conftest import METADATA, Imds

GUID = re.compile(rb"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def conditional(imds: Imds, if_none_match: str) -> int:
    return imds.get("vm", headers={**METADATA, "If-None-Match": if_none_match}).status


@pytest.mark.parametrize(
    ("if_none_match", "status"),
    [
        ('"1"', 304),
        ("1", 304),  # Azure/vm-scheduled-events echoes the bare value it stored
        ('W/"1"', 304),  # RFC 9110 13.1.2: If-None-Match compares weakly
        ('"0", "1"', 304),
        ('"0" ,W/"1"', 304),
        ("*", 304),
        ('"0"', 200),
        ('"0", "2"', 200),
        ('w/"1"', 200),  # the weak prefix is "W/", case-sensitive
        ('"1"x', 200),
        ("", 200),
    ],
)
def test_if_none_match_against_the_current_tag(imds: Imds, if_none_match: str, status: int) -> None:
    """The terminate-notification page (SPEC 1.4): the DocumentIncarnation is "an ETag";
    Microsoft's sample service polls with If-None-Match and expects 304 while unchanged."""
    imds.add_vm("vm")
    first = imds.get("vm")
    assert (first.status, first.etag) == (200, b'"1"')
    assert conditional(imds, if_none_match) == status


def test_a_304_has_the_tag_and_nothing_else(imds: Imds) -> None:
    imds.add_vm("vm")
    response = imds.get("vm", headers={**METADATA, "If-None-Match": '"1"'})
    assert (response.status, response.body, response.content_type, response.etag) == (
        304,
        b"",
        None,
        b'"1"',
    )
    imds.schedule(EventType.REBOOT, "vm")
    changed = imds.get("vm", headers={**METADATA, "If-None-Match": '"1"'})
    assert (changed.status, changed.etag) == (200, b'"2"')


def rebooting(imds: Imds) -> None:
    imds.add_vm("vm")
    event = imds.schedule(EventType.REBOOT, "vm")
    assert imds.approve("vm", event.event_id).status == 200


def test_hold_keeps_the_request_until_the_impact_ends(imds: Imds) -> None:
    """docs/faithfulness.md, impact: hold (the default) answers once the impact is over."""
    rebooting(imds)
    held = imds.get("vm")
    assert (held.status, held.reset) == (0, False)
    assert held.held_until == imds.start + imds.platform.timing.impact
    imds.advance(imds.platform.timing.impact + timedelta(seconds=1))
    assert imds.get("vm").status == 200


def test_refuse_resets_and_drop_closes(make_imds: type[Imds]) -> None:
    """docs/faithfulness.md, impact: refuse resets at once (a VM that is off), drop closes
    the connection unanswered."""
    for policy, reset in (("refuse", True), ("drop", False)):
        imds = make_imds(impact={"Reboot": policy})
        rebooting(imds)
        answer = imds.get("vm")
        assert (answer.status, answer.reset, answer.held_until) == (0, reset, None), policy


def test_request_ids_are_guids_and_never_repeat() -> None:
    """SPEC 1: every response carries an x-ms-request-id GUID, as real captures show."""
    ids = RequestIds()
    first, second = ids.next(), ids.next()
    assert GUID.match(first), first
    assert GUID.match(second), second
    assert first != second
    assert first[:24] == second[:24]
    assert RequestIds().next()[:24] != first[:24], "each process has its own prefix"


def test_a_tag_is_matched_whole(imds: Imds) -> None:
    """Only quotes and the weak prefix are taken off a candidate: ``X"1"X`` is not ``"1"``."""
    imds.add_vm("vm")
    assert conditional(imds, 'X"1"X') == 200
    assert conditional(imds, 'W/"1"') == 304


def test_a_response_carries_what_it_was_made_with() -> None:
    """What the endpoint decides reaches the transports only through the response's fields:
    each one as given, and by default an empty JSON answer, now, on a connection kept."""

    def later(reply: object) -> None: ...

    until = datetime(2024, 4, 11, 22, 0, tzinfo=UTC)
    made = ImdsResponse(0, b"{}", b"text/plain", b'"7"', until, True, True, later)
    assert (made.status, made.body, made.content_type, made.etag) == (
        0,
        b"{}",
        b"text/plain",
        b'"7"',
    )
    assert (made.held_until, made.reset, made.unanswered, made.later) == (until, True, True, later)
    plain = ImdsResponse(200)
    assert (plain.body, plain.content_type, plain.etag, plain.held_until) == (b"", JSON, None, None)
    assert (plain.reset, plain.unanswered, plain.later) == (False, False, None)
