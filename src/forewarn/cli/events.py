"""``forewarn events ...``: any event, by hand, and the list of live ones.

``get`` and ``approve`` are the other side: they talk to the VM-facing endpoint, as software
inside a VM does, through the SDK (:class:`forewarn.client.Client`), so they work against Azure
and forewarn alike and find the endpoint the way the SDK does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from forewarn.cli.common import (
    EVENT_HEADER,
    AzureNames,
    control_api,
    control_option,
    emit,
    event_row,
    examples,
    output_option,
    parse_duration,
)
from forewarn.client import (
    DEFAULT_API_VERSION,
    ENDPOINT_ENVIRONMENT_VARIABLE,
    Client,
    ImdsError,
    InvalidApiVersionError,
    RetryPolicy,
    ScheduledEvent,
)
from forewarn.defaults import DEFAULT_HOST, DEFAULT_PORT
from forewarn.domain.events import EventSource, EventType
from forewarn.scenario.client import segment

_F = TypeVar("_F", bound=Callable[..., Any])


@click.group()
def events() -> None:
    """Create, list, show and cancel scheduled events; get and approve them as a VM does."""


@events.command("list")
@control_option
@output_option
def events_list(control: str, output: str) -> None:
    """List live events with the VMs that approved them."""
    with control_api(control) as api:
        data = api.get("/events")
    rows = [(*event_row(e), e["approvedByVms"]) for e in data["events"]]
    emit(data, output, rows, (*EVENT_HEADER, "APPROVED BY"))


@events.command("show")
@click.argument("event_id")
@control_option
@output_option
def events_show(event_id: str, control: str, output: str) -> None:
    """One event: its fields, audience, parties and approvals."""
    with control_api(control) as api:
        data = api.get(f"/events/{segment(event_id)}")
    emit(data, output, list(data.items()), ("FIELD", "VALUE"))


@events.command(
    "create",
    epilog=examples(
        "forewarn events create --type reboot --vm vm0          # the type's minimum notice",
        "forewarn events create --type freeze --vm vm0 --notice 5m --duration 9",
        "forewarn events create --type redeploy --vm vm0 --vm vm1 --source user",
        "forewarn events create --type reboot --vm vm0 --started  # no notice: a failure",
        "forewarn events create --type preempt --vm spot0 -o json",
    ),
)
@click.option(
    "--type",
    "event_type",
    required=True,
    type=AzureNames([t.value for t in EventType]),
    help="The EventType the document shows (any case).",
)
@click.option("--vm", "vms", multiple=True, required=True, help="Impacted VM (repeatable).")
@click.option(
    "--source",
    type=AzureNames([s.value for s in EventSource]),
    default="platform",
    show_default=True,
    help="The EventSource: platform (maintenance, failures) or user (what a user asked for).",
)
@click.option(
    "--description",
    default="",
    help="The Description the document shows (default: empty).",
)
@click.option(
    "--duration",
    "duration",
    type=click.IntRange(min=-1),
    default=-1,
    show_default=True,
    help="DurationInSeconds (-1 = unknown).",
)
@click.option("--notice", help="Time until NotBefore (e.g. 15m); default: the type's minimum.")
@click.option("--started", is_flag=True, help="Skip Scheduled, as a hardware failure does.")
@click.option(
    "--started-for",
    help="How long it stays Started (e.g. 5m); default: its kind's period in the profile.",
)
@control_option
@output_option
def events_create(
    event_type: str,
    vms: tuple[str, ...],
    source: str,
    description: str,
    duration: int,
    notice: str | None,
    started: bool,
    started_for: str | None,
    control: str,
    output: str,
) -> None:
    """Put an event in front of one or more VMs."""
    payload: dict[str, Any] = {
        "type": event_type,
        "resources": list(vms),
        "source": source,
        "description": description,
        "durationInSeconds": duration,
        "started": started,
    }
    if notice is not None:
        payload["noticeSeconds"] = parse_duration(notice).total_seconds()
    if started_for is not None:
        payload["startedSeconds"] = parse_duration(started_for).total_seconds()
    with control_api(control) as api:
        event = api.post("/events", payload)
    emit(event, output, [event_row(event)], EVENT_HEADER)


@events.command("cancel")
@click.argument("event_id")
@control_option
def events_cancel(event_id: str, control: str) -> None:
    """Cancel a Scheduled event, as the platform does with a risky operation."""
    with control_api(control) as api:
        api.delete(f"/events/{segment(event_id)}")
    click.echo(f"cancelled {event_id}")


#: The Maintenance provider's api-version the acknowledge call is sent with (its SDK's default).
ACKNOWLEDGE_API_VERSION = "2023-10-01-preview"


@events.command("acknowledge")
@click.option(
    "--ids",
    "ids",
    multiple=True,
    required=True,
    help="A scheduled event's ARM id, as az maintenance scheduledevent acknowledge --ids takes "
    "it: /subscriptions/{sub}/resourcegroups/{rg}/providers/microsoft.compute/virtualMachines/"
    "{vm}/providers/microsoft.maintenance/scheduledevents/{EventId} (repeatable).",
)
@control_option
def events_acknowledge(ids: tuple[str, ...], control: str) -> None:
    """Acknowledge events from outside their VMs, through the Maintenance provider's route."""
    with control_api(control) as api:
        for resource_id in ids:
            if not resource_id.startswith("/subscriptions/"):
                raise click.BadParameter(f"{resource_id!r} is no ARM id", param_hint="--ids")
            api.arm("POST", f"{resource_id}/acknowledge", ACKNOWLEDGE_API_VERSION)
            click.echo(f"acknowledged {resource_id}")


