"""Wiring for ``forewarn serve``: build the platform, open the listeners, run until told to stop."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import os
import signal
import socket
import ssl
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import uvicorn
from starlette.types import ASGIApp

from forewarn.control_token import new_token, write_token
from forewarn.defaults import DEFAULT_CONTROL_PORT, DEFAULT_HOST, DEFAULT_PORT
from forewarn.domain.impact import ImpactPolicies
from forewarn.domain.vms import Vm
from forewarn.errors import ForewarnError
from forewarn.eventgrid.delivery import EventGrid
from forewarn.eventgrid.schedule import RESPONSE_TIMEOUT
from forewarn.eventgrid.store import DeliveryStore
from forewarn.server._activity import Activity, ActivityEndpoint
from forewarn.server._impact_hooks import ImpactHooks, watch_impacts
from forewarn.server._serve_logging import configure_logging, log, watch_events
from forewarn.server.control import create_control_app
from forewarn.server.control_guard import ControlGuard
from forewarn.server.dashboard._scenarios import ScenarioRuns
from forewarn.server.health import Health
from forewarn.server.heap import settle_heap
from forewarn.server.http import raise_descriptor_limit, start_imds_server
from forewarn.server.state import (
    OpenedState,
    describe_store,
    is_shared,
    open_state,
    reaching_the_store,
    store_url,
)
from forewarn.storage.urls import sqlite_path

if TYPE_CHECKING:
    from forewarn.cluster.replica import Replica
from forewarn.service import ScheduledEventsService


@dataclass(frozen=True)
class ServeSettings:
    """Everything ``forewarn serve`` can be told; defaults are the zero-configuration run."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    control_host: str = DEFAULT_HOST
    control_port: int = DEFAULT_CONTROL_PORT
    fleet: Path | None = None
    clock: str = "system"
    scale: float = 60.0
    #: Where a manual or scaled clock starts (None: now); a journal keeps its own.
    start: datetime | None = None
    profile: str | None = None
    rate_limit: float = 5.0
    seed: int | None = None
    data_dir: Path | None = None
    store: str | None = None
    timing_overrides: tuple[tuple[str, timedelta], ...] = ()
    #: ``TYPE=POLICY`` settings of :class:`~forewarn.domain.impact.ImpactPolicies`.
    impact: tuple[str, ...] = ()
    impact_hook: str | None = None
    impact_hook_timeout: float = 30.0
    #: The control API's token; None: a new one at each start.
    token: str | None = None
    log_level: str = "info"
    log_format: str = "text"
    #: Where the control API is also served over TLS (the Azure SDKs send bearer tokens only
    #: over HTTPS), with this certificate and key; None: nowhere.
    control_tls: tuple[str, int] | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    #: Where Event Grid writes the events it gives up on; default ``DATA_DIR/dead-letters``
    #: with a data directory, else nowhere (dropped, as Event Grid drops them without one).
    dead_letter_dir: Path | None = None
    #: How long an Event Grid receiver has to answer, in real seconds.
    eventgrid_timeout: float = RESPONSE_TIMEOUT


def build_service(settings: ServeSettings) -> ScheduledEventsService:
    """The service for ``settings``: fresh, or rebuilt from its data directory's journal."""
    return open_state(settings).service


def listen_addresses(settings: ServeSettings, vms: Sequence[Vm]) -> list[tuple[str, int]]:
    """The bind address, plus each VM's own address on the same port.

    A wildcard bind address (``0.0.0.0``, ``::``) already receives every VM's connections,
    each told apart by the address it arrived at, so it is the one listener however many VMs
    there are: the way to serve a large fleet inside a network namespace of its own.
    """
    addresses = [(settings.host, settings.port)]
    if _is_wildcard(settings.host):
        return addresses
    for vm in vms:
        if vm.address is not None and vm.address != settings.host:
            addresses.append((vm.address, settings.port))
    return addresses


