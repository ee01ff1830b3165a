"""What every control command shares: where the control API is, output, and errors.

The HTTP client is made by :class:`CliContext`, which tests replace (``CliRunner.invoke(main,
args, obj=CliContext(connect=...))``) to drive the real control app in-process, with no socket.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import click

from forewarn.control_token import TOKEN_ENVIRONMENT_VARIABLE, token_file, token_origin
from forewarn.defaults import DEFAULT_CONTROL_PORT, DEFAULT_HOST
from forewarn.nesting import load_json
from forewarn.registry import Operation
from forewarn.scenario.durations import parse_duration as _parse_duration

if TYPE_CHECKING:
    import httpx

    from forewarn.scenario.client import ControlClient

F = TypeVar("F", bound=Callable[..., Any])


def _connect(host: str, port: int) -> httpx.Client:
    """:func:`forewarn.scenario.client.connect`, its HTTP client imported by the first command
    that asks: ``forewarn serve`` shares this module and never needs it."""
    from forewarn.scenario.client import connect

    return connect(host, port)


@dataclass(frozen=True)
class CliContext:
    """How commands reach the control API: ``connect(host, port)`` returns an HTTP client."""

    connect: Callable[[str, int], httpx.Client] = _connect


def parse_address(text: str, default_port: int) -> tuple[str, int]:
    """``HOST``, ``HOST:PORT``, ``[V6]:PORT``, or ``PORT`` alone (on 127.0.0.1): a host
    name is never all digits."""
    if text.isdigit():
        host, port_text = DEFAULT_HOST, text
    elif text.startswith("["):
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
    """``90``, ``90s``, ``15m``, ``1h30m``, ``7d``: a duration for the clock and notices."""
    try:
        return _parse_duration(text)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def parse_moment(text: str) -> datetime:
    """An ISO 8601 time, in UTC unless it names a zone: ``2022-04-11T22:11:58Z``."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not an ISO 8601 time") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


@contextmanager
def control_api(address: str) -> Iterator[ControlClient]:
    """A client for the control API at ``address``; its errors become one-line CLI errors,
    saying what to check when nothing answers there or its token was refused."""
    from forewarn.scenario.client import ControlClient, ControlError, ControlUnreachableError

    host, port = parse_address(address, DEFAULT_CONTROL_PORT)
    context = click.get_current_context().find_object(CliContext) or CliContext()
    with context.connect(host, port) as http:
        try:
            yield ControlClient(http)
        except ControlUnreachableError as exc:
            raise click.ClickException(f"{exc}; {where_to_look(host, port)}") from None
        except ControlError as exc:
            if exc.status == 401:
                raise click.ClickException(refused_token(host, port, str(exc))) from None
            raise click.ClickException(str(exc)) from None


def where_to_look(host: str, port: int) -> str:
    """What to check when nothing answers at the control address ``host:port``."""
    return f"is forewarn serve running at {_shown(host, port)}? see --control (or FOREWARN_CONTROL)"


def refused_token(host: str, port: int, refusal: str) -> str:
    """A 401 of the control API at ``host:port`` in one line: which token was sent (the
    variable's, or the file's) and where the server's own is."""
    where, origin = token_file(host, port), token_origin(host, port)
    address = _shown(host, port)
    if origin == TOKEN_ENVIRONMENT_VARIABLE:
        return (
            f"401: the control API at {address} refused the token in "
            f"{TOKEN_ENVIRONMENT_VARIABLE}: unset it to use the one forewarn serve wrote to "
            f"{where}, or set it to that token"
        )
    if origin is not None:
        return (
            f"401: the control API at {address} refused the token in {origin}, which is not "
            "its own (a serve run by another user or in a container writes its own file): "
            f"set {TOKEN_ENVIRONMENT_VARIABLE} to its token"
        )
    return f"{refusal}; none was sent ({TOKEN_ENVIRONMENT_VARIABLE} is unset, no {where})"


