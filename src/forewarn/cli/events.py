"""``forewarn events ...``: any event, by hand, and the list of live ones."""

from __future__ import annotations

from typing import Any

import click

from forewarn.cli.common import (
    EVENT_HEADER,
    control_api,
    control_option,
    emit,
    event_row,
    output_option,
    parse_duration,
)
from forewarn.domain.events import EventSource, EventType
from forewarn.scenario.client import segment


@click.group()
def events() -> None:
    """Create, list, show and cancel scheduled events."""


@events.command("list")
@control_option
@output_option
def events_list(control: str, output: str) -> None:
    """List live events with who sees and who approved them."""
    with control_api(control) as api:
        data = api.get("/events")
    rows = [(*event_row(e), e["approvedBy"]) for e in data["events"]]
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


@events.command("create")
@click.option(
    "--type",
    "event_type",
    required=True,
    type=click.Choice([t.value for t in EventType], case_sensitive=False),
)
@click.option("--vm", "vms", multiple=True, required=True, help="Impacted VM (repeatable).")
@click.option(
    "--source",
    type=click.Choice([s.value for s in EventSource]),
    default="Platform",
    show_default=True,
)
@click.option("--description", default="")
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
    control: str,
    output: str,
) -> None:
    """Put an event in front of one or more VMs."""
    payload: dict[str, Any] = {
        "type": next(t.value for t in EventType if t.value.lower() == event_type.lower()),
        "resources": list(vms),
        "source": source,
        "description": description,
        "durationInSeconds": duration,
        "started": started,
    }
    if notice is not None:
        payload["noticeSeconds"] = parse_duration(notice).total_seconds()
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
