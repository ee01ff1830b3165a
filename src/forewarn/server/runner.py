"""Wiring for ``forewarn serve``: build the platform, open the listeners, run until told to stop."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import functools
import logging
import os
import signal
import socket
import sqlite3
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from forewarn.collector import settle_heap
from forewarn.control_token import new_token, remove_token, write_token
from forewarn.defaults import DEFAULT_CONTROL_PORT, DEFAULT_HOST, DEFAULT_PORT
from forewarn.domain.impact import ImpactPolicies
from forewarn.domain.vms import Vm
from forewarn.eventgrid.delivery import EventGrid
from forewarn.eventgrid.payloads import DEFAULT_TOPIC, topic_of
from forewarn.eventgrid.schedule import RESPONSE_TIMEOUT
from forewarn.eventgrid.store import DeliveryStore
from forewarn.server._activity import Activity, ActivityEndpoint
from forewarn.server._impact_hooks import ImpactHooks, watch_impacts
from forewarn.server._serve_logging import configure_logging, log, watch_events
from forewarn.server.background import BackgroundPart, running
from forewarn.server.banner import control_line, start_up_lines
from forewarn.server.embedded_postgres import EmbeddedPostgres, holds_embedded_store
from forewarn.server.http import raise_descriptor_limit, start_imds_server
from forewarn.server.settings_checks import (
    ExposureError,
    TlsSettingsError,
    accepted_hosts,
    check_control_exposure,
    check_settings,
    check_tls,
    listen_addresses,
    url_for,
)
from forewarn.server.state import (
    SQLITE_FILE,
    OpenedState,
    describe_store,
    is_shared,
    open_state,
    reaching_the_store,
    store_url,
)
from forewarn.server.workers import Workers, WorkerStartError, check_addresses_free
from forewarn.storage.errors import CorruptStoreError, StorageError
from forewarn.storage.urls import sqlite_path

if TYPE_CHECKING:
    import httpx

    from forewarn.cluster.replica import Replica
    from forewarn.server.azure.resourcegraph import QueryProcess
    from forewarn.server.control_guard import ControlGuard
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
    #: Processes answering the VMs (``--workers``); above 1, the fleet is shared through
    #: PostgreSQL (:mod:`forewarn.server.workers`).
    workers: int = 1


def build_service(settings: ServeSettings) -> ScheduledEventsService:
    """The service for ``settings``: fresh, or rebuilt from its data directory's journal."""
    return open_state(settings).service


class _ControlServer(uvicorn.Server):
    """uvicorn without its own signal handling: ``serve`` owns shutdown for both planes."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def _event_grid(
    settings: ServeSettings,
    service: Callable[[], ScheduledEventsService],
    replica: Callable[[], Replica | None],
) -> EventGrid:
    """Event Grid for this server, its state beside the journal's (``eventgrid.sqlite3``), in
    memory, or in the shared PostgreSQL database, where only the leader delivers."""
    url = store_url(settings)

    def topic() -> str:
        """The system topic's: the fleet's first VM's Azure subscription."""
        vms = service().vms()
        return topic_of(vms[0].subscription_id) if vms else DEFAULT_TOPIC

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
            topic=topic,
        )
    path: Path | None = None
    dead_letters = settings.dead_letter_dir
    if settings.data_dir is not None:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        path = settings.data_dir / EVENT_GRID_FILE
        dead_letters = dead_letters or settings.data_dir / "dead-letters"
    elif url is not None:
        path = Path(sqlite_path(url) + "." + EVENT_GRID_FILE)
    try:
        store = DeliveryStore(path)
    except sqlite3.Error as exc:
        raise CorruptStoreError(
            f"Event Grid's state in {path} cannot be opened: {exc} (move the file aside to "
            "start without its subscriptions)"
        ) from None
    return EventGrid(
        lambda: service().now(),
        lambda: service().published().sequence,
        store,
        validation_base=url_for(settings.control_host, settings.control_port),
        dead_letters=dead_letters,
        response_timeout=settings.eventgrid_timeout,
        topic=topic,
    )


#: Event Grid's state file in a data directory.
EVENT_GRID_FILE = "eventgrid.sqlite3"


