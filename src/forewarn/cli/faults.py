"""``forewarn fault ...``: inject, list and clear faults in front of the VM-facing endpoint.

Faults are not platform operations (:mod:`forewarn.faults`): they are never journaled and
leave the platform untouched, so they have a command group of their own.
"""

from __future__ import annotations

from typing import Any

import click

from forewarn.cli.common import control_api, control_option, emit, output_option, parse_duration
from forewarn.faults import FaultKind

_HEADER = (
    "ID",
    "KIND",
    "VM",
    "STATUS",
    "LEFT",
    "EXPIRES IN",
    "PROBABILITY",
    "DELAY",
    "SEED",
    "HITS",
)


def _row(fault: dict[str, Any]) -> tuple[object, ...]:
    expires = fault["expiresIn"]
    return (
        fault["id"],
        fault["kind"],
        fault["vm"] or "all",
        fault["status"],
        fault["remaining"],
        None if expires is None else f"{expires:.1f}s",
        fault["probability"],
        None if fault["delay"] is None else f"{fault['delay']:g}s",
        fault["seed"],
        fault["hits"],
    )


def _seconds(text: str | None) -> float | None:
    return None if text is None else parse_duration(text).total_seconds()


@click.group()
def fault() -> None:
    """Faults clients must survive: 410, 500, 429, 503, latency, timeouts, cut bodies, resets."""


@fault.command("set")
@click.argument("kind", type=click.Choice([kind.value for kind in FaultKind]))
@click.option("--vm", help="Only this VM's requests (default: every VM).")
@click.option("--count", type=click.IntRange(min=1), help="For the next COUNT requests hit.")
@click.option("--for", "duration", help="For this long in real time, e.g. 70s or 2m.")
@click.option(
    "--probability",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=1.0,
    show_default=True,
    help="The share of requests hit.",
)
@click.option("--delay", help="latency: the added delay; timeout: how long before closing.")
@click.option("--seed", type=click.IntRange(min=0), help="Seed the probability draws.")
@control_option
@output_option
def fault_set(
    kind: str,
    vm: str | None,
    count: int | None,
    duration: str | None,
    probability: float,
    delay: str | None,
    seed: int | None,
    control: str,
    output: str,
) -> None:
    """Inject KIND: gone (410), error (500), throttle (429), unavailable (503), latency,
    timeout, truncate, reset.

    Without --count or --for the fault stays until cleared, e.g.
    `forewarn fault set gone --for 70s` or `forewarn fault set throttle --count 5 --vm vm1`.
    """
    body: dict[str, Any] = {"kind": kind, "probability": probability}
    for key, value in (
        ("vm", vm),
        ("count", count),
        ("seconds", _seconds(duration)),
        ("delay", _seconds(delay)),
        ("seed", seed),
    ):
        if value is not None:
            body[key] = value
    with control_api(control) as api:
        created = api.post("/faults", body)
    emit(created, output, [_row(created)], _HEADER)


@fault.command("list")
@control_option
@output_option
def fault_list(control: str, output: str) -> None:
    """The faults in force, in the order they apply."""
    with control_api(control) as api:
        data = api.get("/faults")
    if output != "json" and not data["faults"]:
        click.echo("no faults")
        return
    emit(data, output, [_row(item) for item in data["faults"]], _HEADER)


@fault.command("clear")
@click.argument("fault_id", required=False, type=int)
@click.option("--vm", help="Clear only the faults set for this VM.")
@control_option
def fault_clear(fault_id: int | None, vm: str | None, control: str) -> None:
    """Clear FAULT_ID, the faults of one VM (--vm), or every fault."""
    with control_api(control) as api:
        if fault_id is not None:
            api.delete(f"/faults/{fault_id}")
            click.echo(f"cleared fault {fault_id}")
            return
        cleared = api.request("DELETE", "/faults", params=None if vm is None else {"vm": vm})
    click.echo(f"cleared {cleared['cleared']} fault(s)")


__all__ = [
    "fault",
    "fault_clear",
    "fault_list",
    "fault_set",
]
