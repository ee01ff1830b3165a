"""A shared fleet under load and faults drawn from a seed, and the rules it must keep.

Three ``forewarn serve --store postgresql://...`` front-ends share one namespace, reaching
PostgreSQL through a TCP proxy (tests/support/tcp_proxy.py) so the database can be cut (every
connection reset, new ones refused) or silenced (connections kept, nothing forwarded). Each
front-end is driven as tests/support/fault_tier.py drives one (:class:`fault_tier.Front`, its
:class:`fault_tier.Witness` checking every document it shows). Meanwhile:

- every VM polls its own front-end at its own address (each VM is on one node, as in
  docs/scale-out.md's DaemonSet), with a timeout, and approves some of its Scheduled events;
- an operator restarts and redeploys VMs, creates and cancels events, moves the manual clock
  and queries Resource Graph, each through any front-end that is up;
- an Event Grid receiver (an HTTP server of this process) is subscribed with ``forewarn
  eventgrid subscribe``;
- faults come one at a time, at times and of kinds drawn from the seed: ``kill -9`` of a
  front-end (started again on the same ports), PostgreSQL cut, PostgreSQL silenced, the
  receiver hanging.

Then, once the faults are over and the deliveries have settled, :meth:`Soak.check` holds the
rules: nothing acknowledged lost, nothing refused visible, every state an event was shown in
delivered to the receiver at least once, no EventId naming two events, no
DocumentIncarnation going backwards on any front-end (across its restarts too), and every
poll answered within :data:`POLL_BOUND` outside its VM's impacts and its front-end's own
faults. A failure names the seed and the fault timeline; ``FOREWARN_SOAK_SEED=N`` draws the
same faults at the same times again (the threads' interleaving is the machine's).

A full disk is not one of the faults: the fleet keeps everything in PostgreSQL, and a
front-end of a shared fleet writes to no disk of its own (tests/durability/test_full_disk.py
fills the disk under a ``--data-dir`` server).
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from e2e_support import (
    ServerProcess,
    free_port,
    http_server_in_thread,
    run,
    wait_for,
    wait_until,
)
from fault_tier import AUTH, HEADERS, URL, Front, Witness
from tcp_proxy import TcpProxy

from forewarn.cluster.tasks import BACKOFF_SECONDS
from forewarn.storage import open_journal

#: Every VM's events reach Event Grid and Resource Graph (docs/azure-side.md, "The policy and
#: ARM identity"); two fault domains, a host each.
FLEET = """
availabilitySets:
  - name: soak
    faultDomains: 2
    scheduledEventsPolicy:
      scheduledEventsAdditionalPublishingTargets: {eventGridAndResourceGraph: {enable: true}}
