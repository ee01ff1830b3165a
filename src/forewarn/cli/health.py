"""``forewarn health``: whether the server at ``--control`` is ready, as its exit code.

What a container's ``HEALTHCHECK`` runs (the image has no curl), and what a script can wait
on before it starts a handler: ``GET /healthz`` (no token needed), exit 0 when the server
answers 200, 1 with the reason otherwise.
"""

from __future__ import annotations

import click
import httpx

from forewarn.cli.common import CliContext, control_option, parse_address, where_to_look
from forewarn.defaults import DEFAULT_CONTROL_PORT, HEALTH_PATH
from forewarn.errors import reason
from forewarn.nesting import load_json

__all__ = ["health"]


@click.command()
@control_option
def health(control: str) -> None:
    """Exit 0 if the server is ready, 1 saying why not (GET /healthz on the control API)."""
    host, port = parse_address(control, DEFAULT_CONTROL_PORT)
    context = click.get_current_context().find_object(CliContext) or CliContext()
    with context.connect(host, port) as http:
        try:
            response = http.get(HEALTH_PATH, timeout=5.0)
        except httpx.HTTPError as exc:
            raise click.ClickException(
                f"no answer from {control}: {reason(exc)}; {where_to_look(host, port)}"
            ) from None
    if response.status_code == 200:
        click.echo("ready")
        return
    try:
        why = load_json(response.content)["reason"]
    except (ValueError, KeyError, TypeError):
        why = f"{response.status_code} {response.reason_phrase}"
    raise click.ClickException(f"not ready: {why}")
