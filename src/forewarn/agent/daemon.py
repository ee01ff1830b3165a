"""The long-running part: poll, turn documents into changes, feed the pipeline, keep going.

Nothing the endpoint does stops the loop: 410, 429 and 5xx answers, timeouts, refused
connections (the endpoint restarting, or this VM frozen), documents that are not JSON or not
a Scheduled Events document. Each is counted by kind, logged, shown on ``/healthz``, and the
next poll happens on time. The loop polls once a second by default, as the documentation
advises (learn.microsoft.com/azure/virtual-machines/linux/scheduled-events, "Polling frequency").
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TextIO

import httpx

from forewarn.agent.config import AgentConfig
from forewarn.agent.hooks import HookRunner, Moment
from forewarn.agent.logs import JsonLog
from forewarn.agent.metrics import AgentMetrics, Health, MetricsServer
from forewarn.agent.pipeline import InlineExecutor, Pipeline
from forewarn.agent.policies import Policy
from forewarn.agent.store import HandledStore
from forewarn.client import (
    Client,
    DocumentChange,
    ImdsConnectionError,
    ImdsError,
    ImdsHttpError,
    ImdsTimeoutError,
    IncarnationTracker,
    MalformedResponseError,
    RetryPolicy,
)


def error_kind(error: ImdsError) -> str:
    """A short label for metrics: ``http-429``, ``timeout``, ``malformed``..."""
    if isinstance(error, ImdsHttpError):
        return f"http-{error.status}"
    if isinstance(error, MalformedResponseError):
        return "malformed"
    if isinstance(error, ImdsTimeoutError):
        return "timeout"
    if isinstance(error, ImdsConnectionError):
        return "connection"
    return "other"


#: How long the state keeps an event after it was recovered from. EventIds are never reused,
#: so a recovered event cannot come back; the week only leaves its record there to read.
RECOVERED_KEPT_FOR = timedelta(days=7)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class PollLoop:
    """One poll at a time: read the document, hand a change to the pipeline, retry steps."""

    def __init__(
        self,
        client: Client,
        pipeline: Pipeline,
        *,
        metrics: AgentMetrics,
        health: Health,
        log: JsonLog,
        vm_name: str | None = None,
        interval: float = 1.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.pipeline = pipeline
        self.metrics = metrics
        self.health = health
        self.log = log
        self.vm_name = vm_name
        self.interval = interval
        self._monotonic = monotonic
        self.tracker = IncarnationTracker()
        if vm_name is not None:
            pipeline.vm_name = vm_name

    def _failed(self, what: str, error: ImdsError) -> None:
        kind = error_kind(error)
        self.metrics.poll_errors.labels(kind).inc()
        self.health.failed(f"{what}: {kind}")
        self.log.warning(f"{what} failed; polling goes on", kind=kind, error=str(error))

    def _learn_vm_name(self) -> bool:
        """This VM's name, from instance metadata, until the configuration gives one."""
        if self.vm_name is not None:
            return True
        try:
            name = self.client.instance().name
        except ImdsError as error:
            self._failed("reading this VM's name", error)
            return False
        if not name:
            self.metrics.poll_errors.labels("no-vm-name").inc()
            self.log.error("instance metadata has no compute name; set vm_name")
            return False
        self.vm_name = self.pipeline.vm_name = name
        self.log.info("this VM", vm_name=name)
        return True

    def poll_once(self) -> DocumentChange | None:
        """One poll; never raises for anything the endpoint does."""
        if not self._learn_vm_name():
            return None
        try:
            document = self.client.get()
        except ImdsError as error:
            self._failed("poll", error)
            return None
        self.metrics.polls.inc()
        self.metrics.last_success.set(time.time())
        self.health.succeeded()
        previous = self.tracker.previous
        change = self.tracker.observe(document)
        self.metrics.incarnation.set(document.incarnation)
        if change is not None:
            if previous is not None and document.incarnation < previous.incarnation:
                self.log.warning(
                    "DocumentIncarnation went backwards: the endpoint lost its state",
                    previous=previous.incarnation,
                    incarnation=document.incarnation,
                )
            self.log.info(
                "document changed",
                incarnation=document.incarnation,
                added=[e.event_id for e in change.added],
                started=[e.event_id for e in change.started],
                removed=[e.event_id for e in change.removed],
            )
            self.pipeline.on_change(change)
        else:
            self.pipeline.reconcile()
        return change

    def run(self, stop: threading.Event) -> None:
        """Poll every ``interval`` seconds until ``stop`` is set."""
        due = self._monotonic()
        while not stop.is_set():
            try:
                self.poll_once()
            except Exception as exc:  # a bug here must not end the agent
                self.metrics.poll_errors.labels("internal").inc()
                self.log.error(
                    "internal error; polling goes on",
                    error=repr(exc),
                    traceback=traceback.format_exc(limit=8),
                )
            now = self._monotonic()
            due = max(due + self.interval, now)
            stop.wait(due - now)


