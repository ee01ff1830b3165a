"""``forewarn replay TRACE``: serve a recorded VM its recorded documents again."""

from __future__ import annotations

from pathlib import Path

import click

from forewarn.cli.common import examples, parse_address
from forewarn.defaults import DEFAULT_CONTROL_PORT, DEFAULT_HOST, DEFAULT_PORT
from forewarn.trace.format import TraceError, load_trace


@click.command(
    "replay",
    epilog=examples(
        "forewarn replay vm0.trace                       # at the recorded speed",
        "forewarn replay vm0.trace --speed 60            # a minute a second",
        "forewarn replay vm0.trace --manual              # moved by forewarn clock advance",
    ),
)
@click.argument("trace", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--bind",
    default=f"{DEFAULT_HOST}:{DEFAULT_PORT}",
    show_default=True,
    metavar="HOST:PORT",
    help="Where the recorded VM's endpoint listens.",
)
@click.option(
    "--control",
    default=f"{DEFAULT_HOST}:{DEFAULT_CONTROL_PORT}",
    show_default=True,
    metavar="HOST:PORT",
    help="Where the replay's control API (its clock) listens; clients find its token in "
    "FOREWARN_TOKEN, else in the file this replay writes for the address.",
)
@click.option(
    "--speed",
    type=click.FloatRange(min=0, min_open=True),
    default=1.0,
    show_default=True,
    help="How many recorded seconds pass per real second (1: as recorded).",
)
@click.option(
    "--manual",
    is_flag=True,
    help="A manual clock from the trace's start: forewarn clock advance 15m moves it.",
)
@click.option(
    "--rate-limit",
    type=click.FloatRange(min=0, min_open=True),
    default=5.0,
    show_default=True,
    help="Requests per second allowed per VM before 429 (the IMDS limit is 5).",
)
@click.option(
    "--token",
    envvar="FOREWARN_TOKEN",
    help="The control API's token (env FOREWARN_TOKEN); default: a new one at each start.",
)
def replay(
    trace: Path,
    bind: str,
    control: str,
    speed: float,
    manual: bool,
    rate_limit: float,
    token: str | None,
) -> None:
    """Serve the VM recorded in TRACE (forewarn record) its documents, byte for byte, at the
    recorded times (docs/record-replay.md)."""
    host, port = parse_address(bind, DEFAULT_PORT)
    control_host, control_port = parse_address(control, DEFAULT_CONTROL_PORT)
    try:
        loaded = load_trace(trace)
    except TraceError as exc:
        raise click.ClickException(str(exc)) from None
    from forewarn.server.trace_replay import ReplayError, ReplaySettings, run_replay  # the server

    settings = ReplaySettings(
        trace,
        host=host,
        port=port,
        control_host=control_host,
        control_port=control_port,
        manual=manual,
        speed=speed,
        rate_limit=rate_limit,
        token=token,
    )
    try:
        run_replay(settings, loaded, announce=click.echo)
    except (ReplayError, TraceError) as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(str(exc)) from None


__all__ = ["replay"]
