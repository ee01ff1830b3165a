"""Enablement: when a VM's Scheduled Events are on (SPEC 7).

"The first time you make a request for scheduled events, it implicitly enables the service"
and the answer comes "up to two minutes" later; a VM that makes no request for 24 hours has
it turned off again (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Enabling
and disabling Scheduled Events"). The first-call delay and the idle period come from the timing
profile; the first-call delay is the ``ENABLE`` deadline of
:data:`forewarn.domain._lifecycle.LIFECYCLE`.

Only requests for events are counted here (:meth:`Platform.arrive`'s ``for_events``): the
page ties both the first call and the 24 hours to them ("enabled for your service the first
time you make a request for events"), so reading instance metadata neither turns Scheduled
Events on nor keeps it on.

A VM that is not receiving is not shown new events and not waited for by approvals; once
enabled it is shown every live event of its scope at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from forewarn.domain._lifecycle import Deadline, Deadlines
from forewarn.domain._state import PlatformState, VmRecord
from forewarn.domain.documents import FIRST_INCARNATION, Document


class Enablement:
    """Each VM's enablement instant and last request."""

    def __init__(self, state: PlatformState, deadlines: Deadlines) -> None:
        self._state = state
        self._deadlines = deadlines

    def receiving(self, name: str) -> bool:
        """Scheduled Events is on for ``name``: enabled, and asked within the idle period."""
        record = self._state.records.get(name)
        return record is not None and bool(self.receiving_among({name: record}))

    def receiving_among(self, members: Mapping[str, VmRecord]) -> dict[str, VmRecord]:
        """Those of ``members`` (names with their records) that are :meth:`receiving`, in
        their order; the one statement of the rule, for an event's whole audience at once (a
        set's events reach every member)."""
        state = self._state
        now = state.now
        idle_period = state.timing.idle_period
        return {
            name: record
            for name, record in members.items()
            if (enabled_at := record.enabled_at) is not None
            and enabled_at <= now
            and now - record.last_request < idle_period
        }

    def touch(self, vm_name: str, record: VmRecord) -> bool:
        """Record a request from ``vm_name``, whose record is ``record``: the first one (or
        the first after 24 h idle) turns Scheduled Events on, after the profile's first-call
        delay (SPEC 7).

        True when this request turned it on (the only requests worth journaling).
        """
        state = self._state
        enabled_at = record.enabled_at
        now = state.now
        idle = now - record.last_request >= state.timing.idle_period
        record.last_request = now
        if enabled_at is not None and not idle:
            return False  # on already, or waiting for its first-call delay
        state.changed_for(record)
        if enabled_at is not None:
            # Re-enabled after the idle period: Azure starts the DocumentIncarnation afresh
            # (SPEC 2; ClusterLabs azure-events-az forgets its last incarnation for this).
            record.document = Document(FIRST_INCARNATION, record.document.events)
        enable_at = self._deadlines.due(Deadline.ENABLE, vm_name)
        record.enabled_at = enable_at
        if enable_at <= now:
            self._enable(vm_name)
        else:
            self._deadlines.push(enable_at, vm_name, Deadline.ENABLE)
        return True

    def assume_requests_now(self) -> None:
        """Count every enabled VM as having just asked: after a restart of the service, whose
        journal keeps only the requests that changed state, nobody is idle by our absence."""
        state = self._state
        for record in state.records.values():
            if record.enabled_at is not None:
                record.last_request = state.now

    def last_requests(self) -> dict[str, datetime]:
        """When each VM last made a request."""
        return {name: record.last_request for name, record in self._state.records.items()}

    def take_requests(self, times: Mapping[str, datetime]) -> None:
        """Each VM named in ``times`` and still here last made a request then: whether it is
        idle may change, so it counts as a change."""
        records = self._state.records
        for name, moment in times.items():
            record = records.get(name)
            if record is not None:
                record.last_request = moment
        self._state.changed()

    def enable_due(self, name: str) -> None:
        """The first-call delay is over, unless the VM was deleted or touched again since."""
        record = self._state.records.get(name)
        if (
            record is not None
            and record.enabled_at is not None
            and record.enabled_at <= self._state.now
        ):
            self._enable(name)

    def _enable(self, name: str) -> None:
        state = self._state
        record = state.records[name]
        shown = {event.event_id for event in record.document.events}
        unseen = tuple(
            [
                live.event
                for event_id, live in state.events.items()
                if name in live.audience and event_id not in shown
            ]
        )
        state.show((record,), unseen)  # counted as a change even with none unseen: it is on
