"""``forewarn agent``: the handler daemon, run by hand or by systemd.

Precedence is defaults < ``--config`` file < ``FOREWARN_AGENT_*`` environment < flags; a flag
left out does not override anything. SIGTERM and SIGINT stop polling, let running hooks
finish, and exit 0.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import click

from forewarn.agent.config import AgentConfigError, load_config
from forewarn.agent.daemon import build_agent
from forewarn.agent.store import AgentStateError


@click.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar="FOREWARN_AGENT_CONFIG",
    help="YAML configuration file (see examples/agent.yaml).",
)
@click.option(
    "--endpoint",
    metavar="URL",
    help="Metadata Service URL (default: discovered, see docs/client.md).",
)
@click.option("--vm-name", help="This VM's name (default: from instance metadata).")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the state lives (default: /var/lib/forewarn-agent).",
)
@click.option("--poll-interval", type=float, help="Seconds between polls (default 1).")
@click.option(
    "--metrics-address",
    metavar="HOST:PORT|off",
    help="Where /metrics and /healthz are served, or off (default: 127.0.0.1:9464).",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    help="Write log lines at this level and above (default: info).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    default=None,
    help="Decide and log only: no hooks, no approvals.",
)
@click.option("--print-config", is_flag=True, help="Print the effective configuration and exit.")
def agent(
    config_path: Path | None,
    endpoint: str | None,
    vm_name: str | None,
    state_dir: Path | None,
    poll_interval: float | None,
    metrics_address: str | None,
    log_level: str | None,
    dry_run: bool | None,
    print_config: bool,
) -> None:
    """Handle this VM's scheduled events: prepare, approve, recover (docs/agent.md)."""
    flags: dict[str, Any] = {
        "endpoint": endpoint,
        "vm_name": vm_name,
        "state_dir": state_dir,
        "poll_interval": poll_interval,
        "metrics_address": metrics_address,
        "log_level": log_level,
        "dry_run": dry_run,
    }
    try:
        config = load_config(config_path, environ=os.environ, flags=flags)
    except AgentConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if print_config:
        click.echo(config.to_yaml(), nl=False)
        return
    base_dir = config_path.resolve().parent if config_path is not None else None
    try:
        daemon = build_agent(config, base_dir=base_dir, log_stream=sys.stderr)
    except (OSError, AgentStateError) as exc:
        raise click.ClickException(f"cannot start: {exc}") from None

    def stop(signum: int, frame: FrameType | None) -> None:
        daemon.stop.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    daemon.run()


__all__ = [
    "agent",
]