def _shown(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


#: How a client finds the control API's token, as every ``--control`` help says it.
TOKEN_HELP = (
    "its token is FOREWARN_TOKEN, else the file forewarn serve wrote for that address "
    "(see its start-up lines)"
)


def control_option(function: F) -> F:
    option = click.option(
        "--control",
        "control",
        default=f"{DEFAULT_HOST}:{DEFAULT_CONTROL_PORT}",
        show_default=True,
        envvar="FOREWARN_CONTROL",
        metavar="HOST:PORT",
        help=f"The control API's address (env FOREWARN_CONTROL); {TOKEN_HELP}.",
    )
    return option(function)


def examples(*lines: str) -> str:
    """An ``Examples:`` epilog for ``--help``: one command a line, shown as written (click's
    ``\\b`` keeps it from being rewrapped); a ``#`` starts a comment, as in a shell."""
    return "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


class AzureNames(click.Choice[str]):
    """Azure's names of one kind (``Reboot``, ``Platform``), listed in lower case as every
    other choice of the CLI is, taken in any case, and handed on as Azure spells them."""

    def __init__(self, names: Sequence[str]) -> None:
        self.spelled = {name.lower(): name for name in names}
        super().__init__(list(self.spelled), case_sensitive=False)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        chosen = super().convert(value, param, ctx)
        return self.spelled[str(chosen).lower()]


def output_option(function: F) -> F:
    option = click.option(
        "--output",
        "-o",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="A table for people, or JSON for scripts.",
    )
    return option(function)


def parse_json_object(text: str, hint: str) -> dict[str, Any]:
    """``text`` as a JSON object, or a one-line usage error naming ``hint``."""
    try:
        value = load_json(text)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint=hint) from None
    if not isinstance(value, dict):
        raise click.BadParameter("a JSON object {...} is needed", param_hint=hint)
    return value


def operation_options(operation: Operation, function: F) -> F:
    """The options of ``operation``'s parameters beyond its target and instance ids: each
    flag (``--autoscale``), ``--policy JSON`` for a ``scheduledEventsPolicy``, and a choice by
    its wire name (``--as redeploy``; left out, the operation's default)."""
    for param in reversed(operation.params):
        if param.kind == "choice":
            function = click.option(
                "--" + param.wire, param.name, type=click.Choice(param.choices), help=param.help
            )(function)
        elif param.kind == "flag":
            flag = "--" + param.name.replace("_", "-")
            function = click.option(flag, param.name, is_flag=True, help=param.help)(function)
        elif param.kind == "policy":
            function = click.option(
                "--policy", param.name, required=True, metavar="JSON", help=param.help
            )(function)
    return function


def operation_examples(operation: Operation) -> str | None:
    """The ``Examples:`` epilog of ``operation``'s command, from its declaration."""
    if not operation.examples:
        return None
    command = f"forewarn {operation.target.cli_group} {operation.name}"
    return examples(*(f"{command} {arguments}" for arguments in operation.examples))


def operation_body(operation: Operation, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The route's body for ``arguments`` as the command line gave them (a policy as text)."""
    given = dict(arguments)
    for param in operation.params:
        if param.kind == "policy":
            given[param.name] = parse_json_object(given[param.name], "--policy")
    return operation.body(given)


def cell(value: object) -> str:
    if value is None or value == "" or value == []:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ",".join(str(item) for item in value)
    return str(value)


def emit(data: Any, output: str, rows: Sequence[Sequence[object]], header: Sequence[str]) -> None:
    """``data`` as JSON, or ``rows`` as a table under ``header``."""
    if output == "json":
        click.echo(json.dumps(data, indent=2))
        return
    table = [list(header), *([cell(value) for value in row] for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        click.echo(
            "  ".join(text.ljust(width) for text, width in zip(row, widths, strict=True)).rstrip()
        )


EVENT_HEADER = ("EVENT ID", "TYPE", "STATUS", "SOURCE", "RESOURCES", "NOT BEFORE")


def event_row(event: dict[str, Any]) -> tuple[object, ...]:
    return (
        event["EventId"],
        event["EventType"],
        event["EventStatus"],
        event["EventSource"],
        event["Resources"],
        event["NotBefore"],
    )


def emit_events(data: dict[str, Any], output: str, nothing: str) -> None:
    """The events an operation created, or ``nothing`` when it created none."""
    if output == "table" and not data["events"]:
        click.echo(nothing)
        return
    emit(data, output, [event_row(e) for e in data["events"]], EVENT_HEADER)


__all__ = [
    "EVENT_HEADER",
    "TOKEN_HELP",
    "AzureNames",
    "CliContext",
    "cell",
    "control_api",
    "control_option",
    "emit",
    "emit_events",
    "event_row",
    "examples",
    "operation_body",
    "operation_examples",
    "operation_options",
    "output_option",
    "parse_address",
    "parse_duration",
    "parse_json_object",
    "parse_moment",
    "refused_token",
    "where_to_look",
]
