"""What users and the platform do, turned into events: the rows of SPEC 6.

Each function takes the :class:`~forewarn.domain.platform.Platform` and returns the events it
created. Grouping follows two documented rules: an event's Resources hold VMs of "at most one
update domain" (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, Event Properties,
Resources), and a platform operation on a shared host waits for every tenant's approval
(learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview": "the
system will then wait for all other tenants on the same hardware to also approve"), so one host
operation is one job with one event per tenant and scope group.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

from forewarn.domain import descriptions
from forewarn.domain.errors import InvalidOperationError, UnknownHostError
from forewarn.domain.events import DURATION_UNKNOWN, Event, EventSource, EventType
from forewarn.domain.platform import CampaignView, EventRequest, Platform
from forewarn.domain.scope import ScopeGroup
from forewarn.domain.vms import Priority, Vm

#: DurationInSeconds of a live-migration Freeze, as in the documentation's example.
LIVE_MIGRATION_SECONDS = 5
#: DurationInSeconds of a memory-preserving host update: about 9 s in public captures
#: (SPEC 6, "memory-preserving host update": ~9, seen from 1 to 15).
HOST_UPDATE_SECONDS = 9


def _single(
    platform: Platform,
    vm_name: str,
    event_type: EventType,
    description: str,
    *,
    auto_approved: bool,
) -> tuple[Event, ...]:
    request = EventRequest(event_type, (vm_name,), EventSource.USER, description)
    return platform.schedule_job([request], already_started=auto_approved)


def restart(platform: Platform, vm_name: str) -> tuple[Event, ...]:
    """Reboot, User; with ``userInitiatedReboot`` auto-approval only a Started event shows."""
    vm = platform.vm(vm_name)
    return _single(
        platform,
        vm_name,
        EventType.REBOOT,
        descriptions.USER_RESTART,
        auto_approved=vm.policy.auto_approve_reboot,
    )


def redeploy(platform: Platform, vm_name: str) -> tuple[Event, ...]:
    """Redeploy, User; the VM moves to another host once the impact is over."""
    vm = platform.vm(vm_name)
    return _single(
        platform,
        vm_name,
        EventType.REDEPLOY,
        descriptions.USER_REDEPLOY,
        auto_approved=vm.policy.auto_approve_redeploy,
    )


def simulate_eviction(platform: Platform, vm_names: Sequence[str]) -> tuple[Event, ...]:
    """Preempt, Platform, 30 s: Spot VMs only; each VM is deleted after its impact."""
    requests = []
    for name in vm_names:
        vm = platform.vm(name)
        if vm.priority is not Priority.SPOT:
            raise InvalidOperationError(f"{name} is not a Spot VM; only Spot VMs are evicted")
        requests.append(EventRequest(EventType.PREEMPT, (name,), EventSource.PLATFORM))
    events: list[Event] = []
    for request in requests:
        events.extend(platform.schedule_job([request]))
    return tuple(events)


def instance_name(scale_set_name: str, instance_id: str) -> str:
    """The VM name of a scale set's instance: instance ``0`` of ``web`` is ``web_0``."""
    return f"{scale_set_name}_{instance_id}"


def instance_names(scale_set_name: str, instance_ids: Iterable[str]) -> tuple[str, ...]:
    return tuple(instance_name(scale_set_name, instance) for instance in instance_ids)


def delete_instances(
    platform: Platform,
    scale_set_name: str,
    instance_ids: Sequence[str],
    *,
    autoscale: bool = False,
) -> tuple[Event, ...]:
    """Terminate each instance (scale-in or delete) when the set has terminate notification.

    Without it, instances go at once with no event. All Terminate events of a set with the
    same NotBefore form one job: "all must be approved before any proceeds" (SPEC 3).
    """
    scale_set = platform.scale_set(scale_set_name)
    names = instance_names(scale_set_name, instance_ids)
    for name in names:
        platform.vm(name)
    if not scale_set.terminate_notification:
        for name in names:
            platform.delete_vm(name)
        return ()
    source = EventSource.PLATFORM if autoscale else EventSource.USER
    notice = platform.timing.terminate_notice or scale_set.terminate_timeout
    requests = [EventRequest(EventType.TERMINATE, (name,), source) for name in names]
    return platform.schedule_job(requests, notice=notice, join_key=f"terminate:{scale_set_name}")


def os_image_upgrade(
    platform: Platform, scale_set_name: str, instance_ids: Sequence[str]
) -> tuple[Event, ...]:
    """Guest OS upgrade or reimage: a Reboot notice only with OS image notification on and a
    size that supports it; otherwise the upgrade happens with no event."""
    scale_set = platform.scale_set(scale_set_name)
    names = instance_names(scale_set_name, instance_ids)
    vms = [platform.vm(name) for name in names]
    if not scale_set.os_image_notification:
        return ()
    requests = [
        EventRequest(EventType.REBOOT, (vm.name,), EventSource.PLATFORM)
        for vm in vms
        if vm.gets_os_image_notifications
    ]
    if not requests:
        return ()
    return platform.schedule_job(requests, notice=platform.timing.os_image_notice)


