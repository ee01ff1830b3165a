"""Every operation on a named VM, scale set or host, declared once.

Each :class:`Operation` says what it is called, what it targets, which parameters it takes
(typed, with help), the one-line summary people read, and which journaled
:class:`~forewarn.commands.Command` it becomes. Every adapter is built from this table:

- the control API route ``POST /api/v1/{vms|scale-sets|availability-sets|hosts}/{name}/
  {operation}`` and its
  request model (:mod:`forewarn.server.control`), and ``GET /api/v1/operations``, which
  returns :func:`describe` so a dashboard builds its buttons and forms from it;
- the CLI command ``forewarn {vm|vmss|host} OPERATION --name ...`` (:mod:`forewarn.cli`);
- the scenario step key (``restart: web-0``, ``delete-instances: {...}``,
  ``host: {live-migrate: h1}``) and what the runner sends (:mod:`forewarn.scenario`);
- the pytest plugin's method (``platform.restart("web-0")``, :mod:`forewarn.testing`).

Adding such an operation is a domain function and one entry here (plus, for a host action,
its entry in :data:`forewarn.domain.operations.HOST_ACTIONS`, which replay looks up by name).
Operations that are not "do X to this named thing" (campaigns, arbitrary events, approvals,
cancellation, the clock) keep routes of their own, described by ``/openapi.json``.

This module imports nothing of the server stack, so the CLI and the SDK side can use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from forewarn.commands import (
    Command,
    DeleteInstances,
    HostOperation,
    OsImageUpgrade,
    Redeploy,
    Restart,
    SetPolicy,
    SimulateEviction,
    VmOperation,
)
from forewarn.domain.operations import (
    DEFAULT_HARDWARE_FAILURE,
    HARDWARE_FAILURE_MODELS,
    instance_names,
)
from forewarn.domain.platform import Platform
from forewarn.domain.policy import ScheduledEventsPolicy


@dataclass(frozen=True)
class Target:
    """What an operation names: its route collection, CLI group and name option's help."""

    kind: Literal["vm", "scale-set", "availability-set", "host"]
    collection: str
    cli_group: str
    name_help: str


VM = Target("vm", "vms", "vm", "The VM's name.")
SCALE_SET = Target("scale-set", "scale-sets", "vmss", "The scale set's name.")
HOST = Target("host", "hosts", "host", "The host's name (see `host list`).")
AVAILABILITY_SET = Target(
    "availability-set", "availability-sets", "vm availability-set", "The availability set's name."
)


@dataclass(frozen=True)
class Param:
    """A parameter beyond the target's name.

    ``kind`` fixes its type everywhere: ``instance-ids`` is a non-empty list of numeric
    instance ids (``--instance-ids 0 1 2`` on the command line), ``flag`` a boolean that
    defaults to false (``--autoscale``), ``policy`` a ``scheduledEventsPolicy`` in ARM's JSON
    (``--policy '{...}'``; the adapters hand the operation a
    :class:`~forewarn.domain.policy.ScheduledEventsPolicy`), ``choice`` one of ``choices``,
    optional (``--as redeploy``; left out, the operation's default, the first choice).
    ``name`` is the Python keyword, ``wire`` the JSON key (and the option's name).
    """

    name: str
    wire: str
    kind: Literal["instance-ids", "flag", "policy", "choice"]
    help: str
    choices: tuple[str, ...] = ()


INSTANCE_IDS = Param(
    "instance_ids", "instanceIds", "instance-ids", "Instance ids, as az takes them: 0 1 2."
)
POLICY = Param(
    "policy",
    "scheduledEventsPolicy",
    "policy",
    "The scheduledEventsPolicy as ARM JSON: userInitiatedReboot, userInitiatedRedeploy, "
    "allInstancesDown ({automaticallyApprove: bool}) and scheduledEventsAdditionalPublishing"
    "Targets.eventGridAndResourceGraph ({enable: bool, scheduledEventsApiVersion}); what it "
    "leaves out takes ARM's default.",
)
#: ``host fail --as``: what a hardware failure's event says it is, the documented default first.
HARDWARE_FAILURE_AS = Param(
    "as_",
    "as",
    "choice",
    "What the event says it is: reboot (the default, the VM pages' \"EventType = Reboot and "
    "EventStatus = Started\") or redeploy (the newer Scheduled Events overview's).",
    choices=(
        DEFAULT_HARDWARE_FAILURE,
        *(model for model in HARDWARE_FAILURE_MODELS if model != DEFAULT_HARDWARE_FAILURE),
    ),
)
_PARAM_TYPES = {
    "instance-ids": "array of instance ids",
    "flag": "boolean",
    "policy": "object",
    "choice": "string",
}


