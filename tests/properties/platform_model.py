"""Random fleets, the delivery-scope rules restated, and replayable operation scripts.

Shared by the state machine (``test_platform_properties.py``) and the replay tests
(``test_replay.py``). Run as a script (``python platform_model.py SEED STEPS``) it replays a
script built from ``SEED`` on a fixed fleet and prints one digest of every document per step,
so two processes with different hash seeds can be compared.

The scope rules are written out here again, from the documents rather than from
:mod:`forewarn.domain.scope`, so the property tests check the platform against the rules
and not against itself: learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "The
Basics", and learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Scope" and
"Resources".
"""

from __future__ import annotations

import hashlib
import random
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from hypothesis import strategies as st

from forewarn.domain import operations
from forewarn.domain.api_versions import SCHEDULED_EVENTS_VERSIONS
from forewarn.domain.errors import DomainError
from forewarn.domain.events import Event, EventStatus
from forewarn.domain.fleet import ScaleSet
from forewarn.domain.ids import EventIdFactory
from forewarn.domain.platform import Platform
from forewarn.domain.policy import ScheduledEventsPolicy
from forewarn.domain.timing import DOCUMENTED, FAST, TimingProfile
from forewarn.domain.vms import Priority, Vm
from forewarn.wire.documents import encode_document

T = TypeVar("T")

#: The Monday of the documentation's live-migration example, 15 minutes before its NotBefore.
START = datetime(2022, 4, 11, 22, 11, 58, tzinfo=UTC)
TENANTS = ("tenant-a", "tenant-b")
HOSTS = ("host-0", "host-1", "host-2")
ZONES = ("", "1", "2")
DOMAINS = (0, 1, 2)

GENERAL_SIZE = "Standard_D2s_v3"
GPU_SIZE = "Standard_NC6s_v3"
#: General purpose sizes, a GPU size (N series) and the other families the documentation
#: excludes from OS image notifications: "It doesn't work for G, M, N, and H series"
#: (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "User-initiated
#: maintenance").
SIZES = (GENERAL_SIZE, "Standard_F4s_v2", GPU_SIZE, "Standard_M8ms", "Standard_H16r", "Standard_G2")
GPU_SIZES = frozenset({GPU_SIZE})
NO_OS_IMAGE_NOTIFICATION_SIZES = frozenset(
    {GPU_SIZE, "Standard_M8ms", "Standard_H16r", "Standard_G2"}
)
PROFILES = (DOCUMENTED, FAST)


@dataclass(frozen=True)
class Fleet:
    """VMs and scale sets to build a platform from; ``not_receiving`` VMs have never asked."""

    vms: tuple[Vm, ...]
    scale_sets: tuple[ScaleSet, ...]
    not_receiving: frozenset[str]

    def __repr__(self) -> str:
        """One line per VM with what the rules depend on, so a failing example reads well."""
        lines = [f"{s!r}" for s in self.scale_sets]
        for vm in self.vms:
            group = vm.availability_set or vm.cloud_service or vm.vm_scale_set_name or "-"
            flags = [
                vm.tenant,
                vm.host,
                f"group={group}",
                f"fd={vm.platform_fault_domain}",
                f"ud={vm.platform_update_domain}",
                f"zone={vm.zone or '-'}",
                vm.vm_size,
                vm.priority.value,
            ]
            if vm.placement_group:
                flags.append(f"pg={vm.placement_group}")
            if vm.policy.auto_approve_reboot:
                flags.append("auto-reboot")
            if vm.policy.auto_approve_redeploy:
                flags.append("auto-redeploy")
            if vm.name in self.not_receiving:
                flags.append("not-receiving")
            lines.append(f"{vm.name}: {' '.join(flags)}")
        return "Fleet(\n  " + "\n  ".join(lines) + "\n)"

    def build(self, timing: TimingProfile, seed: int) -> Platform:
        platform = Platform(START, timing=timing, new_event_id=EventIdFactory(seed))
        for scale_set in self.scale_sets:
            platform.add_scale_set(scale_set)
        for vm in self.vms:
            platform.add_vm(vm, receiving=vm.name not in self.not_receiving)
        return platform


def _vm(name: str, **fields: object) -> Vm:
    return Vm(name=name, vm_id=f"id-{name}", **fields)  # type: ignore[arg-type]