def _guarded(app: ASGIApp, token: str, host: str, port: int) -> _Guarded:
    """The control app behind its guard, for a control API listening at ``host:port``
    (plain or TLS): the token, the Host names it answers, ARM's routes refused as ARM does."""
    return _Guarded(app, token, host, port)


def _guard_parts() -> tuple[type[ControlGuard], tuple[str, ...]]:
    from forewarn.server.control import ARM_PREFIXES
    from forewarn.server.control_guard import ControlGuard

    return ControlGuard, ARM_PREFIXES


class _Guarded:
    """``app`` behind :class:`~forewarn.server.control_guard.ControlGuard`, made by the first
    request: the guard's module, and the ARM routes it tells apart, import the control API's
    web framework, which a start does not need (:class:`ControlApp`). The import is made on
    a thread, so the VMs are answered meanwhile."""

    def __init__(self, app: ASGIApp, token: str, host: str, port: int) -> None:
        self._app = app
        self._token = token
        self._hosts = accepted_hosts(host, port)
        self._guard: ControlGuard | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._guard is None:
            guard, arm_paths = await asyncio.to_thread(_guard_parts)
            self._guard = self._guard or guard(
                self._app, token=self._token, hosts=self._hosts, arm_paths=arm_paths
            )
        await self._guard(scope, receive, send)


def _tls_control_server(
    settings: ServeSettings, where: tuple[str, int], app: Any, token: str
) -> _ControlServer:
    """The control API again, over TLS: the ARM SDKs (azure-mgmt-resourcegraph...) refuse to
    send a bearer token over plain HTTP."""
    host, port = where
    return _ControlServer(
        uvicorn.Config(
            _guarded(app, token, host, port),
            host=host,
            port=port,
            log_level="warning",
            lifespan="off",
            ssl_certfile=str(settings.tls_cert),
            ssl_keyfile=None if settings.tls_key is None else str(settings.tls_key),
        )
    )


def _control_client(settings: ServeSettings, token: str) -> httpx.Client:
    """A client of this server's own control API, for scenarios run from the dashboard: made
    when the first of them runs."""
    import httpx

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


def _listen(sock: socket.socket, what: str, option: str) -> socket.socket:
    """``sock`` (bound by :func:`_bound`) listening. Another socket may have bound the same
    address meanwhile (``SO_REUSEADDR`` lets it while neither listens) and listened first:
    then this one refuses in the same one line as a bind would."""
    try:
        sock.listen(2048)
    except OSError as exc:
        host, port = sock.getsockname()[:2]
        sock.close()
        raise listen_refusal(what, host, port, exc, option) from None
    sock.setblocking(False)
    return sock


def listen_refusal(what: str, host: str, port: int, exc: OSError, option: str) -> OSError:
    """One line for an address ``what`` cannot listen on: the reason as the system words it
    (not asyncio's, which quotes the address as a Python tuple) and, when another process
    holds the address, the option that chooses another."""
    reason = os.strerror(exc.errno) if exc.errno else str(exc)
    fix = f"; pass {option} HOST:PORT" if exc.errno == errno.EADDRINUSE else ""
    return OSError(f"{what} cannot listen on {host}:{port}: {reason}{fix}")


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


def _stop_on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)


async def serve(
    settings: ServeSettings,
    *,
    announce: Callable[[str], None] = print,
    stop: asyncio.Event | None = None,
) -> None:
    """Run both planes until SIGINT/SIGTERM (or ``stop`` is set).

    Everything that opens (the stores, the listeners, the control API, the background
    parts) is entered in one exit stack as it starts: leaving it, on the way out or when a
    later step of the start fails, closes what was opened in the reverse order, so a start
    refused at its control port leaves no journal open and no write-ahead log behind."""
    check_settings(settings)
    configure_logging(settings.log_level, settings.log_format)
    _raise_descriptor_limit()
    stop = stop or asyncio.Event()
    _stop_on_signals(stop)
    async with contextlib.AsyncExitStack() as stack:
        # The control address is claimed first, before the store is opened or any VM-facing
        # address bound: a second serve at the same control address stops here, touching
        # nothing.
        control_socket = _bound(
            settings.control_host, settings.control_port, "the control API", "--control"
        )
        stack.callback(control_socket.close)
        workers = None
        store_shown = None
        if _uses_workers(settings):
            settings, store_shown = _store_for_workers(settings, stack)
            workers = Workers(settings, settings.workers)
        lines = await _start(
            settings, stack, stop, control_socket, workers=workers, store_shown=store_shown
        )
        for line in lines:
            announce(line)
        await stop.wait()