@dataclass(frozen=True)
class Operation:
    """One operation: ``command(target_name, **arguments)`` is what gets journaled.

    ``check`` runs on the platform before the command is built, for a refusal the command's
    own effect would word less clearly (an unknown scale set before its unknown instances).
    ``plugin_method`` is the name of the pytest plugin's method; ``cli_aliases`` are extra
    command names (``vmss reimage``); ``examples`` are the arguments of the CLI command,
    each one example its ``--help`` shows (``--name vm0``), a ``#`` starting a comment.
    """

    name: str
    target: Target
    summary: str
    command: Callable[..., Command]
    plugin_method: str
    params: tuple[Param, ...] = ()
    check: Callable[[Platform, str], object] | None = None
    cli_aliases: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()

    @property
    def route(self) -> str:
        """The control API path under ``/api/v1``, with a ``{name}`` placeholder."""
        return f"/{self.target.collection}/{{name}}/{self.name}"

    def path(self, target_name: str) -> str:
        """:attr:`route` for ``target_name``, quoted as one path segment."""
        return self.route.replace("{name}", quote(target_name, safe=""))

    def body(self, arguments: Mapping[str, Any]) -> dict[str, Any] | None:
        """The JSON body of the route for ``arguments`` (by :attr:`Param.name`), or None."""
        if not self.params:
            return None
        body: dict[str, Any] = {}
        for param in self.params:
            if param.kind == "instance-ids":
                body[param.wire] = list(arguments[param.name])
            elif param.kind == "policy":
                body[param.wire] = dict(arguments[param.name])
            elif param.kind == "choice":
                if arguments.get(param.name) is not None:
                    body[param.wire] = arguments[param.name]
            else:
                body[param.wire] = bool(arguments.get(param.name, False))
        return body

    def describe(self) -> dict[str, Any]:
        """The operation as ``GET /api/v1/operations`` lists it."""
        return {
            "name": self.name,
            "target": self.target.kind,
            "method": "POST",
            "path": "/api/v1" + self.route,
            "summary": self.summary,
            "cli": f"forewarn {self.target.cli_group} {self.name}",
            "parameters": [_described(param) for param in self.params],
        }


def _described(param: Param) -> dict[str, Any]:
    return {
        "name": param.wire,
        "type": _PARAM_TYPES[param.kind],
        "required": param.kind not in ("flag", "choice"),
        "help": param.help,
        "choices": list(param.choices),
    }


def _scale_set_exists(platform: Platform, name: str) -> object:
    return platform.scale_set(name)


def _vm_action(action: str) -> Callable[[str], Command]:
    def command(vm: str) -> Command:
        return VmOperation(vm, action)

    return command


def _set_policy(target: Target) -> Callable[..., Command]:
    def command(name: str, policy: ScheduledEventsPolicy) -> Command:
        return SetPolicy.of(target.kind, name, policy)

    return command


def _policy_operation(target: Target, plugin_method: str, who: str) -> Operation:
    """``set-scheduled-events-policy`` on ``target``: changed at run time as ``az ... update
    --set scheduledEventsPolicy=...`` changes it."""
    return Operation(
        "set-scheduled-events-policy",
        target,
        f"Set {who} scheduledEventsPolicy: auto-approval of user reboots and redeploys, "
        "of events whose VMs are all down, and publishing to Event Grid and Resource Graph.",
        _set_policy(target),
        plugin_method,
        params=(POLICY,),
    )


