"""What users and the platform do, turned into events: the rows of SPEC 6.

Each function takes the :class:`~forewarn.domain.platform.Platform` and returns the events it
created. Grouping follows two documented rules: an event's Resources hold VMs of "at most one
update domain" (scheduled-events-linux.txt, Event Properties, Resources), and a platform
operation on a shared host waits for every tenant's approval (scheduled-events-windows-2024.txt,
"High level overview": "the system will then wait for all other tenants on the same hardware to
also approve"), so one host operation is one job with one event per tenant and scope group.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

from forewarn.domain import descriptions
from forewarn.domain.errors import InvalidOperationError, UnknownGroupError
from forewarn.domain.events import Event, EventSource, EventType
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
        auto_approved=vm.auto_approve_reboot,
    )


def redeploy(platform: Platform, vm_name: str) -> tuple[Event, ...]:
    """Redeploy, User; the VM moves to another host once the impact is over."""
    vm = platform.vm(vm_name)
    return _single(
        platform,
        vm_name,
        EventType.REDEPLOY,
        descriptions.USER_REDEPLOY,
        auto_approved=vm.auto_approve_redeploy,
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
        raise UnknownGroupError("host", host, f"no virtual machine runs on host {host!r}")
    return vms


def live_migrate(platform: Platform, host: str) -> tuple[Event, ...]:
    """Freeze, Platform, a few seconds: memory-preserving maintenance of a host."""
    requests = group_requests(
        platform,
        _on_host(platform, host),
        EventType.FREEZE,
        descriptions.LIVE_MIGRATION,
        LIVE_MIGRATION_SECONDS,
    )
    return platform.schedule_job(requests)


def update_host(platform: Platform, host: str) -> tuple[Event, ...]:
    """Freeze, Platform, about 9 s: the memory-preserving host update, the most common real
    event (SPEC 6 [seen]); its Description is the host-maintenance text, not live migration's."""
    requests = group_requests(
        platform,
        _on_host(platform, host),
        EventType.FREEZE,
        descriptions.HOST_MAINTENANCE,
        HOST_UPDATE_SECONDS,
    )
    return platform.schedule_job(requests)


def maintain_host(platform: Platform, host: str) -> tuple[Event, ...]:
    """Reboot, Platform, 15 min: host maintenance that needs a reboot."""
    requests = group_requests(
        platform, _on_host(platform, host), EventType.REBOOT, descriptions.HOST_MAINTENANCE
    )
    return platform.schedule_job(requests)


def predict_failure(platform: Platform, host: str) -> tuple[Event, ...]:
    """Redeploy, Platform, days ahead: degraded hardware predicted to fail (SPEC 4)."""
    requests = group_requests(
        platform, _on_host(platform, host), EventType.REDEPLOY, descriptions.EMERGENCY_REPAIR
    )
    events = platform.schedule_job(requests, notice=platform.timing.predicted_failure_notice)
    platform.host_failing(host, failed=False)
    return events


def fail_host(platform: Platform, host: str) -> tuple[Event, ...]:
    """Hardware failure: no notice, every impacted VM gets a Started Reboot at once, and comes
    back on another host when its impact ends."""
    requests = group_requests(
        platform, _on_host(platform, host), EventType.REBOOT, descriptions.VM_FAILURE
    )
    events = platform.schedule_job(requests, already_started=True)
    platform.host_failing(host, failed=True)
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
    event_type: EventType = EventType.REBOOT,
) -> CampaignView:
    """Routine maintenance over a set of VMs (default: all), one fault domain at a time.

    "VMs in different fault domains won't be impacted by routine maintenance operations at the
    same time. However, they may have operations serialized one after another"
    (scheduled-events-windows-2024.txt, "High level overview").
    """
    if event_type not in (EventType.REBOOT, EventType.FREEZE):
        raise InvalidOperationError("a maintenance campaign reboots or freezes VMs")
    vms = platform.vms() if vm_names is None else tuple(platform.vm(n) for n in vm_names)
    if not vms:
        raise InvalidOperationError("a maintenance campaign needs at least one VM")
    by_fault_domain: dict[int, list[Vm]] = defaultdict(list)
    for vm in vms:
        by_fault_domain[vm.platform_fault_domain].append(vm)
    if event_type is EventType.FREEZE:
        description, duration = descriptions.LIVE_MIGRATION, LIVE_MIGRATION_SECONDS
    else:
        description, duration = descriptions.HOST_MAINTENANCE, -1
    steps = [
        group_requests(platform, by_fault_domain[fd], event_type, description, duration)
        for fd in sorted(by_fault_domain)
    ]
    return platform.start_campaign(steps)
