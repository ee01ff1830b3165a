"""The domain's refusals that users read word for word.

Each text below reaches a person unchanged: as the control API's error ``message``, as the
CLI's one-line ``Error:``, or as ``forewarn serve``'s one-line start-up error. They are part
of the contract, so a change to one is a change users see.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest

from forewarn.commands import HostOperation, VmOperation
from forewarn.domain import operations
from forewarn.domain.clock import ManualClock, ensure_utc
from forewarn.domain.errors import (
    DomainError,
    InvalidEventError,
    InvalidOperationError,
    UnknownEventError,
)
from forewarn.domain.events import EventSource, EventType
from forewarn.domain.fleet import ScaleSet
from forewarn.domain.impact import ImpactPolicies
from forewarn.domain.platform import Platform
from forewarn.domain.ratelimit import RateLimiter
from forewarn.domain.timing import DOCUMENTED
from forewarn.domain.vms import Vm

START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)


def test_the_clock_never_moves_back() -> None:
    clock = ManualClock(START)
    with pytest.raises(ValueError, match=r"^a clock only moves forward$"):
        clock.set(START - timedelta(seconds=1))


def test_unknown_event_ids_are_listed_all() -> None:
    platform = Platform(START)
    platform.add_vm(Vm(name="a", vm_id="a"))
    with pytest.raises(UnknownEventError) as refused:
        platform.approve("a", ["X-1", "X-2"])
    assert str(refused.value) == "unknown event id(s): X-1, X-2"


def test_a_campaign_reboots_or_freezes_and_needs_vms() -> None:
    platform = Platform(START)
    platform.add_vm(Vm(name="a", vm_id="a"))
    with pytest.raises(InvalidOperationError) as wrong_type:
        operations.MaintenanceKind.for_event_type(EventType.REDEPLOY)
    assert str(wrong_type.value) == "a maintenance campaign reboots or freezes VMs"
    with pytest.raises(InvalidOperationError) as no_kind:
        operations.maintenance_campaign(platform, kinds=())
    assert str(no_kind.value) == "a maintenance campaign needs at least one kind"
    with pytest.raises(InvalidOperationError) as empty:
        operations.maintenance_campaign(platform, [])
    assert str(empty.value) == "a maintenance campaign needs at least one VM"


def test_a_bad_impact_policy_lists_the_choices() -> None:
    with pytest.raises(ValueError, match="impact policy") as refused:
        ImpactPolicies.parse(["Freeze=pause"])
    assert str(refused.value) == (
        "impact policy 'Freeze=pause' is not TYPE=POLICY with TYPE one of "
        "Freeze, Reboot, Redeploy, Preempt, Terminate and POLICY one of hold, drop, refuse"
    )


def test_an_unknown_timing_lists_the_known_ones() -> None:
    """Only durations can be overridden: the profile's name and its notice table (set per
    type through ``notice.TYPE``) are not timings."""
    for key in ("name", "minimum_notice", "impactt"):
        with pytest.raises(ValueError, match="unknown timing") as refused:
            DOCUMENTED.with_overrides({key: timedelta(seconds=1)})
        message = str(refused.value)
        assert message.startswith(f"unknown timing {key!r}; known: ")
        known = message.split("known: ")[1].split(", ")
        assert known == sorted(known)
        assert {"impact", "first_call_delay", "notice.Freeze", "notice.Terminate"} <= set(known)
        assert not {"name", "minimum_notice"} & set(known)
    with pytest.raises(ValueError, match=r"^unknown event type in 'notice\.Nap'$"):
        DOCUMENTED.with_overrides({"notice.Nap": timedelta(seconds=1)})


def test_only_durations_are_timings_and_the_refusals_name_every_choice() -> None:
    """README's ``--timing NAME=DURATION``: the names are the profile's durations, an event
    type's minimum notice (``notice.TYPE``) and a kind's Started period
    (``started_period.KIND``); the kinds' table and whether the Started period counts from
    the impact's end are not durations, so they are no timing either."""
    for key in ("started_periods", "started_after_impact"):
        with pytest.raises(ValueError, match=f"^unknown timing {key!r}; known: "):
            DOCUMENTED.with_overrides({key: timedelta(seconds=1)})
    with pytest.raises(ValueError, match="unknown timing") as refused:
        DOCUMENTED.with_overrides({"impactt": timedelta(seconds=1)})
    assert str(refused.value) == (
        "unknown timing 'impactt'; known: first_call_delay, idle_period, impact, "
        "notice.Freeze, notice.Preempt, notice.Reboot, notice.Redeploy, notice.Terminate, "
        "os_image_notice, predicted_failure_notice, started_period, started_period.KIND, "
        "terminate_notice"
    )
    with pytest.raises(ValueError, match="unknown event kind") as unknown_kind:
        DOCUMENTED.with_overrides({"started_period.migration": timedelta(seconds=1)})
    assert str(unknown_kind.value) == (
        "unknown event kind in 'started_period.migration'; known: live-migration, "
        "host-update, host-maintenance, user-reboot, user-redeploy, predicted-failure, "
        "failure-redeploy, failure-reboot, eviction, deletion"
    )