# -- as the VM sees them: the VM-facing endpoint -------------------------------------------


def _endpoint_options(function: _F) -> _F:
    for option in reversed(
        (
            click.option(
                "--endpoint",
                metavar="URL|HOST:PORT",
                help=(
                    "The Scheduled Events endpoint: a URL or HOST[:PORT]. Default: found as "
                    f"the SDK finds it ({ENDPOINT_ENVIRONMENT_VARIABLE}, DHCP option 245 "
                    "leases, 169.254.169.254)."
                ),
            ),
            click.option(
                "--api-version",
                default=DEFAULT_API_VERSION,
                show_default=True,
                help="The Scheduled Events api-version asked for.",
            ),
            click.option(
                "--retries",
                type=click.IntRange(min=0),
                default=3,
                show_default=True,
                help="Retries of a transient failure (no answer, 410, 429, 5xx).",
            ),
        )
    ):
        function = option(function)
    return function


@contextmanager
def _imds_client(endpoint: str | None, api_version: str, retries: int) -> Iterator[Client]:
    """The SDK client; its errors become one-line CLI errors naming the endpoint."""
    try:
        client = Client(endpoint, api_version=api_version, retry=RetryPolicy(attempts=retries + 1))
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="'--endpoint'") from None
    with client:
        try:
            yield client
        except ImdsError as exc:
            message = f"{client.endpoint.base_url}: {exc}"
            if isinstance(exc, InvalidApiVersionError) and exc.newest_versions:
                message += f" (newest versions: {', '.join(exc.newest_versions)})"
            if client.endpoint.source in ("dhcp", "default"):
                # Found, not given: off Azure this is rarely the endpoint meant.
                message += (
                    f" (no endpoint was given, so {client.endpoint.source} chose this one; "
                    f"to reach forewarn serve pass --endpoint http://{DEFAULT_HOST}:"
                    f"{DEFAULT_PORT} or set {ENDPOINT_ENVIRONMENT_VARIABLE})"
                )
            raise click.ClickException(message) from None


def _imds_row(event: ScheduledEvent) -> tuple[object, ...]:
    return (
        event.event_id,
        event.event_type,
        event.status,
        event.source,
        list(event.resources),
        event.raw.get("NotBefore"),
    )


@events.command("get")
@_endpoint_options
@output_option
def events_get(endpoint: str | None, api_version: str, retries: int, output: str) -> None:
    """Read this VM's Scheduled Events document from the VM-facing endpoint."""
    with _imds_client(endpoint, api_version, retries) as client:
        document = client.get()
        where = client.endpoint.base_url
    data = {
        "DocumentIncarnation": document.incarnation,
        "Events": [dict(event.raw) for event in document.events],
    }
    if output == "table":
        click.echo(f"DocumentIncarnation {document.incarnation} at {where}")
    emit(data, output, [_imds_row(event) for event in document.events], EVENT_HEADER)


@events.command("approve")
@click.argument("event_ids", nargs=-1, required=True)
@_endpoint_options
@output_option
def events_approve(
    event_ids: tuple[str, ...], endpoint: str | None, api_version: str, retries: int, output: str
) -> None:
    """Approve events as the VM itself: POST StartRequests to the VM-facing endpoint, so
    they start now instead of at NotBefore (`vm approve` does it for a VM through the
    control API)."""
    with _imds_client(endpoint, api_version, retries) as client:
        client.approve(*event_ids)
        where = client.endpoint.base_url
    if output == "json":
        emit({"approved": list(event_ids), "endpoint": where}, output, [], ())
        return
    for event_id in event_ids:
        click.echo(f"approved {event_id} at {where}")


__all__ = [
    "ACKNOWLEDGE_API_VERSION",
    "events",
    "events_acknowledge",
    "events_approve",
    "events_cancel",
    "events_create",
    "events_get",
    "events_list",
    "events_show",
]
