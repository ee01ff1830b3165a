"""A whole forewarn platform for one test: the handle the pytest fixtures give.

The platform runs on a :class:`~forewarn.domain.clock.ManualClock`, so a test decides when
NotBefore passes (:meth:`ForewarnPlatform.advance`) and never sleeps for platform time. The
application under test reaches it the way it reaches Azure: through a real socket on loopback
(:attr:`ForewarnPlatform.url`, started on first use, one address per VM) or, for httpx-based
code, through an in-process transport (:meth:`ForewarnPlatform.transport`). Either way each
request goes through the real :class:`~forewarn.server.imds.ImdsEndpoint` and is recorded, so
the test can assert what the application did: which events it approved, when, from which VM
and with which headers.

Thread safety: the platform is not thread-safe. Until the socket server starts, everything runs
in the caller's thread; once it runs, every call (operations, clock, reads, transports) is
handed to the server's loop, the only thread that then touches the platform.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

import httpx

from forewarn.client import ENDPOINT_ENVIRONMENT_VARIABLE, Client
from forewarn.commands import (
    CancelEvent,
    Command,
    ScheduleEvent,
    SimulateEviction,
    StartCampaign,
)
from forewarn.config.fleet import Fleet, load_fleet, parse_fleet
from forewarn.config.policy import PolicyIn
from forewarn.domain.clock import DEFAULT_START, ManualClock, seconds_to_duration
from forewarn.domain.documents import Document
from forewarn.domain.events import Event, EventSource, EventType
from forewarn.domain.impact import ImpactChange, ImpactPolicies
from forewarn.domain.platform import EventView, VmState
from forewarn.domain.timing import PROFILES
from forewarn.domain.vms import Vm
from forewarn.faults import ActiveFault, FaultKind, FaultRule
from forewarn.registry import by_plugin_method
from forewarn.server.imds import SCHEDULED_EVENTS_PATH
from forewarn.service import ScheduledEventsService, service_for_fleet
from forewarn.testing._control import control_app, control_client
from forewarn.testing._impact_hook import ImpactHook, ImpactHookCaller
from forewarn.testing._recording import Approval, RecordedRequest, Recorder, RecordingEndpoint
from forewarn.testing._server import ServerThread
from forewarn.testing._transport import endpoint_transport

if TYPE_CHECKING:
    from forewarn.scenario.schema import Scenario, Step
    from forewarn.scenario.steps import ScenarioResult

_T = TypeVar("_T")

#: Where the first VM of a ``vms=[...]`` fleet answers; the next ones follow. Linux routes the
#: whole of 127.0.0.0/8 to the loopback interface, so these need no setup.
FIRST_VM_ADDRESS = "127.0.0.2"
#: The address a single VM without one of its own is served on.
DEFAULT_ADDRESS = "127.0.0.1"
#: How long :meth:`ForewarnPlatform.wait_for_approval` waits for an application running in
#: another thread or process, in real seconds.
DEFAULT_WAIT = 5.0


class _HasEventId(Protocol):
    @property
    def event_id(self) -> str: ...


EventRef = str | _HasEventId | EventView
Seconds = float | timedelta


def event_id_of(event: EventRef) -> str:
    """The upper-case EventId of an id, a domain event, an event view or an SDK event."""
    if isinstance(event, str):
        return event.upper()
    if isinstance(event, EventView):
        return event.event.event_id.upper()
    return event.event_id.upper()


def _seconds(value: Seconds) -> timedelta:
    """``value`` as a duration; a count of seconds is held to the domain's bound first, so a
    huge one is refused rather than overflowing."""
    return value if isinstance(value, timedelta) else seconds_to_duration(value)


def _fleet_of(vms: Sequence[str | Vm] | None, fleet: str | Path | Fleet | None) -> Fleet:
    if vms is not None and fleet is not None:
        raise ValueError("give either vms=[...] or fleet=..., not both")
    if isinstance(fleet, Fleet):
        return fleet
    if isinstance(fleet, Path):
        return load_fleet(fleet)
    if isinstance(fleet, str):
        return parse_fleet(fleet, "<fleet given to forewarn.testing>")
    names = list(vms) if vms is not None else ["vm0"]
    if not names:
        raise ValueError("a fleet needs at least one VM")
    first = ipaddress.ip_address(FIRST_VM_ADDRESS)
    built: list[Vm] = []
    for index, item in enumerate(names):
        if isinstance(item, Vm):
            built.append(item)
            continue
        address = None if len(names) == 1 else str(first + index)
        built.append(Vm(name=item, vm_id=f"forewarn-testing-{item}", host=f"host-{item}",
                        address=address))  # fmt: skip
    return Fleet(tuple(built))


class ForewarnPlatform:
    """A simulated platform, its VM-facing endpoint, and a record of every request to it.

    ``vms`` names standalone VMs (each on its own loopback address when there are several);
    ``fleet`` is a fleet file's YAML text, its :class:`~pathlib.Path`, or a parsed
    :class:`~forewarn.config.fleet.Fleet`. ``profile`` is ``"documented"`` (SPEC numbers,
    free on a manual clock) or ``"fast"``; ``timing`` overrides single durations
    (``{"notice.Reboot": 60}``). ``seed`` makes EventIds the same on every run.
    ``rate_limit`` is the documented 5 requests per second per VM, in real time.
    ``impact`` sets what a VM's requests meet during an impact, per event type
    (``{"Reboot": "refuse"}``; :mod:`forewarn.domain.impact`): held by default. Over
    sockets a held request is answered once the clock passes the impact's end; in-process,
    where nothing else could answer it, it fails at once with ``httpx.ReadTimeout``.
    ``monotonic`` is the rate limit's clock, real time by default; a test of the limit itself
    passes one it moves. ``impact_hook``, like ``serve --impact-hook``, is called with an
    :class:`~forewarn.domain.impact.ImpactChange` each time a VM's impact starts or ends and
    each time a VM is deleted (``phase`` ``"deleted"``, after its impact's end), in the
    test's thread once the call on this handle that made it returns, so a harness can stop
    the software of a VM that no longer exists.

    ``service`` (the use cases, for assertions on the platform's state), ``clock`` (the manual
    clock) and ``endpoint`` (the VM-facing endpoint as a function of one request) are public.
    """

    def __init__(
        self,
        *,
        vms: Sequence[str | Vm] | None = None,
        fleet: str | Path | Fleet | None = None,
        profile: str = "documented",
        timing: Mapping[str, Seconds] | None = None,
        seed: int = 0,
        start: datetime = DEFAULT_START,
        rate_limit: float = 5.0,
        impact: Mapping[str, str] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        impact_hook: ImpactHook | None = None,
    ) -> None:
        policies = ImpactPolicies.parse(f"{k}={v}" for k, v in (impact or {}).items())
        try:
            profile_value = PROFILES[profile]
        except KeyError:
            raise ValueError(
                f"unknown timing profile {profile!r}; known: {', '.join(PROFILES)}"
            ) from None
        if timing is not None and not isinstance(timing, Mapping):
            raise TypeError(
                f"timing takes overrides such as {{'impact': 3}}, not {timing!r}; "
                "choose the profile with profile=..."
            )
        if timing:
            profile_value = profile_value.with_overrides(
                {key: _seconds(value) for key, value in timing.items()}
            )
        self.clock = ManualClock(start)
        self.service: ScheduledEventsService = service_for_fleet(
            _fleet_of(vms, fleet), self.clock, timing=profile_value, seed=seed
        )
        self.recorder = Recorder()
        self.endpoint = RecordingEndpoint(
            self.service, self.recorder, rate_limit=rate_limit, impact=policies, monotonic=monotonic
        )
        self._server: ServerThread | None = None
        self._control_app: Any = None
        self._created: dict[str, datetime] = {}
        self._closed = False
        self._impact_hook = None if impact_hook is None else ImpactHookCaller(impact_hook)

    # -- where the application finds the endpoint ------------------------------------------

    @property
    def vm_names(self) -> tuple[str, ...]:
        return tuple(vm.name for vm in self._vms())

    def _vms(self) -> tuple[Vm, ...]:
        return self._run(self.service.vms)

    def _address_of(self, vm: str | None) -> str:
        vms = self._vms()
        if vm is None:
            if len(vms) != 1:
                names = ", ".join(v.name for v in vms)
                raise ValueError(f"this fleet has {len(vms)} VMs ({names}): name one")
            chosen = vms[0]
        else:
            found = [v for v in vms if v.name == vm]
            if not found:
                raise ValueError(f"no VM named {vm!r}; the fleet has {', '.join(self.vm_names)}")
            chosen = found[0]
        return chosen.address or DEFAULT_ADDRESS

    def serve(self) -> ServerThread:
        """Start the socket server now (the URL properties start it on first use)."""
        if self._closed:
            raise RuntimeError("this forewarn platform is closed")
        if self._server is None:
            hosts = sorted({vm.address or DEFAULT_ADDRESS for vm in self.service.vms()})
            server = ServerThread(self.endpoint, hosts)
            server.start()
            self._server = server
        return self._server

    @property
    def port(self) -> int:
        return self.serve().port

    def url_for(self, vm: str | None = None) -> str:
        """The base URL (``http://127.0.0.2:PORT``) at which ``vm`` reaches its endpoint,
        as ``http://169.254.169.254`` on Azure; what the SDK's ``endpoint`` takes."""
        address = self._address_of(vm)
        return f"http://{address}:{self.port}"

    @property
    def url(self) -> str:
        """:meth:`url_for` the only VM."""
        return self.url_for(None)

    @property
    def urls(self) -> dict[str, str]:
        return {name: self.url_for(name) for name in self.vm_names}

    def scheduled_events_url(self, vm: str | None = None) -> str:
        """The full URL a documented sample polls (without its ``api-version``)."""
        return self.url_for(vm) + SCHEDULED_EVENTS_PATH

    def environ(self, vm: str | None = None) -> dict[str, str]:
        """Environment variables that point the SDK's endpoint discovery at ``vm``'s URL."""
        return {ENDPOINT_ENVIRONMENT_VARIABLE: self.url_for(vm)}

    def transport(self, vm: str | None = None) -> httpx.MockTransport:
        """An ``httpx.MockTransport`` for ``httpx.Client`` or ``httpx.AsyncClient``: requests
        arrive as ``vm``'s, with no socket. Use any base URL, e.g. ``http://169.254.169.254``."""
        return endpoint_transport(self.endpoint, self._address_of(vm), self._run)

    def client(self, vm: str | None = None, **options: Any) -> Client:
        """A :class:`forewarn.client.Client` talking as ``vm`` through :meth:`transport`."""
        return Client("http://169.254.169.254", transport=self.transport(vm), environ={}, **options)

    def control_client(self) -> httpx.Client:
        """An ``httpx.Client`` on this platform's control API (``/api/v1/...``, as ``forewarn
        serve`` offers it to the CLI and scenarios), in process: no port, no token. Close it
        when done (``with platform.control_client() as http: ...``)."""
        if self._control_app is None:
            self._control_app = control_app(self.service)
        return control_client(self._control_app, lambda: self._server)

    def run_scenario(
        self, scenario: Scenario, *, on_step: Callable[[Step], None] | None = None
    ) -> ScenarioResult:
        """Run a parsed scenario (:func:`forewarn.scenario.parse_scenario`) on this platform
        through :meth:`control_client`; its ``fleet:`` and ``profile:`` are this platform's.
        The result: a failed step is returned, not raised."""
        from forewarn.scenario.client import ControlClient  # the scenario stack, deferred
        from forewarn.scenario.steps import run_scenario

        with self.control_client() as http:
            return run_scenario(scenario, ControlClient(http), on_step=on_step)

    def run_flow(
        self,
        name: str,
        vm: str | None = None,
        *,
        dev_timing: bool = False,
        on_step: Callable[[Step], None] | None = None,
    ) -> ScenarioResult:
        """Run the built-in flow ``name`` (``forewarn scenario list``; docs/flows.md) on
        ``vm``, or on the first VM of the fleet it can run on; with ``dev_timing`` the flow's
        minutes are read as seconds, which needs ``profile="dev"``. The result, as
        :meth:`run_scenario`'s."""
        from forewarn.scenario.client import ControlClient  # the scenario stack, deferred
        from forewarn.scenario.flows import flow_scenario
        from forewarn.scenario.steps import run_scenario

        with self.control_client() as http:
            client = ControlClient(http)
            scenario = flow_scenario(client, name, vm=vm, dev_timing=dev_timing)
            return run_scenario(scenario, client, on_step=on_step)

    # -- what happens to the VMs -----------------------------------------------------------

    def execute(self, command: Command) -> tuple[Event, ...]:
        """Apply any :mod:`forewarn.commands` command now; the events it created."""
        return self._created_by(lambda: self.service.execute(command))

    def perform(
        self, operation: str, target: str, *instance_ids: str, **flags: Any
    ) -> tuple[Event, ...]:
        """Run the :mod:`forewarn.registry` operation whose plugin method is ``operation``
        (``"live_migrate"``...) on the VM, scale set or host ``target``; the events it created.

        Every registered operation is also a method of its own name: ``platform.maintain_host
        ("h1")`` is ``platform.perform("maintain_host", "h1")``. A policy is given as ARM JSON:
        ``platform.set_vm_policy("vm0", policy={"userInitiatedReboot": {"automaticallyApprove":
        True}})``.
        """
        try:
            found = by_plugin_method()[operation]
        except KeyError:
            known = ", ".join(by_plugin_method())
            raise ValueError(f"no operation {operation!r}; known: {known}") from None
        arguments: dict[str, Any] = dict(flags)
        if "policy" in arguments:
            arguments["policy"] = PolicyIn.model_validate(arguments["policy"]).policy()
        if any(param.kind == "instance-ids" for param in found.params):
            arguments["instance_ids"] = instance_ids
        elif instance_ids:
            raise TypeError(f"{operation} takes no instance ids")
        return self._created_by(lambda: self.service.perform(found, target, arguments))

    def __getattr__(self, name: str) -> Callable[..., tuple[Event, ...]]:
        if name.startswith("_") or name not in by_plugin_method():
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

        def operation(target: str, *instance_ids: str, **flags: Any) -> tuple[Event, ...]:
            return self.perform(name, target, *instance_ids, **flags)

        operation.__doc__ = by_plugin_method()[name].summary
        return operation

    def _created_by(self, action: Callable[[], tuple[Event, ...]]) -> tuple[Event, ...]:
        events, at = self._run(lambda: (action(), self.service.now()))
        for event in events:
            self._created.setdefault(event.event_id.upper(), at)
        return events

    def restart(self, vm: str) -> tuple[Event, ...]:
        """A user restart: Reboot, source User, 15 minutes' notice or until approved."""
        return self.perform("restart", vm)

    def redeploy(self, vm: str) -> tuple[Event, ...]:
        return self.perform("redeploy", vm)

    def evict(self, *vms: str) -> tuple[Event, ...]:
        """Spot eviction (simulate-eviction): Preempt, 30 seconds' notice, the VM goes away."""
        return self.execute(SimulateEviction(tuple(vms)))

    def delete_instances(
        self, scale_set: str, *instance_ids: str, autoscale: bool = False
    ) -> tuple[Event, ...]:
        return self.perform("delete_instances", scale_set, *instance_ids, autoscale=autoscale)

    def os_image_upgrade(self, scale_set: str, *instance_ids: str) -> tuple[Event, ...]:
        return self.perform("os_image_upgrade", scale_set, *instance_ids)

    def live_migrate(self, host: str) -> tuple[Event, ...]:
        """Freeze for every tenant of ``host`` (VMs made from ``vms=[name]`` are on
        ``host-{name}``)."""
        return self.perform("live_migrate", host)

    def maintain_host(self, host: str) -> tuple[Event, ...]:
        return self.perform("maintain_host", host)

    def predict_failure(self, host: str) -> tuple[Event, ...]:
        return self.perform("predict_failure", host)

    def fail_host(self, host: str, *, as_: str | None = None) -> tuple[Event, ...]:
        """Hardware failure: a Started Reboot at once for every VM of ``host`` (the VM pages),
        or a Redeploy with ``as_="redeploy"`` (the newer overview), as ``host fail --as``."""
        return self.perform("fail_host", host, as_=as_)

    def start_maintenance(
        self,
        vms: Sequence[str] | None = None,
        *,
        event_type: str = "Reboot",
        kinds: Sequence[str] | None = None,
    ) -> tuple[Event, ...]:
        """A maintenance campaign, one fault domain at a time; the first step's events.

        ``kinds`` chooses each fault domain's maintenance in turn (``["update"]`` for the
        memory-preserving host update; ``"live-migrate"``, ``"maintain"``); without it
        ``event_type`` Reboot maintains and Freeze live-migrates.
        """
        chosen = None if kinds is None else tuple(kinds)
        return self.execute(StartCampaign(None if vms is None else tuple(vms), event_type, chosen))

    def schedule(
        self,
        event_type: str | EventType,
        *resources: str,
        source: str | EventSource = EventSource.PLATFORM,
        description: str = "",
        duration_seconds: int = -1,
        notice: Seconds | None = None,
        started: bool = False,
        started_for: Seconds | None = None,
    ) -> Event:
        """Any event, as the control API's ``POST /events`` makes it; ``started_for`` keeps
        it Started that long instead of its kind's period in the timing profile."""
        command = ScheduleEvent(
            event_type=EventType(event_type).value,
            resources=tuple(resources),
            source=EventSource(source).value,
            description=description,
            duration_seconds=duration_seconds,
            notice_seconds=None if notice is None else _seconds(notice).total_seconds(),
            started=started,
            started_seconds=None if started_for is None else _seconds(started_for).total_seconds(),
        )
        return self.execute(command)[0]

    def cancel(self, event: EventRef) -> None:
        """The platform cancels a Scheduled event: it vanishes from every document."""
        self.execute(CancelEvent(event_id_of(event)))

    # -- time ------------------------------------------------------------------------------

    @property
    def now(self) -> datetime:
        return self._run(self.service.now)

    def advance(self, seconds: Seconds) -> datetime:
        """Move platform time forward; whatever falls due happens. The new time."""
        delta = _seconds(seconds)
        return self._run(lambda: self.service.advance_clock(delta).now)

    def set_time(self, moment: datetime) -> datetime:
        return self._run(lambda: self.service.set_clock(moment).now)

    # -- faults clients must survive (forewarn.faults) -------------------------------------

    def fault(
        self,
        kind: str,
        *,
        vm: str | None = None,
        count: int | None = None,
        seconds: Seconds | None = None,
        probability: float = 1.0,
        delay: Seconds | None = None,
        seed: int | None = None,
    ) -> ActiveFault:
        """Inject a fault in front of the endpoint: ``"gone"`` (410), ``"error"`` (500),
        ``"throttle"`` (429), ``"unavailable"`` (503), ``"latency"``, ``"timeout"``,
        ``"truncate"`` or ``"reset"``, for
        ``vm`` or every VM, for the next ``count`` requests and/or ``seconds`` of real time.
        The platform is not touched; requests a fault answers are not among
        :meth:`requests`: over sockets they are in :meth:`faulted_requests`."""
        try:
            fault_kind = FaultKind(kind)
        except ValueError:
            known = ", ".join(k.value for k in FaultKind)
            raise ValueError(f"unknown fault {kind!r}; known: {known}") from None
        rule = FaultRule(
            fault_kind,
            vm=vm,
            count=count,
            seconds=None if seconds is None else _seconds(seconds).total_seconds(),
            probability=probability,
            delay=None if delay is None else _seconds(delay).total_seconds(),
            seed=seed,
        )
        # an unknown VM fails here, not silently later
        return self._run(lambda: self.service.add_fault(rule, time.monotonic()))

    def faults(self) -> tuple[ActiveFault, ...]:
        """The faults in force, in the order they apply."""
        return self._run(lambda: self.service.faults(time.monotonic()))

    def clear_faults(self, fault: ActiveFault | int | None = None, *, vm: str | None = None) -> int:
        """Clear one fault, those of ``vm``, or all; how many were cleared."""
        fault_id = fault.id if isinstance(fault, ActiveFault) else fault
        return self._run(lambda: self.service.clear_faults(fault_id, vm=vm))

    # -- the platform's side ---------------------------------------------------------------

    def events(self) -> tuple[EventView, ...]:
        """Live events with who sees them and who approved them."""
        return self._run(self.service.events)

    def event(self, event: EventRef) -> EventView | None:
        """The live event, or None once it is over (or was cancelled)."""
        wanted = event_id_of(event)
        return next((e for e in self.events() if e.event.event_id.upper() == wanted), None)

    def document(self, vm: str | None = None) -> Document:
        """What ``vm`` would be shown now, before api-version filtering."""
        name = vm if vm is not None else self._only_vm()
        return self._run(lambda: self.service.document(name))

    def vm_state(self, vm: str | None = None) -> VmState:
        name = vm if vm is not None else self._only_vm()
        return self._run(lambda: self.service.vm_state(name))

    def _only_vm(self) -> str:
        names = self.vm_names
        if len(names) != 1:
            raise ValueError(f"this fleet has {len(names)} VMs ({', '.join(names)}): name one")
        return names[0]

    # -- what the application did ----------------------------------------------------------

    def requests(
        self, vm: str | None = None, *, method: str | None = None, path: str | None = None
    ) -> list[RecordedRequest]:
        """Every request so far, oldest first, optionally only ``vm``'s, ``method`` or ``path``."""
        return [
            r
            for r in self.recorder.requests()
            if (vm is None or r.vm == vm)
            and (method is None or r.method == method.upper())
            and (path is None or r.path == path)
        ]

    def faulted_requests(self, vm: str | None = None) -> list[RecordedRequest]:
        """The requests an injected fault answered (over sockets), oldest first, optionally
        only ``vm``'s: each with its ``fault``, the status the fault answered (0 for none)
        and, for a cut answer, the whole body the endpoint made. :meth:`requests` leaves
        them out: the application read no answer of the endpoint's."""
        return [r for r in self.recorder.faulted() if vm is None or r.vm == vm]

    def clear_requests(self) -> None:
        """Forget the requests so far (approvals included), e.g. after a warm-up phase."""
        self.recorder.clear()

    def approvals(self, vm: str | None = None) -> list[Approval]:
        """Every accepted approval, oldest first, optionally only ``vm``'s."""
        return [a for a in self.recorder.approvals() if vm is None or a.vm == vm]

    def approvals_of(self, event: EventRef) -> list[Approval]:
        wanted = event_id_of(event)
        return [a for a in self.approvals() if wanted in a.event_ids]

    def appeared_at(self, event: EventRef) -> datetime | None:
        """When ``event`` came to be: made through this handle, or else first shown in a
        document the application read. None when neither happened."""
        wanted = event_id_of(event)
        return self._created.get(wanted) or self.recorder.first_shown(wanted)

    def assert_approved(
        self, event: EventRef, *, by: str | None = None, within: Seconds | None = None
    ) -> Approval:
        """The first approval of ``event`` (by ``by``, when given), which must have come at
        most ``within`` platform time after :meth:`appeared_at`; else AssertionError."""
        wanted = event_id_of(event)
        approvals = [a for a in self.approvals_of(wanted) if by is None or a.vm == by]
        if not approvals:
            raise AssertionError(
                f"event {wanted} was not approved{f' by {by}' if by else ''}; "
                f"{self._approvals_summary()}"
            )
        first = approvals[0]
        if within is not None:
            limit = _seconds(within)
            appeared = self.appeared_at(wanted)
            if appeared is None:
                raise AssertionError(f"event {wanted}: not known when it appeared")
            took = first.at - appeared
            if took > limit:
                raise AssertionError(
                    f"event {wanted} was approved {took.total_seconds():g} s after it appeared "
                    f"(at {first.at.isoformat()}), not within {limit.total_seconds():g} s"
                )
        return first

    def assert_not_approved(self, event: EventRef) -> None:
        wanted = event_id_of(event)
        approvals = self.approvals_of(wanted)
        if approvals:
            who = ", ".join(f"{a.vm} at {a.at.isoformat()}" for a in approvals)
            raise AssertionError(f"event {wanted} was approved ({who})")

    def wait_for_approval(
        self, event: EventRef, *, by: str | None = None, timeout: float = DEFAULT_WAIT
    ) -> Approval:
        """Wait, at most ``timeout`` real seconds, for an application running in another
        thread or process to approve ``event``; the approval, or AssertionError."""
        wanted = event_id_of(event)

        def approved() -> bool:
            return any(wanted in a.event_ids and (by is None or a.vm == by)
                       for a in self.recorder.approvals())  # fmt: skip

        if not self.recorder.wait(approved, timeout):
            raise AssertionError(
                f"event {wanted} was not approved within {timeout:g} s (real time); "
                f"{self._approvals_summary()}"
            )
        return self.assert_approved(wanted, by=by)

    def wait_for_request(
        self,
        matches: Callable[[RecordedRequest], bool] | None = None,
        *,
        after: int = 0,
        timeout: float = DEFAULT_WAIT,
    ) -> RecordedRequest:
        """Wait, at most ``timeout`` real seconds, for a request (the ``after``-th or later,
        counting from 0) that ``matches``; e.g. until the application has polled again."""
        found: list[RecordedRequest] = []

        def seen() -> bool:
            for request in self.recorder.requests()[after:]:
                if matches is None or matches(request):
                    found.append(request)
                    return True
            return False

        if not self.recorder.wait(seen, timeout):
            raise AssertionError(
                f"no matching request within {timeout:g} s; "
                f"{len(self.recorder.requests())} request(s) so far"
            )
        return found[0]

    def _approvals_summary(self) -> str:
        approvals = self.approvals()
        if not approvals:
            gets = len(self.requests(method="GET"))
            return f"no approvals at all ({gets} GET request(s) seen)"
        listed = "; ".join(
            f"{', '.join(a.event_ids)} by {a.vm} at {a.at.isoformat()}" for a in approvals
        )
        return f"approvals seen: {listed}"

    # -- lifetime --------------------------------------------------------------------------

    def _run(self, function: Callable[[], _T]) -> _T:
        server = self._server
        hook = self._impact_hook
        if hook is None:
            return function() if server is None else server.call(function)

        def then_look() -> tuple[_T, list[ImpactChange]]:
            return function(), hook.look(self.service)

        result, changes = then_look() if server is None else server.call(then_look)
        hook.tell(changes)
        return result

    def close(self) -> None:
        """Stop the socket server, if it was started, and close its connections."""
        self._closed = True
        server, self._server = self._server, None
        if server is not None:
            server.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


#: What ``make_forewarn_platform`` is: a factory of platforms, each closed at teardown. Defined
#: here, not beside the fixture, so ``forewarn.testing`` imports without pytest (``forewarn
#: verify`` and the context manager run where pytest is not installed).
MakePlatform = Callable[..., ForewarnPlatform]