DURATION_TEXT = (
    "DurationInSeconds is -1 (unknown) or a count of seconds up to 3153600000 (36500 days)"
)


def test_refused_events_say_why() -> None:
    """What ``POST /api/v1/events`` answers (422) for an event that breaks a rule."""
    platform = Platform(START)
    platform.add_vm(Vm(name="a", vm_id="a"))
    cases = [
        ([], -1, "an event must impact at least one virtual machine"),
        (["a", "a"], -1, "Resources must not name a virtual machine twice"),
        (["a"], -2, DURATION_TEXT),
        (["a"], 3_153_600_001, DURATION_TEXT),
    ]
    for resources, seconds, text in cases:
        with pytest.raises(InvalidEventError) as refused:
            platform.schedule(
                EventType.FREEZE, resources, source=EventSource.PLATFORM, duration_seconds=seconds
            )
        assert str(refused.value) == text
    with pytest.raises(InvalidEventError) as empty:
        platform.schedule_job([])
    assert str(empty.value) == "a job needs at least one event"


def test_fleet_refusals_name_the_vm_the_address_and_the_host() -> None:
    platform = Platform(START)
    platform.add_vm(Vm(name="a", vm_id="a", address="127.0.0.2"))
    platform.add_scale_set(ScaleSet("web"))
    refusals: list[tuple[Callable[[], object], str]] = [
        (lambda: platform.add_vm(Vm(name="a", vm_id="x")), "virtual machine 'a' already exists"),
        (
            lambda: platform.add_vm(Vm(name="b", vm_id="b", address="127.0.0.2")),
            "address 127.0.0.2 is already 'a''s",
        ),
        (lambda: platform.add_scale_set(ScaleSet("web")), "scale set 'web' already exists"),
        (lambda: platform.document("ghost"), "no virtual machine named 'ghost'"),
        (lambda: operations.live_migrate(platform, "h9"), "no virtual machine runs on host 'h9'"),
        (lambda: ScaleSet("s", platform_fault_domain_count=0),
         "scale set 's': platform fault domain count must be at least 1"),
    ]  # fmt: skip
    for refusal, text in refusals:
        with pytest.raises(DomainError) as refused:
            refusal()
        assert str(refused.value) == text


def test_times_and_rates_that_make_no_sense() -> None:
    with pytest.raises(ValueError, match=r"^platform times must be timezone-aware$"):
        ensure_utc(datetime(2022, 4, 11))
    assert ensure_utc(START.astimezone(timezone(timedelta(hours=2)))).tzinfo is UTC
    # The platform keeps its time in UTC whatever zone it is moved with: every time it shows
    # is GMT (its Date header, NotBefore).
    platform = Platform(START)
    platform.advance_to((START + timedelta(seconds=1)).astimezone(timezone(timedelta(hours=2))))
    assert platform.now == START + timedelta(seconds=1)
    assert platform.now.tzinfo is UTC
    with pytest.raises(ValueError, match=r"^a clock only moves forward$"):
        ManualClock(START).advance(timedelta(seconds=-1))
    with pytest.raises(ValueError, match=r"^rate must be positive$"):
        RateLimiter(rate=0)


def test_a_journal_record_naming_an_unknown_action_is_refused() -> None:
    """A record from elsewhere (or a newer forewarn) is refused with the names known here,
    never guessed at: replay stops on it with a message that says what it is."""
    platform = Platform(START)
    platform.add_vm(Vm(name="a", vm_id="a", host="h1"))
    with pytest.raises(InvalidOperationError) as host:
        HostOperation("h1", "nap").apply(platform)
    assert str(host.value) == (
        "unknown host action 'nap'; known: live-migrate, update, maintain, predict-failure, fail"
    )
    with pytest.raises(InvalidOperationError) as vm:
        VmOperation("a", "nap").apply(platform)
    assert str(vm.value) == "unknown VM action 'nap'; known: freeze-instead, impact-again"
