"""What must hold after every step of the platform, whatever the step was.

:class:`Invariants` keeps the little history the checks need (when an event was first seen
Started, which ids left a VM's document, when each VM last asked) and compares consecutive
:class:`Snapshot` values. Each check names the document and section it comes from.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from platform_model import START, Fleet, expected_audience, fault_domain_group, scope_key

from forewarn.domain.documents import FIRST_INCARNATION, Document
from forewarn.domain.events import Event, EventSource, EventStatus, EventType
from forewarn.domain.platform import CampaignView, EventView, Platform
from forewarn.domain.timing import TimingProfile
from forewarn.domain.vms import Vm

GUID = re.compile(r"^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$")


def seconds(value: int) -> timedelta:
    return timedelta(seconds=value)


@dataclass(frozen=True)
class Snapshot:
    """Everything observable about the platform at one moment."""

    now: datetime
    documents: dict[str, Document]
    events: dict[str, EventView]
    reachable: dict[str, bool]
    receiving: dict[str, bool]
    campaigns: tuple[CampaignView, ...]
    hosts: dict[str, str]
    #: What a request of each VM meets: the VM found at its address, whether it is paused,
    #: and the document it is shown; with the platform's count of changes to them.
    met: dict[str, tuple[Vm | None, bool, Document]]
    changes: int
    #: The VMs nothing of whose changed (:meth:`Platform.unchanged_since`) since the count
    #: of changes read ``since`` (given to :meth:`take`: the last snapshot's).
    unchanged: frozenset[str]

    @classmethod
    def take(cls, platform: Platform, since: int | None = None) -> Snapshot:
        names = [vm.name for vm in platform.vms()]
        since = platform.changes if since is None else since
        return cls(
            now=platform.now,
            documents={name: platform.document(name) for name in names},
            events={view.event.event_id: view for view in platform.events()},
            reachable={name: platform.reachable(name) for name in names},
            receiving={name: platform.receiving(name) for name in names},
            campaigns=platform.campaigns(),
            hosts={vm.name: vm.host for vm in platform.vms()},
            met={
                vm.name: (
                    platform.vm_at(vm.address) if vm.address is not None else vm,
                    platform.pause(vm.name) is not None,
                    platform.document(vm.name),
                )
                for vm in platform.vms()
            },
            changes=platform.changes,
            unchanged=frozenset(name for name in names if platform.unchanged_since(name, since)),
        )


class Invariants:
    """The checks, and what they remember between steps."""

    def __init__(self, fleet: Fleet, timing: TimingProfile, platform: Platform) -> None:
        self.timing = timing
        self.fleet = {vm.name: vm for vm in fleet.vms}
        self.scale_sets = {s.name: s for s in fleet.scale_sets}
        self.last = Snapshot.take(platform)
        self.first_seen: dict[str, Event] = {}
        self.started_by: dict[str, datetime] = {}
        self.removed: set[str] = set()
        self.left_document: dict[str, set[str]] = defaultdict(set)
        self.campaign_of: dict[str, int] = {}
        self.campaign_domains: dict[int, list[int]] = defaultdict(list)
        self.asked_at = {vm.name: START for vm in fleet.vms}
        self.enabled_from: dict[str, datetime | None] = {
            vm.name: None if vm.name in fleet.not_receiving else START for vm in fleet.vms
        }
        self.deleted_on_request: set[str] = set()

    def request_enables(self, name: str, now: datetime) -> bool:
        """SPEC 7: a request turns Scheduled Events on when it is the VM's first, or its
        first after 24 h without one."""
        idle = now - self.asked_at[name] >= self.timing.idle_period
        return self.enabled_from[name] is None or idle

    def requested(self, name: str, now: datetime) -> None:
        """Record a request from ``name``."""
        if self.request_enables(name, now):
            self.enabled_from[name] = now + self.timing.first_call_delay
        self.asked_at[name] = now

    def observe(self, platform: Platform) -> None:
        """Run every check on the step from the last observation to now."""
        previous, current = self.last, Snapshot.take(platform, since=self.last.changes)
        for check in (
            self.check_event_identity,
            self.check_documents_show_platform_events,
            self.check_status_never_goes_back,
            self.check_incarnations,
            self.check_bounds,
            self.check_jobs,
            self.check_resources_grouping,
            self.check_delivery_scope,
            self.check_enablement,
            self.check_campaign_fault_domains,
            self.check_fault_domains_on_their_own_hosts,
            self.check_vm_removal,
            self.check_impact,
            self.check_changes_counted,
            self.check_changes_counted_by_vm,
        ):
            check(previous, current)
        self.last = current

    def check_event_identity(self, previous: Snapshot, current: Snapshot) -> None:
        """SPEC 2 [doc]: EventId an upper-case GUID, "globally unique, stable for the life of
        the event": same id, same type, Resources, source, description, duration; NotBefore
        fixed while Scheduled; a removed id never comes back."""
        for event_id, view in current.events.items():
            event = view.event
            assert GUID.match(event_id), event_id
            assert event_id not in self.removed, f"{event_id} came back after removal"
            first = self.first_seen.setdefault(event_id, event)
            assert (
                event.event_type,
                event.resources,
                event.source,
                event.description,
                event.duration_seconds,
                event.resource_type,
            ) == (
                first.event_type,
                first.resources,
                first.source,
                first.description,
                first.duration_seconds,
                first.resource_type,
            )
            if event.status is EventStatus.SCHEDULED:
                assert event.not_before == first.not_before
        self.removed.update(set(previous.events) - set(current.events))

    def check_documents_show_platform_events(self, previous: Snapshot, current: Snapshot) -> None:
        """Every VM that sees an event sees the same event: the one the platform holds."""
        del previous
        for document in current.documents.values():
            ids = [e.event_id for e in document.events]
            assert len(ids) == len(set(ids))
            for event in document.events:
                assert current.events[event.event_id].event == event

    def check_status_never_goes_back(self, previous: Snapshot, current: Snapshot) -> None:
        """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level
        overview": Scheduled -> Started -> removed; SPEC 2: "An event never moves back from Started
        to Scheduled"; NotBefore is a time while Scheduled and "" (None) once Started."""
        del previous
        for event_id, view in current.events.items():
            event = view.event
            if event.status is EventStatus.STARTED:
                assert event.not_before is None
                self.started_by.setdefault(event_id, current.now)
            else:
                assert event.not_before is not None
                assert event_id not in self.started_by, f"{event_id} went back to Scheduled"

    def check_incarnations(self, previous: Snapshot, current: Snapshot) -> None:
        """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Example responses":
        "The DocumentIncarnation is changing every time there's new information in Events"; SPEC 2:
        it never goes back and the same incarnation always means the same information. Exception,
        SPEC 2 [seen]: a VM re-enabled after 24 h without requests starts afresh (at most one change
        after 1)."""
        for name, document in current.documents.items():
            before = previous.documents.get(name)
            if before is None:
                continue
            afresh = (
                not previous.receiving[name]
                and document.incarnation < before.incarnation
                and document.incarnation <= FIRST_INCARNATION + 1
            )
            if afresh:
                pass
            elif document.events != before.events:
                assert document.incarnation > before.incarnation, name
            else:
                assert document.incarnation == before.incarnation, name
            gone = {e.event_id for e in before.events} - {e.event_id for e in document.events}
            self.left_document[name].update(gone)
            back = self.left_document[name] & {e.event_id for e in document.events}
            assert not back, f"{name}: {back} left the document and came back"

    def check_bounds(self, previous: Snapshot, current: Snapshot) -> None:
        """Scheduled no longer than its notice (it starts at NotBefore at the latest: "the
        event is automatically approved when the NotBefore time is reached",
        learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview"),
        never less than the type's minimum notice ("Event Scheduling",
        learn.microsoft.com/azure/virtual-machines/linux/scheduled-events), and Started no longer
        than the profile's Started period ("EventStatus:"Started" to Completed (event removed from
        Events array): 10 minutes",
        learn.microsoft.com/azure/virtual-machines/windows/scheduled-events), or than its impact
        where that is longer (SPEC 4: "Started --impact, then done--> (removed)"); in a profile
        of seconds, no longer than its impact and the period after it."""
        for event_id, view in current.events.items():
            event = view.event
            if event.status is EventStatus.SCHEDULED:
                assert event.not_before is not None
                assert current.now < event.not_before, f"{event_id} Scheduled past NotBefore"
                if event_id not in previous.events:
                    minimum = self.timing.notice_for(event.event_type)
                    assert event.not_before >= previous.now + minimum
            else:
                impact = max(self.timing.impact, seconds(event.duration_seconds))
                period = self.timing.started_period
                # a profile in seconds counts the period from the end of the impact
                # (docs/flows.md, "Dev timing")
                longest = (
                    impact + period if self.timing.started_after_impact else max(period, impact)
                )
                assert current.now < self.started_by[event_id] + longest, (
                    f"{event_id} Started for longer than {longest}"
                )

    def check_jobs(self, previous: Snapshot, current: Snapshot) -> None:
        """SPEC 3 [doc]: "The event starts when every party that must approve has approved, or
        at NotBefore, whichever is first"; the events of one job start together."""
        jobs: dict[int, list[EventView]] = defaultdict(list)
        for view in current.events.values():
            jobs[view.job_id].append(view)
        for members in jobs.values():
            assert len({m.event.status for m in members}) == 1, "a job started in part"
            if members[0].event.status is EventStatus.SCHEDULED:
                assert not all(m.parties <= m.approvals for m in members), "approved, not started"
        for event_id, view in current.events.items():
            before = previous.events.get(event_id)
            if (
                before is not None
                and before.event.status is EventStatus.SCHEDULED
                and view.event.status is EventStatus.STARTED
            ):
                assert before.event.not_before is not None
                if current.now < before.event.not_before:
                    for member in jobs[view.job_id]:
                        assert member.parties <= member.approvals, f"{event_id} started early"

    def check_resources_grouping(self, previous: Snapshot, current: Snapshot) -> None:
        """learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Event Properties",
        Resources: "guaranteed to contain machines from at most one update domain"; one tenant per
        event, since each tenant on shared hardware approves its own
        (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level
        overview"); one delivery-scope group, so nobody is shown a neighbour it cannot see."""
        for event_id in set(current.events) - set(previous.events):
            vms = [self.fleet[r.name] for r in current.events[event_id].event.resources]
            assert len({vm.platform_update_domain for vm in vms}) == 1
            assert len({vm.tenant for vm in vms}) == 1
            keys = {scope_key(vm, self.scale_sets) or ("vm", vm.name) for vm in vms}
            assert len(keys) == 1

    def audience(self, event: Event) -> frozenset[str]:
        impacted = [self.fleet[r.name] for r in event.resources]
        return expected_audience(impacted, self.fleet.values(), self.scale_sets)

    def check_delivery_scope(self, previous: Snapshot, current: Snapshot) -> None:
        """SPEC 5: every VM shown an event is in the event's delivery scope, and every VM that
        is receiving is shown every live event of its scope."""
        del previous
        audiences = {i: self.audience(v.event) for i, v in current.events.items()}
        for name, document in current.documents.items():
            shown = {e.event_id for e in document.events}
            for event_id in shown:
                assert name in audiences[event_id], f"{name} shown {event_id} out of scope"
            if current.receiving[name]:
                due = {i for i, audience in audiences.items() if name in audience}
                assert shown == due, f"{name} receiving but not shown {due - shown}"

    def check_enablement(self, previous: Snapshot, current: Snapshot) -> None:
        """SPEC 7: receiving from first request + first-call delay until 24 h without one."""
        del previous
        for name, receiving in current.receiving.items():
            enabled_from = self.enabled_from[name]
            expected = (
                enabled_from is not None
                and enabled_from <= current.now
                and current.now - self.asked_at[name] < self.timing.idle_period
            )
            assert receiving is expected, name

    def check_campaign_fault_domains(self, previous: Snapshot, current: Snapshot) -> None:
        """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level
        overview": "VMs in different fault domains won't be impacted by routine maintenance
        operations at the same time"."""
        del previous
        for campaign in current.campaigns:
            for event_id in campaign.current:
                self.campaign_of[event_id] = campaign.campaign_id
        in_impact: dict[tuple[str, str], set[int]] = defaultdict(set)
        live_domains: dict[int, set[int]] = defaultdict(set)
        for event_id, view in current.events.items():
            campaign_id = self.campaign_of.get(event_id)
            if campaign_id is None:
                continue
            for resource in view.event.resources:
                vm = self.fleet[resource.name]
                live_domains[campaign_id].add(vm.platform_fault_domain)
                group = fault_domain_group(vm)
                if (
                    group is not None
                    and view.event.status is EventStatus.STARTED
                    and not current.reachable.get(vm.name, True)
                ):
                    in_impact[group].add(vm.platform_fault_domain)
        for group, domains in in_impact.items():
            assert len(domains) <= 1, f"{group}: fault domains {domains} in impact at once"
        for campaign_id, domains in live_domains.items():
            assert len(domains) == 1, f"campaign {campaign_id} live in fault domains {domains}"
            (domain,) = domains
            walked = self.campaign_domains[campaign_id]
            if not walked or walked[-1] != domain:
                assert not walked or walked[-1] < domain, "fault domains revisited"
                walked.append(domain)

    def check_fault_domains_on_their_own_hosts(self, previous: Snapshot, current: Snapshot) -> None:
        """learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level
        overview": "VMs in different fault domains won't be impacted by routine maintenance
        operations at the same time". A host's maintenance hits all of it at once, so through
        redeploys, predicted failures and host failures no host holds two fault domains of one set,
        and no platform event names two."""
        del previous
        domains_on: dict[tuple[tuple[str, str], str], set[int]] = defaultdict(set)
        for name, host in current.hosts.items():
            vm = self.fleet[name]
            group = fault_domain_group(vm)
            if group is not None:
                domains_on[group, host].add(vm.platform_fault_domain)
        for (group, host), domains in domains_on.items():
            assert len(domains) == 1, f"{host} holds fault domains {domains} of {group}"
        for view in current.events.values():
            if view.event.source is not EventSource.PLATFORM:
                continue
            named: dict[tuple[str, str], set[int]] = defaultdict(set)
            for resource in view.event.resources:
                vm = self.fleet[resource.name]
                group = fault_domain_group(vm)
                if group is not None:
                    named[group].add(vm.platform_fault_domain)
            for group, domains in named.items():
                assert len(domains) == 1, f"{view.event.event_id} spans {domains} of {group}"

    def check_vm_removal(self, previous: Snapshot, current: Snapshot) -> None:
        """A VM leaves the fleet only when asked to (deleted without terminate notification)
        or after a Terminate or Preempt event impacting it has started (scheduled-events-
        linux.txt, "Event Properties": Preempt "is being deleted", Terminate "is scheduled to
        be deleted")."""
        for name in set(previous.documents) - set(current.documents):
            if name in self.deleted_on_request:
                continue
            deleting = [
                view.event
                for snapshot in (previous, current)
                for view in snapshot.events.values()
                if view.event.event_type in (EventType.TERMINATE, EventType.PREEMPT)
                and view.event.impacts(name)
            ]
            assert deleting, f"{name} vanished without a Terminate or Preempt event"

    def check_impact(self, previous: Snapshot, current: Snapshot) -> None:
        """A VM is unreachable only during the impact of a Started event naming it (SPEC 4:
        "Started --impact, then done--> (removed)")."""
        del previous
        for name, reachable in current.reachable.items():
            if reachable:
                continue
            assert any(
                view.event.status is EventStatus.STARTED and view.event.impacts(name)
                for view in current.events.values()
            ), f"{name} unreachable with no Started event impacting it"

    def check_changes_counted(self, previous: Snapshot, current: Snapshot) -> None:
        """Not in the documents: the service answers a VM's repeated request from what its
        last one met while :attr:`Platform.changes` reads the same, so nothing a request
        meets may change without it: no VM comes, goes or moves, no document is replaced,
        and no pause begins (one may end with time alone: nothing is kept while paused)."""
        if current.changes != previous.changes:
            return
        assert current.met.keys() == previous.met.keys(), "the fleet changed uncounted"
        for name, (vm, paused, document) in current.met.items():
            vm_before, paused_before, document_before = previous.met[name]
            assert vm is vm_before, f"{name}: its VM changed uncounted"
            assert document is document_before, f"{name}: its document changed uncounted"
            assert paused_before or not paused, f"{name}: a pause began uncounted"

    def check_changes_counted_by_vm(self, previous: Snapshot, current: Snapshot) -> None:
        """Not in the documents: the service answers a VM's repeated request from what its
        last one met while nothing of that VM's changed since (:meth:`Platform.unchanged_since`,
        other VMs' changes aside), so nothing its request meets may change without it: its
        VM is not gone nor added again nor moved, its document is not replaced, and no pause
        of its begins."""
        for name in current.unchanged:
            assert name in previous.met, f"{name}: added uncounted"
            vm, paused, document = current.met[name]
            vm_before, paused_before, document_before = previous.met[name]
            assert vm is vm_before, f"{name}: its VM changed uncounted"
            assert document is document_before, f"{name}: its document changed uncounted"
            assert paused_before or not paused, f"{name}: a pause began uncounted"