@st.composite
def fleets(draw: st.DrawFn) -> Fleet:
    """Standalone and zonal VMs (some Spot, some with auto-approval), availability sets with
    fault and update domains, a classic cloud service, scale sets (Spot or not, placement
    groups, GPU with one fault domain, terminate and OS image notifications), all spread over
    three hosts shared by two tenants, each set's fault domains on hosts of their own."""
    tenant = st.sampled_from(TENANTS)
    host = st.sampled_from(HOSTS)
    domain = st.sampled_from(DOMAINS)
    vms: list[Vm] = []
    for i in range(draw(st.integers(0, 2))):
        vms.append(
            _vm(
                f"solo{i}",
                subscription_id=draw(tenant),
                host=draw(host),
                zone=draw(st.sampled_from(ZONES)),
                priority=draw(st.sampled_from(Priority)),
                policy=ScheduledEventsPolicy(
                    auto_approve_reboot=draw(st.booleans()),
                    auto_approve_redeploy=draw(st.booleans()),
                ),
            )
        )
    for s in range(draw(st.integers(0, 2))):
        owner = draw(tenant)
        hosts_of = draw(st.permutations(HOSTS))  # fault domain d runs on hosts_of[d]
        for i in range(draw(st.integers(1, 4))):
            fault_domain = draw(domain)
            vms.append(
                _vm(
                    f"avset{s}-{i}",
                    subscription_id=owner,
                    availability_set=f"avset{s}",
                    platform_fault_domain=fault_domain,
                    platform_update_domain=draw(domain),
                    host=hosts_of[fault_domain],
                )
            )
    if draw(st.booleans()):
        owner = draw(tenant)
        hosts_of = draw(st.permutations(HOSTS))
        for i in range(draw(st.integers(1, 3))):
            fault_domain = draw(domain)
            vms.append(
                _vm(
                    f"Role_IN_{i}",
                    subscription_id=owner,
                    cloud_service="classic",
                    iaas=False,
                    platform_fault_domain=fault_domain,
                    platform_update_domain=draw(domain),
                    host=hosts_of[fault_domain],
                )
            )
    scale_sets: list[ScaleSet] = []
    for s in range(draw(st.integers(0, 2))):
        name = f"vmss{s}"
        spot = draw(st.booleans())
        priority = Priority.SPOT if spot else Priority.REGULAR
        scale_set = ScaleSet(
            name,
            priority=priority,
            platform_fault_domain_count=draw(st.integers(1, 3)),
            terminate_notification=not spot and draw(st.booleans()),
            terminate_timeout=timedelta(minutes=draw(st.integers(5, 15))),
            os_image_notification=draw(st.booleans()),
        )
        scale_sets.append(scale_set)
        owner = draw(tenant)
        size = draw(st.sampled_from(SIZES))
        hosts_of = draw(st.permutations(HOSTS))
        for i in range(draw(st.integers(1, 4))):
            vms.append(
                _vm(
                    f"{name}_{i}",
                    subscription_id=owner,
                    vm_scale_set_name=name,
                    placement_group=draw(st.sampled_from((None, "pg1"))),
                    platform_fault_domain=i % scale_set.platform_fault_domain_count,
                    platform_update_domain=draw(domain),
                    vm_size=size,
                    priority=priority,
                    zone=draw(st.sampled_from(ZONES)),
                    host=hosts_of[i % scale_set.platform_fault_domain_count],
                )
            )
    if not vms:
        vms.append(_vm("solo0", subscription_id=draw(tenant), host=draw(host)))
    not_receiving = draw(st.frozensets(st.sampled_from([vm.name for vm in vms]), max_size=3))
    return Fleet(tuple(vms), tuple(scale_sets), not_receiving)


# -- the delivery scope, restated from the documents ---------------------------------------


def scope_key(vm: Vm, scale_sets: Mapping[str, ScaleSet]) -> tuple[str, ...] | None:
    """The group whose members all see each other's events; None when only the VM itself does.

    "Scheduled events are delivered to: Standalone Virtual Machines. All the VMs in a cloud
    service. All the VMs in an availability set. ... All the VMs in a scale set placement
    group." and "the scheduled events go to single VMs in a zone"
    (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "The Basics"); "GPU
    accelerated Virtual Machines in a scale set using 1 fault domain (FD = 1) will only receive
    scheduled events for the impacted resource"
    (learn.microsoft.com/azure/virtual-machines/windows/scheduled-events, "Resources").
    """
    if vm.cloud_service is not None:
        return ("cloud service", vm.cloud_service)
    if vm.availability_set is not None:
        return ("availability set", vm.availability_set)
    if vm.vm_scale_set_name:
        scale_set = scale_sets[vm.vm_scale_set_name]
        if vm.vm_size in GPU_SIZES and scale_set.platform_fault_domain_count == 1:
            return None
        return ("placement group", vm.vm_scale_set_name, vm.placement_group or "")
    return None


