"""``forewarn``: run the service, and drive it from the shell through the control API."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import click
import httpx

from forewarn import __version__
from forewarn.config.fleet import FleetFileError, load_fleet
from forewarn.domain.events import EventSource, EventType
from forewarn.domain.timing import PROFILES
from forewarn.server.runner import (
    DEFAULT_CONTROL_PORT,
    DEFAULT_HOST,
    DEFAULT_PORT,
    ServeSettings,
    run,
)

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?$")


def parse_address(text: str, default_port: int) -> tuple[str, int]:
    """``HOST``, ``HOST:PORT`` or ``[V6]:PORT``."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host, port_text = text, ""
    if not host:
        raise click.BadParameter(f"{text!r} has no host")
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise click.BadParameter(f"{text!r}: the port must be a number from 1 to 65535")
    return host, int(port_text)


def parse_duration(text: str) -> timedelta:
    """``90``, ``90s``, ``15m``, ``1h30m``: a duration for the clock and notices."""
    match = _DURATION.match(text.strip())
    if not text.strip() or match is None:
        raise click.BadParameter(f"{text!r} is not a duration like 90s, 15m or 1h30m")
    hours, minutes, seconds = (float(group) if group else 0.0 for group in match.groups())
    return timedelta(hours=hours, minutes=minutes, seconds=seconds)


@click.group()
@click.version_option(__version__, prog_name="forewarn")
def main() -> None:
    """forewarn: the Azure Scheduled Events service, runnable anywhere."""


@main.command()
@click.option(
    "--bind",
    "bind",
    default=f"{DEFAULT_HOST}:{DEFAULT_PORT}",
    show_default=True,
    help="Where the VM-facing endpoint listens (e.g. 169.254.169.254:80).",
)
@click.option(
    "--control",
    "control",
    default=f"{DEFAULT_HOST}:{DEFAULT_CONTROL_PORT}",
    show_default=True,
    help="Where the control API listens.",
)
@click.option(
    "--fleet",
    type=click.Path(dir_okay=False, path_type=Path),
    help="YAML file describing the VMs (default: one standalone VM, vm0).",
)
@click.option(
    "--clock",
    type=click.Choice(["system", "scaled", "manual"]),
    default="system",
    show_default=True,
    help="Platform time: real, sped up, or moved by `clock advance`.",
)
@click.option(
    "--scale",
    type=click.FloatRange(min=0.001),
    default=60.0,
    show_default=True,
    help="Speed-up factor of --clock scaled.",
)
@click.option(
    "--profile",
    type=click.Choice(sorted(PROFILES)),
    default="documented",
    show_default=True,
    help="Timing profile: documented minimum notices, or fast.",
)
@click.option(
    "--rate-limit",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="Requests per second allowed per VM before 429.",
)
@click.option("--seed", type=int, default=None, help="Seed for EventIds, to replay a run.")
def serve(
    bind: str,
    control: str,
    fleet: Path | None,
    clock: str,
    scale: float,
    profile: str,
    rate_limit: float,
    seed: int | None,
) -> None:
    """Serve /metadata/scheduledevents (and the control API) until interrupted."""
    host, port = parse_address(bind, DEFAULT_PORT)
    control_host, control_port = parse_address(control, DEFAULT_CONTROL_PORT)
    if fleet is not None:
        try:
            load_fleet(fleet)
        except FleetFileError as exc:
            raise click.ClickException(str(exc)) from None
    settings = ServeSettings(
        host=host,
        port=port,
        control_host=control_host,
        control_port=control_port,
        fleet=fleet,
        clock=clock,
        scale=scale,
        profile=profile,
        rate_limit=rate_limit,
        seed=seed,
    )
    try:
        run(settings, announce=lambda line: click.echo(line, err=False))
    except OSError as exc:
        raise click.ClickException(f"cannot listen: {exc}") from None


# -- control commands -------------------------------------------------------------------------


class _Control:
    def __init__(self, address: str) -> None:
        host, port = parse_address(address, DEFAULT_CONTROL_PORT)
        shown = f"[{host}]" if ":" in host else host
        self.base = f"http://{shown}:{port}/api/v1"

    def call(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        try:
            response = httpx.request(method, self.base + path, json=payload, timeout=10.0)
        except httpx.HTTPError as exc:
            raise click.ClickException(
                f"cannot reach the control API at {self.base}: {exc}"
            ) from None
        if response.status_code >= 400:
            try:
                message = response.json()["error"]
            except (ValueError, KeyError, TypeError):
                message = response.text
            raise click.ClickException(f"{response.status_code}: {message}")
        return response.json() if response.content else None


_control_option = click.option(
    "--control",
    "control",
    default=f"{DEFAULT_HOST}:{DEFAULT_CONTROL_PORT}",
    show_default=True,
    envvar="FOREWARN_CONTROL",
    help="The control API's address (env FOREWARN_CONTROL).",
)
_output_option = click.option(
    "--output", "-o", type=click.Choice(["table", "json"]), default="table", show_default=True
)


def _emit(data: Any, output: str, rows: Sequence[Sequence[object]], header: Sequence[str]) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2))
        return
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        click.echo(
            "  ".join(
                str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)
            ).rstrip()
        )


@main.group()
def events() -> None:
    """Create, list and cancel scheduled events."""


@events.command("list")
@_control_option
@_output_option
def events_list(control: str, output: str) -> None:
    """List live events with who sees and who approved them."""
    data = _Control(control).call("GET", "/events")
    rows = [
        (
            e["EventId"],
            e["EventType"],
            e["EventStatus"],
            ",".join(e["Resources"]),
            e["NotBefore"] or "-",
            ",".join(e["approvedBy"]) or "-",
        )
        for e in data["events"]
    ]
    _emit(
        data, output, rows, ("EVENT ID", "TYPE", "STATUS", "RESOURCES", "NOT BEFORE", "APPROVED BY")
    )


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
@_control_option
@_output_option
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
    event = _Control(control).call("POST", "/events", payload)
    _emit(
        event,
        output,
        [(event["EventId"], event["EventType"], event["EventStatus"], event["NotBefore"] or "-")],
        ("EVENT ID", "TYPE", "STATUS", "NOT BEFORE"),
    )


@events.command("cancel")
@click.argument("event_id")
@_control_option
def events_cancel(event_id: str, control: str) -> None:
    """Cancel a Scheduled event, as the platform does with a risky operation."""
    _Control(control).call("DELETE", f"/events/{event_id}")
    click.echo(f"cancelled {event_id}")


@main.group()
def vm() -> None:
    """Inspect the fleet's VMs."""


@vm.command("list")
@_control_option
@_output_option
def vm_list(control: str, output: str) -> None:
    """List VMs and where each one's endpoint answers."""
    data = _Control(control).call("GET", "/vms")
    rows = [
        (v["name"], v["address"] or "(bind address)", v["compute"]["vmId"]) for v in data["vms"]
    ]
    _emit(data, output, rows, ("NAME", "ADDRESS", "VM ID"))


@main.group()
def clock() -> None:
    """Show or move the platform clock."""


@clock.command("show")
@_control_option
def clock_show(control: str) -> None:
    data = _Control(control).call("GET", "/clock")
    click.echo(f"{data['now']} ({data['kind']})")


@clock.command("advance")
@click.argument("duration")
@_control_option
def clock_advance(duration: str, control: str) -> None:
    """Move a manual clock forward, e.g. `forewarn clock advance 15m`."""
    seconds = parse_duration(duration).total_seconds()
    data = _Control(control).call("POST", "/clock/advance", {"seconds": seconds})
    click.echo(data["now"])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
