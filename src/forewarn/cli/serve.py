"""``forewarn serve``: its options are those of :class:`~forewarn.server.runner.ServeSettings`."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import click

from forewarn.cli.common import examples, parse_address, parse_duration, parse_moment
from forewarn.defaults import DEFAULT_CONTROL_PORT, DEFAULT_HOST, DEFAULT_PORT
from forewarn.domain.timing import PROFILES

#: Every option can also come from ``FOREWARN_SERVE_<OPTION>`` (``--rate-limit`` from
#: ``FOREWARN_SERVE_RATE_LIMIT``); ``--store`` and ``--token`` keep their own names too.
ENVIRONMENT_PREFIX = "FOREWARN_SERVE"


def _load_config_file(context: click.Context, _: click.Parameter, path: Path | None) -> None:
    """``--config FILE``: option values from a YAML mapping, beneath environment and flags."""
    if path is None:
        return
    import yaml

    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--config") from None
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        raise click.BadParameter(f"{path}: not a mapping of option names", param_hint="--config")
    assert isinstance(context.command, click.Command)
    known = {
        param.name: param
        for param in context.command.params
        if isinstance(param, click.Option) and param.name not in ("config", "print_config")
    }
    values: dict[str, object] = {}
    for key, value in loaded.items():
        name = str(key).replace("-", "_")
        param = known.get(name)
        if param is None:
            names = ", ".join(sorted(n.replace("_", "-") for n in known if n))
            raise click.BadParameter(
                f"{path}: unknown option {key!r}; known: {names}", param_hint="--config"
            )
        if param.multiple and not isinstance(value, list):
            value = [value]
        values[name] = value
    context.default_map = {**(context.default_map or {}), **values}


@click.command(
    context_settings={"auto_envvar_prefix": ENVIRONMENT_PREFIX},
    epilog=examples(
        "forewarn serve                                    # vm0 at 127.0.0.1:16954",
        "forewarn serve --fleet fleet.yaml --clock manual  # time moves by clock advance",
        "forewarn serve --profile dev --data-dir state     # minutes as seconds; kept",
        "forewarn serve --bind 127.0.0.1:8080 --control 127.0.0.1:8081",
        "forewarn serve --store 'postgresql://postgres@127.0.0.1:5432/test?namespace=fleet'",
    ),
)
@click.option(
    "--config",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    is_eager=True,
    expose_value=False,
    callback=_load_config_file,
    help="YAML file of option values (e.g. `rate-limit: 10`); environment variables "
    "(FOREWARN_SERVE_<OPTION>) and flags override it.",
)
@click.option(
    "--print-config",
    is_flag=True,
    help="Print the settings in effect (from defaults, --config, environment and flags) and exit.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="info: operations and state changes; debug: also every VM request.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Log lines as text, or one JSON object per line.",
)
@click.option(
    "--bind",
    "bind",
    default=f"{DEFAULT_HOST}:{DEFAULT_PORT}",
    show_default=True,
    metavar="HOST:PORT",
    help="Where the VM-facing endpoint listens (e.g. 169.254.169.254:80).",
)
@click.option(
    "--control",
    "control",
    default=f"{DEFAULT_HOST}:{DEFAULT_CONTROL_PORT}",
    show_default=True,
    metavar="HOST:PORT",
    help="Where the control API listens; clients find its token in FOREWARN_TOKEN, else in "
    "the file this serve writes for the address (its start-up lines say where).",
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
    type=click.FloatRange(min=0.001, max=1e12),
    default=60.0,
    show_default=True,
    callback=lambda _context, _param, value: _a_number(value, "--scale"),
    help="Speed-up factor of --clock scaled (the clock stops at the year 9000).",
)
@click.option(
    "--start",
    "start",
    metavar="MOMENT",
    help="Where a manual or scaled clock starts (ISO 8601, UTC unless zoned); default: now.",
)
@click.option(
    "--profile",
    type=click.Choice(sorted(PROFILES)),
    default=None,
    help="Timing profile: documented minimum notices (the default), dev (their minutes read "
    "as seconds), or fast. A data directory keeps the profile it was created with.",
)
@click.option(
    "--timing",
    "timing",
    multiple=True,
    metavar="NAME=DURATION",
    help="Override one duration of the profile, e.g. notice.Reboot=5m, started_period=30s, "
    "started_period.live-migration=1m, first_call_delay=0 (repeatable).",
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Keep state in DIR (SQLite) so it survives restarts; default: in memory.",
)
@click.option(
    "--store",
    default=None,
    metavar="URL",
    envvar="FOREWARN_STORE",
    help="Keep state in another store instead: postgresql://... or sqlite:///path "
    "(env FOREWARN_STORE).",
)
@click.option(
    "--rate-limit",
    type=click.FloatRange(min=0.1),
    default=5.0,
    show_default=True,
    help="Requests per second allowed per VM before 429.",
)
@click.option("--seed", type=int, default=None, help="Seed for EventIds, to replay a run.")
@click.option(
    "--impact",
    "impact",
    multiple=True,
    metavar="TYPE=POLICY",
    help="What a VM's requests meet during an impact of event TYPE: hold (the default: "
    "answered when the impact ends, as a paused VM), drop (closed unanswered) or refuse "
    "(connection reset), e.g. Reboot=refuse (repeatable).",
)
@click.option(
    "--impact-hook",
    default=None,
    metavar="COMMAND",
    help="Shell command run when a VM's impact starts and ends and when it is deleted "
    "(Terminate, Preempt: to stop its software), with FOREWARN_VM, "
    "FOREWARN_EVENT_ID, FOREWARN_EVENT_TYPE and FOREWARN_IMPACT=start|end|deleted set.",
)
@click.option(
    "--impact-hook-timeout",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds before an impact hook is killed.",
)
@click.option(
    "--control-tls",
    "control_tls",
    default=None,
    metavar="HOST:PORT",
    help="Also serve the control API over TLS here, for the Azure SDKs (which send bearer "
    "tokens over HTTPS only); needs --tls-cert.",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="PEM certificate (chain) for --control-tls.",
)
@click.option(
    "--tls-key",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="PEM private key for --control-tls, unless the certificate file holds it.",
)
@click.option(
    "--dead-letter-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where Event Grid writes the events it gives up on (default: DATA_DIR/dead-letters "
    "with --data-dir, else they are dropped).",
)
@click.option(
    "--eventgrid-timeout",
    type=click.FloatRange(min=0.1, max=300),
    default=30.0,
    show_default=True,
    help="Seconds an Event Grid receiver has to answer a delivery (Event Grid waits 30).",
)
@click.option(
    "--workers",
    default="1",
    show_default=True,
    metavar="N|auto",
    callback=lambda _context, _param, value: _workers(value),
    help="Processes answering the VMs behind the same addresses (auto: one per core this "
    "process may use); above 1 they share the fleet through PostgreSQL: --store "
    "postgresql://..., or one of its own under --data-dir (pip install 'forewarn[workers]').",
)
@click.option(
    "--token",
    default=None,
    envvar="FOREWARN_TOKEN",
    metavar="TOKEN",
    help="The control API's token (env FOREWARN_TOKEN); default: a new one at each start, "
    "printed and written where the CLI finds it. Required with --control off loopback.",
)
def serve(
    bind: str,
    control: str,
    fleet: Path | None,
    clock: str,
    scale: float,
    start: str | None,
    profile: str | None,
    timing: tuple[str, ...],
    data_dir: Path | None,
    store: str | None,
    rate_limit: float,
    seed: int | None,
    impact: tuple[str, ...],
    impact_hook: str | None,
    impact_hook_timeout: float,
    token: str | None,
    control_tls: str | None,
    tls_cert: Path | None,
    tls_key: Path | None,
    dead_letter_dir: Path | None,
    eventgrid_timeout: float,
    print_config: bool,
    log_level: str,
    log_format: str,
    workers: int,
) -> None:
    """Serve /metadata/scheduledevents (and the control API) until interrupted."""
    # The server stack is imported here, by the one command that runs it, so the client
    # commands and `forewarn agent` never load it.
    from forewarn.config.fleet import FleetFileError
    from forewarn.control_token import TokenFileError
    from forewarn.journal_replay import ReplayError
    from forewarn.server.embedded_postgres import EmbeddedPostgresError
    from forewarn.server.runner import ExposureError, ServeSettings, TlsSettingsError, run
    from forewarn.server.state import StateMismatchError
    from forewarn.server.workers import WorkerStartError
    from forewarn.storage.errors import StorageError

    host, port = parse_address(bind, DEFAULT_PORT)
    control_host, control_port = parse_address(control, DEFAULT_CONTROL_PORT)
    if (host, port) == (control_host, control_port):
        raise click.ClickException(
            f"--bind and --control are both {bind}: the control API needs an address of its own"
        )
    settings = ServeSettings(
        host=host,
        port=port,
        control_host=control_host,
        control_port=control_port,
        fleet=fleet,
        clock=clock,
        scale=scale,
        start=_start(clock, start),
        profile=profile,
        rate_limit=rate_limit,
        seed=seed,
        data_dir=data_dir,
        store=store,
        timing_overrides=_timing_overrides(profile, timing),
        impact=_impact_policies(impact),
        impact_hook=impact_hook,
        impact_hook_timeout=impact_hook_timeout,
        token=token or None,
        log_level=log_level,
        log_format=log_format,
        control_tls=None
        if control_tls is None
        else parse_address(control_tls, DEFAULT_CONTROL_PORT + 1),
        tls_cert=tls_cert,
        tls_key=tls_key,
        dead_letter_dir=dead_letter_dir,
        eventgrid_timeout=eventgrid_timeout,
        workers=workers,
    )
    if print_config:
        _print_config(click.get_current_context())
        return
    if data_dir is not None and store is not None:
        raise click.UsageError("choose one of --data-dir and --store")
    try:
        run(settings, announce=lambda line: click.echo(line, err=False))
    except (
        FleetFileError,
        StateMismatchError,
        StorageError,
        ExposureError,
        ReplayError,
        TokenFileError,
        TlsSettingsError,
        EmbeddedPostgresError,
        WorkerStartError,
    ) as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(
            str(exc) if "cannot listen" in str(exc) else f"cannot listen: {exc}"
        ) from None


def _print_config(context: click.Context) -> None:
    """The option values in effect, as a ``--config`` file would give them."""
    import yaml

    shown: dict[str, object] = {}
    for name, value in context.params.items():
        if name == "print_config":
            continue
        if name == "token" and value:
            value = "(set)"
        elif isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        shown[name.replace("_", "-")] = value
    click.echo(yaml.safe_dump(shown, sort_keys=False).rstrip())


def _workers(value: str) -> int:
    """``--workers``: a count of at least 1, or ``auto`` (the cores this process may use)."""
    if value == "auto":
        import os

        return len(os.sched_getaffinity(0))
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise click.BadParameter(
            f"{value!r}: a number of at least 1, or auto", param_hint="--workers"
        )
    return count


def _a_number(value: float, option: str) -> float:
    """``value``, unless it is NaN, which every range lets through (no comparison holds)."""
    if value != value:
        raise click.BadParameter("not a number", param_hint=option)
    return value


def _start(clock: str, start: str | None) -> datetime | None:
    if start is None:
        return None
    if clock == "system":
        raise click.BadParameter("a system clock reads the real time", param_hint="--start")
    return parse_moment(start)


def _impact_policies(items: tuple[str, ...]) -> tuple[str, ...]:
    from forewarn.domain.impact import ImpactPolicies

    try:  # refuse a bad policy now, not after the listeners are up
        ImpactPolicies.parse(items)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--impact") from None
    return items


def _timing_overrides(
    profile: str | None, items: tuple[str, ...]
) -> tuple[tuple[str, timedelta], ...]:
    overrides: dict[str, timedelta] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not NAME=DURATION", param_hint="--timing")
        overrides[name.strip()] = parse_duration(value.strip())
    try:  # refuse unknown names now, not after the listeners are up
        PROFILES[profile or "documented"].with_overrides(overrides)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--timing") from None
    return tuple(sorted(overrides.items()))


__all__ = [
    "ENVIRONMENT_PREFIX",
    "serve",
]