def expected_audience(
    impacted: Iterable[Vm], fleet: Iterable[Vm], scale_sets: Mapping[str, ScaleSet]
) -> frozenset[str]:
    """Every VM of ``fleet`` that should be shown an event impacting ``impacted``."""
    impacted = tuple(impacted)
    keys = {scope_key(vm, scale_sets) for vm in impacted} - {None}
    return frozenset(vm.name for vm in impacted) | frozenset(
        vm.name for vm in fleet if scope_key(vm, scale_sets) in keys
    )


def fault_domain_group(vm: Vm) -> tuple[str, str] | None:
    """The set whose fault domains routine maintenance must not hit two at a time."""
    if vm.availability_set is not None:
        return ("availability set", vm.availability_set)
    if vm.vm_scale_set_name:
        return ("scale set", vm.vm_scale_set_name)
    if vm.cloud_service is not None:
        return ("cloud service", vm.cloud_service)
    return None


# -- replayable scripts --------------------------------------------------------------------

KINDS = (
    "restart",
    "redeploy",
    "evict",
    "delete_instances",
    "autoscale_in",
    "os_image_upgrade",
    "live_migrate",
    "maintain_host",
    "predict_failure",
    "fail_host",
    "campaign",
    "approve",
    "approve_unseen",
    "cancel",
    "touch",
    "advance",
    "advance",
    "advance",
    "delete_vm",
)

#: Clock steps worth landing on in either profile: impacts, notices, periods, idle, days.
ADVANCES = (1, 2, 3, 5, 7, 30, 120, 299, 300, 600, 900, 3600, 86_400, 7 * 86_400)


@dataclass(frozen=True)
class Step:
    """One operation of a script; ``pick`` chooses its target among the candidates the
    platform has at that moment (sorted, so the choice depends only on the state)."""

    kind: str
    pick: int
    amount: int


def steps() -> st.SearchStrategy[Step]:
    return st.builds(Step, st.sampled_from(KINDS), st.integers(0, 10_000), st.integers(0, 10_000))


def random_script(seed: int, length: int) -> list[Step]:
    rng = random.Random(seed)
    return [
        Step(rng.choice(KINDS), rng.randrange(10_000), rng.randrange(10_000)) for _ in range(length)
    ]


def _pick(items: Sequence[T], pick: int) -> T | None:
    return items[pick % len(items)] if items else None


def apply_step(platform: Platform, step: Step) -> str:
    """Apply ``step``; the outcome (ids created, error raised, or skip) for comparison."""
    try:
        return _apply(platform, step)
    except DomainError as error:
        return f"{type(error).__name__}: {error}"


def _apply(platform: Platform, step: Step) -> str:
    kind, pick, amount = step.kind, step.pick, step.amount
    names = sorted(vm.name for vm in platform.vms())
    hosts = sorted({vm.host for vm in platform.vms()})
    name = _pick(names, pick)
    host = _pick(hosts, pick)
    created: tuple[Event, ...] = ()
    if kind == "advance":
        seconds = ADVANCES[amount % len(ADVANCES)] if pick % 2 else amount % 1200
        platform.advance_to(platform.now + timedelta(seconds=seconds))
        return f"advanced {seconds}"
    if name is None or host is None:
        return "skip"
    if kind == "restart":
        created = operations.restart(platform, name)
    elif kind == "redeploy":
        created = operations.redeploy(platform, name)
    elif kind == "evict":
        spot = [n for n in names if platform.vm(n).priority is Priority.SPOT]
        if not spot:
            return "skip"
        created = operations.simulate_eviction(platform, spot[pick % len(spot) :][:2])
    elif kind in ("delete_instances", "autoscale_in", "os_image_upgrade"):
        in_sets = [n for n in names if platform.vm(n).vm_scale_set_name]
        target = _pick(in_sets, pick)
        if target is None:
            return "skip"
        scale_set, instance = target.rsplit("_", 1)
        if kind == "os_image_upgrade":
            created = operations.os_image_upgrade(platform, scale_set, [instance])
        else:
            autoscale = kind == "autoscale_in"
            created = operations.delete_instances(
                platform, scale_set, [instance], autoscale=autoscale
            )
    elif kind == "live_migrate":
        created = operations.live_migrate(platform, host)
    elif kind == "maintain_host":
        created = operations.maintain_host(platform, host)
    elif kind == "predict_failure":
        created = operations.predict_failure(platform, host)
    elif kind == "fail_host":
        created = operations.fail_host(platform, host)
    elif kind == "campaign":
        kinds = tuple(operations.MaintenanceKind)
        view = operations.maintenance_campaign(platform, kinds=kinds[amount % 3 :])
        return f"campaign {view.campaign_id} " + ",".join(sorted(view.current))
    elif kind in ("approve", "approve_unseen"):
        seen = [e.event_id for e in platform.document(name).events]
        if kind == "approve_unseen":
            unseen = sorted({v.event.event_id for v in platform.events()} - set(seen))
            seen = unseen or ["00000000-0000-4000-8000-000000000000"]
        target = _pick(seen, amount)
        if target is None:
            return "skip"
        platform.approve(name, [target])
        return f"approved {target}"
    elif kind == "cancel":
        scheduled = [
            v.event.event_id for v in platform.events() if v.event.status is EventStatus.SCHEDULED
        ]
        target = _pick(scheduled, amount)
        if target is None:
            return "skip"
        platform.cancel(target)
        return f"cancelled {target}"
    elif kind == "touch":
        return f"touch {platform.touch(name)}"
    elif kind == "delete_vm":
        platform.delete_vm(name)
        return f"deleted {name}"
    return ",".join(event.event_id for event in created)