def _host_action(action: str) -> Callable[[str], Command]:
    def command(host: str) -> Command:
        return HostOperation(host, action)

    return command


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "restart",
        VM,
        "Restart: a User Reboot event, 15 minutes or approval first.",
        Restart,
        "restart",
        examples=(
            "--name vm0            # a Reboot, 15 minutes ahead",
            "--name vm0 -o json    # the event created, as JSON",
            "--name vm0 --control 127.0.0.1:16955",
        ),
    ),
    Operation(
        "redeploy",
        VM,
        "Redeploy: a User Redeploy event, 10 minutes or approval first.",
        Redeploy,
        "redeploy",
        examples=("--name vm0",),
    ),
    Operation(
        "simulate-eviction",
        VM,
        "Evict a Spot VM: a Preempt event 30 seconds ahead.",
        lambda vm: SimulateEviction((vm,)),
        "evict",
        examples=("--name spot0",),
    ),
    Operation(
        "freeze-instead",
        VM,
        "The VM's Scheduled Reboot freezes it instead (5 s, memory kept), as the "
        "documentation warns may happen; the document still says Reboot.",
        _vm_action("freeze-instead"),
        "freeze_instead",
    ),
    Operation(
        "impact-again",
        VM,
        "A second impact, half as long as advertised, while the VM's event is still Started.",
        _vm_action("impact-again"),
        "impact_again",
    ),
    Operation(
        "simulate-eviction",
        SCALE_SET,
        "Evict Spot instances: a Preempt event 30 seconds ahead for each.",
        lambda name, instance_ids: SimulateEviction(instance_names(name, instance_ids)),
        "evict_instances",
        params=(INSTANCE_IDS,),
        check=_scale_set_exists,
    ),
    Operation(
        "delete-instances",
        SCALE_SET,
        "Delete instances: Terminate events when the set has terminate notification on.",
        lambda name, instance_ids, autoscale=False: DeleteInstances(
            name, tuple(instance_ids), autoscale
        ),
        "delete_instances",
        params=(
            INSTANCE_IDS,
            Param("autoscale", "autoscale", "flag", "Scale-in by autoscale: EventSource Platform."),
        ),
        examples=("--name web --instance-ids 0 1", "--name web --instance-ids 2 --autoscale"),
    ),
    Operation(
        "os-image-upgrade",
        SCALE_SET,
        "Guest OS upgrade or reimage: a Reboot notice with osImageNotification on.",
        lambda name, instance_ids: OsImageUpgrade(name, tuple(instance_ids)),
        "os_image_upgrade",
        params=(INSTANCE_IDS,),
        cli_aliases=("reimage",),
    ),
    _policy_operation(VM, "set_vm_policy", "a standalone VM's"),
    _policy_operation(SCALE_SET, "set_scale_set_policy", "every instance's"),
    _policy_operation(AVAILABILITY_SET, "set_availability_set_policy", "every member's"),
    Operation(
        "live-migrate",
        HOST,
        "Live migration: a Platform Freeze of a few seconds for every VM on the host.",
        _host_action("live-migrate"),
        "live_migrate",
        examples=("--name host-vm0",),
    ),
    Operation(
        "update",
        HOST,
        "Memory-preserving host update: a Platform Freeze of about 9 s for every VM on the host.",
        _host_action("update"),
        "update_host",
    ),
    Operation(
        "maintain",
        HOST,
        "Host maintenance needing a reboot: a Platform Reboot for every VM on the host.",
        _host_action("maintain"),
        "maintain_host",
    ),
    Operation(
        "predict-failure",
        HOST,
        "Predicted hardware failure: a Platform Redeploy days ahead.",
        _host_action("predict-failure"),
        "predict_failure",
    ),
    Operation(
        "fail",
        HOST,
        "Hardware failure: a Started Reboot (or, --as redeploy, Redeploy) at once for every VM "
        "on the host, no notice.",
        lambda host, as_=None: HostOperation(host, "fail", as_),
        "fail_host",
        params=(HARDWARE_FAILURE_AS,),
    ),
)


def for_target(target: Target) -> Iterator[Operation]:
    """The operations on ``target``, in declaration order."""
    return (operation for operation in OPERATIONS if operation.target is target)


def find(target: Target, name: str) -> Operation:
    """The operation ``name`` on ``target``; KeyError when there is none."""
    for operation in for_target(target):
        if operation.name == name:
            return operation
    raise KeyError(f"no {target.kind} operation {name!r}")


def by_plugin_method() -> dict[str, Operation]:
    return {operation.plugin_method: operation for operation in OPERATIONS}


def describe() -> list[dict[str, Any]]:
    """Every operation, as ``GET /api/v1/operations`` returns it."""
    return [operation.describe() for operation in OPERATIONS]


__all__ = [
    "AVAILABILITY_SET",
    "HARDWARE_FAILURE_AS",
    "HOST",
    "OPERATIONS",
    "POLICY",
    "SCALE_SET",
    "VM",
    "Operation",
    "Param",
    "Target",
    "by_plugin_method",
    "describe",
    "find",
    "for_target",
]