class _ControlServer(uvicorn.Server):
    """uvicorn without its own signal handling: ``serve`` owns shutdown for both planes."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


#: How many VMs the start-up lines name; ``forewarn vm list`` shows them all.
_LISTED = 8


def _event_grid(
    settings: ServeSettings,
    service: Callable[[], ScheduledEventsService],
    replica: Callable[[], Replica | None],
) -> EventGrid | None:
    """Event Grid for this server, its state beside the journal's (``eventgrid.sqlite3``), in
    memory, or in the shared PostgreSQL database, where only the leader delivers."""
    url = store_url(settings)
    if url is not None and is_shared(url):
        from forewarn.eventgrid.postgres import PostgresDeliveryStore

        def leading() -> bool:
            shared = replica()
            return shared is not None and shared.leading

        return EventGrid(
            lambda: service().now(),
            lambda: service().published().sequence,
            PostgresDeliveryStore(url),
            validation_base=url_for(settings.control_host, settings.control_port),
            dead_letters=settings.dead_letter_dir,
            response_timeout=settings.eventgrid_timeout,
            active=leading,
        )
    path: Path | None = None
    dead_letters = settings.dead_letter_dir
    if settings.data_dir is not None:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        path = settings.data_dir / EVENT_GRID_FILE
        dead_letters = dead_letters or settings.data_dir / "dead-letters"
    elif url is not None:
        path = Path(sqlite_path(url) + "." + EVENT_GRID_FILE)
    return EventGrid(
        lambda: service().now(),
        lambda: service().published().sequence,
        DeliveryStore(path),
        validation_base=url_for(settings.control_host, settings.control_port),
        dead_letters=dead_letters,
        response_timeout=settings.eventgrid_timeout,
    )


#: Event Grid's state file in a data directory.
EVENT_GRID_FILE = "eventgrid.sqlite3"


def _tls_control_server(
    settings: ServeSettings, where: tuple[str, int], app: Any, token: str
) -> _ControlServer:
    """The control API again, over TLS: the ARM SDKs (azure-mgmt-resourcegraph...) refuse to
    send a bearer token over plain HTTP."""
    host, port = where
    return _ControlServer(
        uvicorn.Config(
            ControlGuard(app, token=token, hosts=accepted_hosts(host, port)),
            host=host,
            port=port,
            log_level="warning",
            lifespan="off",
            ssl_certfile=str(settings.tls_cert),
            ssl_keyfile=None if settings.tls_key is None else str(settings.tls_key),
        )
    )


def _control_client(settings: ServeSettings, token: str) -> httpx.Client:
    """A client of this server's own control API, for scenarios run from the dashboard."""
    return httpx.Client(
        base_url=url_for(settings.control_host, settings.control_port),
        headers={"Authorization": f"Bearer {token}"},
        timeout=30.0,
        trust_env=False,
    )