def _uses_workers(settings: ServeSettings) -> bool:
    """Worker processes: asked for, or kept by the data directory (its own PostgreSQL)."""
    if settings.workers > 1:
        return True
    return settings.data_dir is not None and holds_embedded_store(settings.data_dir)


def _store_for_workers(
    settings: ServeSettings, stack: contextlib.AsyncExitStack
) -> tuple[ServeSettings, str]:
    """The settings with the workers' shared store, and how the start-up line names it:
    ``--store postgresql://...`` as given, else a PostgreSQL of serve's own under the data
    directory (or a temporary one), started here and stopped when ``stack`` is left, after
    everything that uses it."""
    if settings.store is not None:
        if not is_shared(settings.store):
            raise WorkerStartError(
                "--workers shares the fleet through PostgreSQL: give --store postgresql://... "
                "or no --store (for a PostgreSQL of its own)"
            )
        return settings, describe_store(settings)
    home = settings.data_dir
    if home is not None and (home / SQLITE_FILE).exists() and not holds_embedded_store(home):
        raise WorkerStartError(
            f"{home} holds the journal of a single process ({SQLITE_FILE}); --workers keeps "
            "its fleet in PostgreSQL: use another --data-dir"
        )
    server = EmbeddedPostgres(home)
    stack.callback(server.stop)
    url = server.start()
    dead_letters = settings.dead_letter_dir
    if home is not None:
        dead_letters = dead_letters or home / "dead-letters"
        shown = f"PostgreSQL of its own in {server.data}"
    else:
        shown = "PostgreSQL of its own in a temporary directory (lost on exit; use --data-dir)"
    shared = dataclasses.replace(
        settings,
        store=url,
        data_dir=None,
        dead_letter_dir=dead_letters,
        workers=max(settings.workers, 1),
    )
    return shared, shown


class _Start:
    """Whether the start went through: what a failed start made is undone, not kept."""

    done = False


async def _start(
    settings: ServeSettings,
    stack: contextlib.AsyncExitStack,
    stop: asyncio.Event,
    control_socket: socket.socket,
    *,
    workers: Workers | None = None,
    store_shown: str | None = None,
) -> list[str]:
    """Open and start every part of ``serve`` into ``stack``, its control API on
    ``control_socket`` (bound already); the start-up lines. With ``workers``, they answer
    the VMs and this process serves the rest."""
    start = _Start()
    with reaching_the_store(store_url(settings)):
        grid = _event_grid(settings, lambda: service, lambda: state.replica)
        # A failed start leaves the data directory as it found it; a stopping server keeps it.
        stack.callback(lambda: grid.store.close() if start.done else grid.store.abandon())
        state: OpenedState = open_state(settings, grid.on_change)
    service = state.service
    stack.callback(service.close)
    if state.replica is not None:
        # before listening: from its first answer on, writers wait for this front-end
        state.replica.register()
        stack.callback(leave_unless_started, state.replica, lambda: start.done)
    activity = Activity()
    endpoint = ActivityEndpoint(
        service,
        activity,
        rate_limit=settings.rate_limit,
        impact=ImpactPolicies.parse(settings.impact),
        group_writes=state.replica is not None,
    )
    if workers is None:
        servers = await listen_for_vms(settings, endpoint, service.vms(), stack)
        listening: Callable[[], bool] = lambda: all(server.is_serving() for server in servers)  # noqa: E731
        workers_up = None
    else:
        check_addresses_free(listen_addresses(settings, service.vms()))
        stack.push_async_callback(workers.stop)
        await workers.start()
        listening = lambda: workers.up > 0  # noqa: E731
        workers_up = lambda: (workers.up, workers.count)  # noqa: E731
    # start_control writes the token only once both planes listen (the VM-facing ones above)
    token = settings.token or new_token()

    def build_control_app() -> tuple[ASGIApp, QueryProcess]:
        return _control_app(
            settings,
            service,
            activity,
            grid,
            token,
            listening=listening,
            stopping=stop.is_set,
            workers=workers_up,
        )

    control_app = ControlApp(build_control_app)
    stack.callback(control_app.close)
    control = await start_control(
        control_app, settings.control_host, settings.control_port, token, bound=control_socket
    )
    stack.push_async_callback(control.stop)
    if settings.control_tls is not None:
        await _serve_tls(settings, settings.control_tls, control_app, token, stack)

    # Everything built so far (the fleet, the platform, the listeners) lives as long as the
    # process: out of the collector's sight (forewarn.collector).
    settle_heap()
    lines = start_up_lines(
        settings,
        service.vms(),
        profile=service.clock_status().profile,
        token=token,
        token_path=control.token_path,
        store=store_shown,
    )
    parts = _background_parts(settings, state, grid)
    if workers is not None:
        lines.insert(
            1,
            f"  workers: {workers.count} processes answer the VMs (pids "
            f"{', '.join(map(str, workers.pids()))}); this one serves the control API",
        )
        parts.append(("the workers' supervision", workers.supervise))
    for name, part in parts:
        await stack.enter_async_context(running(name, part, stop))
    start.done = True
    return lines