def encoded_documents(platform: Platform) -> bytes:
    """Every VM's document in every api-version, exactly as the endpoint would send them."""
    parts: list[bytes] = []
    for vm in sorted(platform.vms(), key=lambda vm: vm.name):
        document = platform.document(vm.name)
        for version in SCHEDULED_EVENTS_VERSIONS:
            parts.append(f"{vm.name} {version.name} ".encode() + encode_document(document, version))
    return b"\n".join(parts)


#: A fixed fleet with every group kind, for replays outside Hypothesis.
REPLAY_FLEET = Fleet(
    vms=(
        _vm(
            "solo0",
            subscription_id="tenant-a",
            host="host-0",
            policy=ScheduledEventsPolicy(auto_approve_reboot=True),
        ),
        _vm("solo1", subscription_id="tenant-b", host="host-0", zone="1"),
        _vm("spot0", subscription_id="tenant-b", host="host-1", priority=Priority.SPOT),
        *(
            _vm(
                f"avset0-{i}",
                subscription_id="tenant-a",
                availability_set="avset0",
                platform_fault_domain=i % 2,
                platform_update_domain=i % 3,
                host=HOSTS[i % 2],
            )
            for i in range(4)
        ),
        *(
            _vm(
                f"Role_IN_{i}",
                subscription_id="tenant-b",
                cloud_service="classic",
                iaas=False,
                platform_fault_domain=i,
                host=HOSTS[i],
            )
            for i in range(2)
        ),
        *(
            _vm(
                f"vmss0_{i}",
                subscription_id="tenant-a",
                vm_scale_set_name="vmss0",
                placement_group=None if i < 2 else "pg1",
                platform_fault_domain=i % 2,
                host=HOSTS[(i % 2 + 1) % 3],
            )
            for i in range(4)
        ),
        *(
            _vm(
                f"vmss1_{i}",
                subscription_id="tenant-b",
                vm_scale_set_name="vmss1",
                vm_size=GPU_SIZE,
                host=HOSTS[i % 3],
            )
            for i in range(2)
        ),
    ),
    scale_sets=(
        ScaleSet(
            "vmss0",
            platform_fault_domain_count=2,
            terminate_notification=True,
            terminate_timeout=timedelta(minutes=7),
            os_image_notification=True,
        ),
        ScaleSet("vmss1", platform_fault_domain_count=1, os_image_notification=True),
    ),
    not_receiving=frozenset({"Role_IN_1"}),
)


def replay_digests(seed: int, length: int, timing: TimingProfile) -> list[str]:
    """Run ``random_script(seed, length)`` on :data:`REPLAY_FLEET`: one line per step, the
    outcome and a digest of every encoded document."""
    platform = REPLAY_FLEET.build(timing, seed)
    lines = []
    for step in random_script(seed, length):
        outcome = apply_step(platform, step)
        digest = hashlib.sha256(encoded_documents(platform)).hexdigest()
        lines.append(f"{step.kind} -> {outcome} | {digest}")
    return lines


if __name__ == "__main__":
    seed, length = int(sys.argv[1]), int(sys.argv[2])
    for timing in PROFILES:
        print("\n".join(replay_digests(seed, length, timing)))