def _bound(host: str, port: int, what: str, option: str) -> socket.socket:
    """A socket for ``what`` bound to ``host:port`` but not listening yet, so that an address
    in use is one clear error (uvicorn would log a traceback and exit 3) found before
    anything else is started, while nothing is accepted there until it serves."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise listen_refusal(what, host, port, exc, option) from None
    return sock


def _listen(sock: socket.socket) -> socket.socket:
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def listen_refusal(what: str, host: str, port: int, exc: OSError, option: str) -> OSError:
    """One line for an address ``what`` cannot listen on: the reason as the system words it
    (not asyncio's, which quotes the address as a Python tuple) and, when another process
    holds the address, the option that chooses another."""
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    fix = f"; pass {option} HOST:PORT" if exc.errno == errno.EADDRINUSE else ""
    return OSError(f"{what} cannot listen on {host}:{port}: {reason}{fix}")


def accepted_hosts(host: str, port: int) -> list[str] | None:
    """The ``Host`` headers the control API answers: its own names on loopback (so a page
    on another name, rebound to 127.0.0.1, is refused); any elsewhere, where the token alone
    decides."""
    if not _is_loopback(host):
        return None
    names = {host, "localhost", "127.0.0.1", "[::1]"}
    hosts = [f"{name}:{port}" for name in names]
    if port == 80:
        hosts += list(names)
    return hosts


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_tls(settings: ServeSettings) -> None:
    """Refuse TLS settings that cannot work before anything listens: one clear line."""
    if settings.control_tls is None:
        return
    if settings.tls_cert is None:
        raise TlsSettingsError(
            "--control-tls needs --tls-cert (and --tls-key unless the "
            "certificate file holds the key)"
        )
    # Each file read on its own first: ssl names neither when one of them cannot be opened.
    for what, option, path in (
        ("certificate", "--tls-cert", settings.tls_cert),
        ("key", "--tls-key", settings.tls_key),
    ):
        if path is None:
            continue
        try:
            path.read_bytes()
        except OSError as exc:
            raise TlsSettingsError(
                f"cannot read the TLS {what} {path}: {exc.strerror or exc}; check {option}"
            ) from None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(settings.tls_cert, settings.tls_key)
    except (OSError, ssl.SSLError) as exc:
        key = "" if settings.tls_key is None else f" with the key {settings.tls_key}"
        raise TlsSettingsError(
            f"cannot use the TLS certificate {settings.tls_cert}{key}: {exc}"
        ) from None


class TlsSettingsError(ForewarnError):
    """The control API's TLS certificate or key cannot be used."""


def check_control_exposure(settings: ServeSettings) -> None:
    """Refuse to offer the control API beyond this machine under a token nobody chose."""
    if settings.token is None and not _is_loopback(settings.control_host):
        raise ExposureError(
            f"refusing to serve the control API on {settings.control_host} without a token: "
            "pass --token (or FOREWARN_TOKEN), or --control 127.0.0.1:PORT"
        )


class ExposureError(ForewarnError):
    """The control API would be reachable from elsewhere with no chosen token."""


def control_line(settings: ServeSettings, token: str, token_path: Path) -> str:
    """The start-up line of the control API: the link with its token when forewarn made the
    token up, but never a token the user chose (``--token``, ``FOREWARN_TOKEN``), which start-up
    lines would copy into every log that keeps them (a pod's, a CI job's)."""
    control_url = url_for(settings.control_host, settings.control_port)
    if settings.token is None:
        return f"  control: {control_url}/?token={token} (the token is also in {token_path})"
    return (
        f"  control: {control_url}/?token=<the token given with --token or FOREWARN_TOKEN, "
        f"not shown here; the CLI finds it in {token_path}>"
    )


def _raise_descriptor_limit() -> None:
    """Every VM's kept connection (and, at their own addresses, every VM's listener) is a
    descriptor, and services start with a soft limit of 1,024 whatever the hard one: the
    soft limit is raised to the hard one, which any process may do, and said."""
    before, after = raise_descriptor_limit()
    if after != before:
        log(
            logging.getLogger("forewarn.server"),
            logging.INFO,
            f"open files: soft limit raised from {before} to {after}",
        )


def url_for(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}" + ("" if port == 80 else f":{port}")


async def serve(
    settings: ServeSettings,
    *,
    announce: Callable[[str], None] = print,
    stop: asyncio.Event | None = None,
) -> None:
    """Run both planes until SIGINT/SIGTERM (or ``stop`` is set)."""
    check_control_exposure(settings)
    check_tls(settings)
    configure_logging(settings.log_level, settings.log_format)
    _raise_descriptor_limit()
    # The control address is claimed first, before the store is opened or any VM-facing
    # address bound: a second serve at the same control address stops here, touching nothing.
    control_socket = _bound(
        settings.control_host, settings.control_port, "the control API", "--control"
    )
    try:
        await _serve(settings, control_socket, announce=announce, stop=stop)
    finally:
        control_socket.close()


async def _serve(
    settings: ServeSettings,
    control_socket: socket.socket,
    *,
    announce: Callable[[str], None],
    stop: asyncio.Event | None,
) -> None:
    with reaching_the_store(store_url(settings)):
        grid = _event_grid(settings, lambda: service, lambda: state.replica)
        try:
            state: OpenedState = open_state(settings, None if grid is None else grid.on_change)
        except BaseException:
            if grid is not None:
                grid.store.abandon()
            raise
    service = state.service
    if state.replica is not None:
        try:  # before listening: from its first answer on, writers wait for this front-end
            state.replica.register()
        except BaseException:
            service.close()
            raise
    activity = Activity()
    endpoint = ActivityEndpoint(
        service,
        activity,
        rate_limit=settings.rate_limit,
        impact=ImpactPolicies.parse(settings.impact),
        group_writes=state.replica is not None,
    )
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)

    servers = []
    for host, port in listen_addresses(settings, service.vms()):
        try:
            servers.append(await start_imds_server(endpoint, host, port))
        except OSError as exc:
            raise listen_refusal("the VM-facing endpoint", host, port, exc, "--bind") from None
    # start_control writes the token only once both planes listen (the VM-facing ones above)
    token = settings.token or new_token()
    control_app = create_control_app(
        service,
        activity=activity,
        runs=ScenarioRuns(lambda: _control_client(settings, token)),
        health=Health(
            service.check_store,
            listening=lambda: all(server.is_serving() for server in servers),
            stopping=stop.is_set,
        ),
        eventgrid=grid,
    )
    control = await start_control(
        control_app, settings.control_host, settings.control_port, token, bound=control_socket
    )
    tls_server = tls_task = None
    if settings.control_tls is not None:
        tls_server = _tls_control_server(settings, settings.control_tls, control_app, token)
        tls_host, tls_port = settings.control_tls
        tls_socket = _listen(
            _bound(tls_host, tls_port, "the control API over TLS", "--control-tls")
        )
        tls_task = asyncio.create_task(tls_server.serve(sockets=[tls_socket]))

    # Everything built so far (the fleet, the platform, the listeners) lives as long as the
    # process: out of the collector's sight (forewarn.server.heap).
    settle_heap()

    vms = service.vms()
    addressed = [vm for vm in vms if vm.address is not None]
    # Where a VM answers: the bind address is no VM's when the fleet gives VMs addresses of
    # their own (nothing answers a request there), so the first of those.
    first = next((vm for vm in addressed if vm.address == settings.host), None)
    if first is None and addressed:
        first = addressed[0]
    endpoint_url = url_for(settings.host if first is None else str(first.address), settings.port)
    vm_names = ", ".join(vm.name for vm in vms[:5])
    more = len(vms) - 5
    whose = "" if first is None else f" ({first.name}'s; each VM at its own address)"
    announce(
        f"forewarn: Scheduled Events for {len(vms)} VM(s) ({vm_names}"
        f"{f' and {more} more' if more > 0 else ''}) at {endpoint_url}/metadata/scheduledevents"
        f"{whose}; control API at {url_for(settings.control_host, settings.control_port)}/api/v1; "
        f"clock {settings.clock}, timing profile {service.clock_status().profile}; "
        f"state in {describe_store(settings)}."
    )
    if addressed:
        shown = ", ".join(f"{vm.name} at {vm.address}" for vm in addressed[:_LISTED])
        rest = len(addressed) - _LISTED
        announce(f"  VMs: {shown}{f' and {rest} more' if rest > 0 else ''}")
    announce(
        f"  try: curl -H Metadata:true "
        f'"{endpoint_url}/metadata/scheduledevents?api-version=2020-07-01"'
    )
    announce(control_line(settings, token, control.token_path))
    if settings.control_tls is not None:
        tls_url = url_for(*settings.control_tls).replace("http://", "https://", 1)
        announce(f"  control over TLS (for the Azure SDKs): {tls_url}")
    events_task = asyncio.create_task(watch_events(service.events, stop))
    front_end_task = None
    if state.replica is not None:  # one of the front-ends sharing a PostgreSQL journal
        from forewarn.cluster.tasks import run_front_end

        front_end_task = asyncio.create_task(run_front_end(state.replica, stop))
    grid_task = None
    if grid is not None:
        grid_task = asyncio.create_task(grid.run(stop))
    hooks_task = None
    if settings.impact_hook is not None:
        hooks = ImpactHooks(settings.impact_hook, timeout=settings.impact_hook_timeout)
        hooks_task = asyncio.create_task(
            watch_impacts(service.impacts, service.deletions_after, hooks, stop)
        )
    try:
        await stop.wait()
    finally:
        await events_task
        if grid_task is not None:
            await grid_task
            grid.store.close()  # type: ignore[union-attr]
        if front_end_task is not None:
            await front_end_task
        if hooks_task is not None:
            await hooks_task
        if tls_server is not None and tls_task is not None:
            tls_server.should_exit = True
            # keep-alive connections of SDK clients are not waited for
            tls_server.force_exit = True
            await tls_task
        for server in servers:
            server.close()  # stop listening; open keep-alive connections end with the process
        await control.stop()
        service.close()


