"""Request and response models of the control API, and the mapping from domain views.

Kept apart from the routes so the shapes the OpenAPI document describes read in one place.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    create_model,
)

from forewarn.config.policy import PolicyIn
from forewarn.defaults import CONTROL_API
from forewarn.domain.api_versions import CURRENT_VERSION
from forewarn.domain.events import Event, EventSource, EventStatus, EventType
from forewarn.domain.fleet import INSTANCE_ID_PATTERN
from forewarn.domain.operations import MaintenanceKind
from forewarn.domain.platform import CampaignView, EventView, VmState
from forewarn.limits import MAX_DESCRIPTION, MAX_NAME_LENGTH, MAX_NAMES, MAX_SECONDS
from forewarn.registry import Operation, Param
from forewarn.service import ClockStatus, Created
from forewarn.wire.documents import event_fields
from forewarn.wire.instance import compute_fields

MAX_CONTROL_BODY = 64 * 1024
API = CONTROL_API

VmName = Annotated[str, Field(min_length=1, max_length=MAX_NAME_LENGTH)]
InstanceId = Annotated[str, Field(pattern=INSTANCE_ID_PATTERN)]
EventIds = Annotated[list[Annotated[str, Field(max_length=64)]], Field(max_length=MAX_NAMES)]
Seconds = Annotated[float, Field(strict=True, ge=0, le=MAX_SECONDS, allow_inf_nan=False)]


# -- request bodies -----------------------------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateEventRequest(_Body):
    type: EventType
    resources: list[VmName] = Field(min_length=1, max_length=MAX_NAMES)
    source: EventSource = EventSource.PLATFORM
    description: str = Field(default="", max_length=MAX_DESCRIPTION)
    duration_in_seconds: StrictInt = Field(
        default=-1, alias="durationInSeconds", ge=-1, le=MAX_SECONDS
    )
    notice_seconds: Seconds | None = Field(default=None, alias="noticeSeconds")
    started: StrictBool = False
    #: How long it stays Started instead of its kind's Started period in the timing profile.
    started_seconds: Seconds | None = Field(default=None, alias="startedSeconds")


def _field(param: Param) -> tuple[Any, Any]:
    if param.kind == "policy":
        return PolicyIn, Field(alias=param.wire, description=param.help)
    if param.kind == "choice":
        return Literal[param.choices] | None, Field(
            default=None, alias=param.wire, description=param.help
        )
    if param.kind == "instance-ids":
        ids = Field(alias=param.wire, min_length=1, max_length=MAX_NAMES, description=param.help)
        return list[InstanceId], ids
    return StrictBool, Field(default=False, alias=param.wire, description=param.help)


def operation_arguments(body: BaseModel | None) -> dict[str, Any]:
    """The arguments of an operation's request ``body``, by parameter name: a policy as the
    domain's :class:`~forewarn.domain.policy.ScheduledEventsPolicy`."""
    if body is None:
        return {}
    return {name: value.policy() if isinstance(value, PolicyIn) else value for name, value in body}


def request_model(operation: Operation) -> type[BaseModel] | None:
    """The body model of ``operation``'s route, from its parameters; None when it takes none."""
    if not operation.params:
        return None
    name = "".join(part.title() for part in operation.name.split("-")) + "Request"
    fields: dict[str, Any] = {param.name: _field(param) for param in operation.params}
    return create_model(name, __base__=_Body, **fields)


class ApproveRequest(_Body):
    event_ids: EventIds | Literal["all"] = Field(alias="eventIds")


class CampaignRequest(_Body):
    vms: list[VmName] | None = Field(default=None, min_length=1, max_length=MAX_NAMES)
    event_type: Literal["Reboot", "Freeze"] = Field(default="Reboot", alias="eventType")
    kinds: list[MaintenanceKind] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NAMES,
        description="Each fault domain's maintenance in turn (step i takes kinds[i mod n]): "
        "update (Freeze ~9 s), live-migrate (Freeze 5 s), maintain (Reboot). Without it, "
        "eventType Reboot maintains and Freeze live-migrates.",
    )


class AdvanceClockRequest(_Body):
    seconds: Seconds


class SetClockRequest(_Body):
    now: AwareDatetime


# -- responses ----------------------------------------------------------------------------------


