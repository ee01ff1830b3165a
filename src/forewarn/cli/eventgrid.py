"""``forewarn eventgrid ...``: webhook subscriptions to the system topic of scheduled events,
named as ``az eventgrid event-subscription`` names them where it can."""

from __future__ import annotations

import click

from forewarn.cli.common import control_api, control_option, emit, examples, output_option
from forewarn.scenario.client import segment

HEADER = (
    "NAME",
    "SCHEMA",
    "STATE",
    "DELIVERED",
    "FAILED",
    "DEAD-LETTERED",
    "DEAD-LETTER-FAILED",
    "PENDING",
    "ENDPOINT",
)


@click.group()
def eventgrid() -> None:
    """Subscribe webhooks to scheduled events, as Event Grid's system topic delivers them."""


def _row(subscription: dict[str, object]) -> tuple[object, ...]:
    return (
        subscription["name"],
        subscription["schema"],
        subscription["provisioningState"],
        subscription["delivered"],
        subscription["failed"],
        subscription["deadLettered"],
        subscription["deadLetterFailures"],
        subscription["pending"],
        subscription["endpoint"],
    )


@eventgrid.command(
    "subscribe",
    epilog=examples(
        "forewarn eventgrid subscribe --endpoint http://127.0.0.1:8000/events",
        "forewarn eventgrid subscribe --endpoint https://hooks.example.com/x --name ops",
        "forewarn eventgrid subscribe --endpoint http://127.0.0.1:8000/ --schema cloudevents",
    ),
)
@click.option("--endpoint", required=True, metavar="URL", help="The webhook's http(s) URL.")
@click.option(
    "--schema",
    type=click.Choice(["eventgrid", "cloudevents"]),
    default="eventgrid",
    show_default=True,
    help="Event Grid's own schema, or CloudEvents 1.0.",
)
@click.option("--name", default=None, help="3-64 letters, digits or hyphens (default: made up).")
@control_option
@output_option
def subscribe(endpoint: str, schema: str, name: str | None, control: str, output: str) -> None:
    """Subscribe ENDPOINT; it must pass the validation handshake before events are delivered."""
    payload = {"endpoint": endpoint, "schema": schema}
    if name is not None:
        payload["name"] = name
    with control_api(control) as api:
        data = api.post("/eventgrid/subscriptions", payload)
    emit(data, output, [_row(data)], HEADER)


@eventgrid.command("list")
@control_option
@output_option
def subscriptions(control: str, output: str) -> None:
    """Every subscription with its deliveries, failed attempts, dead-lettered events and
    failed dead-letter writes."""
    with control_api(control) as api:
        data = api.get("/eventgrid/subscriptions")
    emit(data, output, [_row(s) for s in data["subscriptions"]], HEADER)


@eventgrid.command("delete")
@click.option("--name", required=True, help="The subscription.")
@control_option
def delete(name: str, control: str) -> None:
    """Delete a subscription and its pending deliveries."""
    with control_api(control) as api:
        api.delete(f"/eventgrid/subscriptions/{segment(name)}")
    click.echo(f"deleted {name}")


@eventgrid.command("fault")
@click.option("--name", required=True, help="The subscription.")
@click.option(
    "--kind",
    type=click.Choice(["eventgrid-duplicate"]),
    default="eventgrid-duplicate",
    show_default=True,
    help="eventgrid-duplicate: an event sent twice with the same id (Double notifications).",
)
@click.option(
    "--count",
    type=click.IntRange(1, 100_000),
    default=1,
    show_default=True,
    help="How many of the next deliveries arrive twice.",
)
@control_option
@output_option
def fault(name: str, kind: str, count: int, control: str, output: str) -> None:
    """Make the next COUNT deliveries to a subscription arrive twice."""
    with control_api(control) as api:
        data = api.post(
            f"/eventgrid/subscriptions/{segment(name)}/faults", {"kind": kind, "count": count}
        )
    emit(data, output, [_row(data)], HEADER)


__all__ = ["HEADER", "delete", "eventgrid", "fault", "subscribe", "subscriptions"]