@dataclass
class ControlPlane:
    """A control API being served: where (with its token), and how to stop it."""

    server: uvicorn.Server
    task: asyncio.Task[None]
    token_path: Path
    link: str

    async def stop(self) -> None:
        self.server.should_exit = True
        await self.task


async def start_control(
    app: ASGIApp, host: str, port: int, token: str, *, bound: socket.socket | None = None
) -> ControlPlane:
    """Serve ``app`` as a control API on ``host:port``, guarded by ``token`` (written where
    the CLI finds it) once it listens; OSError, one line, when it cannot.

    The token is written only once the port is bound (and, in ``serve``, the VM-facing
    listeners before it): a serve that cannot start never replaces the token of the one
    running at this control address, which holds the port, and the CLI is never locked out
    of it."""
    control_socket = _listen(bound or _bound(host, port, "the control API", "--control"))
    try:
        token_path = write_token(host, port, token)
    except BaseException:
        control_socket.close()
        raise
    guarded = ControlGuard(app, token=token, hosts=accepted_hosts(host, port))
    control = _ControlServer(
        uvicorn.Config(guarded, host=host, port=port, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(control.serve(sockets=[control_socket]))
    while not control.started:
        if task.done():
            await task
            raise OSError(f"the control API could not listen on {host}:{port}")
        await asyncio.sleep(0.01)
    return ControlPlane(control, task, token_path, f"{url_for(host, port)}/?token={token}")


def run(settings: ServeSettings, *, announce: Callable[[str], None] = print) -> None:
    """Blocking entry point: uvloop when available, the standard loop otherwise."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency, but not on every platform
        asyncio.run(serve(settings, announce=announce))
        return
    uvloop.run(serve(settings, announce=announce))


__all__ = [
    "ControlPlane",
    "ExposureError",
    "ServeSettings",
    "TlsSettingsError",
    "accepted_hosts",
    "build_service",
    "check_control_exposure",
    "control_line",
    "listen_addresses",
    "listen_refusal",
    "run",
    "serve",
    "start_control",
    "url_for",
]