class _Out(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class EventOut(_Out):
    """The event as api-version 2020-07-01 shows it, plus who sees and who approved it."""

    event_id: str = Field(alias="EventId")
    event_status: EventStatus = Field(alias="EventStatus")
    event_type: EventType = Field(alias="EventType")
    resource_type: str = Field(alias="ResourceType")
    resources: list[str] = Field(alias="Resources")
    not_before: str = Field(alias="NotBefore")
    description: str = Field(alias="Description")
    event_source: EventSource = Field(alias="EventSource")
    duration_in_seconds: int = Field(alias="DurationInSeconds")
    audience: list[str] = Field(description="VMs whose document shows the event")
    parties: list[str] = Field(description="Tenants (subscriptions) that must approve")
    approved_by: list[str] = Field(alias="approvedBy", description="Tenants that approved")
    approved_by_vms: list[str] = Field(
        alias="approvedByVms", description="VMs whose approval was taken, in order"
    )
    job_id: int | None = Field(alias="jobId", description="Events of one job start together")


class EventsOut(_Out):
    events: list[EventOut]


class ApprovedOut(_Out):
    approved: list[str]


class VmOut(_Out):
    name: str
    address: str | None
    host: str
    reachable: bool = Field(description="False while an impact is under way")
    receiving: bool = Field(description="Scheduled Events is on for this VM")
    subscription_id: str = Field(alias="subscriptionId")
    availability_set: str | None = Field(alias="availabilitySet")
    scale_set: str | None = Field(alias="scaleSet")
    cloud_service: str | None = Field(alias="cloudService")
    fault_domain: int = Field(alias="faultDomain")
    update_domain: int = Field(alias="updateDomain")
    priority: str
    compute: dict[str, Any] = Field(description="The VM's /metadata/instance compute section")


class VmsOut(_Out):
    vms: list[VmOut]


class DocumentOut(_Out):
    document_incarnation: int = Field(alias="DocumentIncarnation")
    events: list[dict[str, Any]] = Field(alias="Events")


class HostOut(_Out):
    name: str
    vms: list[str]


class HostsOut(_Out):
    hosts: list[HostOut]


class CampaignOut(_Out):
    id: int
    step: int = Field(description="Steps (fault domains) begun so far")
    steps: int
    current_events: list[str] = Field(alias="currentEvents")


class CampaignsOut(_Out):
    campaigns: list[CampaignOut]


class CampaignStartedOut(_Out):
    campaign: CampaignOut | None = Field(description="None when it had nothing left to do")
    events: list[EventOut]


class ClockOut(_Out):
    now: str
    kind: str
    profile: str
    next_deadline: str | None = Field(alias="nextDeadline")


class ParameterOut(_Out):
    name: str
    type: str
    required: bool
    help: str
    choices: list[str] = Field(description="The values a string may take (empty: any)")


class OperationOut(_Out):
    name: str
    target: Literal["vm", "scale-set", "availability-set", "host"]
    method: str
    path: str
    summary: str
    cli: str = Field(description="The CLI command that performs it")
    parameters: list[ParameterOut] = Field(description="The JSON body's fields")


class OperationsOut(_Out):
    operations: list[OperationOut]


class ErrorOut(_Out):
    error: str


# -- mapping ------------------------------------------------------------------------------------


def event_out(event: Event, view: EventView | None) -> EventOut:
    return EventOut.model_validate(
        {
            **event_fields(view.event if view else event, CURRENT_VERSION),
            "audience": sorted(view.audience) if view else [],
            "parties": sorted(view.parties) if view else [],
            "approvedBy": sorted(view.approvals) if view else [],
            "approvedByVms": list(view.approvers) if view else [],
            "jobId": view.job_id if view else None,
        }
    )


def created_out(created: Created) -> EventOut:
    """An event a call created, as it is now."""
    return event_out(created.event, created.view)


def vm_out(state: VmState) -> VmOut:
    vm = state.vm
    return VmOut.model_validate(
        {
            "name": vm.name,
            "address": vm.address,
            "host": vm.host,
            "reachable": state.reachable,
            "receiving": state.receiving,
            "subscriptionId": vm.subscription_id,
            "availabilitySet": vm.availability_set,
            "scaleSet": vm.vm_scale_set_name or None,
            "cloudService": vm.cloud_service,
            "faultDomain": vm.platform_fault_domain,
            "updateDomain": vm.platform_update_domain,
            "priority": vm.priority.value,
            "compute": compute_fields(vm),
        }
    )


def campaign_out(view: CampaignView) -> CampaignOut:
    return CampaignOut(
        id=view.campaign_id,
        step=view.step,
        steps=view.steps,
        currentEvents=sorted(view.current),
    )


def clock_out(status: ClockStatus) -> ClockOut:
    deadline = status.next_deadline
    return ClockOut(
        now=status.now.isoformat(),
        kind=status.kind,
        profile=status.profile,
        nextDeadline=deadline.isoformat() if deadline else None,
    )