def group_requests(
    platform: Platform,
    vms: Iterable[Vm],
    event_type: EventType,
    description: str,
    duration_seconds: int = -1,
) -> list[EventRequest]:
    """One request per (tenant, delivery-scope group, update domain), naming its VMs in fleet
    order: the documentation's example lists ``["FrontEnd_IN_0", "BackEnd_IN_0"]``, roles as
    the service defines them, not alphabetically."""
    groups: dict[tuple[str, ScopeGroup, int], list[str]] = defaultdict(list)
    for vm in vms:
        key = (vm.tenant, platform.scope_of(vm), vm.platform_update_domain)
        groups[key].append(vm.name)
    return [
        EventRequest(event_type, tuple(names), EventSource.PLATFORM, description, duration_seconds)
        for _, names in sorted(groups.items())
    ]


def _on_host(platform: Platform, host: str) -> list[Vm]:
    vms = [vm for vm in platform.vms() if vm.host == host]
    if not vms:
        raise UnknownHostError(host)
    return vms


class MaintenanceKind(enum.Enum):
    """The kinds of host maintenance, each one event type, Description and DurationInSeconds.

    A host operation is one of these on one host; a maintenance campaign runs one per fault
    domain, choosing the kind step by step.
    """

    #: "Host server is undergoing maintenance.", a Freeze of about 9 s: the memory-preserving
    #: host update, the most common real event (SPEC 6 [seen]).
    UPDATE = "update"
    #: A Freeze of a few seconds described as live migration (the documentation's example).
    LIVE_MIGRATE = "live-migrate"
    #: Host maintenance that needs a reboot: a Platform Reboot, impact unknown.
    MAINTAIN = "maintain"

    @property
    def event(self) -> tuple[EventType, str, int]:
        """Its event type, Description and DurationInSeconds."""
        return _MAINTENANCE_EVENTS[self]

    @classmethod
    def for_event_type(cls, event_type: EventType) -> MaintenanceKind:
        """The campaign kind a bare event type has always meant: Reboot maintains, Freeze
        live-migrates."""
        if event_type is EventType.REBOOT:
            return cls.MAINTAIN
        if event_type is EventType.FREEZE:
            return cls.LIVE_MIGRATE
        raise InvalidOperationError("a maintenance campaign reboots or freezes VMs")


_MAINTENANCE_EVENTS = {
    MaintenanceKind.UPDATE: (EventType.FREEZE, descriptions.HOST_MAINTENANCE, HOST_UPDATE_SECONDS),
    MaintenanceKind.LIVE_MIGRATE: (
        EventType.FREEZE,
        descriptions.LIVE_MIGRATION,
        LIVE_MIGRATION_SECONDS,
    ),
    MaintenanceKind.MAINTAIN: (EventType.REBOOT, descriptions.HOST_MAINTENANCE, DURATION_UNKNOWN),
}


def _maintenance_requests(
    platform: Platform, vms: Iterable[Vm], kind: MaintenanceKind
) -> list[EventRequest]:
    event_type, description, duration = kind.event
    return group_requests(platform, vms, event_type, description, duration)


def live_migrate(platform: Platform, host: str) -> tuple[Event, ...]:
    """Freeze, Platform, a few seconds: memory-preserving maintenance of a host."""
    kind = MaintenanceKind.LIVE_MIGRATE
    return platform.schedule_job(_maintenance_requests(platform, _on_host(platform, host), kind))


def update_host(platform: Platform, host: str) -> tuple[Event, ...]:
    """Freeze, Platform, about 9 s: the memory-preserving host update, the most common real
    event (SPEC 6 [seen]); its Description is the host-maintenance text, not live migration's."""
    kind = MaintenanceKind.UPDATE
    return platform.schedule_job(_maintenance_requests(platform, _on_host(platform, host), kind))


def maintain_host(platform: Platform, host: str) -> tuple[Event, ...]:
    """Reboot, Platform, 15 min: host maintenance that needs a reboot."""
    kind = MaintenanceKind.MAINTAIN
    return platform.schedule_job(_maintenance_requests(platform, _on_host(platform, host), kind))


def predict_failure(platform: Platform, host: str) -> tuple[Event, ...]:
    """Redeploy, Platform, days ahead: degraded hardware predicted to fail (SPEC 4)."""
    requests = group_requests(
        platform, _on_host(platform, host), EventType.REDEPLOY, descriptions.EMERGENCY_REPAIR
    )
    events = platform.schedule_job(requests, notice=platform.timing.predicted_failure_notice)
    platform.host_predicted_to_fail(host)
    return events


