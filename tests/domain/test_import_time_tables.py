"""Tables the domain works out once, at import: their contents, and their builders called
where a test can reach them.

A table built at import is built before any test runs, so a mistake in its builder shows only
in what the table holds: these tests state what each one must hold, written out from its
source, and call the builder again to check it still makes exactly that.
"""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest

from forewarn.domain import documents
from forewarn.domain.api_versions import SCHEDULED_EVENTS_VERSIONS
from forewarn.domain.events import EventType
from forewarn.domain.kinds import EventKind
from forewarn.domain.timing import (
    DEV,
    DOCUMENTED,
    FAST,
    PROFILES,
    TimingProfile,
    _minutes_read_as_seconds,
)

_SECOND = timedelta(seconds=1)
FREEZE, REBOOT, REDEPLOY = EventType.FREEZE, EventType.REBOOT, EventType.REDEPLOY
PREEMPT, TERMINATE = EventType.PREEMPT, EventType.TERMINATE


def test_dev_is_the_documented_profile_with_every_minute_read_as_a_second() -> None:
    """docs/faithfulness.md, "Dev timing": "The `dev` profile reads the documented minutes as
    seconds, as the mock server's Dev Timing does; the Started period then counts from the end
    of the VM's impact". Impacts stay in seconds (DurationInSeconds is), and so does the 24 h
    idle rule; Terminate's notice is the sets' default notBeforeTimeout (5 minutes) read so."""
    assert (
        TimingProfile(
            name="dev",
            minimum_notice={
                FREEZE: 15 * _SECOND,
                REBOOT: 15 * _SECOND,
                REDEPLOY: 10 * _SECOND,
                PREEMPT: timedelta(seconds=0.5),
                TERMINATE: 5 * _SECOND,
            },
            impact=timedelta(seconds=7),
            started_period=10 * _SECOND,
            first_call_delay=2 * _SECOND,
            idle_period=timedelta(hours=24),
            predicted_failure_notice=timedelta(days=7) / 60,
            os_image_notice=15 * _SECOND,
            terminate_notice=5 * _SECOND,
            started_periods={EventKind.LIVE_MIGRATION: 5 * _SECOND},
            started_after_impact=True,
        )
        == DEV
    )
    assert PROFILES["dev"] is DEV
    assert _minutes_read_as_seconds(DOCUMENTED) == DEV


def test_a_profile_read_as_seconds_keeps_a_terminate_notice_of_its_own() -> None:
    """The builder on a profile that gives Terminate a notice of its own (``fast``: 2 s) reads
    that one, not the minimum notice; everything but the impact and the idle rule divided."""
    read = _minutes_read_as_seconds(FAST)
    assert read.terminate_notice == timedelta(seconds=2) / 60
    assert read.minimum_notice == {t: n / 60 for t, n in FAST.minimum_notice.items()}
    assert (read.impact, read.idle_period) == (FAST.impact, FAST.idle_period)
    assert read.started_period == FAST.started_period / 60
    assert read.first_call_delay == FAST.first_call_delay / 60
    assert read.predicted_failure_notice == FAST.predicted_failure_notice / 60
    assert read.os_image_notice == FAST.os_image_notice / 60
    assert read.started_periods == {}
    assert read.started_after_impact
    assert read.name == "dev"


def test_the_narrow_views_are_the_versions_that_hide_event_types() -> None:
    """SPEC 2.2: Preempt arrived with 2017-11-01, Terminate with 2019-01-01; the versions
    before show neither (or not Terminate), each a view of the document of its own."""
    assert (
        frozenset({FREEZE, REBOOT, REDEPLOY}),
        frozenset({FREEZE, REBOOT, REDEPLOY, PREEMPT}),
    ) == documents.NARROW_VIEWS
    assert {v.event_types for v in SCHEDULED_EVENTS_VERSIONS} == {
        *documents.NARROW_VIEWS,
        frozenset(EventType),
    }


#: Which narrow view shows a change to events of these types (SPEC 2.2: "its incarnation moves
#: only when what that version is shown changes"), written out: before 2017-11-01, before
#: 2019-01-01; None when both do (a change every version shows).
SEEN = {
    (): (False, False),
    (PREEMPT,): (False, True),
    (TERMINATE,): (False, False),
    (PREEMPT, TERMINATE): (False, True),
}


@pytest.mark.parametrize(
    "types",
    [
        types
        for size in range(len(EventType) + 1)
        for types in itertools.combinations(EventType, size)
    ],
    ids=lambda types: "+".join(t.value for t in types) or "none",
)
def test_seen_by_every_set_of_event_types(types: tuple[EventType, ...]) -> None:
    """Every set of event types a change can touch, the table and its builder alike: a change
    to a Freeze, Reboot or Redeploy event is seen by every version, one to a Preempt event by
    those from 2017-11-01, one to a Terminate event only by those from 2019-01-01."""
    expected = None if {FREEZE, REBOOT, REDEPLOY} & set(types) else SEEN[types]
    assert documents.seen_by(types) == expected
    assert documents._seen_by(types) == expected
    assert documents._seen_by(reversed(types)) == expected