vms:
"""
ADDRESSES = {f"soak{n}": f"127.0.0.{n + 2}" for n in range(6)}
FRONT_ENDS = 3
#: How long a VM waits for its poll (its client's timeout): a poll takes milliseconds; the
#: freezes this soak looks for last tens of seconds (issue text: 10 s timeouts, 3 of 3).
POLL_BOUND = 5.0
#: How long after PostgreSQL's outage ended a front-end may still be catching up: its
#: follower's longest wait between reconnections, and a second to read what it missed.
RECONNECT_SECONDS = BACKOFF_SECONDS[1] + 1.0
#: How long a control call or an approval is waited for before it counts as unanswered (its
#: outcome unknown): docs/scale-out.md bounds a write's database work at 5 s for the lock,
#: 10 s a statement and 5 s to connect.
WRITE_TIMEOUT = 20.0
#: How long a receiver the soak makes hang hangs at most, and forewarn's wait for it.
EVENTGRID_TIMEOUT = 1.0
#: How long a front-end may take to start (its import, replay and registering): a bound on a
#: hang, not on speed. A start takes seconds on a quiet machine; a restart during a run
#: competes with the run's own load and with other tests, and took over 30 s on two cores
#: shared with a dozen busy processes.
START_SECONDS = 120.0
#: The wall time the deliveries have to settle after the faults, and the front-ends to agree.
SETTLE_SECONDS = 180.0
RESOURCE_GRAPH = "/providers/Microsoft.ResourceGraph/resources?api-version=2022-10-01"
IMPACT_POLICY = ("Reboot=refuse", "Redeploy=refuse", "Freeze=refuse")
FAULT_KINDS = ("kill", "postgres-cut", "postgres-silence", "receiver-hang")


def fleet_text() -> str:
    lines = [
        f"  - {{name: {vm}, address: {address}, availabilitySet: soak, "
        f"faultDomain: {n % 2}, host: h{n}}}"
        for n, (vm, address) in enumerate(ADDRESSES.items())
    ]
    return FLEET + "\n".join(lines) + "\n"


#: What a front-end's ``503`` says when a write's commit was sent and its answer lost
#: (docs/scale-out.md, "A silent PostgreSQL": "One case cannot be known: a `COMMIT` that
#: reached the server and whose answer was lost. That `503` says so (`the change could not be
#: confirmed ...: it may or may not have been applied`), and the front-end rebuilds its state
#: from the journal, which says which").
MAY_HAVE_BEEN_APPLIED = "it may or may not have been applied"
#: What a front-end's ``503`` says to every call while it rebuilds its copy from a journal it
#: cannot read (docs/scale-out.md, "How front-ends stay one fleet": it "refuses its VMs'
#: requests and the control API's reads with `503` ... until its follower has rebuilt it";
#: docs/control.md: "every call but the dashboard page answers `503` until it is").
REBUILDING = "is rebuilding its state from the journal"


def write_outcome(answer: httpx.Response) -> str:
    """What a control call's answer says of its change: ``acked`` (2xx), ``unknown`` (a
    ``503`` whose commit could not be confirmed) or ``refused`` (any other status)."""
    if answer.is_success:
        return "acked"
    if answer.status_code == 503 and MAY_HAVE_BEEN_APPLIED in answer.text:
        return "unknown"
    return "refused"


def approval_outcome(answer: httpx.Response) -> str:
    """What a VM's approval's answer says of it. IMDS answers every write it could not
    confirm with its own text (docs/scale-out.md, "A silent PostgreSQL": "answered `503`
    (a VM's approval or first request, with IMDS's own text)"), the one whose commit was
    sent and went unanswered too, so a VM cannot tell that one from a refusal: a ``503`` is
    ``unknown``, and the journal says which (:meth:`Soak.journaled_approvals`)."""
    if answer.is_success:
        return "acked"
    return "unknown" if answer.status_code == 503 else "refused"


class RebuildingError(Exception):
    """A front-end answered ``503`` as it rebuilds its copy from the journal (:data:`REBUILDING`)."""


@dataclass
class Write:
    """A change asked of the fleet, and what it was answered: ``acked`` (2xx), ``refused``
    (refused: it must not show) or ``unknown`` (no answer, or a ``503`` that cannot say:
    applied or not, either may show, and the journal says which)."""

    kind: str
    key: tuple[str, ...]
    outcome: str
    detail: str = ""
    #: The EventIds an acknowledged operation or event creation returned.
    events: tuple[str, ...] = ()


@dataclass
class Poll:
    vm: str
    front: int
    started: float
    ended: float
    outcome: str


@dataclass
class Fault:
    kind: str
    start: float
    length: float
    front: int = -1


class Receiver:
    """An Event Grid webhook in this process: answers the validation handshake, records each
    delivered event (its EventId, status, type and resources), and while :meth:`hang` is in
    force holds every delivery unanswered, then answers 503 and records none of them (they
    must come again)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.delivered: list[dict[str, Any]] = []
        self.hung = 0
        self._hang_until = 0.0
        self.released = threading.Event()

    def hang(self, seconds: float) -> None:
        with self.lock:
            self._hang_until = time.monotonic() + seconds

    def release(self) -> None:
        with self.lock:
            self._hang_until = 0.0
        self.released.set()

    def pairs(self) -> set[tuple[str, str]]:
        with self.lock:
            return {(e["EventId"], e["EventStatus"]) for e in self.delivered}

    def handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Webhook(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.headers.get("aeg-event-type") == "SubscriptionValidation":
                    code = body[0]["data"]["validationCode"]
                    self.answer(json.dumps({"validationResponse": code}).encode())
                    return
                with receiver.lock:
                    hang = receiver._hang_until - time.monotonic()
                if hang > 0:
                    with receiver.lock:
                        receiver.hung += 1
                    receiver.released.wait(hang)
                    with contextlib.suppress(OSError):  # forewarn gave up, or is told to retry
                        self.answer(b"", 503)
                    return
                with receiver.lock:
                    for event in body:
                        receiver.delivered.append(event["data"]["resourceInfo"]["properties"])
                self.answer(b"")

            def answer(self, body: bytes, status: int = 200) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Webhook


def draw_faults(seed: int, seconds: float) -> list[Fault]:
    """The faults of a run of ``seconds``, one at a time: each kind once in a shuffled round,
    then the next round, so even a short run meets every kind."""
    rng = random.Random(seed)
    faults: list[Fault] = []
    at = 3.0
    kinds: list[str] = []
    while True:
        if not kinds:
            kinds = list(FAULT_KINDS)
            rng.shuffle(kinds)
        at += rng.uniform(1.5, 4.0)
        kind = kinds.pop()
        # the database away for longer than a poll's bound too: reads must not wait on it
        length = rng.uniform(2.0, 2 * POLL_BOUND) if "postgres" in kind else rng.uniform(1.0, 4.0)
        if at + length > seconds:
            return faults
        front = rng.randrange(FRONT_ENDS) if kind == "kill" else -1
        faults.append(Fault(kind, at, length, front))
        at += length


def journaled_approvals(store: str) -> set[tuple[str, ...]]:
    """(VM, EventId) of every approval the journal of ``store`` holds, those journaled with
    other writes of their transaction (a ``group`` record, docs/scale-out.md) included."""
    journal = open_journal(store)
    try:
        return {
            (command["vm"], event_id)
            for _, record in journal.records()
            for command in (record["commands"] if record["op"] == "group" else [record])
            if command["op"] == "approve"
            for event_id in command["event_ids"]
        }
    finally:
        journal.close()


@dataclass
class Soak:
    """The run: its front-ends, proxy, receiver, actors, and everything they were told."""

    seed: int
    seconds: float
    workdir: Path
    store: str
    proxy: TcpProxy
    receiver: Receiver
    receiver_url: str
    fronts: list[Front] = field(default_factory=list)
    processes: list[contextlib.ExitStack] = field(default_factory=list)
    running: dict[int, ServerProcess] = field(default_factory=dict)
    #: One witness over every front-end: an EventId names one event everywhere.
    everywhere: Witness = field(default_factory=Witness)
    writes: list[Write] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    #: Front-end -> its down windows (monotonic start, end): kill -9 until it listens again.
    down: dict[int, list[tuple[float, float]]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    began: float = field(default_factory=time.monotonic)
    #: How long the fleet took to come up (before :attr:`began` counts the run's own time).
    up_seconds: float = 0.0
    #: Clock moves asked (answered or not) so far: a reset poll is an impact when one began
    #: since the poll did (the impact may have ended in between).
    advances_asked: int = 0
    #: Clock moves asked and not answered yet, and when the last one was answered.
    advancing: int = 0
    advanced: float = 0.0
    start_clock: str = ""
    #: (vm, EventId) a VM approved or is approving, so each is asked once.
    approving: set[tuple[str, str]] = field(default_factory=set)
    #: EventIds an acknowledged creation made and that may still be Scheduled (to cancel).
    cancellable: list[str] = field(default_factory=list)
    approvals: list[threading.Thread] = field(default_factory=list)
    #: Each clock move the operator asked: by how much, through which front-end, when it
    #: was asked and answered, and its outcome (a cut poll's violation quotes the last).
    moves: list[str] = field(default_factory=list)
    #: (when answered, the platform time it answered) each acknowledged clock move.
    acknowledged: list[tuple[float, datetime]] = field(default_factory=list)
    #: (began, ended) each cut or silence of PostgreSQL: a front-end's follower reconnects
    #: after one with a doubling wait, so it may show what was acknowledged meanwhile late.
    store_out: list[tuple[float, float]] = field(default_factory=list)

    # -- the fleet ---------------------------------------------------------------------------

    @property
    def options(self) -> list[str]:
        parts = urlsplit(self.store)
        user = f"{parts.username}@" if parts.username else ""
        proxied = parts._replace(netloc=f"{user}127.0.0.1:{self.proxy.port}").geturl()
        fleet = self.workdir / "fleet.yaml"
        options = ["--store", proxied, "--fleet", str(fleet)]
        options += ["--eventgrid-timeout", str(EVENTGRID_TIMEOUT), "--log-level", "warning"]
        for policy in IMPACT_POLICY:
            options += ["--impact", policy]
        return options

    def start(self, index: int) -> ServerProcess:
        logs = self.workdir / f"front-end-{index}"
        logs.mkdir(exist_ok=True)
        stack = contextlib.ExitStack()
        front = self.fronts[index]
        process = stack.enter_context(front.serving(logs, self.options, START_SECONDS))
        self.processes[index] = stack
        self.running[index] = process
        wait_for(
            lambda: listening(ADDRESSES["soak0"], front.port),
            what=f"front-end {index}'s VM-facing endpoint",
            server=process,
            timeout=START_SECONDS,
        )
        return process

    def up(self) -> None:
        (self.workdir / "fleet.yaml").write_text(fleet_text())
        for index in range(FRONT_ENDS):
            self.fronts.append(
                Front(free_port(["127.0.0.1"]), free_port(["127.0.0.1"]), ADDRESSES, Witness())
            )
            self.processes.append(contextlib.ExitStack())
            self.down[index] = []
        # the first makes the namespace; the others start together (most of a start is
        # importing and building the app, seconds of CPU each, the test's own cost)
        self.start(0)
        with ThreadPoolExecutor(FRONT_ENDS - 1) as starting:
            list(starting.map(self.start, range(1, FRONT_ENDS)))
        for n, vm in enumerate(ADDRESSES):  # each VM's first request, before any fault
            answer = self.fronts[n % FRONT_ENDS].poll(vm)
            assert answer.status_code == 200, answer.text
        self.start_clock = self.fronts[0].clock()
        control = f"127.0.0.1:{self.fronts[-1].control_port}"
        subscribed = run(
            [
                *(sys.executable, "-m", "forewarn", "eventgrid", "subscribe", "--name", "soak"),
                *("--endpoint", f"{self.receiver_url}/api/events", "--control", control),
                *("--output", "json"),
            ],
            timeout=60,
        )
        assert subscribed.returncode == 0, subscribed.stderr
        assert json.loads(subscribed.stdout)["provisioningState"] == "Succeeded"
        self.up_seconds = time.monotonic() - self.began

    def stop(self) -> None:
        for stack in self.processes:
            try:
                stack.close()
            except AssertionError as error:
                self.violations.append(f"a front-end's output: {error}")

    def note(self, text: str) -> None:
        line = f"{time.monotonic() - self.began:7.2f}s {text}"
        with self.lock:
            self.timeline.append(line)

    def violate(self, text: str) -> None:
        with self.lock:
            self.violations.append(f"{time.monotonic() - self.began:7.2f}s {text}")

    def live_fronts(self) -> list[int]:
        """The front-ends not killed and waiting to start again."""
        with self.lock:
            return [i for i, w in self.down.items() if not w or w[-1][1] != float("inf")]

    # -- the actors --------------------------------------------------------------------------

    def actor(self, name: str, body: Callable[[random.Random], None]) -> threading.Thread:
        rng = random.Random(f"{self.seed}/{name}")

        def running() -> None:
            try:
                while not self.stopping.is_set():
                    body(rng)
            except Exception:
                self.violate(f"{name} stopped on an error:\n{traceback.format_exc()}")

        thread = threading.Thread(target=running, name=name, daemon=True)
        thread.start()
        return thread

    def poller(self, vm: str, index: int) -> Callable[[random.Random], None]:
        front = self.fronts[index]
        url = URL.format(ADDRESSES[vm], front.port)

        def poll(rng: random.Random) -> None:
            asked = self.advances_asked
            started = time.monotonic()
            try:
                answer = httpx.get(url, headers=HEADERS, timeout=POLL_BOUND, trust_env=False)
                outcome = str(answer.status_code)
            except httpx.TimeoutException:
                outcome, answer = "timeout", None
            except httpx.ConnectError as error:
                outcome, answer = f"connect: {error}", None
            except httpx.TransportError as error:
                outcome, answer = f"reset: {type(error).__name__} {error}", None
            ended = time.monotonic()
            with self.lock:
                self.polls.append(Poll(vm, index, started, ended, outcome))
            if answer is not None and answer.status_code == 200:
                try:
                    shown = front.witness.document(vm, answer.content)
                    for event in shown["Events"]:
                        self.everywhere.event(
                            event["EventId"], event["EventType"], event["Resources"]
                        )
                except AssertionError as error:
                    self.violate(f"front-end {index} showed {vm}: {error}")
                    return
                for event in shown["Events"]:
                    key = (vm, event["EventId"])
                    scheduled = event["EventStatus"] == "Scheduled"
                    if scheduled and key not in self.approving and rng.random() < 0.5:
                        self.approving.add(key)
                        approval = threading.Thread(
                            target=self.approve, args=(vm, index, event["EventId"])
                        )
                        self.approvals.append(approval)
                        approval.start()
            elif outcome.startswith("reset") and self.in_impact(vm, index, asked, started) is None:
                self.violate(
                    f"{vm}'s poll of front-end {index} at {started - self.began:.2f}s was "
                    f"cut ({outcome}) while {vm} is reachable and the clock did not move; "
                    f"{self.cut_context(vm, index)}"
                )
            time.sleep(rng.uniform(0.1, 0.4))

        return poll

    def in_impact(self, vm: str, index: int, asked: int, started: float) -> str | None:
        """Why ``vm``'s poll of front-end ``index``, begun at ``started`` when ``asked`` clock
        moves had been asked, may have met its impact (None when it cannot have): the VM is
        unreachable now; or the clock moved meanwhile (ending an impact: a move asked since,
        in flight, or answered since the second before the poll, which a follower applies
        within 250 ms, docs/scale-out.md); or the front-end had not yet applied a move
        acknowledged before the poll (docs/scale-out.md, "How front-ends stay one fleet": a
        writer waits 250 ms for the others, then answers anyway, and "a front-end that lags
        it (a stalled process, a machine out of CPU) can show an acknowledged change late,
        and the log says so"); or a move was acknowledged since PostgreSQL's outage began,
        the poll within :data:`RECONNECT_SECONDS` of its end (the front-end's follower may be
        waiting to reconnect: by the time its clock is read here it has caught up); or its
        front-end is down.

        The front-end's clock is read before the VM, and the soak's moves looked at after
        both answered: a move asked while the front-end was being asked ends the impact
        before it answers, and looked at first, it would go unseen. A move is judged by when
        it was answered against when the poll began, not against now: on a busy machine
        this look comes seconds after the reset, and a move in flight as the poll began may
        have been answered long before it."""
        if index not in self.live_fronts():
            return "its front-end was killed"
        control = self.fronts[index].control
        try:
            clock = httpx.get(f"{control}/clock", headers=AUTH, timeout=POLL_BOUND)
            answer = httpx.get(f"{control}/vms/{vm}", headers=AUTH, timeout=POLL_BOUND)
        except httpx.TransportError:
            return "its front-end was killed"
        with self.lock:
            moved = self.advances_asked != asked or self.advancing > 0
            moved = moved or self.advanced > started - 1.0
            acknowledged = max((now for at, now in self.acknowledged if at < started), default=None)
            reconnecting = any(
                began <= started <= ended + RECONNECT_SECONDS
                and any(began <= at < started for at, _ in self.acknowledged)
                for began, ended in self.store_out
            )
        if moved:
            return "the clock moved"
        if reconnecting:
            return "its front-end was reconnecting after PostgreSQL's outage, behind a clock move"
        if index not in self.live_fronts():
            return "its front-end was killed"
        shown = datetime.fromisoformat(clock.json()["now"]) if clock.status_code == 200 else None
        if shown is not None and acknowledged is not None and shown < acknowledged:
            self.note(
                f"{vm}'s poll of front-end {index} reset while the front-end showed "
                f"{shown.time()}, behind the {acknowledged.time()} acknowledged before it"
            )
            return "its front-end lagged a clock move acknowledged before"
        if answer.status_code != 200 or not answer.json()["reachable"]:
            return "unreachable"
        return None

    def cut_context(self, vm: str, index: int) -> str:
        """What a poll judged cut may be explained by: the clock's last moves as the soak
        asked them, and the VM's events and the clock as its front-end shows them now."""
        with self.lock:
            moves = self.moves[-3:]
        try:
            listed = self.read(self.fronts[index], "/events")["events"]
            clock = self.read(self.fronts[index], "/clock")["now"]
        except (httpx.TransportError, AssertionError, RebuildingError) as error:
            return f"clock moves {moves}; front-end {index} unread: {error}"
        events = [
            (event["EventId"][:8], event["EventType"], event["EventStatus"])
            for event in listed
            if vm in event["Resources"]
        ]
        return f"clock moves {moves}; front-end {index} at {clock} shows {vm}'s {events}"

    def approve(self, vm: str, index: int, event_id: str) -> None:
        front = self.fronts[index]
        try:
            answer = httpx.post(
                URL.format(ADDRESSES[vm], front.port),
                headers=HEADERS,
                content=json.dumps({"StartRequests": [{"EventId": event_id}]}),
                timeout=WRITE_TIMEOUT,
                trust_env=False,
            )
            outcome = approval_outcome(answer)
            detail = f"{answer.status_code} {answer.text[:200]}"
        except httpx.TransportError as error:
            outcome, detail = "unknown", repr(error)
        with self.lock:
            self.writes.append(Write("approve", (vm, event_id), outcome, detail))

    def operator(self, rng: random.Random) -> None:
        live = self.live_fronts()
        if not live:
            time.sleep(0.1)
            return
        index = rng.choice(live)
        front = self.fronts[index]
        vm = rng.choice(list(ADDRESSES))
        action = rng.choices(
            ["restart", "redeploy", "create", "advance", "cancel", "query"], [3, 1, 2, 3, 1, 2]
        )[0]
        if action in ("restart", "redeploy"):
            kind = {"restart": "Reboot", "redeploy": "Redeploy"}[action]
            self.control(index, "POST", f"/vms/{vm}/{action}", None, action, (kind, vm))
        elif action == "create":
            kind = rng.choice(["Freeze", "Reboot"])
            body: dict[str, Any] = {"type": kind, "resources": [vm]}
            self.control(index, "POST", "/events", body, "create", (kind, vm))
        elif action == "advance":
            seconds = rng.choice([30, 60, 300, 900])
            with self.lock:
                self.advances_asked += 1
                self.advancing += 1
            body = {"seconds": seconds}
            asked = time.monotonic() - self.began
            outcome = "raised"
            try:
                move = self.control(
                    index, "POST", "/clock/advance", body, "advance", (str(seconds),)
                )
                outcome = f"{move.outcome} {'' if move.outcome == 'acked' else move.detail[:80]}"
            finally:
                with self.lock:
                    self.advancing -= 1
                    self.advanced = time.monotonic()
                    answered = self.advanced - self.began
                    self.moves.append(
                        f"+{seconds}s via {index} {asked:.2f}s-{answered:.2f}s {outcome}"
                    )
        elif action == "cancel" and self.cancellable:
            event_id = self.cancellable.pop(rng.randrange(len(self.cancellable)))
            self.control(index, "DELETE", f"/events/{event_id}", None, "cancel", (event_id,))
        elif action == "query":
            try:
                for row in self.resource_graph(front, timeout=WRITE_TIMEOUT):
                    properties = row["properties"]
                    self.everywhere.event(
                        properties["EventId"], properties["EventType"], properties["Resources"]
                    )
            except (httpx.TransportError, RebuildingError):
                pass  # a read: its answer, not its absence, is what is checked
            except AssertionError as error:
                self.violate(f"Resource Graph on front-end {index}: {error}")
        time.sleep(rng.uniform(0.1, 0.5))

    def control(
        self, index: int, method: str, path: str, body: Any, kind: str, key: tuple[str, ...]
    ) -> Write:
        """Ask front-end ``index`` for a change; what it was answered, as recorded."""
        try:
            answer = httpx.request(
                method,
                f"{self.fronts[index].control}{path}",
                json=body,
                headers=AUTH,
                timeout=WRITE_TIMEOUT,
                trust_env=False,
            )
        except httpx.TransportError as error:
            unanswered = Write(kind, key, "unknown", repr(error))
            with self.lock:
                self.writes.append(unanswered)
            return unanswered
        made: tuple[str, ...] = ()
        if answer.is_success and kind in ("restart", "redeploy", "create"):
            shown = answer.json()
            listed = shown.get("events", [shown])
            made = tuple(event["EventId"] for event in listed)
            try:
                for event in listed:
                    self.everywhere.event(event["EventId"], event["EventType"], event["Resources"])
            except AssertionError as error:
                self.violate(f"front-end {index} answered {kind}: {error}")
            if kind == "create":
                self.cancellable.extend(made)
        outcome = write_outcome(answer)
        if kind == "advance" and outcome == "acked":
            now = datetime.fromisoformat(answer.json()["now"])
            with self.lock:
                self.acknowledged.append((time.monotonic(), now))
        write = Write(kind, key, outcome, f"{answer.status_code} {answer.text[:200]}", made)
        with self.lock:
            self.writes.append(write)
        return write

    @staticmethod
    def resource_graph(front: Front, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Every row of ``maintenanceresources`` (every published event, finished ones too,
        docs/azure-side.md "Resource Graph"), page after page."""
        rows: list[dict[str, Any]] = []
        options: dict[str, Any] = {"$top": 1000}
        base = front.control.removesuffix("/api/v1")
        while True:
            answer = httpx.post(
                f"{base}{RESOURCE_GRAPH}",
                json={"query": "maintenanceresources", "options": options},
                headers=AUTH,
                timeout=timeout,
                trust_env=False,
            )
            if answer.status_code == 503 and REBUILDING in answer.text:
                raise RebuildingError(answer.text)
            assert answer.status_code == 200, answer.text
            body = answer.json()
            rows += body["data"]
            if "$skipToken" not in body:
                return rows
            options = {"$top": 1000, "$skipToken": body["$skipToken"]}

    # -- the faults --------------------------------------------------------------------------

    def inject(self, faults: list[Fault]) -> None:
        for fault in faults:
            wait = fault.start - (time.monotonic() - self.began)
            if wait > 0:
                time.sleep(wait)
            self.note(
                f"{fault.kind} {f'front-end {fault.front} ' if fault.front >= 0 else ''}"
                f"for {fault.length:.2f}s"
            )
            if fault.kind == "kill":
                self.kill(fault.front, fault.length)
            elif fault.kind == "postgres-cut":
                began = time.monotonic()
                self.proxy.cut()
                time.sleep(fault.length)
                self.proxy.restore()
                with self.lock:
                    self.store_out.append((began, time.monotonic()))
            elif fault.kind == "postgres-silence":
                began = time.monotonic()
                self.proxy.silence()
                time.sleep(fault.length)
                self.proxy.resume()
                with self.lock:
                    self.store_out.append((began, time.monotonic()))
            elif fault.kind == "receiver-hang":
                self.receiver.hang(fault.length)
                time.sleep(fault.length)
            self.note(f"{fault.kind} over")

    def kill(self, index: int, downtime: float) -> None:
        """``kill -9`` of front-end ``index``, then the same command on the same ports."""
        with self.lock:
            self.down[index].append((time.monotonic(), float("inf")))
        process = self.running[index]
        process.process.kill()
        process.process.wait(10)
        try:
            self.processes[index].close()
        except AssertionError as error:
            self.violate(f"front-end {index}'s output before its kill: {error}")
        time.sleep(downtime)
        self.start(index)
        with self.lock:
            began, _ = self.down[index][-1]
            self.down[index][-1] = (began, time.monotonic())
        self.note(f"front-end {index} listens again")

    # -- the run -----------------------------------------------------------------------------

    def run(self) -> None:
        """Load and faults for :attr:`seconds`; then every actor stopped and the store back."""
        faults = draw_faults(self.seed, self.seconds)
        self.began = time.monotonic()
        self.note(f"faults drawn: {len(faults)}")
        actors = [
            self.actor(f"poller {vm}", self.poller(vm, n % FRONT_ENDS))
            for n, vm in enumerate(ADDRESSES)
        ]
        actors.append(self.actor("operator", self.operator))
        try:
            self.inject(faults)
            self.stopping.wait(max(0.0, self.seconds - (time.monotonic() - self.began)))
        finally:
            self.stopping.set()
            self.proxy.restore()
            self.proxy.resume()
            self.receiver.release()
            for thread in [*actors, *self.approvals]:
                thread.join(WRITE_TIMEOUT + 5)
            self.note("load stopped")

    def shown_pairs(self) -> set[tuple[str, str]]:
        """(EventId, EventStatus) of every event any VM was shown."""
        pairs = set()
        for front in self.fronts:
            for bodies in list(front.witness.documents.values()):
                for body in list(bodies.values()):
                    for event in json.loads(body)["Events"]:
                        pairs.add((event["EventId"], event["EventStatus"]))
        return pairs

    def settle(self) -> None:
        """Until every state shown and every event's latest state is delivered: the clock
        moves on (retries are due on the platform's clock) whenever the deliveries stop."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            rows = list(self.state(self.fronts[0])["rows"].values())
            expected = self.shown_pairs() | {
                (properties["EventId"], properties["EventStatus"]) for properties in rows
            }

            def delivered(wanted: set[tuple[str, str]] = expected) -> bool:
                return wanted <= self.receiver.pairs()

            if holds_within(delivered, seconds=3.0):
                self.note(f"{len(expected)} states delivered")
                return
            if time.monotonic() > deadline:
                missing = sorted(expected - self.receiver.pairs())
                self.violate(f"never delivered to the receiver ({len(missing)}): {missing[:6]}")
                return
            self.advance(120)

    def advance(self, seconds: int) -> None:
        front = self.fronts[0]
        answer = until_answered(
            lambda: httpx.post(
                f"{front.control}/clock/advance",
                json={"seconds": seconds},
                headers=AUTH,
                timeout=WRITE_TIMEOUT,
                trust_env=False,
            )
        )
        assert answer.status_code == 200, answer.text
        with self.lock:
            self.writes.append(Write("advance", (str(seconds),), "acked", "settling"))

    def final_states(self) -> list[dict[str, Any]]:
        """Each front-end's final state, once they all agree (they follow one journal)."""
        deadline = time.monotonic() + 30
        while True:
            states = [self.state(front) for front in self.fronts]
            if all(state == states[0] for state in states):
                return states
            if time.monotonic() > deadline:
                clocks = [state["clock"] for state in states]
                counts = [len(state["rows"]) for state in states]
                self.violate(f"the front-ends never agreed: clocks {clocks}, events {counts}")
                return states
            time.sleep(0.1)

    def state(self, front: Front) -> dict[str, Any]:
        """``front``'s events (Resource Graph's rows and the live ones) and clock, once it
        is not rebuilding its copy (which a fault may have left it doing)."""
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            try:
                rows = {row["name"]: row["properties"] for row in self.resource_graph(front)}
                listed = self.read(front, "/events")["events"]
                clock = self.read(front, "/clock")["now"]
            except RebuildingError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
                continue
            live = {event["EventId"]: event for event in listed}
            return {"rows": rows, "live": live, "clock": clock}

    @staticmethod
    def read(front: Front, path: str) -> Any:
        """A control API read's answer; :class:`RebuildingError` while ``front`` rebuilds."""
        answer = httpx.get(f"{front.control}{path}", headers=AUTH, timeout=10, trust_env=False)
        if answer.status_code == 503 and REBUILDING in answer.text:
            raise RebuildingError(answer.text)
        assert answer.status_code == 200, answer.text
        return answer.json()

    # -- the rules ---------------------------------------------------------------------------

    def check(self) -> None:
        self.settle()
        states = self.final_states()
        journaled = self.journaled_approvals()
        self.check_approvals(journaled)
        for index, state in enumerate(states):
            self.check_state(index, state, journaled)
        with self.receiver.lock:
            delivered = list(self.receiver.delivered)
        known = set(states[0]["rows"])
        for event_id in sorted({event["EventId"] for event in delivered} - known):
            self.violate(f"the receiver was delivered {event_id}, an event the fleet never had")
        for event in delivered:
            try:
                self.everywhere.event(event["EventId"], event["EventType"], event["Resources"])
            except AssertionError as error:
                self.violate(f"the receiver was delivered {error}")
        self.check_polls()

    def check_state(
        self, index: int, state: dict[str, Any], journaled: set[tuple[str, ...]]
    ) -> None:
        rows: dict[str, dict[str, Any]] = state["rows"]
        live: dict[str, dict[str, Any]] = state["live"]
        where = f"front-end {index}'s final state"
        made = [w for w in self.writes if w.kind in ("restart", "redeploy", "create")]
        acked_ids = {event_id for w in made if w.outcome == "acked" for event_id in w.events}
        for event_id in sorted(acked_ids - set(rows)):
            self.violate(f"{where} lost the acknowledged event {event_id}")
        # an event nobody was told about is one an unanswered request made, or a refused one
        unknown = Counter(w.key for w in made if w.outcome == "unknown")
        unexplained = Counter(
            (p["EventType"], *p["Resources"]) for i, p in rows.items() if i not in acked_ids
        )
        for key, count in unexplained.items():
            if count > unknown[key]:
                refused = sum(1 for w in made if w.key == key and w.outcome == "refused")
                self.violate(
                    f"{where} holds {count} {key} events no acknowledged request made "
                    f"({unknown[key]} went unanswered, {refused} were refused)"
                )
        asked = {(w.kind, w.key) for w in self.writes if w.outcome in ("acked", "unknown")}
        for write in self.writes:
            if write.kind == "cancel":
                (event_id,) = write.key
                status = rows.get(event_id, {}).get("EventStatus")
                if write.outcome == "acked" and status != "Canceled":
                    self.violate(f"{where}: acknowledged cancel of {event_id} shows {status}")
                refused = write.outcome == "refused" and ("cancel", write.key) not in asked
                if refused and status == "Canceled":
                    self.violate(f"{where}: refused cancel of {event_id} was applied")
            if write.kind == "approve":  # as the journal says (check_approvals)
                vm, event_id = write.key
                status = rows.get(event_id, {}).get("EventStatus")
                approvers = live.get(event_id, {}).get("approvedByVms", [])
                held = write.key in journaled
                if held and status == "Scheduled" and vm not in approvers:
                    self.violate(f"{where}: {vm}'s journaled approval of {event_id} is lost")
                if not held and vm in approvers:
                    self.violate(f"{where}: {vm}'s approval of {event_id} shows, not journaled")
        self.check_clock(where, state["clock"])

    def check_approvals(self, journaled: set[tuple[str, ...]]) -> None:
        """The journal holds every acknowledged approval and no refused one; an unknown one
        (no answer, or IMDS's ``503``) may be either, and what the journal says of it is what
        every front-end must show (:meth:`check_state`)."""
        for write in self.writes:
            if write.kind != "approve":
                continue
            vm, event_id = write.key
            held = write.key in journaled
            if write.outcome == "acked" and not held:
                self.violate(f"{vm}'s acknowledged approval of {event_id} is not journaled")
            if write.outcome == "refused" and held:
                self.violate(f"{vm}'s refused approval of {event_id} ({write.detail}) is journaled")

    def journaled_approvals(self) -> set[tuple[str, ...]]:
        """(VM, EventId) of every approval the shared journal holds: the verdict on those
        whose answer could not say (docs/scale-out.md, "A silent PostgreSQL": "the front-end
        rebuilds its state from the journal, which says which")."""
        return journaled_approvals(self.store)

    def check_clock(self, where: str, now: str) -> None:
        moved = datetime.fromisoformat(now) - datetime.fromisoformat(self.start_clock)
        seconds = round(moved.total_seconds())
        advances = [w for w in self.writes if w.kind == "advance"]
        acked = sum(int(w.key[0]) for w in advances if w.outcome == "acked")
        unknown = [int(w.key[0]) for w in advances if w.outcome == "unknown"]
        possible = {acked}  # each unanswered move applied or not: every subset's sum
        for seconds_asked in unknown:
            possible |= {total + seconds_asked for total in possible}
        if seconds not in possible:
            refused = [int(w.key[0]) for w in advances if w.outcome == "refused"]
            self.violate(
                f"{where}: the clock moved {seconds} s; acknowledged {acked} s, unanswered "
                f"{unknown}, refused {refused}"
            )

    def check_polls(self) -> None:
        """Every poll answered within :data:`POLL_BOUND` (its client's timeout), but those
        that met its VM's impact (cut, and judged so as they happened) or its front-end
        killed."""
        for poll in self.polls:
            if poll.outcome in ("200", "503") or poll.outcome.startswith("reset"):
                continue
            if any(
                start <= poll.ended and poll.started <= end for start, end in self.down[poll.front]
            ):
                continue
            self.violate(
                f"{poll.vm}'s poll of front-end {poll.front} at "
                f"{poll.started - self.began:.2f}s-{poll.ended - self.began:.2f}s: {poll.outcome}"
            )

    def report(self) -> str:
        outcomes = Counter(
            "answered" if p.outcome in ("200", "503") else p.outcome.split(":")[0]
            for p in self.polls
        )
        writes = Counter(f"{w.kind} {w.outcome}" for w in self.writes)
        lines = [
            f"soak seed {self.seed}, {self.seconds:g} s: replay with "
            f"FOREWARN_SOAK_SEED={self.seed} FOREWARN_SOAK_SECONDS={self.seconds:g} "
            "pytest tests/soak",
            f"up in {self.up_seconds:.1f} s; run and checks in {time.monotonic() - self.began:.1f} s",
            f"polls: {dict(outcomes)}",
            f"writes: {dict(sorted(writes.items()))}",
            f"deliveries: {len(self.receiver.delivered)} received, {self.receiver.hung} held",
            "timeline:",
            *self.timeline,
        ]
        if self.violations:
            lines += [f"{len(self.violations)} violations:", *self.violations[:40]]
            for index in range(len(self.fronts)):
                for log in sorted((self.workdir / f"front-end-{index}").glob("serve-*.log")):
                    logged = log.read_text(errors="replace").splitlines()
                    lines += [f"--- front-end {index}, {log.name}, last lines ---"]
                    lines += [line[:400] for line in logged[-25:]]
        return "\n".join(lines)


def listening(host: str, port: int) -> bool:
    """Whether the VM-facing endpoint answers at ``host`` (an unknown path: no VM asks)."""
    try:
        httpx.get(f"http://{host}:{port}/", timeout=1, trust_env=False)
    except httpx.TransportError:
        return False
    return True


def holds_within(check: Callable[[], bool], seconds: float) -> bool:
    """Whether ``check`` comes to hold within ``seconds`` (:func:`e2e_support.wait_until`)."""
    try:
        wait_until(check, what="", timeout=seconds)
    except AssertionError:
        return False
    return True


def until_answered(ask: Callable[[], httpx.Response]) -> httpx.Response:
    """The first answer that is not a 503 or a lost connection, within SETTLE_SECONDS."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        try:
            answer = ask()
            if answer.status_code != 503 or time.monotonic() > deadline:
                return answer
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


@contextlib.contextmanager
def soak_run(seed: int, seconds: float, workdir: Path, store: str) -> Iterator[Soak]:
    """A :class:`Soak` with its proxy and receiver, its front-ends stopped however it ends."""
    parts = urlsplit(store)
    assert parts.hostname is not None
    receiver = Receiver()
    with (
        TcpProxy((parts.hostname, parts.port or 5432)) as proxy,
        http_server_in_thread(receiver.handler()) as url,
    ):
        soak = Soak(seed, seconds, workdir, store, proxy, receiver, url)
        try:
            yield soak
        finally:
            receiver.release()
            soak.stop()