@dataclass
class Agent:
    """Everything ``forewarn agent`` runs, built from its configuration."""

    config: AgentConfig
    client: Client
    store: HandledStore
    pipeline: Pipeline
    loop: PollLoop
    metrics: AgentMetrics
    health: Health
    log: JsonLog
    executor: Executor
    stop: threading.Event
    server: MetricsServer | None = None

    def run(self) -> None:
        """Serve metrics, poll until :attr:`stop` is set, then finish the steps under way."""
        if self.server is not None:
            self.server.start()
            host, port = self.server.address
            self.log.info("metrics and health", url=f"http://{host}:{port}/metrics")
        self.log.info(
            "agent started",
            endpoint=self.client.endpoint.base_url,
            endpoint_source=self.client.endpoint.source,
            dry_run=self.config.dry_run,
            state=str(self.store.path),
        )
        try:
            self.loop.run(self.stop)
        finally:
            self.log.info("agent stopping; waiting for hooks under way")
            self.pipeline.wait_idle()
            self.close()
            self.log.info("agent stopped")

    def close(self) -> None:
        self.executor.shutdown(wait=True)
        if self.server is not None:
            self.server.close()
        self.client.close()
        self.store.close()


def _interruptible(stop: threading.Event) -> Callable[[float], None]:
    """A sleep for the client's retry waits that ends early when the agent is told to stop."""

    def sleep(seconds: float) -> None:
        stop.wait(seconds)

    return sleep


def _split_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def build_agent(
    config: AgentConfig,
    *,
    base_dir: Path | None = None,
    transport: httpx.BaseTransport | None = None,
    environ: Mapping[str, str] | None = None,
    log_stream: TextIO | None = None,
    sleep: Callable[[float], None] | None = None,
    monotonic: Callable[[], float] = time.monotonic,
    now: Callable[[], datetime] = _utc_now,
    inline: bool = False,
    serve_metrics: bool = True,
) -> Agent:
    """Wire an agent; ``transport``, ``sleep``, ``monotonic`` and ``inline`` are for tests.

    ``base_dir`` is where hooks run (the configuration file's directory), so relative hook
    paths in the file mean the same wherever the agent is started from.
    """
    stop = threading.Event()
    log = JsonLog(log_stream, level=config.log_level, now=now)
    metrics = AgentMetrics()
    health = Health(config.health_stale_after, monotonic)
    server = None
    if serve_metrics and config.metrics_address is not None:
        host, port = _split_address(config.metrics_address)
        server = MetricsServer(host, port, metrics, health)
    try:
        store = HandledStore.in_directory(config.state_dir)
    except BaseException:
        if server is not None:
            server.close()
        raise
    forgotten = store.forget_before(now() - RECOVERED_KEPT_FOR)
    if forgotten:
        log.info(
            "forgot events recovered long ago", steps=forgotten, kept_for=str(RECOVERED_KEPT_FOR)
        )
    client = Client(
        config.endpoint,
        api_version=config.api_version,
        timeout=config.request_timeout,
        retry=RetryPolicy(attempts=3, deadline=max(2.0, 3 * config.poll_interval)),
        transport=transport,
        sleep=sleep if sleep is not None else _interruptible(stop),
        monotonic=monotonic,
        environ=environ,
    )
    hooks = HookRunner(
        {
            Moment.PREPARE: config.hooks.prepare,
            Moment.STARTED: config.hooks.started,
            Moment.RECOVER: config.hooks.recover,
        },
        cwd=base_dir,
        output_limit=config.hook_output_limit,
        environ=environ,
        monotonic=monotonic,
    )
    executor: Executor = (
        InlineExecutor()
        if inline
        else ThreadPoolExecutor(config.hook_workers, thread_name_prefix="forewarn-hook")
    )
    pipeline = Pipeline(
        approve=client.approve,
        policy=Policy.from_specs(config.policies),
        election=config.leader_election,
        hooks=hooks,
        store=store,
        metrics=metrics,
        log=log,
        executor=executor,
        now=now,
        approval_attempts=config.approval_attempts,
        dry_run=config.dry_run,
    )
    loop = PollLoop(
        client,
        pipeline,
        metrics=metrics,
        health=health,
        log=log,
        vm_name=config.vm_name,
        interval=config.poll_interval,
        monotonic=monotonic,
    )
    return Agent(
        config, client, store, pipeline, loop, metrics, health, log, executor, stop, server
    )


__all__ = [
    "RECOVERED_KEPT_FOR",
    "Agent",
    "PollLoop",
    "build_agent",
    "error_kind",
]