def _control_app(
    settings: ServeSettings,
    service: ScheduledEventsService,
    activity: Activity,
    grid: EventGrid,
    token: str,
    *,
    listening: Callable[[], bool],
    stopping: Callable[[], bool],
    workers: Callable[[], tuple[int, int]] | None,
) -> tuple[ASGIApp, QueryProcess]:
    """The control API's app, and the process its Resource Graph queries run in (off the
    VMs' interpreter, spawned by the first query)."""
    from forewarn.server.azure.resourcegraph import QueryProcess
    from forewarn.server.control import create_control_app
    from forewarn.server.dashboard._scenarios import ScenarioRuns
    from forewarn.server.health import Health

    queries = QueryProcess()
    app = create_control_app(
        service,
        activity=activity,
        runs=ScenarioRuns(lambda: _control_client(settings, token)),
        health=Health(
            service.check_store,
            listening=listening,
            stopping=stopping,
            workers=workers,
            writes=service.write_refused,
        ),
        eventgrid=grid,
        queries=queries,
    )
    return app, queries


class ControlApp:
    """The control API, built by its first request rather than by the start.

    The VMs' endpoint needs none of it: its web framework, its routes' models, the dashboard
    and Resource Graph's KQL grammar took a third of a second of CPU before the first VM was
    answered. The control port listens from the start as before; its first
    request waits while the app is built on a thread (the VMs are answered meanwhile), and
    requests arriving during the build wait for the same one.
    """

    def __init__(self, build: Callable[[], tuple[ASGIApp, QueryProcess]]) -> None:
        self._build = build
        self._built: tuple[ASGIApp, QueryProcess] | None = None
        self._lock = asyncio.Lock()

    @property
    def built(self) -> bool:
        return self._built is not None

    async def app(self) -> ASGIApp:
        """The app, built now if no request has built it yet."""
        if self._built is None:
            async with self._lock:
                if self._built is None:
                    self._built = await asyncio.to_thread(self._build)
        return self._built[0]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._built[0] if self._built is not None else await self.app()
        await app(scope, receive, send)

    def close(self) -> None:
        """Stop the query process, if a query started it."""
        if self._built is not None:
            self._built[1].close()


def leave_unless_started(replica: Replica, started: Callable[[], bool]) -> None:
    """A front-end that joined the namespace's list but never served leaves it now, so
    writers stop waiting for it at once (a started one's follower leaves as it stops)."""
    if started():
        return
    with contextlib.suppress(StorageError):
        replica.journal.forget_front_end(replica.front_end)


async def listen_for_vms(
    settings: ServeSettings,
    endpoint: ActivityEndpoint,
    vms: Sequence[Vm],
    stack: contextlib.AsyncExitStack,
    *,
    shared_by: int = 1,
) -> list[asyncio.Server]:
    """The VM-facing listeners, each closed when ``stack`` is (open keep-alive connections
    end with the process); ``shared_by``: how many processes listen on them (workers)."""
    servers: list[asyncio.Server] = []
    for host, port in listen_addresses(settings, vms):
        try:
            server = await start_imds_server(endpoint, host, port, shared_by=shared_by)
        except OSError as exc:
            raise listen_refusal("the VM-facing endpoint", host, port, exc, "--bind") from None
        stack.callback(server.close)
        servers.append(server)
    return servers