#: What a hardware failure's event may say it is, by the name ``host fail --as`` takes. The
#: pages disagree: "During the recovery process an event will be created for all impacted VMs
#: with EventType = Reboot and EventStatus = Started" (learn.microsoft.com/azure/
#: virtual-machines/windows/scheduled-events, "Event scheduling", the 2024 page, in every
#: language edition of it), "with `EventType = Redploy` and `EventStatus = Started`" (the
#: newer "Scheduled Events overview", "Exceptional Cases", misspelt).
HARDWARE_FAILURE_MODELS: dict[str, EventType] = {
    "reboot": EventType.REBOOT,
    "redeploy": EventType.REDEPLOY,
}
#: The default: the VM pages' Reboot, the better evidence: stated on the pages about the IMDS
#: endpoint itself, set apart as its own lines ("EventType = Reboot", "EventStatus =
#: Started") and the same in each language edition, where the overview's one mention is a
#: misspelt word in a page that covers Event Grid and Resource Graph too. The other is a
#: choice away.
DEFAULT_HARDWARE_FAILURE = "reboot"


def fail_host(
    platform: Platform, host: str, model: str = DEFAULT_HARDWARE_FAILURE
) -> tuple[Event, ...]:
    """Hardware failure: no notice, every impacted VM gets a Started event at once (a Reboot,
    or a Redeploy as ``model`` says: :data:`HARDWARE_FAILURE_MODELS`), and comes back on
    another host when its impact ends."""
    event_type = HARDWARE_FAILURE_MODELS.get(model)
    if event_type is None:
        known = ", ".join(HARDWARE_FAILURE_MODELS)
        raise InvalidOperationError(f"a hardware failure is one of {known}, not {model!r}")
    requests = group_requests(
        platform, _on_host(platform, host), event_type, descriptions.VM_FAILURE
    )
    events = platform.schedule_job(requests, already_started=True)
    platform.host_failed(host)
    return events


def freeze_instead(platform: Platform, vm_name: str) -> tuple[Event, ...]:
    """The VM's Scheduled Reboot freezes it instead, for as long as a live migration's Freeze."""
    platform.freeze_instead(vm_name, LIVE_MIGRATION_SECONDS)
    return ()


def impact_again(platform: Platform, vm_name: str) -> tuple[Event, ...]:
    """A second, shorter impact while the VM's event is still Started."""
    platform.impact_again(vm_name)
    return ()


VmAction = Callable[[Platform, str], tuple[Event, ...]]

#: The documented edge cases that happen to a VM under an event, by the name they are
#: journaled under (``VmOperation.action``); they create no event of their own.
VM_ACTIONS: dict[str, VmAction] = {
    "freeze-instead": freeze_instead,
    "impact-again": impact_again,
}

HostAction = Callable[[Platform, str], tuple[Event, ...]]

#: What each host action does, by the name it is journaled under (``HostOperation.action``).
HOST_ACTIONS: dict[str, HostAction] = {
    "live-migrate": live_migrate,
    "update": update_host,
    "maintain": maintain_host,
    "predict-failure": predict_failure,
    "fail": fail_host,
}


def maintenance_campaign(
    platform: Platform,
    vm_names: Sequence[str] | None = None,
    *,
    kinds: Sequence[MaintenanceKind] = (MaintenanceKind.MAINTAIN,),
) -> CampaignView:
    """Routine maintenance over a set of VMs (default: all), one fault domain at a time.

    "VMs in different fault domains won't be impacted by routine maintenance operations at the
    same time. However, they may have operations serialized one after another"
    (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "High level overview").
    Step *i* (the *i*-th fault domain, in order) is maintenance of kind ``kinds[i mod len(kinds)]``.
    """
    if not kinds:
        raise InvalidOperationError("a maintenance campaign needs at least one kind")
    vms = platform.vms() if vm_names is None else tuple(platform.vm(n) for n in vm_names)
    if not vms:
        raise InvalidOperationError("a maintenance campaign needs at least one VM")
    by_fault_domain: dict[int, list[Vm]] = defaultdict(list)
    for vm in vms:
        by_fault_domain[vm.platform_fault_domain].append(vm)
    steps = [
        _maintenance_requests(platform, by_fault_domain[fd], kinds[step % len(kinds)])
        for step, fd in enumerate(sorted(by_fault_domain))
    ]
    return platform.start_campaign(steps)


__all__ = [
    "DEFAULT_HARDWARE_FAILURE",
    "HARDWARE_FAILURE_MODELS",
    "HOST_ACTIONS",
    "HOST_UPDATE_SECONDS",
    "LIVE_MIGRATION_SECONDS",
    "VM_ACTIONS",
    "HostAction",
    "MaintenanceKind",
    "VmAction",
    "delete_instances",
    "fail_host",
    "freeze_instead",
    "group_requests",
    "impact_again",
    "instance_name",
    "instance_names",
    "live_migrate",
    "maintain_host",
    "maintenance_campaign",
    "os_image_upgrade",
    "predict_failure",
    "redeploy",
    "restart",
    "simulate_eviction",
    "update_host",
]
