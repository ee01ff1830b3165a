"""``forewarn clock ...``: read the platform time, or move a manual clock."""

from __future__ import annotations

import json
from typing import Any

import click

from forewarn.cli.common import (
    control_api,
    control_option,
    output_option,
    parse_duration,
    parse_moment,
)


def _show(data: dict[str, Any], output: str) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2))
        return
    deadline = data.get("nextDeadline")
    due = f", next change due {deadline}" if deadline else ""
    click.echo(f"{data['now']} ({data['kind']}, profile {data['profile']}{due})")


@click.group()
def clock() -> None:
    """Show or move the platform clock (only `serve --clock manual` can be moved)."""


@clock.command("show")
@control_option
@output_option
def clock_show(control: str, output: str) -> None:
    """The platform time and when the next lifecycle step is due."""
    with control_api(control) as api:
        _show(api.get("/clock"), output)


@clock.command("advance")
@click.argument("duration")
@control_option
@output_option
def clock_advance(duration: str, control: str, output: str) -> None:
    """Move a manual clock forward by DURATION (90, 90s, 15m, 1h30m, 7d)."""
    seconds = parse_duration(duration).total_seconds()
    with control_api(control) as api:
        _show(api.post("/clock/advance", {"seconds": seconds}), output)


@clock.command("set")
@click.argument("moment")
@control_option
@output_option
def clock_set(moment: str, control: str, output: str) -> None:
    """Move a manual clock to MOMENT (ISO 8601; UTC unless it names a zone)."""
    when = parse_moment(moment)
    with control_api(control) as api:
        _show(api.post("/clock/set", {"now": when.isoformat()}), output)


__all__ = [
    "clock",
    "clock_advance",
    "clock_set",
    "clock_show",
]