async def _serve_tls(
    settings: ServeSettings,
    where: tuple[str, int],
    app: Any,
    token: str,
    stack: contextlib.AsyncExitStack,
) -> None:
    tls_server = _tls_control_server(settings, where, app, token)
    what, option = "the control API over TLS", "--control-tls"
    tls_socket = _listen(_bound(*where, what, option), what, option)
    task = asyncio.create_task(tls_server.serve(sockets=[tls_socket]))

    async def stop_tls() -> None:
        tls_server.should_exit = True
        tls_server.force_exit = True  # keep-alive connections of SDK clients are not waited for
        await task

    stack.push_async_callback(stop_tls)


def _background_parts(
    settings: ServeSettings, state: OpenedState, grid: EventGrid
) -> list[tuple[str, BackgroundPart]]:
    """What runs beside the listeners, in the order it starts (and the reverse it stops)."""
    service = state.service
    parts: list[tuple[str, BackgroundPart]] = [
        ("the event log", functools.partial(watch_events, service.events))
    ]
    if state.replica is not None:  # one of the front-ends sharing a PostgreSQL journal
        from forewarn.cluster.tasks import run_front_end

        follow = functools.partial(run_front_end, state.replica)
        parts.append(("the shared journal's follower and leader", follow))
    parts.append(("Event Grid's deliveries", grid.run))
    if settings.impact_hook is not None:
        hooks = ImpactHooks(settings.impact_hook, timeout=settings.impact_hook_timeout)
        parts.append(
            (
                "the impact hooks",
                functools.partial(watch_impacts, service.impacts, service.deletions_after, hooks),
            )
        )
    return parts


@dataclass
class ControlPlane:
    """A control API being served: where (with its token), and how to stop it."""

    server: uvicorn.Server
    task: asyncio.Task[None]
    token_path: Path
    link: str
    #: Where it listens and the token it wrote there, removed again as it stops.
    address: tuple[str, int]
    token: str

    async def stop(self) -> None:
        """Stop serving, then remove the token file while it still holds this server's
        token (never another server's), so no token outlives a clean stop."""
        self.server.should_exit = True
        await self.task
        remove_token(*self.address, self.token)


async def start_control(
    app: ASGIApp, host: str, port: int, token: str, *, bound: socket.socket | None = None
) -> ControlPlane:
    """Serve ``app`` as a control API on ``host:port``, guarded by ``token`` (written where
    the CLI finds it) once it listens; OSError, one line, when it cannot.

    The token is written only once the port is bound (and, in ``serve``, the VM-facing
    listeners before it): a serve that cannot start never replaces the token of the one
    running at this control address, which holds the port, and the CLI is never locked out
    of it."""
    what, option = "the control API", "--control"
    control_socket = _listen(bound or _bound(host, port, what, option), what, option)
    try:
        token_path = write_token(host, port, token)
    except BaseException:
        control_socket.close()
        raise
    guarded = _guarded(app, token, host, port)
    control = _ControlServer(
        uvicorn.Config(guarded, host=host, port=port, log_level="warning", lifespan="off")
    )
    task = asyncio.create_task(control.serve(sockets=[control_socket]))
    while not control.started:
        if task.done():
            await task
            raise OSError(f"the control API could not listen on {host}:{port}")
        await asyncio.sleep(0.01)
    link = f"{url_for(host, port)}/?token={token}"
    return ControlPlane(control, task, token_path, link, (host, port), token)


def run(settings: ServeSettings, *, announce: Callable[[str], None] = print) -> None:
    """Blocking entry point: uvloop when available, the standard loop otherwise."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency, but not on every platform
        asyncio.run(serve(settings, announce=announce))
        return
    uvloop.run(serve(settings, announce=announce))


__all__ = [
    "EVENT_GRID_FILE",
    "ControlApp",
    "ControlPlane",
    "ExposureError",
    "ServeSettings",
    "TlsSettingsError",
    "accepted_hosts",
    "build_service",
    "check_control_exposure",
    "check_tls",
    "control_line",
    "leave_unless_started",
    "listen_addresses",
    "listen_for_vms",
    "listen_refusal",
    "run",
    "serve",
    "start_control",
    "url_for",
]
